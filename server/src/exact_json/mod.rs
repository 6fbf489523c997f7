//! JSON kept exactly as it was sent: the create body's `input`.
//!
//! Why not a parsed tree (core's `Value`, or a general JSON library's):
//! it holds numbers as `f64` (or 64-bit integers), so
//! `{"n": 9007199254740993}` came back as `9007199254740992`, and two
//! bodies that differ only beyond double precision compared equal under
//! one `Idempotency-Key`. A library's arbitrary-precision numbers would
//! fix the numbers, but such a switch is a cargo feature, unified into
//! every crate of the workspace that uses the library (core's tests
//! compare vectors as trees, where `1` and `1.0` would stop being equal).
//! So the server keeps `input` as text, and this module does the two
//! things it needs on text:
//!
//! - [`members`]: the raw text of each top-level member of an object
//!   (`input` is stored and answered byte for byte as it arrived);
//! - [`canonical`]: a form in which two JSON values are equal exactly when
//!   they mean the same thing, numbers compared by their exact decimal
//!   value (PROTOCOL.md, "Create a task": `1`, `1.0` and `10e-1` are one
//!   number, `2^53` and `2^53 + 1` are two).
//!
//! The grammar is RFC 8259's, as strict as core's codec (which reads the
//! body first and gives the errors a client sees for malformed JSON);
//! this scanner only has to agree with it, and never panics on any text.

mod scanner;

use scanner::Scanner;

/// JSON text that has been checked to be one JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawJson(String);

impl RawJson {
    /// Checks `text` and keeps it as it is.
    pub fn parse(text: impl Into<String>) -> Result<Self, String> {
        let text = text.into();
        let mut s = Scanner::new(&text);
        s.document(None)?;
        Ok(RawJson(text))
    }

    /// The text, exactly as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its [`canonical`] form (the text is known to parse).
    pub fn canonical(&self) -> Result<String, String> {
        canonical(&self.0)
    }
}

/// The members of a top-level JSON object, in document order: each key
/// (unescaped) and the exact text of its value. Duplicate keys are all
/// listed; a reader that wants `JSON.parse`'s answer takes the last.
pub fn members(text: &str) -> Result<Vec<(String, &str)>, String> {
    let mut s = Scanner::new(text);
    s.skip_ws();
    if s.peek() != Some(b'{') {
        return Err(s.error("expected an object"));
    }
    let mut out = Vec::new();
    s.pos += 1;
    s.skip_ws();
    if s.peek() == Some(b'}') {
        s.pos += 1;
    } else {
        loop {
            s.skip_ws();
            let key = s.string(true)?.unwrap_or_default();
            s.colon()?;
            let start = s.pos;
            s.value(1, None)?;
            out.push((key, text.get(start..s.pos).unwrap_or_default()));
            s.skip_ws();
            if s.end_of(b'}')? {
                break;
            }
        }
    }
    s.skip_ws();
    if s.pos != text.len() {
        return Err(s.error("trailing characters after the JSON value"));
    }
    Ok(out)
}

/// The elements of a JSON array (a batch's `items`), each as the exact
/// text it was sent as; `None` when `text` is not an array.
pub fn elements(text: &str) -> Result<Option<Vec<&str>>, String> {
    let mut s = Scanner::new(text);
    s.skip_ws();
    if s.peek() != Some(b'[') {
        return Ok(None);
    }
    let mut out = Vec::new();
    s.pos += 1;
    s.skip_ws();
    if s.peek() == Some(b']') {
        s.pos += 1;
    } else {
        loop {
            s.skip_ws();
            let start = s.pos;
            s.value(1, None)?;
            out.push(text.get(start..s.pos).unwrap_or_default());
            s.skip_ws();
            if s.end_of(b']')? {
                break;
            }
        }
    }
    s.skip_ws();
    if s.pos != text.len() {
        return Err(s.error("trailing characters after the JSON value"));
    }
    Ok(Some(out))
}

/// The canonical form of one JSON value: objects with their keys sorted
/// and duplicates resolved to the last (as `JSON.parse` does), strings
/// unescaped and re-escaped one way, numbers as their exact value
/// (`-0` is `0`; `1.50e1` is `15`), no whitespace. Only for comparing:
/// numbers are written as `<digits>e<exponent>`, which is not JSON.
pub fn canonical(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    Scanner::new(text).document(Some(&mut out))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
