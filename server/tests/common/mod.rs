//! Shared test harness: a real server on a free loopback port with a real
//! SQLite file in a temp dir, driven over real HTTP.
#![allow(dead_code)]

pub mod budgets;
pub mod continuations;
pub mod json;
pub mod judge;
pub mod lifecycle;
pub mod output;
pub mod pg;
pub mod process;
pub mod raw;
pub mod replay;
pub mod scrape;
pub mod steps;

// Each test crate uses some of these (the `dead_code` allowance above,
// for imports).
#[allow(unused_imports)]
pub use process::{lift_file_limit, limited, listening_addr, server_command, spawn_logged, Logged};

use std::time::{SystemTime, UNIX_EPOCH};

use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};
use taskwire_core::ResumeAnswer;
use taskwire_server::client::{self, Conn, Reply};
use taskwire_server::signature::{callback_body, Secret, SignedHeaders, DEV_SECRET};
use taskwire_server::{start, Config, Server};
use taskwire_wire::from_json;

pub use self::json::ReplyJson;

pub struct Harness {
    pub server: Option<Server>,
    pub addr: String,
    pub dir: tempfile::TempDir,
    pub config: Config,
}

pub fn test_config(dir: &std::path::Path) -> Config {
    let mut c = Config::defaults();
    c.listen = "127.0.0.1:0".into();
    c.data = dir.to_path_buf();
    c.tokens = vec!["demo=demo".into(), "other=other".into()];
    c.sweep_ms = 50;
    c.heartbeat_ms = 150;
    c
}

pub async fn harness(tweak: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = test_config(dir.path());
    tweak(&mut config);
    let server = start(config.clone()).await.expect("server starts");
    Harness {
        addr: server.addr.to_string(),
        server: Some(server),
        dir,
        config,
    }
}

pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub fn secret() -> Secret {
    Secret::parse(DEV_SECRET).unwrap()
}

impl Harness {
    /// Stops the server and starts a new one on the same data dir.
    pub async fn restart(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await;
        }
        let server = start(self.config.clone()).await.expect("server restarts");
        self.addr = server.addr.to_string();
        self.server = Some(server);
    }

    pub fn state(&self) -> &taskwire_server::AppState {
        &self.server.as_ref().unwrap().state
    }

    pub async fn req(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<axum::body::Bytes>,
    ) -> Reply {
        // Read whole up to 64 MiB (the demo's static files include a 24 MiB
        // one); `truncated` would say if a test ever read past it.
        let r = client::request_within(&self.addr, method, path, headers, body, 64 << 20)
            .await
            .expect("request");
        assert!(!r.truncated, "{method} {path}: reply over 64 MiB");
        r
    }

    /// Where `--metrics-listen` was bound.
    pub fn metrics_addr(&self) -> String {
        self.server
            .as_ref()
            .unwrap()
            .metrics_addr
            .expect("--metrics-listen is bound")
            .to_string()
    }

    pub async fn get(&self, token: &str, path: &str) -> Reply {
        let auth = format!("Bearer {token}");
        self.req("GET", path, &[("authorization", &auth)], "").await
    }

    pub async fn post(&self, token: &str, path: &str, extra: &[(&str, &str)], body: &str) -> Reply {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        headers.extend_from_slice(extra);
        self.req("POST", path, &headers, body.to_string()).await
    }

    /// Creates a task for `token`'s tenant and returns its id.
    pub async fn create(&self, token: &str, body: Value) -> String {
        let r = self.post(token, "/v1/tasks", &[], &body.to_string()).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        r.json()["id"].as_str().unwrap().to_string()
    }

    pub async fn create_default(&self) -> String {
        self.create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 3}))
            .await
    }

    /// Posts a callback signed with the development secret, its body
    /// naming `task`. The `webhook-id` sent is [`task_scoped`]`(task,
    /// callback_id)`: a tenant's callback id is refused on its other tasks,
    /// and tests reuse short names ("s", "ok") on every task.
    pub async fn callback(&self, task: &str, callback_id: &str, event: &Value) -> Reply {
        let body = callback_body(task, event);
        self.callback_raw(
            task,
            &task_scoped(task, callback_id),
            now_secs(),
            body.as_bytes(),
        )
        .await
    }

    /// Posts `body` exactly as given, signed with the development secret
    /// under exactly `callback_id`.
    pub async fn callback_raw(&self, task: &str, callback_id: &str, ts: i64, body: &[u8]) -> Reply {
        self.callback_signed(&secret(), task, callback_id, ts, body)
            .await
    }

    /// Posts `body` exactly as given, signed with `secret`.
    pub async fn callback_signed(
        &self,
        secret: &Secret,
        task: &str,
        callback_id: &str,
        ts: i64,
        body: &[u8],
    ) -> Reply {
        let signed = secret.headers(callback_id, ts, body);
        let headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.req(
            "POST",
            &format!("/v1/tasks/{task}/callbacks"),
            &headers,
            body.to_vec(),
        )
        .await
    }

    /// A callback that must be accepted; returns its answer.
    pub async fn ok_callback(&self, task: &str, callback_id: &str, event: Value) -> Value {
        let r = self.callback(task, callback_id, &event).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        r.json()
    }

    /// Commits a succeeded task for `token`'s tenant (start, then
    /// succeed); returns its notification key.
    pub async fn succeeded_task(&self, token: &str) -> String {
        let id = self
            .create(token, json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
            .await;
        self.ok_callback(&id, "s", start_ev(1)).await;
        self.ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12"))
            .await;
        format!("{id}:succeeded:2")
    }

    pub async fn resume(&self, token: &str, task: &str, query: &str) -> (Reply, ResumeAnswer) {
        let r = self
            .get(token, &format!("/v1/tasks/{task}/resume?{query}"))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let answer =
            from_json::<ResumeAnswer>(std::str::from_utf8(&r.body).unwrap(), "answer").unwrap();
        (r, answer)
    }
}

pub fn start_ev(at: u64) -> Value {
    json!({"type": "start", "atMs": at, "worker": "w1"})
}
pub fn progress_ev(at: u64, p: u64) -> Value {
    json!({"type": "progress", "atMs": at, "progress": p, "cursor": format!("c{p}")})
}
pub fn succeed_ev(at: u64, hash: &str) -> Value {
    json!({"type": "succeed", "atMs": at, "resultRef": "blob://summaries/doc-1", "resultHash": hash})
}
pub fn fail_ev(at: u64, retryable: bool) -> Value {
    json!({"type": "fail", "atMs": at, "error": "quota", "retryable": retryable})
}

/// Whether `body` with `headers` is signed with `secret` (as a webhook
/// receiver checks it).
pub fn verifies(secret: &Secret, headers: &axum::http::HeaderMap, body: &[u8]) -> bool {
    let Ok(signed) = SignedHeaders::parse(headers, now_secs()) else {
        return false;
    };
    let mut verifier = signed.verifier(std::slice::from_ref(secret));
    verifier.update(body);
    verifier.finish(&signed)
}

/// Asserts the JSON error shape.
pub fn assert_error(r: &Reply, status: u16, code: &str, field: &str) {
    assert_eq!(r.status, status, "{:?}", r.json());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let body = r.json();
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(field),
        "message {message:?} should name {field:?}"
    );
}

/// Starts the built binary on a free port with `--data data` (a directory
/// or a `postgres://` URL); returns it and the address it printed.
pub fn spawn_binary(data: &std::ffi::OsStr) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskwire-server"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--retention",
            "100000",
            "--token",
            "demo=demo",
        ])
        .arg("--data")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn server");
    let addr = listening_addr(&mut child);
    (child, addr)
}

/// The `webhook-id` the helpers send for a test's short `callback_id`:
/// made the task's own (see [`Harness::callback`]).
pub fn task_scoped(task: &str, callback_id: &str) -> String {
    format!("{task}:{callback_id}")
}

/// Posts a signed callback on `conn` (its id [`task_scoped`]); an answer
/// other than 200 is an error (the load tests count those as not
/// acknowledged).
pub async fn signed(
    conn: &mut Conn,
    task: &str,
    callback_id: &str,
    event: &Value,
) -> std::io::Result<Value> {
    let body = callback_body(task, event);
    let callback_id = task_scoped(task, callback_id);
    let headers = secret().headers(&callback_id, now_secs(), body.as_bytes());
    let hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = conn
        .send("POST", &format!("/v1/tasks/{task}/callbacks"), &hs, body)
        .await?;
    if r.status != 200 {
        return Err(std::io::Error::other(format!("status {}", r.status)));
    }
    Ok(r.json())
}

/// Creates a task (one attempt, 1 h TTL) for tenant `demo` on a server
/// started with [`spawn_binary`]; returns its id.
pub async fn create_at(addr: &str) -> String {
    let r = create(addr, json!({"ttlMs": 3_600_000, "maxAttempts": 1})).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()["id"].as_str().expect("an id").to_string()
}

/// `POST /v1/tasks` with `body` for tenant `demo`, on a fresh connection
/// (the fault tests' server may have been restarted): the reply as it is.
pub async fn create(addr: &str, body: Value) -> Reply {
    client::request(
        addr,
        "POST",
        "/v1/tasks",
        &[
            ("authorization", "Bearer demo"),
            ("content-type", "application/json"),
        ],
        body.to_string(),
    )
    .await
    .expect("create")
}
