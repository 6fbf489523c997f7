//! The codec's error: a message and where it happened.
//!
//! The `de::Error` constructors are all overridden so that no message ever
//! formats a float or escapes a string with `Debug`: both would pull
//! several kilobytes of formatting code into the WebAssembly bundle.

use alloc::{format, string::String, string::ToString};
use core::fmt::{self, Display};

use serde::de::{self, Expected, Unexpected};

use super::Path;

/// A JSON codec error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    /// `None` until a deserializer frame stamps it; `Some("")` is the root.
    path: Option<String>,
    syntax: bool,
}

impl Error {
    /// Malformed JSON text (the parser's errors; `taskwire-wire`).
    pub fn syntax(message: String) -> Self {
        Error {
            message,
            path: Some(String::new()),
            syntax: true,
        }
    }

    fn new(message: String) -> Self {
        Error {
            message,
            path: None,
            syntax: false,
        }
    }

    /// An error at a known place.
    pub(crate) fn located(message: String, at: Path<'_>) -> Self {
        Error {
            message,
            path: Some(at.text()),
            syntax: false,
        }
    }

    /// Stamps `path` on the error, unless a deeper frame already did
    /// (the serde bridge's frames, in `taskwire-wire`).
    pub fn stamped(self, path: &Path<'_>) -> Self {
        self.at(path)
    }

    /// [`Error::stamped`], for this crate (see [`crate::text`] for why).
    pub(crate) fn at(mut self, path: &Path<'_>) -> Self {
        if self.path.is_none() {
            self.path = Some(path.text());
        }
        self
    }

    /// The message, without the path.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where the error is (`history[3].event.atMs`; empty at the root).
    pub fn path(&self) -> &str {
        self.path.as_deref().unwrap_or("")
    }

    /// True for malformed JSON text (as opposed to a well-formed value of
    /// the wrong shape).
    pub fn is_syntax(&self) -> bool {
        self.syntax
    }
}

impl Error {
    /// As a core [`crate::Error`] (`invalid-request`): `what`, the path
    /// and the message, e.g. `event.progress: must be an integer from 0
    /// to 100, got 101`.
    pub fn to_error(&self, what: &str) -> crate::Error {
        self.locate(what)
    }

    /// [`Error::to_error`], for this crate (see [`crate::text`] for why).
    pub(crate) fn locate(&self, what: &str) -> crate::Error {
        let mut place = String::from(what);
        let path = self.path();
        if !path.is_empty() {
            if !path.starts_with("[") {
                place.push_str(".");
            }
            place.push_str(path);
        }
        // Messages that name a sub-field start with '.' (".retryable: …")
        // and join the path directly.
        if !self.message.starts_with(".") {
            place.push_str(": ");
        }
        place.push_str(&self.message);
        crate::Error::invalid(place)
    }
}

impl Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path() {
            "" => f.write_str(&self.message),
            path => write!(f, "{path}: {}", self.message),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// What a value was, in words (never its float digits).
fn describe(unexp: &Unexpected<'_>) -> &'static str {
    match unexp {
        Unexpected::Bool(_) => "a boolean",
        Unexpected::Unsigned(_) | Unexpected::Signed(_) | Unexpected::Float(_) => "a number",
        Unexpected::Char(_) | Unexpected::Str(_) => "a string",
        Unexpected::Unit | Unexpected::Option => "null",
        Unexpected::Seq => "an array",
        Unexpected::Map => "an object",
        _ => "an unexpected value",
    }
}

/// What was expected, in words. Derived struct visitors say "struct
/// RawEvent"; a JavaScript caller should read "an object".
fn expectation(exp: &dyn Expected) -> String {
    let text = exp.to_string();
    if text.starts_with("struct ") || text.starts_with("internally tagged") {
        String::from("an object")
    } else {
        text
    }
}

impl de::Error for Error {
    fn custom<T: Display>(msg: T) -> Self {
        Error::new(msg.to_string())
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Error::new(format!(
            "expected {}, got {}",
            expectation(exp),
            describe(&unexp)
        ))
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Error::new(format!("expected {exp}, got {}", describe(&unexp)))
    }

    fn invalid_length(len: usize, exp: &dyn Expected) -> Self {
        Error::new(format!("expected {exp}, got {len} items"))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let mut message = format!(
            "unknown value {}, expected one of ",
            crate::text::quoted(variant)
        );
        for (i, name) in expected.iter().enumerate() {
            if i > 0 {
                message.push_str(", ");
            }
            message.push_str(name);
        }
        Error::new(message)
    }

    fn unknown_field(field: &str, _expected: &'static [&'static str]) -> Self {
        Error::new(format!("unknown field {}", crate::text::quoted(field)))
    }

    fn missing_field(field: &'static str) -> Self {
        // Leading '.': names a sub-field of the current path.
        Error::new(format!(".{field}: required"))
    }

    fn duplicate_field(field: &'static str) -> Self {
        Error::new(format!(".{field}: appears twice"))
    }
}

impl serde::ser::Error for Error {
    fn custom<T: Display>(msg: T) -> Self {
        Error::new(msg.to_string())
    }
}
