//! The one error type of the crate.
//!
//! Every failure carries a stable [`ErrorCode`] (what a program matches on)
//! and a message that names the offending field (what a human reads).
//! Invalid input is always an error, never a panic, and a failed call leaves
//! every piece of state exactly as it was.

use alloc::string::String;
use core::fmt;

/// Stable, machine-readable error codes. Their wire spelling (`code`) never
/// changes; messages may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A value is missing, of the wrong type or outside its domain.
    InvalidRequest,
    /// The task id is unknown.
    NotFound,
    /// A task with that id already exists (the existing one is untouched).
    TaskExists,
    /// An executor event that carries `attempt` has an `atMs` too far
    /// from the server's clock (see [`crate::work::check_report_clock`]).
    ClockSkew,
}

impl ErrorCode {
    /// The wire spelling: `invalid-request`, `not-found`, `task-exists` or
    /// `clock-skew`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid-request",
            ErrorCode::NotFound => "not-found",
            ErrorCode::TaskExists => "task-exists",
            ErrorCode::ClockSkew => "clock-skew",
        }
    }
}

/// An error with a stable code and a message that names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, for programs.
    pub code: ErrorCode,
    /// What went wrong, for humans; always names the field or id involved.
    pub message: String,
}

impl Error {
    /// An `invalid-request` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error {
            code: ErrorCode::InvalidRequest,
            message: message.into(),
        }
    }

    /// A `not-found` error for the task `id`.
    pub fn not_found(id: &str) -> Self {
        Error {
            code: ErrorCode::NotFound,
            message: join(&["taskId: no task with id ", &quoted(id)]),
        }
    }

    /// A `task-exists` error for the task `id`.
    pub fn task_exists(id: &str) -> Self {
        Error {
            code: ErrorCode::TaskExists,
            message: join(&["id: a task with id ", &quoted(id), " already exists"]),
        }
    }
}

/// The message builders (without `format!`), from the leaf module
/// [`crate::text`].
pub use crate::text::{join, quoted};

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_stable_spellings() {
        assert_eq!(ErrorCode::InvalidRequest.as_str(), "invalid-request");
        assert_eq!(ErrorCode::NotFound.as_str(), "not-found");
        assert_eq!(ErrorCode::TaskExists.as_str(), "task-exists");
        assert_eq!(ErrorCode::ClockSkew.as_str(), "clock-skew");
    }

    #[test]
    fn long_ids_are_cut_in_messages() {
        let id = "x".repeat(10_000);
        let err = Error::not_found(&id);
        assert!(err.message.len() < 120, "{}", err.message);
        assert!(err.message.starts_with("taskId:"));
        assert_eq!(quoted("héllo"), "\"héllo\"");
    }

    #[test]
    fn display_leads_with_the_code() {
        assert_eq!(
            Error::invalid("event.atMs: must be finite").to_string(),
            "invalid-request: event.atMs: must be finite"
        );
    }
}
