//! What the parser builds: core's tree for the readers, or the exact tree
//! of [`crate::exact`]. One grammar (`parse.rs`), two trees.

use alloc::borrow::Cow;
use alloc::vec::Vec;

use taskwire_core::json::Value;

/// What the parser builds each value into.
pub(crate) trait Tree<'a>: Sized {
    fn null() -> Self;
    fn boolean(b: bool) -> Self;
    /// A number from its text (already checked against the grammar);
    /// `None` when it is out of range for this tree.
    fn number(text: &'a str) -> Option<Self>;
    fn string(s: Cow<'a, str>) -> Self;
    fn array(items: Vec<Self>) -> Self;
    fn object(entries: Vec<(Cow<'a, str>, Self)>) -> Self;
    /// The value, told the exact text it was read from.
    fn with_text(self, _text: &'a str) -> Self {
        self
    }
}

impl<'a> Tree<'a> for Value<'a> {
    fn null() -> Self {
        Value::Null
    }
    fn boolean(b: bool) -> Self {
        Value::Bool(b)
    }
    /// Rounds exactly as JavaScript's `Number()` does; `None` past f64.
    fn number(text: &'a str) -> Option<Self> {
        super::number::parse_f64(text).map(Value::Number)
    }
    fn string(s: Cow<'a, str>) -> Self {
        Value::String(s)
    }
    fn array(items: Vec<Self>) -> Self {
        Value::Array(items)
    }
    fn object(entries: Vec<(Cow<'a, str>, Self)>) -> Self {
        Value::Object(entries)
    }
}
