//! A JSON tree as a JavaScript host hands it over after its own
//! `JSON.parse` (taskwire-wasm's `jsonTree` in js/runtime.js writes it):
//! the browser page then needs no JSON text parser, only this decoder.
//! It lives here, with the tree, so that the tree's code (growing its
//! vectors) is compiled once, in this crate, for the page.

use alloc::borrow::Cow;
use alloc::{string::String, vec::Vec};

use super::Value;

/// Decodes `text` (the encoding below); `None` for `~` (a value nested
/// deeper than 64 levels, or a number the host rounded to infinity) and,
/// never, for anything else it does not expect.
pub fn decode(text: &str) -> Option<Value<'static>> {
    Reader { text, at: 0 }.value()
}

/// Reads what `jsonTree` wrote: `n`, `t`, `f`; `i<digits>;` (a safe
/// integer ≥ 0), `d<hex>;` (any other number, its IEEE 754 bits);
/// `s<n>:<text>` (a string of n UTF-16 units); `[…]`; `{` then `<n>:<key>`
/// and the value, for each field in `Object.keys` order, `}`. `None`
/// for `~` (and, never, for anything else it does not expect). By
/// byte, without `chars` or `to_digit`: the smallest code.
struct Reader<'a> {
    text: &'a str,
    at: usize,
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

    fn value(&mut self) -> Option<Value<'static>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_kind() {
        // What jsonTree writes for
        // {"a":[null,true,false,1.5],"é😀":"x😀y"}: 1.5 is 0x3ff8000000000000.
        let text = "{1:a[ntfd3ff8000000000000;]3:é😀s4:x😀y}";
        let expected = Value::Object(Vec::from([
            (
                Cow::Borrowed("a"),
                Value::Array(Vec::from([
                    Value::Null,
                    Value::Bool(true),
                    Value::Bool(false),
                    Value::Number(1.5),
                ])),
            ),
            (Cow::Borrowed("é😀"), Value::String(Cow::Borrowed("x😀y"))),
        ]));
        assert_eq!(decode(text), Some(expected));
    }

    #[test]
    fn refuses_what_it_does_not_expect() {
        for text in ["~", "", "[", "{1:a", "s9:short", "d12", "x"] {
            assert_eq!(decode(text), None, "{text:?}");
        }
    }
}
