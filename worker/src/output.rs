//! Live output (PROTOCOL.md §Live output): a job's text as it writes it,
//! appended to one of the task's streams with signed requests.
//!
//! `job.output("draft")?.write(text)` only buffers. The buffer goes out
//! as one chunk when it reaches [`FLUSH_UNITS`], [`FLUSH_AFTER`] after its
//! first write (a timer), on [`Output::flush`], and before the attempt's
//! last report (`succeed`, `fail`, `hold`): a handler writing a token at
//! a time sends a few requests a second, not one per token, and the
//! follower never sees the end before the text.
//!
//! Each chunk is addressed by `(attempt, offset)`, so a resend is safe: a
//! chunk whose first send landed is answered `duplicate-chunk`. A chunk is
//! resent under the same address after a network error, 408, 429 or 503,
//! until the lease could no longer be alive. A newer attempt
//! (`stale-attempt`) or the task's end (`output-closed`) ends the stream:
//! later writes return the job's cancellation error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskwire_core::json::object;
use taskwire_core::output::{byte_index, utf16_len, StreamName};

use crate::error::JobError;
use crate::http::{Persist, SendError, REQUEST_TIMEOUT};
use crate::report::Reporter;
use crate::sign::random_id;

/// A buffer this long (UTF-16 units) is sent at once.
pub const FLUSH_UNITS: u64 = 4096;
/// A buffer is sent at the latest this long after its first write.
pub const FLUSH_AFTER: Duration = Duration::from_millis(100);
/// The most units one request carries (core's limit is 65,536).
const CHUNK_UNITS: u64 = 16 * 1024;

/// A job's writer on one output stream. Cheap to clone; clones share the
/// buffer and the offset.
#[derive(Clone)]
pub struct Output {
    inner: Arc<Stream>,
}

pub(crate) struct Stream {
    reporter: Arc<Reporter>,
    name: StreamName,
    state: Mutex<Buffer>,
    /// One send at a time, in offset order.
    sending: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Buffer {
    /// Units the server holds (acknowledged).
    sent: u64,
    pending: String,
    /// A timer is armed for `pending`.
    timer: bool,
    /// Why the stream ended, once it did (answered to every later write).
    ended: Option<String>,
}

impl Output {
    pub(crate) fn open(reporter: &Arc<Reporter>, name: &str) -> Result<Output, JobError> {
        let name = StreamName::new(name, "stream").map_err(|e| JobError::fatal(e.message))?;
        let mut streams = reporter.outputs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = streams.iter().find(|s| s.name == name) {
            return Ok(Output {
                inner: Arc::clone(open),
            });
        }
        let inner = Arc::new(Stream {
            reporter: Arc::clone(reporter),
            name,
            state: Mutex::new(Buffer::default()),
            sending: tokio::sync::Mutex::new(()),
        });
        streams.push(Arc::clone(&inner));
        Ok(Output { inner })
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        self.inner.name.as_str()
    }

    /// Adds `text` to the stream. Sent at once past [`FLUSH_UNITS`],
    /// else within [`FLUSH_AFTER`]. An error is a previous send's: the
    /// stream ended (a newer attempt, the task's end) or was refused.
    pub async fn write(&self, text: &str) -> Result<(), JobError> {
        let (full, arm) = {
            let mut b = self.inner.buffer();
            if let Some(why) = &b.ended {
                return Err(ended_error(why));
            }
            b.pending.push_str(text);
            let arm = !b.timer && !b.pending.is_empty();
            b.timer |= arm;
            (utf16_len(&b.pending) >= FLUSH_UNITS, arm)
        };
        if arm {
            let stream = Arc::clone(&self.inner);
            tokio::spawn(async move {
                tokio::time::sleep(FLUSH_AFTER).await;
                stream.buffer().timer = false;
                // An error is kept in the buffer and answered to the next
                // write or flush.
                let _ = stream.flush().await;
            });
        }
        if full {
            self.inner.flush().await?;
        }
        Ok(())
    }

    /// Sends whatever is buffered; resolves when the server holds it.
    pub async fn flush(&self) -> Result<(), JobError> {
        self.inner.flush().await
    }

    /// How many UTF-16 units the server acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        self.inner.buffer().sent
    }
}

impl Stream {
    fn buffer(&self) -> std::sync::MutexGuard<'_, Buffer> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends the buffer in chunks of at most [`CHUNK_UNITS`], in order.
    pub(crate) async fn flush(&self) -> Result<(), JobError> {
        let _one_at_a_time = self.sending.lock().await;
        loop {
            let (offset, chunk) = {
                let mut b = self.buffer();
                if let Some(why) = &b.ended {
                    return Err(ended_error(why));
                }
                if b.pending.is_empty() {
                    return Ok(());
                }
                let cut = cut_at(&b.pending, CHUNK_UNITS);
                let chunk: String = b.pending.drain(..cut).collect();
                (b.sent, chunk)
            };
            match self.send(offset, &chunk).await {
                Ok(()) => self.buffer().sent = offset + utf16_len(&chunk),
                Err(why) => {
                    let mut b = self.buffer();
                    // Put back: nothing after a refused chunk is sent.
                    b.pending.insert_str(0, &chunk);
                    b.ended = Some(why.clone());
                    return Err(ended_error(&why));
                }
            }
        }
    }

    /// One chunk, resent under its address until it is delivered or the
    /// lease could no longer be alive.
    async fn send(&self, offset: u64, text: &str) -> Result<(), String> {
        let r = &self.reporter;
        let body = object(&[
            ("taskId", &r.task_id.as_str()),
            ("stream", &self.name.as_str()),
            ("attempt", &r.attempt),
            ("offset", &offset),
            ("text", &text),
        ]);
        let path = format!("/v1/tasks/{}/output/{}", r.task_id, self.name.as_str());
        let persist = Persist {
            until: Some(r.lease_until()),
            timeout: REQUEST_TIMEOUT,
            resend: true,
        };
        let transport = r.transport();
        match transport
            .post_signed(&path, &random_id("out"), &body, persist)
            .await
        {
            Ok(_) => Ok(()),
            Err(SendError::Status { code, message, .. }) => Err(format!("{code}: {message}")),
            Err(e @ SendError::GaveUp(_)) => Err(e.to_string()),
        }
    }
}

impl Reporter {
    /// Sends every stream's buffer before the attempt's last report: a
    /// follower gets the whole text before it learns the task ended.
    pub(crate) async fn flush_outputs(&self) {
        let streams: Vec<Arc<Stream>> = self
            .outputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for stream in streams {
            if let Err(e) = stream.flush().await {
                eprintln!(
                    "taskwire-worker: {} output {}: {e}",
                    self.task_id,
                    stream.name.as_str()
                );
            }
        }
    }
}

/// The byte index where the first `units` UTF-16 units of `text` end,
/// never inside a character.
fn cut_at(text: &str, units: u64) -> usize {
    if utf16_len(text) <= units {
        return text.len();
    }
    (0..=units)
        .rev()
        .find_map(|u| byte_index(text, u).filter(|&i| i > 0))
        .unwrap_or(text.len())
}

/// A stream fenced off by a newer attempt or closed by the task's end
/// ends the job as cancelled; anything else is final.
fn ended_error(why: &str) -> JobError {
    if why.starts_with("stale-attempt") || why.starts_with("output-closed") {
        JobError::cancelled()
    } else {
        JobError::fatal(format!("output: {why}"))
    }
}

#[cfg(test)]
mod tests {
    use super::cut_at;

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(cut_at("abc", 10), 3);
        assert_eq!(cut_at("abcd", 2), 2);
        // "a😀": the emoji is units 1..3; a cut at 2 falls inside it.
        assert_eq!(cut_at("a😀b", 2), 1);
        assert_eq!(cut_at("a😀b", 3), 5);
    }
}
