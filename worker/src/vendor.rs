//! Submit once, then poll: the pattern of seed 004 for a vendor's
//! asynchronous job (OCR, transcoding, a model behind a queue).
//!
//! - `submit(key)` is called once per attempt under
//!   [`Job::key`]`(step, "submit")`, the same key in every attempt. A
//!   vendor that deduplicates by it answers a new attempt's submit with
//!   the job it already has, so a retried task never starts a second
//!   vendor job.
//! - `poll(handle)` is called until the vendor's job is done, with
//!   exponential backoff (capped, with jitter), until the task's
//!   `deadlineAtMs` or the helper's own timeout, whichever comes first;
//!   past it the job fails **final** (the vendor's work may still be
//!   running: a person decides). Up to [`PollOptions::max_poll_errors`]
//!   retryable poll errors in a row are waited out; the next one, or any
//!   final one, ends the job with that error.
//! - A submit whose outcome is unknown (the request went out, no answer
//!   came back) is **never blindly sent again** (004: `SUBMIT_UNKNOWN`, 「不
//!   会盲目自动重提」): the helper asks `lookup(key)` whether the vendor
//!   has a job under the key; a vendor without a lookup gets the job
//!   failed, final, with an error saying the outcome is unknown, for a
//!   person to check.
//!
//! The job's signal is checked before each call and during each wait.
//!
//! A submit's error, returned with `?`, is sorted by this table (as the
//! Node and Python libraries sort theirs):
//!
//! | submit error | outcome |
//! |---|---|
//! | `std::io::Error` timed out, reset, aborted, broken pipe, unexpected EOF; `tokio::time::error::Elapsed` | unknown |
//! | [`HttpStatusError`] 500, 502, 504 | unknown |
//! | anything else (connection refused, 4xx, 429, 503, …) | not submitted: classified as any error |

use std::future::Future;
use std::time::Duration;

use crate::error::{ErrorClass, HttpStatusError, JobError};
use crate::http::backoff_between;
use crate::job::Job;

/// What a vendor's submit may end in, besides its handle.
#[derive(Debug)]
pub enum SubmitError {
    /// The vendor answered and refused, or the request never left (a
    /// refused connection): classified as any other error.
    Failed(JobError),
    /// The request may have reached the vendor, and no answer came back
    /// (a timeout or a reset after sending): the vendor may or may not
    /// have a job under the key.
    Unknown(String),
}

/// A vendor's answer to a lookup by key.
#[derive(Debug)]
pub enum Lookup<H> {
    /// It has a job under the key: poll this one.
    Found(H),
    /// It has none: submitting under the key again is safe.
    NotFound,
    /// This vendor cannot be asked (the default).
    Unsupported,
}

/// A vendor's job, as the helper sees it.
pub enum Status<T> {
    /// Still running: poll again later.
    Pending,
    /// Finished with this output.
    Done(T),
}

/// A vendor's asynchronous API: one submit, one poll, optionally a lookup.
pub trait Vendor: Send + Sync {
    /// What identifies the vendor's job once submitted.
    type Handle: Send + Sync;
    /// The finished job's output.
    type Output: Send;

    /// Creates the vendor's job under the idempotency `key`.
    fn submit(&self, key: &str) -> impl Future<Output = Result<Self::Handle, SubmitError>> + Send;

    /// Asks once how the vendor's job is doing.
    fn poll(
        &self,
        handle: &Self::Handle,
    ) -> impl Future<Output = Result<Status<Self::Output>, JobError>> + Send;

    /// Asks whether the vendor has a job under `key` (after a submit whose
    /// outcome is unknown). Default: [`Lookup::Unsupported`].
    fn lookup(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Lookup<Self::Handle>, JobError>> + Send {
        let _ = key;
        async { Ok(Lookup::Unsupported) }
    }
}

/// How long and how often to poll.
#[derive(Debug, Clone, Copy)]
pub struct PollOptions {
    /// The first wait between two polls (default 1 s).
    pub first_delay: Duration,
    /// The longest wait between two polls (default 30 s).
    pub max_delay: Duration,
    /// Stop polling after this long (default none: only the task's
    /// `deadlineAtMs` bounds it). Running out is a final failure: the
    /// vendor's work may still be running, and a person decides.
    pub timeout: Option<Duration>,
    /// Retryable poll errors in a row that are waited out (default 5);
    /// the next one ends the job with it (retryable: a new attempt polls
    /// the same vendor job again, under the same key).
    pub max_poll_errors: u32,
}

impl Default for PollOptions {
    fn default() -> Self {
        PollOptions {
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            timeout: None,
            max_poll_errors: 5,
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for SubmitError {
    /// Sorts a submit's error by the table in the module's docs.
    fn from(e: E) -> Self {
        if outcome_unknown(&e) {
            SubmitError::Unknown(e.to_string())
        } else {
            SubmitError::Failed(JobError::from(e))
        }
    }
}

/// Whether an error after sending leaves the vendor's side unknown: the
/// request may have arrived (a timeout, a connection cut mid-answer, a
/// 500/502/504). A refused connection, a 4xx, a 429 or a 503 never
/// created anything.
fn outcome_unknown(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as K;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<tokio::time::error::Elapsed>() {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                K::TimedOut
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::BrokenPipe
                    | K::UnexpectedEof
            ) {
                return true;
            }
        }
        if let Some(s) = err.downcast_ref::<HttpStatusError>() {
            return matches!(s.status, 500 | 502 | 504);
        }
        cur = err.source();
    }
    false
}

impl Job {
    /// Runs `vendor`'s job for `step`: submit once under
    /// `key(step, "submit")`, then poll until it is done (see the module's
    /// docs). Returns its output.
    pub async fn vendor<V: Vendor>(
        &self,
        step: &str,
        vendor: &V,
        options: PollOptions,
    ) -> Result<V::Output, JobError> {
        let key = self.key(step, "submit");
        self.check()?;
        let handle = match vendor.submit(&key).await {
            Ok(h) => h,
            Err(SubmitError::Failed(e)) => return Err(e),
            Err(SubmitError::Unknown(why)) => {
                self.check()?;
                match vendor.lookup(&key).await? {
                    Lookup::Found(h) => h,
                    Lookup::NotFound => match vendor.submit(&key).await {
                        // The vendor said it has no job under the key: one
                        // more submit cannot make a second one.
                        Ok(h) => h,
                        Err(SubmitError::Failed(e)) => return Err(e),
                        Err(SubmitError::Unknown(why)) => return Err(unknown(&key, &why)),
                    },
                    Lookup::Unsupported => return Err(unknown(&key, &why)),
                }
            }
        };
        self.check()?;
        self.poll_until_done(vendor, &handle, options).await
    }

    async fn poll_until_done<V: Vendor>(
        &self,
        vendor: &V,
        handle: &V::Handle,
        options: PollOptions,
    ) -> Result<V::Output, JobError> {
        let started = tokio::time::Instant::now();
        let give_up = options.timeout.map(|t| started + t);
        let mut n: u32 = 0;
        let mut errors: u32 = 0;
        loop {
            self.check()?;
            match vendor.poll(handle).await {
                Ok(Status::Done(out)) => return Ok(out),
                Ok(Status::Pending) => errors = 0,
                Err(e)
                    if e.class() == ErrorClass::Retryable && errors < options.max_poll_errors =>
                {
                    errors += 1;
                }
                Err(e) => return Err(e),
            }
            self.check()?;
            let wait = backoff_between(options.first_delay, options.max_delay, n);
            n = n.saturating_add(1);
            if let Some(at) = give_up {
                if tokio::time::Instant::now() + wait > at {
                    return Err(JobError::fatal(format!(
                        "the vendor's job was still pending after {} ms (it may still be running)",
                        options.timeout.unwrap_or_default().as_millis()
                    )));
                }
            }
            if let Some(deadline) = self.task().deadline_at_ms {
                if self.server_now_ms() + wait.as_millis() as f64 >= deadline {
                    return Err(JobError::fatal(
                        "the vendor's job was still pending at the task's deadline (it may still be running)",
                    ));
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.token().cancelled_owned() => return Err(JobError::cancelled()),
            }
        }
    }
}

fn unknown(key: &str, why: &str) -> JobError {
    JobError::fatal(format!(
        "the vendor submit under key {key} has an unknown outcome ({why}): not submitted again; \
         check the vendor for a job under this key"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown<E: std::error::Error + Send + Sync + 'static>(e: E) -> bool {
        matches!(SubmitError::from(e), SubmitError::Unknown(_))
    }

    #[test]
    fn a_submit_error_is_unknown_only_when_the_request_may_have_arrived() {
        use std::io::{Error, ErrorKind as K};
        assert!(unknown(Error::from(K::TimedOut)));
        assert!(unknown(Error::from(K::ConnectionReset)));
        assert!(unknown(Error::from(K::BrokenPipe)));
        assert!(!unknown(Error::from(K::ConnectionRefused)));
        let status = |status| HttpStatusError {
            status,
            message: String::new(),
        };
        for s in [500, 502, 504] {
            assert!(unknown(status(s)), "{s}");
        }
        for s in [400, 404, 429, 503] {
            assert!(!unknown(status(s)), "{s}");
        }
        assert!(!unknown(crate::FatalError("bad".into())));
    }
}
