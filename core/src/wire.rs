//! JSON text in and out, with errors that name the field.
//!
//! Every layer (HTTP bodies, the npm package boundary, the test vectors)
//! moves wire types as JSON text, so this is the one place that turns a
//! parse failure into an [`Error`]: `event.atMs: must be a finite number
//! >= 0, got -1`. The codec is [`crate::json`].

use serde::{Deserialize, Serialize};

use crate::{json, Error};

/// Parses `text` as a `T`. `what` names the value in errors (`"event"`
/// gives messages like `event.atMs: must be a finite number >= 0`).
pub fn from_json<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, Error> {
    json::from_str(text).map_err(|e| locate(&e, what))
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
/// serialize, so the fallback `null` is unreachable in practice, and
/// never a panic.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    json::to_string(value).unwrap_or_else(|_| String::from("null"))
}

/// `what` + the error's path + its message, e.g. `event.progress: …`.
fn locate(e: &json::Error, what: &str) -> Error {
    let mut place = String::from(what);
    let path = e.path();
    if !path.is_empty() {
        if !path.starts_with('[') {
            place.push('.');
        }
        place.push_str(path);
    }
    let message = e.message();
    // Messages that name a sub-field start with '.' (".retryable: …") and
    // join the path directly.
    if message.starts_with('.') {
        Error::invalid(format!("{place}{message}"))
    } else {
        Error::invalid(format!("{place}: {message}"))
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
        assert_eq!(err.message, "body.items[1].n: expected u8, got a string");
        let err = from_json::<Outer>(r#"{"items":[{"n":1},{}]}"#, "body").unwrap_err();
        assert_eq!(err.message, "body.items[1].n: required");
        let err = from_json::<Outer>(r#"[]"#, "body").unwrap_err();
        assert_eq!(err.message, "body: expected an object, got an array");
    }

    #[test]
    fn reports_syntax_and_trailing_garbage() {
        let err = from_json::<Outer>("{", "body").unwrap_err();
        assert!(
            err.message.starts_with("body: invalid JSON"),
            "{}",
            err.message
        );
        let err = from_json::<Outer>(r#"{"items":[]} x"#, "body").unwrap_err();
        assert!(err.message.contains("trailing"), "{}", err.message);
    }

    #[test]
    fn rejects_invalid_utf8() {
        let err = from_json_bytes::<Outer>(&[0xff, 0xfe], "body").unwrap_err();
        assert_eq!(err.message, "body: body is not valid UTF-8");
    }
}
