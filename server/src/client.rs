//! A minimal HTTP/1.1 client on hyper (already in axum's tree), for the
//! demo executor's callbacks, the notify webhook, the tests and the load
//! tool. [`Conn::open`] speaks plain HTTP; [`Conn::over`] speaks it over
//! any stream, which is how the notify sender posts to `https://`
//! receivers (src/notify/tls.rs).
//!
//! **A reply's body is read up to a cap, never further.** The peer may be
//! anyone (a tenant's webhook receiver): one that answered 200 with an
//! endless body made the old `collect()` read until the response timeout,
//! 2 GB of memory in 5 s. [`Conn::send_within`] stops reading at its
//! limit, keeps what it read, says so ([`Reply::truncated`]) and drops the
//! connection (hyper closes a socket whose body was abandoned);
//! [`Conn::send`] uses [`DEFAULT_REPLY_LIMIT`] and fails past it. The head
//! is bounded by hyper (its ~400 KB read buffer, 100 headers).

use std::io;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use taskwire_wire::from_json_serde_bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The most body [`Conn::send`] reads: generous, for the tests and the
/// load tools, whose peer is our own server (a batch's answer is a few
/// hundred KB); a reply past it is an error, not a silent cut.
pub const DEFAULT_REPLY_LIMIT: usize = 16 * 1024 * 1024;

/// A response, its body read whole or up to a cap.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, or its first `limit` bytes when [`Reply::truncated`].
    pub body: Bytes,
    /// The body went on past the cap of [`Conn::send_within`]: the rest
    /// was not read, and the connection was dropped.
    pub truncated: bool,
}

impl Reply {
    /// The body read as `T` by taskwire's codec; an error names the field
    /// under `what` (`answer.task.version: expected u64, got a string`).
    /// Fields of the body that `T` does not declare are skipped.
    pub fn read<'a, T: Deserialize<'a>>(&'a self, what: &str) -> Result<T, taskwire_core::Error> {
        from_json_serde_bytes(&self.body, what)
    }

    /// The body as text, for messages (invalid UTF-8 replaced).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Conn {
    /// Connects to `host:port`.
    pub async fn open(authority: &str) -> io::Result<Conn> {
        let stream = TcpStream::connect(authority).await?;
        stream.set_nodelay(true)?;
        Conn::over(stream, authority).await
    }

    /// Speaks HTTP/1.1 over `stream` (a TLS stream, say), sending `host`
    /// as the Host header.
    pub async fn over<S>(stream: S, host: &str) -> io::Result<Conn>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            sender,
            host: host.to_string(),
        })
    }

    /// Sends a request and returns the response with its body unread
    /// (for streams).
    pub async fn stream(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> io::Result<Response<Incoming>> {
        let mut req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).map_err(other)?)
            .uri(path)
            .header("host", &self.host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(body.into())).map_err(other)?;
        self.sender.ready().await.map_err(other)?;
        self.sender.send_request(req).await.map_err(other)
    }

    /// Sends a request and reads the whole response, up to
    /// [`DEFAULT_REPLY_LIMIT`]: a longer body is an error.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> io::Result<Reply> {
        let reply = self
            .send_within(method, path, headers, body, DEFAULT_REPLY_LIMIT)
            .await?;
        if reply.truncated {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reply body over {DEFAULT_REPLY_LIMIT} bytes: not read further"),
            ));
        }
        Ok(reply)
    }

    /// Sends a request and reads the response's body up to `limit` bytes.
    /// Past them reading stops: the reply keeps the first `limit` bytes
    /// and is [`Reply::truncated`], and the connection is given up (the
    /// rest of the body is neither read nor waited for). For a caller that
    /// only needs the status, or a short answer, from a peer it does not
    /// trust.
    pub async fn send_within(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
        limit: usize,
    ) -> io::Result<Reply> {
        let res = self.stream(method, path, headers, body).await?;
        let (parts, body) = res.into_parts();
        let (body, truncated) = read_within(body, limit).await?;
        Ok(Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
            truncated,
        })
    }
}

/// Reads `body` until its end or `limit` bytes, whichever comes first;
/// `true` when it stopped at the limit. The body is dropped on return,
/// which tells hyper to close the connection rather than read on.
async fn read_within(mut body: Incoming, limit: usize) -> io::Result<(Bytes, bool)> {
    // The usual reply is one piece: kept as hyper handed it, no copy.
    let mut first: Option<Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    let mut read = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(other)?.into_data() else {
            continue; // trailers
        };
        let room = limit - read;
        let over = data.len() > room;
        let data = if over { data.slice(..room) } else { data };
        read += data.len();
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            earlier => {
                if let Some(earlier) = earlier {
                    joined.extend_from_slice(&earlier);
                }
                joined.extend_from_slice(&data);
            }
        }
        if over {
            return Ok((take(first, joined), true));
        }
    }
    Ok((take(first, joined), false))
}

fn take(first: Option<Bytes>, joined: Vec<u8>) -> Bytes {
    first.unwrap_or_else(|| Bytes::from(joined))
}

/// One request on a fresh connection, its body read up to `limit`
/// ([`Conn::send_within`]).
pub async fn request_within(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
    limit: usize,
) -> io::Result<Reply> {
    Conn::open(authority)
        .await?
        .send_within(method, path, headers, body, limit)
        .await
}

/// One request on a fresh connection ([`Conn::send`]).
pub async fn request(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> io::Result<Reply> {
    Conn::open(authority)
        .await?
        .send(method, path, headers, body)
        .await
}
