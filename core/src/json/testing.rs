//! Core's unit tests read JSON text through serde_json (a dev-dependency)
//! into the tree, then through the readers under test. Core has no text
//! parser of its own (`taskwire-wire` has, and depends on this crate, so
//! these tests cannot use it). What the text parser and the exact writer
//! do is tested in `taskwire-wire`, including that the two writers agree.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use super::{FromJson, Value};

/// `text` read as `T`, with the readers' errors (`what` + path + why).
pub(crate) fn from_json<T: FromJson>(text: &str, what: &str) -> Result<T, crate::Error> {
    let parsed: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| crate::Error::invalid(alloc::format!("{what}: invalid JSON ({e})")))?;
    super::from_value(&tree(&parsed), what)
}

/// `value` as JSON text that [`from_json`] reads back (serde_json's
/// spelling, which may differ from the wire's in number syntax only).
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

fn tree(value: &serde_json::Value) -> Value<'static> {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap()),
        serde_json::Value::String(s) => Value::String(Cow::Owned(s.clone())),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(tree).collect()),
        serde_json::Value::Object(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (Cow::Owned(k.clone()), tree(v)))
                .collect::<Vec<_>>(),
        ),
    }
}
