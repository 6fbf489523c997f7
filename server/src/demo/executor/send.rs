//! How the executor's callbacks reach the server: signed with the
//! tenant's secrets and posted over loopback HTTP, as an outside executor
//! posts them.

use serde::Deserialize;
use taskwire_core::State;
use tokio::time::Instant;

use super::{Answer, Executor};
use crate::executor_event::ExecutorEvent;
use crate::routes::now_secs;
use crate::signature::{callback_body, signed_headers};
use crate::{client, AppState};

impl Executor {
    /// Posts one callback, counts its answer; `None` if it failed.
    pub(super) async fn post(
        &mut self,
        callback_id: &str,
        event: &ExecutorEvent,
    ) -> Option<Answer> {
        self.last_sent = Instant::now();
        let id = format!("{}-{callback_id}", self.task);
        match send_callback(&self.state, &self.tenant, &self.task, &id, event).await {
            Ok(answer) => {
                self.stats.callback_named(&answer.reason);
                Some(Answer {
                    state: State::ALL.into_iter().find(|s| answer.state == s.as_str()),
                    reason: answer.reason,
                    cancel_requested: answer.cancel_requested,
                })
            }
            Err(e) => {
                eprintln!("taskwire-server: demo executor: {}: {e}", self.task);
                None
            }
        }
    }
}

/// The parts of the server's answer the executor reads (PROTOCOL.md
/// §Executor callback); a part missing is empty, as for an executor that
/// tolerates answers it does not fully know.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CallbackReply {
    reason: String,
    state: String,
    cancel_requested: bool,
}

/// The most of a callback answer read: ours are a few hundred bytes; the
/// cap only keeps a bound on every read of a peer's bytes.
const ANSWER_LIMIT: usize = 64 * 1024;

/// Posts one signed callback; returns the server's answer.
async fn send_callback(
    state: &AppState,
    tenant: &str,
    task: &str,
    callback_id: &str,
    event: &ExecutorEvent,
) -> Result<CallbackReply, String> {
    let body = callback_body(task, event);
    let secrets = state.keyring.secrets_of(tenant);
    let signed = signed_headers(secrets, callback_id, now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("content-type", "application/json"));
    let addr = state.addr.to_string();
    let reply = client::request_within(
        &addr,
        "POST",
        &format!("/v1/tasks/{task}/callbacks"),
        &headers,
        body,
        ANSWER_LIMIT,
    )
    .await
    .map_err(|e| e.to_string())?;
    if reply.truncated {
        Err(format!("callback answer over {ANSWER_LIMIT} bytes"))
    } else if reply.status == 200 {
        reply.read("answer").map_err(|e| e.message)
    } else {
        Err(format!("callback answered {}", reply.status))
    }
}
