//! JSON text in and out, with errors that name the field.
//!
//! Every layer (HTTP bodies, the npm package boundary, the test vectors)
//! moves wire types as JSON text, so this is the one place that turns a
//! parse failure into an [`Error`]. The fast path is a plain
//! `serde_json` parse; only when it fails is the text parsed a second time
//! with path tracking, so valid input pays nothing for good messages.

use serde::{Deserialize, Serialize};

use crate::Error;

/// Parses `text` as a `T`. `what` names the value in errors (`"event"`
/// gives messages like `event.atMs: must be a finite number >= 0`).
pub fn from_json<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, Error> {
    serde_json::from_str(text).map_err(|_| describe::<T>(text, what))
}

/// Like [`from_json`], for raw bytes (an HTTP body). Invalid UTF-8 is an
/// `invalid-request` error, like any other malformed body.
pub fn from_json_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, Error> {
    match std::str::from_utf8(bytes) {
        Ok(text) => from_json(text, what),
        Err(_) => Err(Error::invalid(format!("{what}: body is not valid UTF-8"))),
    }
}

/// Serializes a wire value. None of this crate's types can fail to
/// serialize (no non-string map keys, no non-finite numbers), so the
/// fallback `null` is unreachable in practice, and never a panic.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| String::from("null"))
}

/// Second, slow pass: where in the value did parsing fail?
fn describe<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Error {
    let mut de = serde_json::Deserializer::from_str(text);
    let err = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => match de.end() {
            Ok(()) => return Error::invalid(format!("{what}: invalid JSON")),
            Err(e) => return Error::invalid(format!("{what}: {}", bare_message(&e))),
        },
        Err(e) => e,
    };
    let path = err.path().to_string();
    let mut place = String::from(what);
    if path != "." {
        if !path.starts_with('[') {
            place.push('.');
        }
        place.push_str(&path);
    }
    let message = bare_message(err.inner());
    // Messages from our own checks that name a sub-field start with '.'
    // (".retryable: required …") and join the path directly.
    if message.starts_with('.') {
        Error::invalid(format!("{place}{message}"))
    } else {
        Error::invalid(format!("{place}: {message}"))
    }
}

/// serde_json's message without its " at line L column C" suffix: the field
/// path says where, and positions mean nothing to a JavaScript caller.
fn bare_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&suffix) {
        Some(bare) => bare.to_string(),
        None => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        n: u8,
    }

    #[test]
    fn names_nested_fields() {
        let err = from_json::<Outer>(r#"{"items":[{"n":1},{"n":"x"}]}"#, "body").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(
            err.message.starts_with("body.items[1].n: invalid type"),
            "{}",
            err.message
        );
        assert!(!err.message.contains("line"), "{}", err.message);
    }

    #[test]
    fn reports_syntax_and_trailing_garbage() {
        let err = from_json::<Outer>("{", "body").unwrap_err();
        assert!(err.message.starts_with("body"), "{}", err.message);
        let err = from_json::<Outer>(r#"{"items":[]} x"#, "body").unwrap_err();
        assert!(err.message.contains("trailing"), "{}", err.message);
    }

    #[test]
    fn rejects_invalid_utf8() {
        let err = from_json_bytes::<Outer>(&[0xff, 0xfe], "body").unwrap_err();
        assert_eq!(err.message, "body: body is not valid UTF-8");
    }
}
