//! What the load tool sends (creates, signed callbacks and their events)
//! and what it reads of the answers: small typed structs read by
//! taskwire's codec (`Reply::read`; fields not named here are skipped).

use serde::de::IgnoredAny;
use serde::Deserialize;
use taskwire_server::client::{Conn, Reply};
use taskwire_server::executor_event::ExecutorEvent;
use taskwire_server::signature::callback_body;

use crate::{Ctx, Res};

impl Ctx {
    /// Creates a task (1 h TTL, one attempt); its id.
    pub async fn create(&self, conn: &mut Conn) -> Res<String> {
        let r = conn
            .send(
                "POST",
                "/v1/tasks",
                &[("authorization", &self.auth)],
                r#"{"ttlMs":3600000,"maxAttempts":1}"#,
            )
            .await?;
        Ok(created_id(&r).map_err(|e| format!("create: {e}"))?)
    }

    /// Posts `event` for `task`, signed, under the callback id `{task}-{id}`.
    pub async fn callback(
        &self,
        conn: &mut Conn,
        task: &str,
        id: &str,
        event: &ExecutorEvent,
    ) -> Res<()> {
        let body = callback_body(task, event);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs() as i64;
        // A tenant's callback id is refused on its other tasks: make each
        // scenario's ids ("start", "p1", …) the task's own.
        let id = format!("{task}-{id}");
        let signed = self.secret.headers(&id, now, body.as_bytes());
        let hs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = conn
            .send("POST", &format!("/v1/tasks/{task}/callbacks"), &hs, body)
            .await?;
        if r.status != 200 {
            return Err(format!("callback: {} {}", r.status, r.text()).into());
        }
        Ok(())
    }
}

/// A task in an answer: a create's, a batch's item.
#[derive(Deserialize)]
pub struct Task {
    pub id: String,
}

/// The id of the task a create made, or the answer as text.
pub fn created_id(r: &Reply) -> Result<String, String> {
    r.read::<Task>("answer")
        .map(|t| t.id)
        .map_err(|_| format!("{} {}", r.status, r.text()))
}

/// A created batch.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    pub batch_id: String,
    pub tasks: Vec<Task>,
}

/// A resume answer, a task's or a batch's: what the tool looks at.
#[derive(Default, Deserialize)]
#[serde(default)]
pub struct Resumed {
    pub mode: String,
    /// A task's answer: the task, with its version.
    pub task: Option<Version>,
    /// A batch's answer: the tasks it brings (counted only).
    pub tasks: Vec<IgnoredAny>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub struct Version {
    pub version: Option<u64>,
}

/// A resume answer; an answer that is not one reads as empty.
pub fn resumed(r: &Reply) -> Resumed {
    r.read("answer").unwrap_or_default()
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorFields,
}

#[derive(Deserialize)]
struct ErrorFields {
    code: String,
}

/// An error answer's code, or `None` for any other answer.
pub fn error_code(r: &Reply) -> Option<String> {
    r.read::<ErrorBody>("answer").ok().map(|e| e.error.code)
}

/// The `start` every scenario sends (`atMs` 1, worker `load`).
pub fn start() -> ExecutorEvent {
    ExecutorEvent::start("load").at(1.0)
}

/// Progress `p`, at `p + 1` ms.
pub fn progress(p: u64) -> ExecutorEvent {
    ExecutorEvent::progress(p, &format!("c{p}")).at((p + 1) as f64)
}
