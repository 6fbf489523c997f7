//! JSON text in, wire types out.
//!
//! The client build lets the runtime's `JSON.parse` build the tree and
//! reads it into the core's readers (`taskwire_core::wire::from_value`),
//! so the page carries no JSON text parser and no float parsing (2.4 KB
//! gzip less; docs/package.md). Field errors are the core's, word for
//! word; only a syntax error reads differently (`JSON.parse`'s message).
//! The full build keeps the core's own parser, which is faster for
//! `TaskBook`'s many small calls.
//!
//! The tree crosses as one string (`jsonTree` in `wasm/js/runtime.js`):
//! a walk of it through an import per value kind (`Reflect.get`,
//! `Object.keys`, `Array.isArray`, …) cost the page 0.6 KB gzip more.

#[cfg(not(feature = "book"))]
use alloc::string::String;
use taskwire_core as tw;
use tw::json::FromJson;

/// Parses `text` as a wire type; `what` names it in errors.
#[cfg(feature = "book")]
pub fn read<T: FromJson>(text: &str, what: &str) -> Result<T, tw::Error> {
    tw::wire::from_json(text, what)
}

/// Parses `text` as a wire type; `what` names it in errors.
#[cfg(not(feature = "book"))]
pub fn read<T: FromJson>(text: &str, what: &str) -> Result<T, tw::Error> {
    tw::wire::from_value(&parse(text, what)?, what)
}

/// `JSON.parse(text)` as the core's tree. Not generic: one copy for
/// every type read (a copy per type cost the page 0.2 KB gzip).
#[cfg(not(feature = "book"))]
fn parse(text: &str, what: &str) -> Result<tw::json::Value<'static>, tw::Error> {
    let tree = tree::json_tree(text);
    let failed = |why: &str| {
        let mut message = String::from(what);
        message.push_str(why);
        tw::Error::invalid(message)
    };
    if let Some(error) = tree.strip_prefix("!") {
        let mut why = String::from(": invalid JSON (");
        why.push_str(error);
        why.push_str(")");
        return Err(failed(&why));
    }
    tree::Reader { text: &tree, at: 0 }
        .value()
        .ok_or_else(|| failed(": nested too deeply, or a number out of range"))
}

#[cfg(not(feature = "book"))]
mod tree {
    use alloc::borrow::Cow;
    use alloc::{string::String, vec::Vec};

    use taskwire_core::json::Value;
    use wasm_bindgen::prelude::wasm_bindgen;

    #[wasm_bindgen(module = "/js/runtime.js")]
    extern "C" {
        /// `JSON.parse(text)` encoded for [`Reader`]: `!` and the
        /// runtime's message when `text` is not JSON, `~` when the value
        /// is nested deeper than the core's parser goes (64) or holds a
        /// number `JSON.parse` rounded to infinity.
        #[wasm_bindgen(js_name = jsonTree)]
        pub fn json_tree(text: &str) -> String;
    }

    /// Reads what `jsonTree` wrote: `n`, `t`, `f`; `i<digits>;` (a safe
    /// integer ≥ 0), `d<hex>;` (any other number, its IEEE 754 bits);
    /// `s<n>:<text>` (a string of n UTF-16 units); `[…]`; `{` then `<n>:<key>`
    /// and the value, for each field in `Object.keys` order, `}`. `None`
    /// for `~` (and, never, for anything else it does not expect). By
    /// byte, without `chars` or `to_digit`: the smallest code.
    pub struct Reader<'a> {
        pub text: &'a str,
        pub at: usize,
    }

    impl Reader<'_> {
        fn byte(&mut self) -> Option<u8> {
            let b = *self.text.as_bytes().get(self.at)?;
            self.at += 1;
            Some(b)
        }

        /// Digits in base `radix` (10, or 16 in lower case) up to `end`.
        fn number(&mut self, radix: u64, end: u8) -> Option<u64> {
            let mut n: u64 = 0;
            loop {
                let b = self.byte()?;
                if b == end {
                    return Some(n);
                }
                let digit = if b >= b'a' {
                    b - b'a' + 10
                } else {
                    b.wrapping_sub(b'0')
                };
                n = n.wrapping_mul(radix).wrapping_add(u64::from(digit));
            }
        }

        /// `<n>:<text>`, n counted in UTF-16 units (as JavaScript counts):
        /// one per lead byte, two for a four-byte character.
        fn string(&mut self) -> Option<String> {
            let len = self.number(10, b':')?;
            let bytes = self.text.as_bytes();
            let start = self.at;
            let mut units = 0;
            while units < len {
                let b = *bytes.get(self.at)?;
                self.at += 1;
                units += match b {
                    0x80..=0xBF => 0,
                    0xF0.. => 2,
                    _ => 1,
                };
            }
            while units > 0 && bytes.get(self.at).is_some_and(|b| b & 0xC0 == 0x80) {
                self.at += 1;
            }
            Some(String::from(self.text.get(start..self.at)?))
        }

        pub fn value(&mut self) -> Option<Value<'static>> {
            Some(match self.byte()? {
                b'n' => Value::Null,
                b't' => Value::Bool(true),
                b'f' => Value::Bool(false),
                b'd' => Value::Number(f64::from_bits(self.number(16, b';')?)),
                b's' => Value::String(Cow::Owned(self.string()?)),
                b'[' => {
                    let mut items = Vec::new();
                    while self.text.as_bytes().get(self.at) != Some(&b']') {
                        items.push(self.value()?);
                    }
                    self.byte();
                    Value::Array(items)
                }
                b'{' => {
                    let mut entries = Vec::new();
                    while self.text.as_bytes().get(self.at) != Some(&b'}') {
                        let key = self.string()?;
                        entries.push((Cow::Owned(key), self.value()?));
                    }
                    self.byte();
                    Value::Object(entries)
                }
                _ => return None,
            })
        }
    }
}
