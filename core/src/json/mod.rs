//! taskwire's own compact JSON codec for serde.
//!
//! Why not serde_json: in the WebAssembly bundle, serde_json plus the
//! path tracking needed for good errors (serde_path_to_error, a second
//! monomorphized copy of every parser) plus float formatting cost ~110 KB
//! of 247 KB before wasm-opt. This codec parses to a small tree, then
//! deserializes from it with the path always known, so every error names
//! its field in one pass, and no message ever formats a float. It is used
//! on every target, so native and wasm errors are identical.
//!
//! Scope: what the wire types need (structs, unit enums as strings,
//! options, sequences, string-keyed maps, internally tagged enums).

mod de;
mod error;
mod float;
mod number;
mod parse;
mod read;
mod ser;
mod write;

pub use de::Path;
pub use error::Error;
pub use float::{set_float_writer, FloatWriter};
pub use parse::Value;
pub use read::{deserialize_via_from_json, expected, invalid, variant, Fields, FromJson};
pub(crate) use read::{impl_deserialize, Gather, Placeholder};
pub use write::{object, write, ToJson, ToJsonDyn, Writer};

/// Parses JSON text into a [`FromJson`] type (the wire types): one pass
/// over the text into a tree, one over the tree into `T`.
pub fn read<T: FromJson>(text: &str) -> Result<T, Error> {
    let value = parse::parse(text)?;
    T::from_json(&value, Path::Root)
}

/// Parses JSON text into a [`Value`] tree.
pub fn parse_value(text: &str) -> Result<Value<'_>, Error> {
    parse::parse(text)
}

use alloc::string::String;
use serde::{Deserialize, Serialize};

/// Parses JSON text into any serde `T` (for types without [`FromJson`]).
pub fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, Error> {
    let value = parse::parse(text)?;
    // The tree must outlive the borrowed strings handed to `T`; a
    // deserialized `T` that borrows from `text` (not from the tree) is
    // fine, because borrowed tree strings are slices of `text`.
    deserialize(&value)
}

fn deserialize<'a, T: Deserialize<'a>>(value: &parse::Value<'a>) -> Result<T, Error> {
    T::deserialize(de::De {
        value,
        path: de::Path::Root,
    })
    .map_err(|e| e.at(&de::Path::Root))
}

/// Writes `value` as compact JSON.
pub fn to_string<T: ?Sized + Serialize>(value: &T) -> Result<String, Error> {
    let mut out = String::with_capacity(128);
    value.serialize(ser::Ser { out: &mut out })?;
    Ok(out)
}

/// Appends a number as JSON writes it (integers without a fraction).
pub fn write_number(out: &mut String, n: f64) {
    ser::write_f64(out, n);
}

/// Appends `s` as a JSON string literal (with JavaScript's escapes).
pub fn write_string(out: &mut String, s: &str) {
    ser::write_str(out, s);
}
