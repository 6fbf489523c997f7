//! The JSON tree the readers read: what the text parser
//! (`taskwire-wire`) or the browser's `JSON.parse` (the page's walker)
//! builds.

use alloc::borrow::Cow;
use alloc::vec::Vec;

/// A parsed JSON value. Strings borrow from the text when they hold no
/// escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// A number (finite: overflow is a parse error).
    Number(f64),
    /// A string.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Value<'a>>),
    /// An object's entries in document order (duplicates kept; readers
    /// take the last, as `JSON.parse` does).
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
}
