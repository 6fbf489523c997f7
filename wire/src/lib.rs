//! # taskwire-wire
//!
//! JSON text in and out for taskwire's types, with errors that name the
//! field: `event.atMs: must be a finite number >= 0, got -1`.
//!
//! Every layer that holds JSON *text* goes through here: the server's
//! bodies and stored rows, the npm package's full build, the test
//! vectors. It is the text side of core's [`taskwire_core::json`]:
//! - a strict RFC 8259 parser into core's tree (`parse.rs`, with its own
//!   exact decimal-to-double conversion in `number.rs`), read by core's
//!   readers ([`from_json`]);
//! - a serde bridge over the same tree and writer, for a server's own
//!   request and answer types ([`from_json_serde`], [`to_json`]);
//! - [`exact`]: JSON kept as it was sent (a client's `input`), and the
//!   canonical form two requests are compared in, on the same parser.
//!
//! The browser page carries none of this: it lets `JSON.parse` build the
//! tree and reads it with core's readers, which is why the readers stay
//! in core (see [`taskwire_core::json`]).

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![allow(clippy::single_char_add_str)]

extern crate alloc;

mod de;
pub mod exact;
mod number;
mod parse;
mod ser;
mod tree;

use alloc::string::String;
use serde::{Deserialize, Serialize};

use taskwire_core::follow::{AnswerReader, BatchReader, FollowConfig};
use taskwire_core::json::{self, FromJson, Path, Value};
use taskwire_core::Error;

/// Parses JSON text into core's tree.
pub fn parse_value(text: &str) -> Result<Value<'_>, json::Error> {
    parse::parse(text)
}

/// Parses JSON text into a [`FromJson`] type (the wire types): one pass
/// over the text into a tree, one over the tree into `T`.
pub fn read<T: FromJson>(text: &str) -> Result<T, json::Error> {
    T::from_json(&parse::parse(text)?, Path::Root)
}

/// Parses JSON text into any serde `T` (for types without [`FromJson`]).
pub fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, json::Error> {
    let value = parse::parse(text)?;
    // The tree must outlive the borrowed strings handed to `T`; a
    // deserialized `T` that borrows from `text` (not from the tree) is
    // fine, because borrowed tree strings are slices of `text`.
    T::deserialize(de::De {
        value: &value,
        path: Path::Root,
    })
    .map_err(|e| e.stamped(&Path::Root))
}

/// Writes `value` as compact JSON, as `JSON.stringify` would.
pub fn to_string<T: ?Sized + Serialize>(value: &T) -> Result<String, json::Error> {
    let mut out = String::with_capacity(128);
    value.serialize(ser::Ser { out: &mut out })?;
    Ok(out)
}

/// Parses `text` as one of the wire types. `what` names the value in
/// errors (`"event"` gives messages like `event.atMs: must be a finite
/// number >= 0, got -1`).
pub fn from_json<T: FromJson>(text: &str, what: &str) -> Result<T, Error> {
    read(text).map_err(|e| e.to_error(what))
}

/// Like [`from_json`], for raw bytes (an HTTP body). Invalid UTF-8 is an
/// `invalid-request` error, like any other malformed body.
pub fn from_json_bytes<T: FromJson>(bytes: &[u8], what: &str) -> Result<T, Error> {
    from_json(utf8(bytes, what)?, what)
}

/// Parses `text` as any serde type (a server's own request bodies), with
/// the same field-naming errors.
pub fn from_json_serde<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, Error> {
    from_str(text).map_err(|e| e.to_error(what))
}

/// Like [`from_json_serde`], for raw bytes.
pub fn from_json_serde_bytes<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    what: &str,
) -> Result<T, Error> {
    from_json_serde(utf8(bytes, what)?, what)
}

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, Error> {
    core::str::from_utf8(bytes).map_err(|_| {
        Error::invalid(taskwire_core::text::join(&[
            what,
            ": body is not valid UTF-8",
        ]))
    })
}

/// Serializes a wire value. None of core's types can fail to serialize,
/// so the fallback `null` is unreachable in practice, and never a panic.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    to_string(value).unwrap_or_else(|_| String::from("null"))
}

/// Reads a resume answer (and its epoch) from an answer's text: a
/// [`FollowConfig`]'s reader for an executor that holds the text.
pub const READ_ANSWER: AnswerReader = |text| from_json(text, "answer");

/// Reads a batch answer from an answer's text, likewise.
pub const READ_BATCH: BatchReader = |text| from_json(text, "answer");

/// A [`FollowConfig`] with the default settings and this crate's readers
/// of answer text (a browser executor brings readers over `JSON.parse`
/// instead, and carries no parser).
pub fn follow_config() -> FollowConfig {
    FollowConfig::new(READ_ANSWER, READ_BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use taskwire_core::{ErrorCode, Event};

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
        let err = from_json::<taskwire_core::Task>(
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
