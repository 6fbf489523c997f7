//! JSON text → a tree, strict RFC 8259 grammar: core's [`Value`] for the
//! readers, or the exact tree of [`crate::exact`] (numbers as written,
//! each value's text). One grammar for both, in one place.
//!
//! Strings without escapes borrow from the input, so a typical event
//! allocates only for what its fields keep.

use alloc::borrow::Cow;
use alloc::{format, string::String, vec::Vec};

use taskwire_core::json::{Error, Value};

pub(crate) use crate::tree::Tree;

/// Nesting deeper than this is refused: a stack overflow is a trap in
/// WebAssembly, and no wire type nests beyond 4 levels.
pub(crate) const MAX_DEPTH: usize = 64;

/// Parses one JSON document into core's tree; whitespace around it is
/// allowed, anything else after it is an error.
pub(crate) fn parse(text: &str) -> Result<Value<'_>, Error> {
    parse_as(text)
}

/// Parses one JSON document into any [`Tree`].
pub(crate) fn parse_as<'a, T: Tree<'a>>(text: &'a str) -> Result<T, Error> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    p.skip_ws();
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.error("trailing characters after the JSON value"));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, what: &str) -> Error {
        Error::syntax(format!(
            "invalid JSON: {what} at character {}",
            self.pos + 1
        ))
    }

    /// The bytes not yet read. (`get` instead of indexing everywhere in
    /// this file: an impossible out-of-range slice must not link the
    /// panic-message machinery into the wasm bundle.)
    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    /// The text from `start` to the current position.
    fn since(&self, start: usize) -> &'a str {
        self.text.get(start..self.pos).unwrap_or_default()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_word<T>(&mut self, word: &str, value: T) -> Result<T, Error> {
        if self.rest().starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("unexpected character"))
        }
    }

    fn value<T: Tree<'a>>(&mut self, depth: usize) -> Result<T, Error> {
        let start = self.pos;
        let value = match self.peek() {
            None => Err(self.error("unexpected end")),
            Some(b'n') => self.expect_word("null", T::null()),
            Some(b't') => self.expect_word("true", T::boolean(true)),
            Some(b'f') => self.expect_word("false", T::boolean(false)),
            Some(b'"') => self.string().map(T::string),
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => self.object(depth + 1),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("unexpected character")),
        }?;
        Ok(value.with_text(self.since(start)))
    }

    fn enter(&self, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            Err(self.error("nested too deeply"))
        } else {
            Ok(())
        }
    }

    fn array<T: Tree<'a>>(&mut self, depth: usize) -> Result<T, Error> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(T::array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(T::array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn object<T: Tree<'a>>(&mut self, depth: usize) -> Result<T, Error> {
        self.enter(depth)?;
        self.pos += 1;
        let mut entries = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(T::object(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':'"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            entries.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(T::object(entries));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn number<T: Tree<'a>>(&mut self) -> Result<T, Error> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while let Some(b'0'..=b'9') = p.peek() {
                p.pos += 1;
            }
            p.pos > from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
        } else if !digits(self) {
            return Err(self.error("invalid number"));
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.error("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.error("invalid number"));
            }
        }
        // The grammar is checked above.
        T::number(self.since(start)).ok_or_else(|| self.error("number out of range"))
    }

    fn string(&mut self) -> Result<Cow<'a, str>, Error> {
        self.pos += 1; // opening quote
        let start = self.pos;
        // Fast path: no escapes, borrow the slice.
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    let s = self.since(start);
                    self.pos += 1;
                    return Ok(Cow::Borrowed(s));
                }
                Some(b'\\') => break,
                Some(0..=0x1f) => return Err(self.error("control character in string")),
                Some(_) => self.pos += 1,
            }
        }
        let mut out = String::from(self.since(start));
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.escape()?;
                    out.push(c);
                }
                Some(0..=0x1f) => return Err(self.error("control character in string")),
                Some(_) => {
                    // Copy one whole UTF-8 character (the input is a str).
                    let rest = self.text.get(self.pos..).unwrap_or_default();
                    let c = rest.chars().next().unwrap_or('\u{FFFD}');
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn escape(&mut self) -> Result<char, Error> {
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                return self.unicode_escape();
            }
            _ => return Err(self.error("invalid escape")),
        };
        self.pos += 1;
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u32, Error> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("invalid \\u escape"))?;
        let mut n = 0u32;
        for &d in digits {
            let v = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.error("invalid \\u escape"))?;
            n = n * 16 + v;
        }
        self.pos += 4;
        Ok(n)
    }

    /// `\uXXXX`, joining surrogate pairs. A lone surrogate (which a Rust
    /// string cannot hold) becomes U+FFFD, as `TextEncoder` does when
    /// JavaScript hands such a string to WebAssembly.
    fn unicode_escape(&mut self) -> Result<char, Error> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.rest().starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{FFFD}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Value<'_> {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    #[test]
    fn parses_every_kind() {
        assert_eq!(ok(" null "), Value::Null);
        assert_eq!(ok("true"), Value::Bool(true));
        assert_eq!(ok("-0.5e2"), Value::Number(-50.0));
        assert_eq!(ok("1152921504606846976"), Value::Number(2f64.powi(60)));
        assert_eq!(
            ok(r#""a\"b\u00e9\ud83d\ude00""#),
            Value::String("a\"bé😀".into())
        );
        assert_eq!(ok(r#""\ud800x""#), Value::String("\u{FFFD}x".into()));
        assert_eq!(
            ok(r#"{"a":[1,{}],"b":"x"}"#),
            Value::Object(vec![
                (
                    "a".into(),
                    Value::Array(vec![Value::Number(1.0), Value::Object(vec![])])
                ),
                ("b".into(), Value::String("x".into())),
            ])
        );
    }

    #[test]
    fn borrows_plain_strings() {
        match ok(r#""plain""#) {
            Value::String(Cow::Borrowed(s)) => assert_eq!(s, "plain"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_what_json_rejects() {
        for bad in [
            "",
            " ",
            "nul",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "-",
            "NaN",
            "Infinity",
            "1e400",
            "[1,]",
            "{\"a\":1,}",
            "{a:1}",
            "'x'",
            "\"\u{1}\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[1] 2",
            "\"abc",
            "{\"a\" 1}",
            "[",
            "{",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn limits_nesting() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).is_err());
        let fine = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&fine).is_ok());
        let very_deep = "[".repeat(1_000_000);
        assert!(parse(&very_deep).is_err());
    }
}
