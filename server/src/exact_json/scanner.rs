//! The scanner behind [`super::members`] and [`super::canonical`]: one
//! pass over JSON text, strict RFC 8259 grammar (as core's codec), that
//! can write the canonical form as it goes.

use std::fmt::Write as _;

/// Nesting deeper than this is refused (core's codec refuses past 64).
const MAX_DEPTH: usize = 128;
/// Exponents are kept as `i64`; no double is within 10^18 digits of these.
const MAX_EXPONENT_DIGITS: usize = 18;

pub(super) struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Scanner<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    pub(super) fn error(&self, what: &str) -> String {
        format!("invalid JSON: {what} at character {}", self.pos + 1)
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    pub(super) fn document(&mut self, out: Option<&mut String>) -> Result<(), String> {
        self.skip_ws();
        self.value(0, out)?;
        self.skip_ws();
        if self.pos != self.bytes.len() {
            return Err(self.error("trailing characters after the JSON value"));
        }
        Ok(())
    }

    pub(super) fn value(&mut self, depth: usize, out: Option<&mut String>) -> Result<(), String> {
        match self.peek() {
            None => Err(self.error("unexpected end")),
            Some(b'n') => self.word("null", out),
            Some(b't') => self.word("true", out),
            Some(b'f') => self.word("false", out),
            Some(b'"') => {
                let s = self.string(out.is_some())?;
                if let (Some(out), Some(s)) = (out, s) {
                    write_string(out, &s);
                }
                Ok(())
            }
            Some(b'[') => self.array(depth + 1, out),
            Some(b'{') => self.object(depth + 1, out),
            Some(b'-' | b'0'..=b'9') => self.number(out),
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    fn word(&mut self, word: &str, out: Option<&mut String>) -> Result<(), String> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if !rest.starts_with(word.as_bytes()) {
            return Err(self.error("unexpected character"));
        }
        self.pos += word.len();
        if let Some(out) = out {
            out.push_str(word);
        }
        Ok(())
    }

    fn enter(&self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        Ok(())
    }

    /// After an element: `,` (more follow) or `close` (true: done).
    pub(super) fn end_of(&mut self, close: u8) -> Result<bool, String> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(self.error(if close == b']' {
                "expected ',' or ']'"
            } else {
                "expected ',' or '}'"
            })),
        }
    }

    pub(super) fn colon(&mut self) -> Result<(), String> {
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.error("expected ':'"));
        }
        self.pos += 1;
        self.skip_ws();
        Ok(())
    }

    fn array(&mut self, depth: usize, mut out: Option<&mut String>) -> Result<(), String> {
        self.enter(depth)?;
        self.pos += 1;
        if let Some(out) = out.as_deref_mut() {
            out.push('[');
        }
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            let mut first = true;
            loop {
                self.skip_ws();
                if let Some(out) = out.as_deref_mut() {
                    if !first {
                        out.push(',');
                    }
                }
                first = false;
                self.value(depth, out.as_deref_mut())?;
                self.skip_ws();
                if self.end_of(b']')? {
                    break;
                }
            }
        }
        if let Some(out) = out {
            out.push(']');
        }
        Ok(())
    }

    fn object(&mut self, depth: usize, out: Option<&mut String>) -> Result<(), String> {
        self.enter(depth)?;
        self.pos += 1;
        let canonical = out.is_some();
        // (key, canonical value) per member, when canonicalizing.
        let mut entries: Vec<(String, String)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                let key = self.string(canonical)?;
                self.colon()?;
                let mut value = String::new();
                self.value(depth, canonical.then_some(&mut value))?;
                if let Some(key) = key {
                    entries.push((key, value));
                }
                self.skip_ws();
                if self.end_of(b'}')? {
                    break;
                }
            }
        }
        if let Some(out) = out {
            // Stable sort, then keep the last of equal keys.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<(String, String)> = Vec::with_capacity(entries.len());
            for entry in entries {
                match kept.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => kept.push(entry),
                }
            }
            out.push('{');
            for (i, (key, value)) in kept.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                out.push_str(value);
            }
            out.push('}');
        }
        Ok(())
    }

    /// A string literal; its unescaped value when `keep`.
    pub(super) fn string(&mut self, keep: bool) -> Result<Option<String>, String> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string"));
        }
        self.pos += 1;
        let mut value = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(keep.then_some(value));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.escape()?;
                    if keep {
                        value.push(c);
                    }
                }
                Some(0..=0x1f) => return Err(self.error("control character in string")),
                Some(_) => {
                    // One whole UTF-8 character (the input is a str).
                    let c = self
                        .text
                        .get(self.pos..)
                        .and_then(|rest| rest.chars().next())
                        .ok_or_else(|| self.error("unterminated string"))?;
                    if keep {
                        value.push(c);
                    }
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn escape(&mut self) -> Result<char, String> {
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

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("invalid \\u escape"))?;
        let mut n = 0u32;
        for &d in digits {
            let v = char::from(d)
                .to_digit(16)
                .ok_or_else(|| self.error("invalid \\u escape"))?;
            n = n * 16 + v;
        }
        self.pos += 4;
        Ok(n)
    }

    /// `\uXXXX`, joining surrogate pairs; a lone surrogate is U+FFFD, as
    /// core's codec reads it.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let first = self.hex4()?;
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if (0xD800..0xDC00).contains(&first) && rest.starts_with(b"\\u") {
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

    /// Scans one number, writing its exact canonical form when asked.
    fn number(&mut self, out: Option<&mut String>) -> Result<(), String> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        if self.peek() == Some(b'0') {
            self.pos += 1;
        } else if self.digits() == 0 {
            return Err(self.error("invalid number"));
        }
        let int = self.slice(int_start);
        let mut frac = "";
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let start = self.pos;
            if self.digits() == 0 {
                return Err(self.error("invalid number"));
            }
            frac = self.slice(start);
        }
        let mut exponent: i64 = 0;
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            let minus = match self.peek() {
                Some(b'-') => {
                    self.pos += 1;
                    true
                }
                Some(b'+') => {
                    self.pos += 1;
                    false
                }
                _ => false,
            };
            let start = self.pos;
            if self.digits() == 0 {
                return Err(self.error("invalid number"));
            }
            let text = self.slice(start).trim_start_matches('0');
            if text.len() > MAX_EXPONENT_DIGITS {
                return Err(self.error("number exponent has too many digits"));
            }
            let magnitude: i64 = if text.is_empty() {
                0
            } else {
                text.parse()
                    .map_err(|_| self.error("number exponent out of range"))?
            };
            exponent = if minus { -magnitude } else { magnitude };
        }
        if let Some(out) = out {
            write_number(out, negative, int, frac, exponent)
                .ok_or_else(|| self.error("number exponent out of range"))?;
        }
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn slice(&self, start: usize) -> &'a str {
        self.text.get(start..self.pos).unwrap_or_default()
    }
}

/// Writes `±int.frac × 10^exponent` as `[-]<digits>e<exp>`: the digits
/// without leading or trailing zeros, so equal values write equal text.
/// Zero (either sign) is `0`. `None` when the exponent overflows.
fn write_number(
    out: &mut String,
    negative: bool,
    int: &str,
    frac: &str,
    exponent: i64,
) -> Option<()> {
    let all = || int.bytes().chain(frac.bytes());
    let leading = all().take_while(|&b| b == b'0').count();
    let total = int.len() + frac.len();
    if leading == total {
        out.push('0');
        return Some(());
    }
    let trailing = all().rev().take_while(|&b| b == b'0').count();
    // value = digits(all) × 10^(exponent − frac.len()); dropping trailing
    // zeros moves the exponent up by as many.
    let shift = i64::try_from(trailing).ok()? - i64::try_from(frac.len()).ok()?;
    let exp = exponent.checked_add(shift)?;
    if negative {
        out.push('-');
    }
    out.extend(
        all()
            .skip(leading)
            .take(total - leading - trailing)
            .map(char::from),
    );
    let _ = write!(out, "e{exp}");
    Some(())
}

/// A JSON string literal, escaped one fixed way.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
