//! JSON text in and out, with errors that name the field.
//!
//! Every layer (HTTP bodies, the npm package boundary, the test vectors)
//! moves wire types as JSON text, so this is the one place that turns a
//! parse failure into an [`Error`]: `event.atMs: must be a finite number
//! >= 0, got -1`. The codec is [`crate::json`].

use alloc::string::String;
use serde::{Deserialize, Serialize};

use crate::json::{self, FromJson};
use crate::Error;

/// Parses `text` as one of the wire types. `what` names the value in
/// errors (`"event"` gives messages like `event.atMs: must be a finite
/// number >= 0, got -1`).
pub fn from_json<T: FromJson>(text: &str, what: &str) -> Result<T, Error> {
    json::read(text).map_err(|e| locate(&e, what))
}

/// Reads an already parsed JSON tree as one of the wire types, with the
/// same field-naming errors as [`from_json`] (a browser executor lets
/// `JSON.parse` build the tree: the page then needs no JSON text parser).
pub fn from_value<T: FromJson>(value: &json::Value<'_>, what: &str) -> Result<T, Error> {
    T::from_json(value, json::Path::Root).map_err(|e| locate(&e, what))
}

/// Like [`from_json`], for raw bytes (an HTTP body). Invalid UTF-8 is an
/// `invalid-request` error, like any other malformed body.
pub fn from_json_bytes<T: FromJson>(bytes: &[u8], what: &str) -> Result<T, Error> {
    from_json(utf8(bytes, what)?, what)
}

/// Parses `text` as any serde type (a server's own request bodies), with
/// the same field-naming errors.
pub fn from_json_serde<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, Error> {
    json::from_str(text).map_err(|e| locate(&e, what))
}

/// Like [`from_json_serde`], for raw bytes.
pub fn from_json_serde_bytes<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    what: &str,
) -> Result<T, Error> {
    from_json_serde(utf8(bytes, what)?, what)
}

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, Error> {
    core::str::from_utf8(bytes)
        .map_err(|_| Error::invalid(crate::error::join(&[what, ": body is not valid UTF-8"])))
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
        if !path.starts_with("[") {
            place.push_str(".");
        }
        place.push_str(path);
    }
    let message = e.message();
    // Messages that name a sub-field start with '.' (".retryable: …") and
    // join the path directly.
    if !message.starts_with(".") {
        place.push_str(": ");
    }
    place.push_str(message);
    Error::invalid(place)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, Event};

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
    fn names_nested_fields_of_wire_types() {
        let err =
            from_json::<Event>(r#"{"type":"start","atMs":"1","worker":"w"}"#, "event").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert_eq!(err.message, "event.atMs: expected a number, got a string");
        let err = from_json::<crate::Task>(
            r#"{"id":"t","state":"running","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":0,"version":1,"history":[{"version":1,"event":{"type":"start","atMs":-1,"worker":"w"}}]}"#,
            "task",
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "task.history[0].event.atMs: must be a finite number >= 0, got -1"
        );
    }

    #[test]
    fn names_nested_fields_of_serde_types() {
        let err = from_json_serde::<Outer>(r#"{"items":[{"n":1},{"n":"x"}]}"#, "body").unwrap_err();
        assert_eq!(err.message, "body.items[1].n: expected u8, got a string");
        let err = from_json_serde::<Outer>(r#"{"items":[{"n":1},{}]}"#, "body").unwrap_err();
        assert_eq!(err.message, "body.items[1].n: required");
        let err = from_json_serde::<Outer>(r#"[]"#, "body").unwrap_err();
        assert_eq!(err.message, "body: expected an object, got an array");
    }

    #[test]
    fn reports_syntax_and_trailing_garbage() {
        let err = from_json::<Event>("{", "body").unwrap_err();
        assert!(
            err.message.starts_with("body: invalid JSON"),
            "{}",
            err.message
        );
        let err = from_json_serde::<Outer>(r#"{"items":[]} x"#, "body").unwrap_err();
        assert!(err.message.contains("trailing"), "{}", err.message);
    }

    #[test]
    fn rejects_invalid_utf8() {
        let err = from_json_bytes::<Event>(&[0xff, 0xfe], "body").unwrap_err();
        assert_eq!(err.message, "body: body is not valid UTF-8");
        let err = from_json_serde_bytes::<Outer>(&[0xff], "body").unwrap_err();
        assert_eq!(err.message, "body: body is not valid UTF-8");
    }
}
