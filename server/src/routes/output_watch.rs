//! A task's output on the task's own watch routes (PROTOCOL.md §Live
//! output, "Following"): `GET /v1/tasks/{id}/resume` and `/events` with
//! `?output=<stream>[&outputAttempt=A&outputOffset=O]`.
//!
//! Only a follower that asks gets output; without `output` the routes
//! answer byte for byte as before, and their held requests hold nothing
//! more. With it, one held request serves both: it wakes on the task's
//! next version *or* on an append to the task ([`crate::hub::output`]),
//! and its answer carries the text the follower lacks from
//! `(outputAttempt, outputOffset)`, as core's `OutputLog::since` says.

use std::time::Duration;

use axum::response::sse::Event as SseEvent;
use axum::response::Response;
use taskwire_core::json::object;
use taskwire_core::output::{utf16_len, Catchup, StreamName};
use taskwire_core::{worth_holding, ResumeAnswer, MAX_SAFE_INTEGER};

use super::resume::{aborted, with_epoch};
use super::{no_store_json, Query};
use crate::error::ApiError;
use crate::hub::output::{OutputWatch, Piece};
use crate::hub::{answer_from, Subscription, Wake};
use crate::limits::Watcher;
use crate::store::OutputWanted;
use crate::AppState;

/// Reads `outputAttempt`, `outputOffset` and `output` (each judged when
/// sent, so a bad one is a 400 naming it): `None` when the follower did
/// not ask for output.
pub fn wanted(query: &Query) -> Result<Option<OutputWanted>, ApiError> {
    let attempt = query.int("outputAttempt", MAX_SAFE_INTEGER)?.unwrap_or(0);
    let offset = query.int("outputOffset", MAX_SAFE_INTEGER)?.unwrap_or(0);
    let Some(name) = query.get("output") else {
        return Ok(None);
    };
    Ok(Some(OutputWanted {
        stream: StreamName::new(name, "output")?,
        attempt,
        offset,
    }))
}

/// `{"stream", "attempt", "offset", "text", "complete"}`: what a page
/// feeds to its `OutputMirror` (`apply(attempt, offset, text)`, then
/// `close(attempt)` when `complete`).
pub fn output_json(stream: &StreamName, c: &Catchup) -> String {
    object(&[
        ("stream", &stream.as_str()),
        ("attempt", &c.attempt),
        ("offset", &c.offset),
        ("text", &c.text.as_str()),
        ("complete", &c.complete),
    ])
}

/// A resume answer's JSON with the output after its other fields.
fn with_output(answer_json: String, stream: &StreamName, c: &Catchup) -> String {
    let mut out = answer_json;
    // An answer is always a JSON object: reopen it.
    if out.ends_with('}') {
        out.pop();
        out.push_str(",\"output\":");
        out.push_str(&output_json(stream, c));
        out.push('}');
    }
    out
}

/// Who holds a request, and on what task.
pub struct Follower {
    pub tenant: String,
    pub subject: Option<Box<str>>,
    pub id: String,
}

/// The long-poll with output: answered at once when the follower lacks
/// anything (a version, text, a newer attempt, the end), else held until
/// one of them comes or `wait_ms` passes.
pub async fn resume(
    state: AppState,
    who: Follower,
    (cursor, wait_ms, snapshot, same_epoch): (u64, u64, bool, bool),
    wanted: OutputWanted,
) -> Result<Response, ApiError> {
    let watcher = Watcher {
        tenant: &who.tenant,
        subject: who.subject.as_deref(),
    };
    if wait_ms > 0 {
        super::check_watch_quota(&state, watcher).await?;
    }
    // Both subscribed before the reads: what commits in between wakes.
    let mut sub = state.hub.subscribe(&who.id, &who.tenant);
    let mut out = state.hub.output.watch(&who.id);
    let answer = state
        .store
        .resume(who.tenant.clone(), who.id.clone(), cursor, snapshot)
        .await?;
    let mut lacks = read(&state, &who, &wanted).await?;
    let live = answer.task().is_some_and(|t| !t.state.is_terminal());
    let reply = |answer, lacks: &Catchup| {
        no_store_json(with_output(
            with_epoch(&state, answer),
            &wanted.stream,
            lacks,
        ))
    };
    if !worth_holding(wait_ms, answer.mode(), live, same_epoch) || lacks.is_news(wanted.attempt) {
        return Ok(reply(answer, &lacks));
    }
    let _held = match super::admit_watch(&state, watcher) {
        Ok(permit) => permit,
        Err(refused) => return Err(refused.await),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => return Ok(reply(answer, &lacks)),
            wake = sub.wait_past(cursor) => {
                let Some(answer) = woken(&state, &who, &sub, cursor, wake).await? else {
                    return Ok(aborted());
                };
                let lacks = read(&state, &who, &wanted).await?;
                return Ok(reply(answer, &lacks));
            }
            piece = out.appended() => {
                lacks = match continues(piece.as_deref(), &wanted) {
                    Some(lacks) => lacks,
                    None => read(&state, &who, &wanted).await?,
                };
                if lacks.is_news(wanted.attempt) {
                    return Ok(reply(answer, &lacks));
                }
            }
        }
    }
}

/// What a follower holding `wanted` lacks, when the append that woke it
/// starts exactly where its text ends: the piece itself (the task was
/// live when it committed; its end wakes the follower through the task).
fn continues(piece: Option<&Piece>, wanted: &OutputWanted) -> Option<Catchup> {
    let p = piece?;
    let next = p.stream == wanted.stream.as_str()
        && p.attempt == wanted.attempt
        && p.offset == wanted.offset;
    next.then(|| Catchup {
        attempt: p.attempt,
        offset: p.offset,
        text: p.text.clone(),
        complete: false,
    })
}

async fn read(
    state: &AppState,
    who: &Follower,
    wanted: &OutputWanted,
) -> Result<Catchup, ApiError> {
    Ok(state
        .store
        .read_output(who.tenant.clone(), who.id.clone(), wanted.clone())
        .await?)
}

/// The answer after a task's wake (`None`: the connection is to drop).
async fn woken(
    state: &AppState,
    who: &Follower,
    sub: &Subscription,
    cursor: u64,
    wake: Wake,
) -> Result<Option<ResumeAnswer>, ApiError> {
    match wake {
        Wake::Changed(latest) => match answer_from(&latest, cursor, state.retention) {
            Some(a) => Ok(Some(a)),
            None => {
                let id = sub.task_id().to_string();
                Ok(Some(
                    state
                        .store
                        .resume(who.tenant.clone(), id, cursor, false)
                        .await?,
                ))
            }
        },
        Wake::Dropped => Ok(None),
    }
}

/// An SSE stream with output: `resume` messages as without it (their `id`
/// is the version), and an `output` message whenever the follower lacks
/// text, a newer attempt or the end. It ends after the task's terminal
/// message and the output's `complete` one.
pub struct OutputStream {
    pub state: AppState,
    pub who: Follower,
    pub sub: Subscription,
    pub out: OutputWatch,
    pub cursor: u64,
    pub wanted: OutputWanted,
    /// The first answer, read before the stream opened.
    pub first: Option<ResumeAnswer>,
    pub task_done: bool,
    pub output_done: bool,
    pub queued: Vec<SseEvent>,
}

type Item = Result<SseEvent, std::io::Error>;

/// The next message of an [`OutputStream`].
pub async fn next(mut st: OutputStream) -> Option<(Item, OutputStream)> {
    loop {
        if !st.queued.is_empty() {
            let event = st.queued.remove(0);
            return Some((Ok(event), st));
        }
        if st.task_done && st.output_done {
            return None;
        }
        let mut answer = st.first.take();
        let mut task_woke = answer.is_some();
        let mut piece = None;
        if !task_woke {
            tokio::select! {
                wake = st.sub.wait_past(st.cursor), if !st.task_done => {
                    match woken(&st.state, &st.who, &st.sub, st.cursor, wake).await {
                        Ok(Some(a)) => { answer = Some(a); task_woke = true; }
                        Ok(None) => return Some((Err(std::io::Error::other("connection dropped by the server")), ended(st))),
                        Err(e) => return Some((Err(std::io::Error::other(e.message)), ended(st))),
                    }
                }
                p = st.out.appended(), if !st.output_done => piece = p,
            }
        }
        if let Some(answer) = answer {
            let (version, terminal) = answer
                .task()
                .map_or((st.cursor, false), |t| (t.version, t.state.is_terminal()));
            st.cursor = version;
            st.task_done = terminal;
            st.queued.push(
                SseEvent::default()
                    .event("resume")
                    .id(version.to_string())
                    .data(with_epoch(&st.state, answer)),
            );
        }
        if st.output_done {
            continue;
        }
        let known = continues(piece.as_deref(), &st.wanted).filter(|_| !task_woke);
        let lacks = match known {
            Some(l) => l,
            None => match read(&st.state, &st.who, &st.wanted).await {
                Ok(l) => l,
                Err(e) => return Some((Err(std::io::Error::other(e.message)), ended(st))),
            },
        };
        if lacks.is_news(st.wanted.attempt) || (task_woke && lacks.complete) {
            st.wanted.attempt = lacks.attempt;
            st.wanted.offset = lacks.offset + utf16_len(&lacks.text);
            st.output_done = lacks.complete;
            st.queued.push(
                SseEvent::default()
                    .event("output")
                    .data(output_json(&st.wanted.stream, &lacks)),
            );
        }
    }
}

fn ended(mut st: OutputStream) -> OutputStream {
    st.task_done = true;
    st.output_done = true;
    st.queued.clear();
    st
}
