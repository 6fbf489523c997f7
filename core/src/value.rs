//! Validated scalar types and their JSON encoding.
//!
//! Times are JSON numbers holding f64 milliseconds, so that comparisons and
//! sums behave exactly as they do in JavaScript. Counters (versions,
//! attempts) are integers limited to JavaScript's safe range, because beyond
//! 2^53 a JavaScript peer can no longer tell `n` from `n + 1`.
//!
//! Each type here can only hold a valid value: once an [`crate::Event`] is
//! built, the state machine has nothing left to check.

use alloc::string::String;
use serde::{Serialize, Serializer};

use crate::json::{self, FromJson, Path, Value};
use crate::Error;

// JavaScript's number rules are a leaf module of their own; re-exported
// here, with the types built on them.
pub use crate::js::{exact_integer, is_integral, number, round, to_safe_u64, MAX_SAFE_INTEGER};

/// True for the characters JavaScript's `String.prototype.trim` removes.
///
/// This differs from Rust's `char::is_whitespace` in two places: JavaScript
/// trims U+FEFF (byte order mark) and keeps U+0085 (next line). A core that
/// claims to match JavaScript must agree on what "blank" means.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'..='\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

/// True when JavaScript's `s.trim() === ""` would be true.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(is_js_whitespace)
}

/// Compares two strings the way JavaScript's `<` does: by UTF-16 code
/// units, not by bytes. The two orders differ for characters outside the
/// Basic Multilingual Plane against U+E000..U+FFFF.
pub fn cmp_js(a: &str, b: &str) -> core::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A point in time or a duration in milliseconds: a finite f64 ≥ 0.
///
/// `-0` is accepted (JavaScript's `-0 < 0` is false) and encodes as `0`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Millis(f64);

impl Millis {
    /// Checks `ms` is finite and ≥ 0; `field` names it in the error.
    pub fn new(ms: f64, field: &str) -> Result<Self, Error> {
        if ms.is_finite() && ms >= 0.0 {
            Ok(Millis(ms))
        } else {
            Err(Error::invalid(crate::error::join(&[
                field,
                ": must be a finite number >= 0, got ",
                &number(ms),
            ])))
        }
    }

    /// The value in milliseconds.
    pub const fn get(self) -> f64 {
        self.0
    }
}

impl Serialize for Millis {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ms::serialize(&self.0, s)
    }
}

impl FromJson for Millis {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let ms = f64::from_json(value, at)?;
        if ms >= 0.0 {
            Ok(Millis(ms))
        } else {
            Err(json::invalid(
                crate::error::join(&["must be a finite number >= 0, got ", &number(ms)]),
                at,
            ))
        }
    }
}

/// A progress percentage: an integer from 0 to 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Percent(u8);

impl Percent {
    /// Checks `p` is an integer in `0..=100`; `field` names it in the error.
    pub fn new(p: f64, field: &str) -> Result<Self, Error> {
        if is_integral(p) && (0.0..=100.0).contains(&p) {
            Ok(Percent(p as u8))
        } else {
            Err(Error::invalid(crate::error::join(&[
                field,
                ": must be an integer from 0 to 100, got ",
                &number(p),
            ])))
        }
    }

    /// The percentage.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl Serialize for Percent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

impl FromJson for Percent {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let p = f64::from_json(value, at)?;
        if is_integral(p) && (0.0..=100.0).contains(&p) {
            Ok(Percent(p as u8))
        } else {
            Err(json::invalid(
                crate::error::join(&["must be an integer from 0 to 100, got ", &number(p)]),
                at,
            ))
        }
    }
}

/// A string that is not blank in JavaScript's sense (see [`is_blank`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NonBlank(String);

impl NonBlank {
    /// Checks `s` is not blank; `field` names it in the error.
    pub fn new(s: impl Into<String>, field: &str) -> Result<Self, Error> {
        let s = s.into();
        if is_blank(&s) {
            Err(Error::invalid(crate::error::join(&[
                field,
                ": must not be blank",
            ])))
        } else {
            Ok(NonBlank(s))
        }
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The owned string.
    pub fn into_string(self) -> String {
        self.0
    }

    /// An empty stand-in for a field a reader found missing: only ever
    /// built next to the error that is returned instead of it.
    pub(crate) fn placeholder() -> Self {
        NonBlank(String::new())
    }
}

impl core::ops::Deref for NonBlank {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Serialize for NonBlank {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl FromJson for NonBlank {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let s = String::from_json(value, at)?;
        if is_blank(&s) {
            Err(json::invalid("must not be blank", at))
        } else {
            Ok(NonBlank(s))
        }
    }
}

json::impl_deserialize!(Millis, Percent, NonBlank);

/// Serde helpers for f64 milliseconds: integral values encode as JSON
/// integers (`1200`, not `1200.0`), as `JSON.stringify` writes them.
pub mod ms {
    use super::*;

    /// Writes `v` as an integer when it is one (and safe), else as a float.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match exact_integer(*v) {
            Some(n) => s.serialize_i64(n),
            None => s.serialize_f64(*v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_matches_javascript_trim() {
        assert!(is_blank(""));
        assert!(is_blank(" \t\n\r\u{000B}\u{000C}"));
        assert!(is_blank("\u{FEFF}\u{00A0}\u{3000}\u{2028}"));
        // U+0085 is whitespace to Rust but not to JavaScript's trim.
        assert!(!is_blank("\u{0085}"));
        assert!(!is_blank(" a "));
    }

    #[test]
    fn js_order_is_by_utf16_code_units() {
        use std::cmp::Ordering::*;
        // U+1F600 encodes as surrogates D83D..., below U+FF5E in UTF-16,
        // above it in UTF-8.
        assert_eq!(cmp_js("\u{1F600}", "\u{FF5E}"), Less);
        assert_eq!("\u{1F600}".cmp("\u{FF5E}"), Greater);
        assert_eq!(cmp_js("a", "b"), Less);
        assert_eq!(cmp_js("b", "b"), Equal);
    }

    #[test]
    fn millis_domain() {
        assert!(Millis::new(0.0, "x").is_ok());
        assert!(Millis::new(-0.0, "x").is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Millis::new(bad, "event.atMs").unwrap_err();
            assert!(err.message.starts_with("event.atMs:"), "{}", err.message);
        }
    }

    #[test]
    fn percent_domain() {
        assert_eq!(Percent::new(100.0, "p").unwrap().get(), 100);
        for bad in [-1.0, 101.0, 2.5, f64::NAN, f64::INFINITY] {
            assert!(Percent::new(bad, "p").is_err(), "{bad}");
        }
    }

    #[test]
    fn non_blank_rejects_js_blank() {
        assert!(NonBlank::new("\u{FEFF} ", "k").is_err());
        assert_eq!(&*NonBlank::new("k1", "k").unwrap(), "k1");
    }
}
