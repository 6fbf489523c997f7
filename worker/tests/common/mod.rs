//! The real reference server for the worker's tests: its binary, built
//! if missing, started on a free port with a fresh data directory, and a
//! small client for what a person or a backend does to tasks (create,
//! get, cancel, decide).

#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use taskwire_worker::{Worker, WorkerBuilder};

/// The server's public development secret (server/README.md), shared by
/// every tenant without one of its own.
pub const SECRET: &str = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q=";
/// The tenant and its token (`--token demo=demo`).
pub const TENANT: &str = "demo";

/// The workspace's target directory, as cargo uses it.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
    }
}

/// The server binary, built once per test process if it is missing
/// (`env!("CARGO_BIN_EXE_…")` only names a package's own binaries).
fn server_binary() -> PathBuf {
    static BUILT: Mutex<bool> = Mutex::new(false);
    let bin = target_dir().join("debug/taskwire-server");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !*built && !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "taskwire-server", "--bin", "taskwire-server"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build of the server");
        assert!(status.success(), "the server did not build");
    }
    *built = true;
    bin
}

/// A running server; killed when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:port`.
    pub addr: String,
    _data: tempfile::TempDir,
    extra: Vec<String>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// The server listening on `listen` with `data`; its process and address,
/// or `None` if it did not start (its port still taken).
fn spawn_server(listen: &str, data: &std::path::Path, extra: &[&str]) -> Option<(Child, String)> {
    let mut child = Command::new(server_binary())
        .args(["--listen", listen, "--token", "demo=demo"])
        .arg("--data")
        .arg(data)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    std::thread::spawn(move || {
        let mut line = String::new();
        while err.read_line(&mut line).is_ok_and(|n| n > 0) {
            eprint!("server: {line}");
            line.clear();
        }
    });
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the listening line");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .unwrap_or_default()
        .to_string();
    if !line.contains("http://") || addr.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    Some((child, addr))
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server with tenant `demo` and `extra` flags, on a free port.
    pub fn start(extra: &[&str]) -> Server {
        let data = tempfile::tempdir().expect("tempdir");
        let (child, addr) = spawn_server("127.0.0.1:0", data.path(), extra)
            .unwrap_or_else(|| panic!("the server did not start"));
        Server {
            child,
            addr,
            _data: data,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            client: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        }
    }

    /// Stops the server (as a crash would: SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same address and data, once the port is
    /// free again (a few tries).
    pub fn start_again(&mut self) {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        for _ in 0..50 {
            if let Some((child, _)) = spawn_server(&self.addr, self._data.path(), &extra) {
                self.child = child;
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the server did not start again on {}", self.addr);
    }

    /// The server's SQLite file.
    pub fn database(&self) -> PathBuf {
        self._data.path().join("taskwire.sqlite3")
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A worker builder for this server, with a short lease (a heartbeat
    /// a second) and short held claims, so the tests run quickly.
    pub fn worker(&self, name: &str) -> WorkerBuilder {
        Worker::builder(self.url(), TENANT, SECRET)
            .name(name)
            .lease_ms(3_000)
            .wait_ms(1_000)
    }

    /// A request with the tenant token; the status and the JSON body.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url()))
            .header("authorization", "Bearer demo")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .unwrap();
        self.send(req).await
    }

    async fn send(&self, req: hyper::Request<Full<Bytes>>) -> (u16, Value) {
        let res = self.client.request(req).await.expect("the server answers");
        let status = res.status().as_u16();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, value)
    }

    /// Creates a task of `kind` with `input` (plus `extra` fields); its id.
    pub async fn create(&self, kind: &str, input: Value, extra: Value) -> String {
        let mut body = json!({"ttlMs": 600_000, "maxAttempts": 3, "kind": kind, "input": input});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let (status, task) = self.call("POST", "/v1/tasks", Some(body)).await;
        assert_eq!(status, 201, "create: {task}");
        task["id"].as_str().unwrap().to_string()
    }

    /// The task as `GET` shows it.
    pub async fn get(&self, id: &str) -> Value {
        let (status, task) = self.call("GET", &format!("/v1/tasks/{id}"), None).await;
        assert_eq!(status, 200, "get: {task}");
        task
    }

    /// Polls the task until `done` holds of it (generous: 30 s); the task.
    pub async fn wait_for(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let task = self.get(id).await;
            if done(&task) {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} never became {what}: {task}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the task's `state`.
    pub async fn wait_state(&self, id: &str, state: &str) -> Value {
        self.wait_for(id, state, |t| t["state"] == state).await
    }

    /// A person cancels the task.
    pub async fn cancel(&self, id: &str) -> Value {
        let (status, answer) = self
            .call("POST", &format!("/v1/tasks/{id}/cancel"), Some(json!({})))
            .await;
        assert_eq!(status, 200, "cancel: {answer}");
        answer
    }

    /// A person decides on the held artifact of `task` (as `GET` showed it).
    pub async fn decide(&self, task: &Value, decision: &str, reason: &str) -> Value {
        let id = task["id"].as_str().unwrap();
        let body = json!({
            "decision": decision,
            "artifactHash": task["artifactHash"],
            "version": task["version"],
            "reason": reason,
        });
        let (status, answer) = self
            .call("POST", &format!("/v1/tasks/{id}/decisions"), Some(body))
            .await;
        assert_eq!(status, 200, "decide: {answer}");
        answer
    }

    /// A signed callback sent by the test itself (another process of the
    /// same executor, say); the answer.
    pub async fn callback(&self, id: &str, event: Value) -> (u16, Value) {
        let mut body = event;
        body["taskId"] = json!(id);
        let body = body.to_string();
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .to_string();
        let cb_id = format!(
            "cb_test_{}",
            std::process::id() as u128 * 1_000_000 + now_ms() as u128
        );
        let key = STANDARD
            .decode(SECRET.trim_start_matches("whsec_"))
            .unwrap();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        mac.update(format!("{cb_id}.{ts}.{body}").as_bytes());
        let signature = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        let req = hyper::Request::post(format!("{}/v1/tasks/{id}/callbacks", self.url()))
            .header("content-type", "application/json")
            .header("webhook-id", cb_id)
            .header("webhook-timestamp", ts)
            .header("webhook-signature", signature)
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        self.send(req).await
    }
}

/// The local clock in ms.
pub fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// Runs `worker` in the background; shut it down with
/// `worker.shutdown(..)` and await the handle.
pub fn spawn(worker: &Worker) -> tokio::task::JoinHandle<()> {
    let worker = worker.clone();
    tokio::spawn(async move { worker.run().await.expect("the run ended in an error") })
}
