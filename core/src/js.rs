//! JavaScript's number rules, which the wire follows: the safe integer
//! range, integers written without a fraction as `JSON.stringify` writes
//! them, other numbers in their shortest round-trip form, and numbers
//! spelled as JavaScript spells them in messages.
//!
//! A leaf: it uses nothing of the crate but [`crate::text`], so the
//! value types ([`crate::value`]) and the JSON readers and writers
//! ([`crate::json`]) both build on it without importing each other.

use alloc::string::String;

mod float;
mod integral;

pub use float::{set_float_writer, FloatWriter};
pub use integral::{is_integral, round};

/// The largest integer JavaScript represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `Some(n)` when `v` is an integer JavaScript holds exactly
/// (`|v| <= MAX_SAFE_INTEGER`), to be written without a fraction, as
/// `JSON.stringify` writes it (`-0` gives `0`).
pub fn exact_integer(v: f64) -> Option<i64> {
    if is_integral(v) && (-(MAX_SAFE_INTEGER as f64)..=MAX_SAFE_INTEGER as f64).contains(&v) {
        Some(v as i64)
    } else {
        None
    }
}

/// `Some(n)` when `v` is an integer in `0..=MAX_SAFE_INTEGER`.
pub fn to_safe_u64(v: f64) -> Option<u64> {
    if is_integral(v) && (0.0..=MAX_SAFE_INTEGER as f64).contains(&v) {
        Some(v as u64)
    } else {
        None
    }
}

/// A number as text for messages: `NaN`, `Infinity` and `-Infinity` as
/// JavaScript spells them, others in their shortest form. (`{}` on an f64
/// would pull float formatting, ~17 KB, into the wasm bundle.)
pub fn number(v: f64) -> String {
    if v.is_nan() {
        String::from("NaN")
    } else if v.is_infinite() {
        String::from(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        let mut out = String::new();
        write_f64(&mut out, v);
        out
    }
}

/// Appends `n` as JSON writes it: integers as integers; other finite
/// numbers in their shortest round-trip form (ryu's, `float.rs`; a few
/// digits of exponent syntax may differ from JavaScript's, the value
/// never does); non-finite as `null`.
pub fn write_number(out: &mut String, n: f64) {
    write_f64(out, n);
}

/// [`write_number`], for this crate's writers. (Kept apart from the
/// public one: what only the page's paths call stays `pub(crate)`, see
/// [`crate::text`].)
pub(crate) fn write_f64(out: &mut String, n: f64) {
    if !n.is_finite() {
        out.push_str("null");
    } else if let Some(i) = exact_integer(n) {
        write_i64(out, i);
    } else {
        float::write(out, n);
    }
}

/// Appends `n` in decimal.
fn write_i64(out: &mut String, n: i64) {
    if n < 0 {
        out.push_str("-");
    }
    crate::text::push_u64(out, n.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_integers() {
        assert_eq!(to_safe_u64(5.0), Some(5));
        assert_eq!(to_safe_u64(MAX_SAFE_INTEGER as f64), Some(MAX_SAFE_INTEGER));
        assert_eq!(to_safe_u64(2f64.powi(60)), None);
        assert_eq!(to_safe_u64(1.5), None);
        assert_eq!(to_safe_u64(-1.0), None);
        assert_eq!(to_safe_u64(f64::NAN), None);
    }

    #[test]
    fn numbers_as_javascript_writes_them() {
        let write = |v: f64| {
            let mut out = String::new();
            write_f64(&mut out, v);
            out
        };
        assert_eq!(write(1200.0), "1200");
        assert_eq!(write(-0.0), "0");
        assert_eq!(write(-3.0), "-3");
        assert_eq!(write(0.5), "0.5");
        assert_eq!(write(f64::NAN), "null");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(number(-1.5), "-1.5");
    }
}
