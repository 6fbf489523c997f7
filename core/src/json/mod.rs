//! JSON as core's types read and write it: the tree ([`Value`]), the
//! readers over it ([`FromJson`], with errors that name the field), and
//! the page's writers ([`ToJson`]).
//!
//! The text side (the strict parser that builds the tree, the serde
//! bridge for a server's own bodies, `from_json`/`to_json`) is the
//! `taskwire-wire` crate, which depends on this one. What stays here is
//! exactly what the browser page runs: the page builds the tree with
//! `JSON.parse` (taskwire-wasm's walker) and reads it with these readers.
//! Kept in this crate on purpose: every crate on the page's path compiles
//! its own copy of the std code it inlines (`Vec` growth, string copies),
//! and the readers in a crate of their own cost the page 0.4 KB gzip
//! (docs/package.md).
//!
//! Why not serde_json: in the WebAssembly bundle, serde_json plus the
//! path tracking needed for good errors (serde_path_to_error, a second
//! monomorphized copy of every parser) plus float formatting cost ~110 KB
//! of 247 KB before wasm-opt. Reading from a tree with the path always
//! known names every error's field in one pass, and no message ever
//! formats a float. The same readers run on every target, so native and
//! wasm errors are identical.
//!
//! Scope: what the wire types need (structs, unit enums as strings,
//! options, sequences, string-keyed maps, internally tagged enums).

mod error;
pub mod host;
mod path;
mod read;
mod tree;
mod write;

pub use error::Error;
pub use path::Path;
pub use read::{deserialize_via_from_json, expected, invalid, variant, Fields, FromJson};
pub(crate) use read::{impl_deserialize, Gather, Placeholder};
pub use tree::Value;
#[cfg(feature = "steps")]
pub use write::timeline_answer;
pub use write::{object, write, write_string, ToJson, ToJsonDyn, Writer};

/// Reads a tree as one of the wire types; `what` names the value in
/// errors (`"event"` gives `event.atMs: must be a finite number >= 0, got
/// -1`). The page lets `JSON.parse` build the tree; `taskwire-wire`'s
/// `from_json` parses text first.
pub fn from_value<T: FromJson>(value: &Value<'_>, what: &str) -> Result<T, crate::Error> {
    T::from_json(value, Path::Root).map_err(|e| e.locate(what))
}

#[cfg(test)]
pub(crate) mod testing;
