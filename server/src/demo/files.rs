//! `--demo`'s static files: `--demo-dir` at `/`, and `/pkg/…` from
//! `--demo-pkg-dir` (the built npm package, so the page runs exactly what
//! `npm run build` produced, with no copy to go stale).
//!
//! The directories hold the page; nothing says they are safe to serve
//! blindly (a symlink to a database, a FIFO someone left there), so:
//!
//! - the URL path becomes a relative path of plain names: no `..`, no
//!   absolute parts, and no percent-decoding (`%2e%2e` is a file name,
//!   which does not exist);
//! - the file's canonical path (symlinks resolved) must lie under the
//!   root's canonical path: a symlink inside the root that points outside
//!   it is a 404, one that stays inside is followed;
//! - it is opened with `O_NOFOLLOW | O_NONBLOCK`: opening a FIFO would
//!   otherwise wait for a writer, holding one of the runtime's 16 blocking
//!   threads for good (20 such requests starved every store read), and the
//!   final component cannot be swapped for a symlink after the check;
//! - the *opened handle* must be a regular file (`fstat`): a FIFO, socket,
//!   device or directory is a 404;
//! - the body is streamed in [`CHUNK`]-byte reads with `Content-Length`,
//!   so memory does not grow with the file (server/README.md, "Demo").

use std::path::{Component, Path, PathBuf};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncReadExt;

use crate::error::ApiError;
use crate::{AppState, Config};

/// Bytes read per chunk of a streamed file.
pub const CHUNK: usize = 64 * 1024;

/// Serves `--demo-dir` at `/` (GET and HEAD); anything else, and anything
/// that is not a regular file under the root, is the JSON 404.
pub async fn static_file(State(state): State<AppState>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return not_found().into_response();
    }
    let Some((root, path)) = demo_path(&state.config, uri.path()) else {
        return not_found().into_response();
    };
    match open_under(root, &path).await {
        Some((file, len)) => file_response(file, len, &path, method == Method::HEAD),
        None => not_found().into_response(),
    }
}

fn not_found() -> ApiError {
    ApiError::not_found("path: no such route")
}

/// Maps a URL path to its root and file: `/pkg/…` into `--demo-pkg-dir`,
/// everything else into `--demo-dir`.
pub fn demo_path<'c>(config: &'c Config, url_path: &str) -> Option<(&'c Path, PathBuf)> {
    let (root, rest) = match url_path.strip_prefix("/pkg/") {
        Some(rest) => (config.demo_pkg_dir.as_path(), rest),
        None => (config.demo_dir.as_path(), url_path),
    };
    safe_path(root, rest).map(|p| (root, p))
}

/// Maps a URL path into `root`, refusing `..`, absolute parts and
/// anything that is not a plain file name (`/` and `dir/` are their
/// `index.html`).
pub fn safe_path(root: &Path, url_path: &str) -> Option<PathBuf> {
    let rel = url_path.trim_start_matches('/');
    let rel = if rel.is_empty() || rel.ends_with('/') {
        format!("{rel}index.html")
    } else {
        rel.to_string()
    };
    let mut out = root.to_path_buf();
    for part in Path::new(&rel).components() {
        match part {
            Component::Normal(p) => out.push(p),
            _ => return None,
        }
    }
    Some(out)
}

/// Opens `path` if it is a regular file under `root` once every symlink
/// is resolved (see the module docs); returns it with its length.
async fn open_under(root: &Path, path: &Path) -> Option<(tokio::fs::File, u64)> {
    let root = tokio::fs::canonicalize(root).await.ok()?;
    let real = tokio::fs::canonicalize(path).await.ok()?;
    if !real.starts_with(&root) {
        return None;
    }
    let mut options = tokio::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = options.open(&real).await.ok()?;
    // fstat of the handle opened, not of the name: what is served is
    // what was checked.
    let meta = file.metadata().await.ok()?;
    meta.is_file().then_some((file, meta.len()))
}

fn file_response(file: tokio::fs::File, len: u64, path: &Path, head: bool) -> Response {
    let body = if head {
        Body::empty()
    } else {
        // At most `len` bytes: a file that grows while it is sent must not
        // overrun the Content-Length already promised.
        let reader = file.take(len);
        Body::from_stream(futures_util::stream::try_unfold(
            reader,
            |mut reader| async move {
                let mut buf = vec![0u8; CHUNK];
                let n = reader.read(&mut buf).await?;
                if n == 0 {
                    return Ok::<_, std::io::Error>(None);
                }
                buf.truncate(n);
                Ok(Some((Bytes::from(buf), reader)))
            },
        ))
    };
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_demo_dir() {
        let root = Path::new("/srv/demo");
        assert_eq!(
            safe_path(root, "/"),
            Some(PathBuf::from("/srv/demo/index.html"))
        );
        assert_eq!(
            safe_path(root, "/pkg/a.js"),
            Some(PathBuf::from("/srv/demo/pkg/a.js"))
        );
        assert_eq!(safe_path(root, "/../etc/passwd"), None);
        assert_eq!(safe_path(root, "/a/../../b"), None);
        // Not decoded: a literal (and absent) file name.
        assert_eq!(
            safe_path(root, "/%2e%2e/x"),
            Some(PathBuf::from("/srv/demo/%2e%2e/x"))
        );
    }

    #[test]
    fn pkg_paths_map_to_the_package_build() {
        let mut config = Config::defaults();
        config.demo_dir = PathBuf::from("/srv/demo");
        config.demo_pkg_dir = PathBuf::from("/srv/dist/client");
        let mapped = |p: &str| demo_path(&config, p).map(|(root, path)| (root.to_path_buf(), path));
        assert_eq!(
            mapped("/pkg/index.js"),
            Some((
                PathBuf::from("/srv/dist/client"),
                PathBuf::from("/srv/dist/client/index.js")
            ))
        );
        assert_eq!(
            mapped("/app.js"),
            Some((
                PathBuf::from("/srv/demo"),
                PathBuf::from("/srv/demo/app.js")
            ))
        );
        assert_eq!(mapped("/pkg/../../etc/passwd"), None);
        // `/pkg` without the slash is an ordinary page path.
        assert_eq!(
            mapped("/pkg"),
            Some((PathBuf::from("/srv/demo"), PathBuf::from("/srv/demo/pkg")))
        );
    }
}
