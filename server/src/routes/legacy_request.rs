//! The form in which servers before exact comparison stored a create
//! under an `Idempotency-Key` (see `store::Idempotency`): a replay of a
//! body they stored must still match their row after an upgrade.
//!
//! They wrote `{"input":…,"kind":…,"maxAttempts":…,"ttlMs":…}` with a
//! general-purpose JSON writer from the body as taskwire-wire read it:
//! object keys sorted (byte order), of duplicate keys the last, strings
//! escaped as the codec escapes them (the same rules), and each number as
//! the codec handed it over: a safe integer as an integer, any other
//! number (`ttlMs` always, a fraction, an integer past 2^53, `-0`) as a
//! double, printed by zmij (`60000.0`, `2.5`, `1e+21`, `-0.0`), which is
//! not the codec's float form (`1e21`). This module writes that text
//! again, byte for byte, without that writer.

use std::collections::BTreeMap;

use taskwire_core::js::write_number;
use taskwire_core::json::{write_string, Value};
use taskwire_core::value::exact_integer;
use taskwire_wire::parse_value;

/// The stored form of a create: `input` is its exact text as sent (or
/// none), which is parsed here as taskwire-wire parsed the whole body.
pub fn legacy_request(
    ttl_ms: f64,
    max_attempts: u64,
    kind: Option<&str>,
    input: Option<&str>,
) -> Result<String, String> {
    let mut out = String::from("{\"input\":");
    match input {
        Some(text) => {
            let value = parse_value(text).map_err(|e| e.to_string())?;
            write_value(&mut out, &value);
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"kind\":");
    match kind {
        Some(kind) => write_string(&mut out, kind),
        None => out.push_str("null"),
    }
    out.push_str(",\"maxAttempts\":");
    out.push_str(&max_attempts.to_string());
    out.push_str(",\"ttlMs\":");
    write_double(&mut out, ttl_ms);
    out.push('}');
    Ok(out)
}

/// A value of `input`, as it was handed over by the codec's reader.
fn write_value(out: &mut String, value: &Value<'_>) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // The reader hands safe integers over as integers (except `-0`,
        // which stays a double to keep its sign), everything else as a
        // double.
        Value::Number(n) if exact_integer(*n).is_some() && !is_negative_zero(*n) => {
            write_number(out, *n)
        }
        Value::Number(n) => write_double(out, *n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(entries) => {
            // Sorted, and `insert` keeps the last of duplicate keys.
            let mut sorted = BTreeMap::new();
            for (key, item) in entries {
                sorted.insert(key.as_ref(), item);
            }
            out.push('{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// A number held as a double, as zmij prints it (the parser refuses
/// numbers that overflow, so `n` is finite).
fn write_double(out: &mut String, n: f64) {
    out.push_str(zmij::Buffer::new().format_finite(n));
}

fn is_negative_zero(n: f64) -> bool {
    n == 0.0 && n.is_sign_negative()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(input: &str) -> String {
        legacy_request(60000.0, 2, Some("k"), Some(input)).unwrap()
    }

    #[test]
    fn keys_sorted_last_duplicate_wins_numbers_as_handed_over() {
        assert_eq!(
            legacy_request(60000.0, 2, Some("k"), Some(r#"{"a": [1, 2.5]}"#)).unwrap(),
            r#"{"input":{"a":[1,2.5]},"kind":"k","maxAttempts":2,"ttlMs":60000.0}"#
        );
        assert_eq!(
            legacy_request(1.5, 1, None, None).unwrap(),
            r#"{"input":null,"kind":null,"maxAttempts":1,"ttlMs":1.5}"#
        );
        assert_eq!(
            form(r#"{"b": 1, "a": {"d": 2, "c": 3}, "b": 4}"#),
            r#"{"input":{"a":{"c":3,"d":2},"b":4},"kind":"k","maxAttempts":2,"ttlMs":60000.0}"#
        );
        assert_eq!(
            form(r#"[1.0, -3, -0, -0.0, 1e21, 9007199254740993, 1e16, 0.1, 1.5e-7]"#),
            r#"{"input":[1,-3,-0.0,-0.0,1e+21,9007199254740992.0,1e+16,0.1,1.5e-7],"kind":"k","maxAttempts":2,"ttlMs":60000.0}"#
        );
        assert_eq!(
            form(r#""\u00e9\n\u0001\"\\/""#),
            "{\"input\":\"é\\n\\u0001\\\"\\\\/\",\"kind\":\"k\",\"maxAttempts\":2,\"ttlMs\":60000.0}"
        );
    }

    #[test]
    fn ttls_are_doubles() {
        let ttl = |n: f64| {
            let text = legacy_request(n, 1, None, None).unwrap();
            let at = text.find("\"ttlMs\":").unwrap() + "\"ttlMs\":".len();
            text[at..text.len() - 1].to_string()
        };
        assert_eq!(ttl(0.0), "0.0");
        assert_eq!(ttl(-0.0), "-0.0");
        assert_eq!(ttl(3_600_000.0), "3600000.0");
        assert_eq!(ttl(9007199254740991.0), "9007199254740991.0");
        assert_eq!(ttl(1e300), "1e+300");
    }
}
