//! JSON kept exactly as it was sent, for a server that stores a client's
//! `input` and compares requests under one `Idempotency-Key`.
//!
//! Why not core's tree: it holds numbers as f64, so `{"n":
//! 9007199254740993}` would come back as `9007199254740992`, and two
//! bodies that differ only beyond double precision would compare equal.
//! Here the same parser ([`crate::parse`]: one grammar for all of
//! taskwire) builds a tree that keeps each number's digits and each
//! value's exact text, for three things:
//!
//! - [`members`], [`elements`]: the text of each member of an object, or
//!   element of an array, as it arrived (stored and answered byte for
//!   byte);
//! - [`canonical`]: a form in which two JSON values are equal exactly when
//!   they mean the same thing, numbers compared by their exact decimal
//!   value (PROTOCOL.md, "Create a task": `1`, `1.0` and `10e-1` are one
//!   number, `2^53` and `2^53 + 1` are two);
//! - [`RawJson`]: text checked to be one JSON value.
//!
//! The canonical form is stored (a create's request, to compare its
//! replays with), so its spelling must never change.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use taskwire_core::json::Error;

use crate::parse::{parse_as, Tree};

/// Exponents are kept as `i64`; no double is within 10^18 digits of these.
const MAX_EXPONENT_DIGITS: usize = 18;

/// A value with the text it was read from.
struct Exact<'a> {
    text: &'a str,
    kind: Kind<'a>,
}

enum Kind<'a> {
    Null,
    Bool(bool),
    /// The number as written (checked against the grammar).
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Exact<'a>>),
    Object(Vec<(Cow<'a, str>, Exact<'a>)>),
}

impl<'a> Tree<'a> for Exact<'a> {
    fn null() -> Self {
        Exact::of(Kind::Null)
    }
    fn boolean(b: bool) -> Self {
        Exact::of(Kind::Bool(b))
    }
    fn number(text: &'a str) -> Option<Self> {
        Some(Exact::of(Kind::Number(text)))
    }
    fn string(s: Cow<'a, str>) -> Self {
        Exact::of(Kind::String(s))
    }
    fn array(items: Vec<Self>) -> Self {
        Exact::of(Kind::Array(items))
    }
    fn object(entries: Vec<(Cow<'a, str>, Self)>) -> Self {
        Exact::of(Kind::Object(entries))
    }
    fn with_text(mut self, text: &'a str) -> Self {
        self.text = text;
        self
    }
}

impl<'a> Exact<'a> {
    fn of(kind: Kind<'a>) -> Self {
        Exact { text: "", kind }
    }
}

/// JSON text that has been checked to be one JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawJson(String);

impl RawJson {
    /// Checks `text` and keeps it as it is.
    pub fn parse(text: impl Into<String>) -> Result<Self, Error> {
        let text = text.into();
        parse_as::<Exact>(&text)?;
        Ok(RawJson(text))
    }

    /// The text, exactly as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its [`canonical`] form.
    pub fn canonical(&self) -> Result<String, Error> {
        canonical(&self.0)
    }
}

/// The members of a top-level JSON object, in document order: each key
/// (unescaped) and the exact text of its value. Duplicate keys are all
/// listed; a reader that wants `JSON.parse`'s answer takes the last.
pub fn members(text: &str) -> Result<Vec<(String, &str)>, Error> {
    match parse_as::<Exact>(text)?.kind {
        Kind::Object(entries) => Ok(entries
            .into_iter()
            .map(|(key, value)| (key.into_owned(), value.text))
            .collect()),
        _ => Err(Error::syntax(String::from("expected an object"))),
    }
}

/// The elements of a JSON array (a batch's `items`), each as the exact
/// text it was sent as; `None` when `text` is not an array.
pub fn elements(text: &str) -> Result<Option<Vec<&str>>, Error> {
    Ok(match parse_as::<Exact>(text)?.kind {
        Kind::Array(items) => Some(items.into_iter().map(|item| item.text).collect()),
        _ => None,
    })
}

/// The canonical form of one JSON value: objects with their keys sorted
/// and duplicates resolved to the last (as `JSON.parse` does), strings
/// unescaped and re-escaped one way, numbers as their exact value
/// (`-0` is `0`; `1.50e1` is `15`), no whitespace. Only for comparing:
/// numbers are written as `<digits>e<exponent>`, which is not JSON.
pub fn canonical(text: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    write_canonical(&parse_as::<Exact>(text)?, &mut out)?;
    Ok(out)
}

fn write_canonical(value: &Exact<'_>, out: &mut String) -> Result<(), Error> {
    match &value.kind {
        Kind::Null => out.push_str("null"),
        Kind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Kind::Number(text) => write_number(out, text).ok_or_else(|| {
            Error::syntax(String::from("invalid JSON: number exponent out of range"))
        })?,
        Kind::String(s) => write_string(out, s),
        Kind::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        Kind::Object(entries) => {
            // Sorted by key; `insert` keeps the last of duplicate keys, as
            // `JSON.parse` does.
            let mut sorted = BTreeMap::new();
            for (key, item) in entries {
                sorted.insert(key.as_ref(), item);
            }
            out.push('{');
            for (i, (key, value)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_canonical(value, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Writes a number (its text, checked against the grammar) as
/// `[-]<digits>e<exp>`: the digits without leading or trailing zeros, so
/// equal values write equal text. Zero (either sign) is `0`. `None` when
/// the exponent overflows.
fn write_number(out: &mut String, text: &str) -> Option<()> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], exponent(&unsigned[at + 1..])?),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
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

/// An exponent's text (`+12`, `-3`, `007`) as a number; `None` past
/// [`MAX_EXPONENT_DIGITS`] significant digits.
fn exponent(text: &str) -> Option<i64> {
    let (minus, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let digits = digits.trim_start_matches('0');
    if digits.len() > MAX_EXPONENT_DIGITS {
        return None;
    }
    let magnitude: i64 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some(if minus { -magnitude } else { magnitude })
}

/// A JSON string literal, escaped one fixed way (the stored canonical
/// form's: `"`, `\` and control characters only, as `\u00xx`).
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

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::ToString;
    use alloc::vec;

    fn same(a: &str, b: &str) -> bool {
        canonical(a).unwrap() == canonical(b).unwrap()
    }

    #[test]
    fn elements_are_kept_as_sent() {
        let items = elements(" [ {\"a\": 1.0} ,[2], \"x\" ] ").unwrap().unwrap();
        assert_eq!(items, vec!["{\"a\": 1.0}", "[2]", "\"x\""]);
        assert_eq!(elements("[]").unwrap().unwrap(), Vec::<&str>::new());
        assert_eq!(elements("{}").unwrap(), None);
        assert!(elements("[1,").is_err());
        assert!(elements("[1] 2").is_err());
    }

    #[test]
    fn numbers_compare_by_exact_value() {
        for (a, b) in [
            ("1", "1.0"),
            ("1", "10e-1"),
            ("100", "1e2"),
            ("1.5E+1", "15"),
            ("0", "-0"),
            ("0.000", "0e99"),
            ("-2.50", "-25e-1"),
            ("9007199254740993", "9007199254740993.000"),
        ] {
            assert!(same(a, b), "{a} and {b} are one number");
        }
        for (a, b) in [
            ("9007199254740993", "9007199254740992"),
            ("1", "-1"),
            ("0.1", "0.10000000000000001"),
            ("1e-400", "0"),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567891",
            ),
        ] {
            assert!(!same(a, b), "{a} and {b} are two numbers");
        }
        assert_eq!(canonical("-12.3400e-2").unwrap(), "-1234e-4");
        assert!(canonical("1e9999999999999999999").is_err());
    }

    #[test]
    fn objects_ignore_order_whitespace_and_escapes() {
        assert!(same(
            r#" { "b" : [1, {"c":null}], "a":"\u0041" } "#,
            r#"{"a":"A","b":[1.0,{"c":null}]}"#
        ));
        // The last of duplicate keys counts, as in JSON.parse.
        assert!(same(r#"{"a":1,"a":2}"#, r#"{"a":2}"#));
        assert!(!same(r#"{"a":1,"a":2}"#, r#"{"a":1}"#));
        assert!(!same("[1,2]", "[2,1]"));
        // Lone surrogates read as U+FFFD, as core reads them.
        assert!(same(r#""\ud800""#, "\"\u{FFFD}\""));
        assert_eq!(canonical("\"a\\u0000\"").unwrap(), "\"a\\u0000\"");
    }

    #[test]
    fn members_are_exact_slices() {
        let text = r#"{"ttlMs":1e3 , "input": {"n": 9007199254740993} ,"k":"\"x"}"#;
        let m = members(text).unwrap();
        assert_eq!(
            m,
            vec![
                ("ttlMs".to_string(), "1e3"),
                ("input".to_string(), r#"{"n": 9007199254740993}"#),
                ("k".to_string(), r#""\"x""#),
            ]
        );
        assert!(members("[]").is_err());
        assert!(members("{} x").is_err());
        assert_eq!(members(" {} ").unwrap(), vec![]);
    }

    #[test]
    fn refuses_what_json_refuses_without_panicking() {
        for bad in [
            "",
            "{",
            "[1,]",
            "01",
            "1.",
            "-",
            "1e",
            "+1",
            "\"\\x\"",
            "\"a",
            "nul",
            "[1 2]",
            "{\"a\" 1}",
            "{1:2}",
            "\"\u{1}\"",
            "\"\\u12\"",
            "1 2",
        ] {
            assert!(canonical(bad).is_err(), "{bad:?} must be refused");
            assert!(RawJson::parse(bad).is_err(), "{bad:?} must be refused");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(canonical(&deep).is_err());
        assert!(RawJson::parse(" {\"a\": [1, 2.5e-3, true, null]} ").is_ok());
    }
}
