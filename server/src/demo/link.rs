//! The network between the demo's workers and the server: a loopback
//! relay that forwards each HTTP request as it came, counts the answers
//! to callbacks for the tenant's `GET /v1/demo/stats`, and, when the
//! demo asks, loses one answer on purpose.
//!
//! The workers run on the `taskwire-worker` library, which hides every
//! answer from the demo: the relay is where the demo sees what the server
//! made of each report. A lost answer is the seed's redelivery, made the
//! way a real network makes it: the server judged the callback, the
//! worker never heard, and the library sends it again under the same
//! `webhook-id`, which the server absorbs (`duplicate-callback`).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex as AsyncMutex;

use crate::stats::Stats;

/// The most of a request or an answer relayed: a claim answer of a
/// full worker (100 tasks with their inputs) fits many times over.
const BODY_LIMIT: usize = 4 * 1024 * 1024;

/// A running relay; it stops when dropped.
#[derive(Debug)]
pub struct Link {
    /// Where the workers connect.
    pub addr: SocketAddr,
    faults: Arc<Faults>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// `(task, event type)` whose next callback answer is to be lost.
#[derive(Debug, Default)]
struct Faults {
    lose: Mutex<HashSet<(String, String)>>,
}

impl Faults {
    fn lose(&self) -> MutexGuard<'_, HashSet<(String, String)>> {
        // A plain set: still consistent after a panic elsewhere.
        self.lose.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Link {
    /// Starts a relay to the server at `upstream`, counting callback
    /// answers in `stats`.
    pub async fn start(upstream: SocketAddr, stats: Arc<Stats>) -> std::io::Result<Link> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let faults = Arc::new(Faults::default());
        let accept = tokio::spawn(accept_loop(listener, upstream, stats, Arc::clone(&faults)));
        Ok(Link {
            addr,
            faults,
            accept,
        })
    }

    /// Loses the answer to the next callback of type `event` (`progress`,
    /// `succeed`) for `task`: the relay closes the worker's connection
    /// after the server answered it. The type keeps a heartbeat sent
    /// meanwhile from taking the fault meant for the report.
    pub fn lose_next_answer(&self, task: &str, event: &str) {
        self.faults
            .lose()
            .insert((task.to_string(), event.to_string()));
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    stats: Arc<Stats>,
    faults: Arc<Faults>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (stats, faults) = (Arc::clone(&stats), Arc::clone(&faults));
        tokio::spawn(async move {
            if let Err(e) = relay(stream, upstream, stats, faults).await {
                eprintln!("taskwire-server: demo link: {e}");
            }
        });
    }
}

/// Relays one worker connection over one connection to the server.
async fn relay(
    stream: TcpStream,
    upstream: SocketAddr,
    stats: Arc<Stats>,
    faults: Arc<Faults>,
) -> Result<(), String> {
    let server = TcpStream::connect(upstream)
        .await
        .map_err(|e| format!("connect {upstream}: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(server))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let sender = Arc::new(AsyncMutex::new(sender));
    let service = service_fn(move |request: Request<Incoming>| {
        let (sender, stats, faults) =
            (Arc::clone(&sender), Arc::clone(&stats), Arc::clone(&faults));
        async move { forward(request, &sender, &stats, &faults).await }
    });
    // A lost answer ends the connection with an error: expected.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
    Ok(())
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Forwards one request and returns the server's answer, or an error
/// (the worker's connection is closed unanswered) when it is to be lost.
async fn forward(
    request: Request<Incoming>,
    sender: &AsyncMutex<Sender>,
    stats: &Stats,
    faults: &Faults,
) -> Result<Response<Full<Bytes>>, String> {
    let task = callback_task(request.uri().path()).map(str::to_string);
    let (parts, body) = request.into_parts();
    let body = whole(body, "request").await?;
    // The callback's own event type, read before the body moves on.
    let event = task.as_ref().map(|_| field_of(&body, "type"));
    let answer = sender
        .lock()
        .await
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await
        .map_err(|e| format!("forward: {e}"))?;
    let (parts, body) = answer.into_parts();
    let body = whole(body, "answer").await?;
    if let (Some(task), Some(event)) = (task, event) {
        if parts.status == 200 {
            stats.callback_named(&field_of(&body, "reason"));
        }
        if faults.lose().remove(&(task, event)) {
            return Err("a callback's answer lost on purpose".to_string());
        }
    }
    Ok(Response::from_parts(parts, Full::new(body)))
}

/// A request's or an answer's whole body, up to [`BODY_LIMIT`].
async fn whole(body: Incoming, what: &str) -> Result<Bytes, String> {
    Limited::new(body, BODY_LIMIT)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| format!("{what} body: {e}"))
}

/// The task of a callback path, `/v1/tasks/{id}/callbacks`.
fn callback_task(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/tasks/")?
        .strip_suffix("/callbacks")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The two top-level fields the link reads: a callback's `type`, and
/// its answer's `reason` (each empty when absent).
#[derive(Default, Deserialize)]
struct Fields {
    #[serde(default, rename = "type")]
    event: String,
    #[serde(default)]
    reason: String,
}

/// Field `name` (`type` or `reason`) of a JSON body; empty when it has
/// none or is not JSON.
fn field_of(body: &[u8], name: &str) -> String {
    let fields = taskwire_wire::from_json_serde_bytes::<Fields>(body, "body").unwrap_or_default();
    if name == "type" {
        fields.event
    } else {
        fields.reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_callback_paths_name_a_task() {
        assert_eq!(callback_task("/v1/tasks/t_1/callbacks"), Some("t_1"));
        assert_eq!(callback_task("/v1/work/claim"), None);
        assert_eq!(callback_task("/v1/tasks//callbacks"), None);
        assert_eq!(callback_task("/v1/tasks/a/b/callbacks"), None);
        assert_eq!(
            field_of(br#"{"reason":"applied","x":1}"#, "reason"),
            "applied"
        );
        assert_eq!(
            field_of(br#"{"taskId":"t","type":"progress"}"#, "type"),
            "progress"
        );
        assert_eq!(field_of(b"not json", "reason"), "");
    }
}
