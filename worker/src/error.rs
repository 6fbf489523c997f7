//! What a job's failure means for the task: another attempt, or the end.
//!
//! A handler returns `Result<Done, JobError>`, and `?` turns any error into
//! a [`JobError`], classified by this table (seed 001 §7, "error class
//! decides the retry policy"):
//!
//! | error | class | report |
//! |---|---|---|
//! | [`RetryableError`] | retryable | `fail`, `retryable: true` |
//! | [`FatalError`] | final | `fail`, `retryable: false` |
//! | [`HttpStatusError`] 408, 429, 5xx | retryable | `fail`, `retryable: true` |
//! | [`HttpStatusError`], any other status | final | `fail`, `retryable: false` |
//! | `std::io::Error` of a network kind (refused, reset, aborted, not connected, broken pipe, timed out, unexpected EOF, interrupted, would block) | retryable | `fail`, `retryable: true` |
//! | `tokio::time::error::Elapsed` (a timeout) | retryable | `fail`, `retryable: true` |
//! | `hyper::Error`, `hyper_util` client errors (the network) | retryable | `fail`, `retryable: true` |
//! | anything else: programming errors, validation, bad input | final | `fail`, `retryable: false` |
//!
//! The error's whole `source()` chain is searched, first match wins, so a
//! library error that wraps an `io::Error` is still a network error. A
//! retryable failure only asks for another attempt: the server re-queues
//! it while `maxAttempts` allows, and fails it after.

use std::error::Error as StdError;
use std::fmt;

/// A configuration value that cannot be used; names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, message: impl Into<String>) -> Self {
        ConfigError {
            field,
            message: message.into(),
        }
    }

    /// The field at fault (`url`, `tenant`, `secret`, `name`, …).
    pub fn field(&self) -> &str {
        self.field
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl StdError for ConfigError {}

/// Whether a failure is worth another attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Transient (the network, a timeout, a vendor's 429 or 5xx): the task
    /// is re-queued while attempts are left.
    Retryable,
    /// Permanent (bad input, a bug, a vendor's 4xx): the task fails.
    Final,
    /// The job stopped because its cancellation signal fired
    /// ([`crate::Job::check`]); what is reported depends on why it fired.
    Cancelled,
}

/// The error a handler returns. Made from any error by `?` (classified by
/// the table above), or on purpose with [`JobError::retryable`] and
/// [`JobError::fatal`]. Deliberately not a `std::error::Error` itself, so
/// that `?` can convert every error into it (as `anyhow::Error` does).
pub struct JobError {
    class: ErrorClass,
    message: String,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl JobError {
    /// A failure another attempt may get past.
    pub fn retryable(message: impl Into<String>) -> Self {
        JobError::of(ErrorClass::Retryable, message.into())
    }

    /// A failure no attempt will get past.
    pub fn fatal(message: impl Into<String>) -> Self {
        JobError::of(ErrorClass::Final, message.into())
    }

    /// The job stopped because its signal fired.
    pub fn cancelled() -> Self {
        JobError::of(ErrorClass::Cancelled, "cancelled".into())
    }

    fn of(class: ErrorClass, message: String) -> Self {
        JobError {
            class,
            message,
            source: None,
        }
    }

    /// Its class: what the worker reports.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The message reported as the task's `error`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error it was made from, if any.
    pub fn source(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobError({:?}: {})", self.class, self.message)
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for JobError {
    fn from(e: E) -> Self {
        let class = classify(&e);
        JobError {
            class,
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

/// Raise it (or return it through `?`) for a transient failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryableError(pub String);

impl fmt::Display for RetryableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for RetryableError {}

/// Raise it (or return it through `?`) for a permanent failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatalError(pub String);

impl fmt::Display for FatalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for FatalError {}

/// A vendor's HTTP answer that is not a success, classified by its status
/// (408, 429 and 5xx are retryable, any other is final).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpStatusError {
    /// The HTTP status.
    pub status: u16,
    /// What the vendor said, for the task's `error`.
    pub message: String,
}

impl fmt::Display for HttpStatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.message)
    }
}

impl StdError for HttpStatusError {}

/// Whether `status` is worth asking again: 408, 429 and 5xx.
pub(crate) fn retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

/// The class of any error, by the table in the module's docs.
pub fn classify(e: &(dyn StdError + 'static)) -> ErrorClass {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(class) = classify_one(err) {
            return class;
        }
        cur = err.source();
    }
    ErrorClass::Final
}

fn classify_one(e: &(dyn StdError + 'static)) -> Option<ErrorClass> {
    use std::io::ErrorKind as K;
    if e.is::<RetryableError>() || e.is::<tokio::time::error::Elapsed>() {
        return Some(ErrorClass::Retryable);
    }
    if e.is::<FatalError>() {
        return Some(ErrorClass::Final);
    }
    if let Some(s) = e.downcast_ref::<HttpStatusError>() {
        return Some(if retryable_status(s.status) {
            ErrorClass::Retryable
        } else {
            ErrorClass::Final
        });
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return match io.kind() {
            K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::BrokenPipe
            | K::TimedOut
            | K::UnexpectedEof
            | K::Interrupted
            | K::WouldBlock => Some(ErrorClass::Retryable),
            // Another io error (a file not found, a permission) says
            // nothing about the network: look further down the chain.
            _ => None,
        };
    }
    if e.is::<hyper::Error>() || e.is::<hyper_util::client::legacy::Error>() {
        return Some(ErrorClass::Retryable);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of<E: StdError + Send + Sync + 'static>(e: E) -> ErrorClass {
        JobError::from(e).class()
    }

    #[test]
    fn the_table() {
        let io = |k| std::io::Error::new(k, "x");
        assert_eq!(class_of(RetryableError("r".into())), ErrorClass::Retryable);
        assert_eq!(class_of(FatalError("f".into())), ErrorClass::Final);
        let status = |s| HttpStatusError {
            status: s,
            message: String::new(),
        };
        for s in [408, 429, 500, 502, 503] {
            assert_eq!(class_of(status(s)), ErrorClass::Retryable, "{s}");
        }
        for s in [400, 401, 403, 404, 409, 422] {
            assert_eq!(class_of(status(s)), ErrorClass::Final, "{s}");
        }
        assert_eq!(
            class_of(io(std::io::ErrorKind::ConnectionReset)),
            ErrorClass::Retryable
        );
        assert_eq!(
            class_of(io(std::io::ErrorKind::NotFound)),
            ErrorClass::Final
        );
        assert_eq!(class_of("x".parse::<u32>().unwrap_err()), ErrorClass::Final);
    }

    #[test]
    fn the_source_chain_is_searched() {
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl StdError for Wrapper {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let e = Wrapper(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(class_of(e), ErrorClass::Retryable);
    }
}
