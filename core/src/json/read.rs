//! Reading the wire types straight from a parsed [`Value`]: [`FromJson`].
//!
//! Why not serde's derived `Deserialize`: its per-field visitor code is
//! monomorphized for every field type and costs ~15 KB of the WebAssembly
//! bundle for our handful of types; reading from the tree is a few calls
//! per field. The types still implement `Deserialize` (for serde users),
//! through [`deserialize_via_from_json`], so each type's wire format is
//! written once, here in its `FromJson`.

use alloc::borrow::Cow;
use alloc::{string::String, string::ToString, vec::Vec};
use core::fmt::{self, Display};

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{Error, Path, Value};
use crate::js::MAX_SAFE_INTEGER;

/// A type read from JSON; `at` is where the value sits (for errors).
pub trait FromJson: Sized {
    /// Reads `value`, or fails with an error that names where and why.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, Error>;
}

/// What a JSON value is, in words.
pub(crate) fn kind_of(value: &Value<'_>) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `expected {what}, got {kind}` at `at`.
pub fn expected(what: &str, value: &Value<'_>, at: Path<'_>) -> Error {
    Error::located(
        crate::error::join(&["expected ", what, ", got ", kind_of(value)]),
        at,
    )
}

/// A message at `at` (for rules beyond the value's kind).
pub fn invalid(message: impl Into<String>, at: Path<'_>) -> Error {
    Error::located(message.into(), at)
}

/// The fields of a JSON object.
pub struct Fields<'v, 'a, 'p> {
    entries: &'v [(Cow<'a, str>, Value<'a>)],
    at: Path<'p>,
}

impl<'v, 'a, 'p> Fields<'v, 'a, 'p> {
    /// The object's fields, or an error if `value` is not an object.
    pub fn of(value: &'v Value<'a>, at: Path<'p>) -> Result<Self, Error> {
        match value {
            Value::Object(entries) => Ok(Fields { entries, at }),
            other => Err(expected("an object", other, at)),
        }
    }

    /// Where the object sits.
    pub fn at(&self) -> Path<'p> {
        self.at
    }

    /// The raw value of `key` (the last one, as `JSON.parse` keeps it).
    pub fn raw(&self, key: &str) -> Option<&'v Value<'a>> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// `key` read as a `T`; `None` when absent or `null`.
    pub fn get<T: FromJson>(&self, key: &str) -> Result<Option<T>, Error> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => T::from_json(value, Path::Key(&self.at, key)).map(Some),
        }
    }

    /// `key` read as a `T`; absent or `null` is an error.
    pub fn req<T: FromJson>(&self, key: &str) -> Result<T, Error> {
        self.get(key)?.ok_or_else(|| self.missing(key, "required"))
    }

    /// An error about a missing field, e.g. `required for a start event`.
    pub fn missing(&self, key: &str, why: &str) -> Error {
        invalid(why, Path::Key(&self.at, key))
    }
}

/// Reads an object's fields one by one and keeps the first error, so a
/// reader has no early return per field and drops its partial result in
/// one place (an early return per field repeats the drop code at every
/// one). Every reader shares its per-type copies: in the page's wasm,
/// that is ~3 KB less than a `?` per field.
pub(crate) struct Gather<'f, 'v, 'a, 'p> {
    fields: &'f Fields<'v, 'a, 'p>,
    /// Names the object in "required" messages (`a start event`).
    what: Option<&'static str>,
    error: Option<Error>,
}

/// Stands in for a missing required field once its error is recorded; it
/// never escapes, since the reader then returns the error.
pub(crate) trait Placeholder {
    fn placeholder() -> Self;
}

impl<T: Default> Placeholder for T {
    fn placeholder() -> Self {
        T::default()
    }
}

impl<'f, 'v, 'a, 'p> Gather<'f, 'v, 'a, 'p> {
    /// `what`: `Some("start")` gives `required for a start event`.
    pub(crate) fn new(fields: &'f Fields<'v, 'a, 'p>, what: Option<&'static str>) -> Self {
        Gather {
            fields,
            what,
            error: None,
        }
    }

    /// An optional field (`None` when absent or `null`).
    pub(crate) fn opt<T: FromJson>(&mut self, key: &str) -> Option<T> {
        if self.error.is_some() {
            return None;
        }
        self.fields.get(key).unwrap_or_else(|e| {
            self.error = Some(e);
            None
        })
    }

    /// A required field.
    pub(crate) fn req<T: FromJson + Placeholder>(&mut self, key: &str) -> T {
        match self.opt(key) {
            Some(value) => value,
            None => {
                if self.error.is_none() {
                    self.error = Some(self.missing(key));
                }
                T::placeholder()
            }
        }
    }

    /// Records an error about `key` (unless one is already recorded).
    pub(crate) fn fail(&mut self, key: &str, why: &str) {
        if self.error.is_none() {
            self.error = Some(self.fields.missing(key, why));
        }
    }

    /// Records `error` (unless one is already recorded): for a reader
    /// that checks a field inside a list (`steps[2]`).
    #[cfg(feature = "steps")]
    pub(crate) fn fail_with(&mut self, error: Error) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Out of line: one copy, not one per field type.
    #[inline(never)]
    fn missing(&self, key: &str) -> Error {
        match self.what {
            Some(what) => self.fields.missing(
                key,
                &crate::error::join(&["required for a ", what, " event"]),
            ),
            None => self.fields.missing(key, "required"),
        }
    }

    /// `value`, or the first error.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, Error> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }
}

impl FromJson for String {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, Error> {
        match value {
            Value::String(s) => Ok(s.to_string()),
            other => Err(expected("a string", other, at)),
        }
    }
}

impl FromJson for bool {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, Error> {
        match value {
            Value::Bool(b) => Ok(*b),
            other => Err(expected("a boolean", other, at)),
        }
    }
}

impl FromJson for f64 {
    /// Any JSON number (always finite: the parser refuses overflow).
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, Error> {
        match value {
            Value::Number(n) => Ok(*n),
            other => Err(expected("a number", other, at)),
        }
    }
}

impl FromJson for u64 {
    /// A counter: an integer from 0 to 2^53 − 1 (`5.0` is accepted).
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, Error> {
        let n = f64::from_json(value, at)?;
        crate::js::to_safe_u64(n).ok_or_else(|| {
            let max = crate::text::decimal(MAX_SAFE_INTEGER);
            let got = crate::js::number(n);
            invalid(
                crate::error::join(&["must be an integer from 0 to ", &max, ", got ", &got]),
                at,
            )
        })
    }
}

impl<T: FromJson> FromJson for Vec<T> {
    /// A loop, not `collect` into a `Result`: its adapters (`GenericShunt`,
    /// `try_process`) cost the page ~2 KB of wasm for two element types.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, Error> {
        let Value::Array(items) = value else {
            return Err(expected("an array", value, at));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            out.push(T::from_json(item, Path::Index(&at, i))?);
        }
        Ok(out)
    }
}

/// Reads a string naming one of `variants` (unit enums on the wire).
pub fn variant<T: Copy>(
    value: &Value<'_>,
    at: Path<'_>,
    variants: &[(&str, T)],
) -> Result<T, Error> {
    let Value::String(s) = value else {
        return Err(expected("a string", value, at));
    };
    if let Some((_, v)) = variants.iter().find(|(name, _)| *name == s.as_ref()) {
        return Ok(*v);
    }
    let mut message = String::from("unknown value ");
    message.push_str(&crate::error::quoted(s));
    message.push_str(", expected one of ");
    for (i, (name, _)) in variants.iter().enumerate() {
        if i > 0 {
            message.push_str(", ");
        }
        message.push_str(name);
    }
    Err(invalid(message, at))
}

/// `Deserialize` for a [`FromJson`] type: collects whatever the
/// deserializer holds into a [`Value`], then reads it. Errors carry the
/// inner path relative to the value (`.atMs: …`).
pub fn deserialize_via_from_json<'de, D: Deserializer<'de>, T: FromJson>(
    deserializer: D,
) -> Result<T, D::Error> {
    let value = deserializer.deserialize_any(ValueVisitor)?;
    T::from_json(&value, Path::Root).map_err(|e| de::Error::custom(Relative(&e)))
}

/// An error as `.path: message` (or the bare message at the root).
struct Relative<'e>(&'e Error);

impl Display for Relative<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.path() {
            "" => f.write_str(self.0.message()),
            path if path.starts_with('[') => write!(f, "{path}: {}", self.0.message()),
            path => write!(f, ".{path}: {}", self.0.message()),
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value<'static>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Value::Number(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Value::String(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Value::String(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Seed)?;
            entries.push((Cow::Owned(key), value));
        }
        Ok(Value::Object(entries))
    }
}

struct Seed;

impl<'de> de::DeserializeSeed<'de> for Seed {
    type Value = Value<'static>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// Implements `Deserialize` for types that implement [`FromJson`].
macro_rules! impl_deserialize {
    ($($ty:ty),* $(,)?) => {$(
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::json::deserialize_via_from_json(d)
            }
        }
    )*};
}
pub(crate) use impl_deserialize;
