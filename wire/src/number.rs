//! Decimal text → nearest f64, exactly (round half to even), with no
//! lookup tables.
//!
//! Why not `str::parse::<f64>`: it links a 10 KB table of powers of five
//! (for the Eisel–Lemire fast path) into the WebAssembly bundle, about a
//! sixth of the whole module. Here:
//! - Clinger's fast path: when the digits fit in 2^53 and the power of ten
//!   is at most 22, one exact f64 multiplication or division rounds
//!   correctly. Integers and short decimals (nearly every wire value)
//!   take it.
//! - Otherwise the "simple decimal conversion" (as in Go's strconv): the
//!   digits are shifted by powers of two until the value sits in [1/2, 1),
//!   then 53 bits are read off and rounded. Exact, slower, and rare.
//!
//! `tests/properties.rs` checks it against `str::parse::<f64>` on random
//! inputs, including halfway cases and subnormals.

use alloc::{vec, vec::Vec};

/// At most this many significant digits are kept; the rest only decide
/// rounding (a "sticky" flag). 800 digits cover every halfway case of f64.
const MAX_DIGITS: usize = 800;

/// Parses text already checked against the JSON number grammar.
/// Returns `None` when the value overflows f64 (the caller reports it).
pub(crate) fn parse_f64(text: &str) -> Option<f64> {
    let mut d = Decimal::read(text);
    if let Some(fast) = d.fast_path() {
        return Some(fast);
    }
    d.convert()
}

/// The exact powers of ten representable in an f64.
fn pow10(n: usize) -> f64 {
    let mut p = 1.0;
    for _ in 0..n {
        p *= 10.0;
    }
    p
}

struct Decimal {
    /// Significant digits (0..=9), no leading zeros.
    digits: Vec<u8>,
    /// Position of the decimal point: value = 0.d1d2d3… × 10^point.
    point: i64,
    negative: bool,
    /// Non-zero digits were dropped beyond `MAX_DIGITS`.
    truncated: bool,
}

impl Decimal {
    fn read(text: &str) -> Decimal {
        let mut d = Decimal {
            digits: Vec::with_capacity(24),
            point: 0,
            negative: false,
            truncated: false,
        };
        let bytes = text.as_bytes();
        let mut i = 0;
        if bytes.first() == Some(&b'-') {
            d.negative = true;
            i = 1;
        }
        let mut seen_point = false;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'.' => seen_point = true,
                b'0'..=b'9' => {
                    if b == b'0' && d.digits.is_empty() {
                        // Leading zeros only move the point after it.
                        if seen_point {
                            d.point -= 1;
                        }
                    } else {
                        if d.digits.len() < MAX_DIGITS {
                            d.digits.push(b - b'0');
                        } else if b != b'0' {
                            d.truncated = true;
                        }
                        if !seen_point {
                            d.point += 1;
                        }
                    }
                }
                _ => break,
            }
            i += 1;
        }
        if let Some(b'e' | b'E') = bytes.get(i) {
            i += 1;
            let mut negative = false;
            match bytes.get(i) {
                Some(b'-') => {
                    negative = true;
                    i += 1;
                }
                Some(b'+') => i += 1,
                _ => {}
            }
            let mut exp: i64 = 0;
            while let Some(&b @ b'0'..=b'9') = bytes.get(i) {
                // Saturate: anything this large is 0 or infinity anyway.
                exp = (exp * 10 + i64::from(b - b'0')).min(100_000);
                i += 1;
            }
            d.point += if negative { -exp } else { exp };
        }
        // Trailing zeros carry no information.
        while d.digits.last() == Some(&0) {
            d.digits.pop();
        }
        d
    }

    fn signed(&self, v: f64) -> f64 {
        if self.negative {
            -v
        } else {
            v
        }
    }

    /// Clinger's fast path: exact operands, one correctly rounded operation.
    fn fast_path(&self) -> Option<f64> {
        if self.digits.is_empty() {
            return Some(self.signed(0.0));
        }
        if self.digits.len() > 15 || self.truncated {
            return None;
        }
        let mut mantissa: u64 = 0;
        for &digit in &self.digits {
            mantissa = mantissa * 10 + u64::from(digit);
        }
        // value = mantissa × 10^exp10
        let exp10 = self.point - self.digits.len() as i64;
        let m = mantissa as f64; // exact: < 10^15 < 2^53
        let v = if (0..=22).contains(&exp10) {
            m * pow10(exp10 as usize)
        } else if (-22..0).contains(&exp10) {
            m / pow10((-exp10) as usize)
        } else {
            return None;
        };
        Some(self.signed(v))
    }

    /// The simple decimal conversion; `None` on overflow.
    fn convert(&mut self) -> Option<f64> {
        const MANT_BITS: i64 = 52;
        const BIAS: i64 = -1023;
        // Shift sizes by decimal-point position: 2^n < 10^point.
        const STEP: [u32; 9] = [1, 3, 6, 9, 13, 16, 19, 23, 26];
        let step = |p: i64| STEP.get(p as usize).copied().unwrap_or(27);

        if self.point > 310 {
            return None;
        }
        if self.point < -330 {
            return Some(self.signed(0.0));
        }
        let mut exp: i64 = 0;
        while self.point > 0 {
            let n = step(self.point);
            self.right_shift(n);
            exp += i64::from(n);
        }
        while self.point < 0 || (self.point == 0 && self.digits.first().is_some_and(|&d| d < 5)) {
            let n = step(-self.point);
            self.left_shift(n);
            exp -= i64::from(n);
        }
        // Now in [1/2, 1); floats normalise to [1, 2).
        exp -= 1;
        if exp < BIAS + 1 {
            // Subnormal: shift down to the minimum exponent.
            let n = BIAS + 1 - exp;
            let mut left = n;
            while left > 0 {
                let k = left.min(60) as u32;
                self.right_shift(k);
                left -= i64::from(k);
            }
            exp += n;
        }
        if exp - BIAS >= (1 << 11) - 1 {
            return None;
        }
        self.left_shift(1 + MANT_BITS as u32);
        let mut mant = self.rounded_integer();
        if mant == 2 << MANT_BITS {
            mant >>= 1;
            exp += 1;
            if exp - BIAS >= (1 << 11) - 1 {
                return None;
            }
        }
        if mant & (1 << MANT_BITS) == 0 {
            exp = BIAS; // subnormal (or zero)
        }
        let bits = (mant & ((1 << MANT_BITS) - 1)) | (((exp - BIAS) as u64 & 0x7ff) << MANT_BITS);
        Some(self.signed(f64::from_bits(bits)))
    }

    /// Multiplies by 2^k (k ≤ 60).
    fn left_shift(&mut self, k: u32) {
        if self.digits.is_empty() {
            return;
        }
        // Work from the last digit up, into a buffer with room for the
        // carry digits (2^60 < 10^19).
        let mut out = vec![0u8; self.digits.len() + 19];
        let mut w = out.len();
        let mut carry: u64 = 0;
        for &digit in self.digits.iter().rev() {
            let v = (u64::from(digit) << k) + carry;
            carry = v / 10;
            w -= 1;
            if let Some(slot) = out.get_mut(w) {
                *slot = (v % 10) as u8;
            }
        }
        while carry > 0 {
            w -= 1;
            if let Some(slot) = out.get_mut(w) {
                *slot = (carry % 10) as u8;
            }
            carry /= 10;
        }
        let added = (self.digits.len() + 19 - w) as i64 - self.digits.len() as i64;
        out.drain(..w);
        self.point += added;
        self.set_digits(out);
    }

    /// Divides by 2^k (k ≤ 60).
    fn right_shift(&mut self, k: u32) {
        let mask = (1u64 << k) - 1;
        let mut read = 0;
        let mut n: u64 = 0;
        // Read enough leading digits to produce a first output digit.
        loop {
            if n >> k != 0 {
                break;
            }
            match self.digits.get(read) {
                Some(&digit) => {
                    n = n * 10 + u64::from(digit);
                    read += 1;
                }
                None => {
                    if n == 0 {
                        self.digits.clear();
                        self.point = 0;
                        return;
                    }
                    while n >> k == 0 {
                        n *= 10;
                        read += 1;
                    }
                    break;
                }
            }
        }
        self.point -= read as i64 - 1;
        let mut out = Vec::with_capacity(self.digits.len() + 20);
        while let Some(&digit) = self.digits.get(read) {
            out.push((n >> k) as u8);
            n = ((n & mask) * 10) + u64::from(digit);
            read += 1;
        }
        // Flush what is left of the remainder.
        while n > 0 {
            let digit = (n >> k) as u8;
            n = (n & mask) * 10;
            if out.len() < MAX_DIGITS {
                out.push(digit);
            } else if digit > 0 {
                self.truncated = true;
            }
        }
        self.set_digits(out);
    }

    fn set_digits(&mut self, mut digits: Vec<u8>) {
        if digits.len() > MAX_DIGITS {
            if digits.iter().skip(MAX_DIGITS).any(|&d| d != 0) {
                self.truncated = true;
            }
            digits.truncate(MAX_DIGITS);
        }
        while digits.last() == Some(&0) {
            digits.pop();
        }
        self.digits = digits;
    }

    /// The integer part, rounded half to even (64 bits are enough here:
    /// the caller has shifted the value below 2^54).
    fn rounded_integer(&self) -> u64 {
        if self.point > 20 {
            return u64::MAX;
        }
        if self.point < 0 {
            // Below 0.1: rounds to zero.
            return 0;
        }
        let point = self.point as usize;
        let mut n: u64 = 0;
        for i in 0..point {
            n = n * 10 + u64::from(self.digits.get(i).copied().unwrap_or(0));
        }
        if self.should_round_up(point) {
            n += 1;
        }
        n
    }

    fn should_round_up(&self, at: usize) -> bool {
        let Some(&digit) = self.digits.get(at) else {
            return false;
        };
        if digit == 5 && at + 1 == self.digits.len() && !self.truncated {
            // Exactly halfway: round to even.
            return at > 0 && self.digits.get(at - 1).is_some_and(|d| d % 2 == 1);
        }
        digit >= 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(text: &str) {
        let ours = parse_f64(text);
        let std = text.parse::<f64>().ok().filter(|v| v.is_finite());
        assert_eq!(
            ours.map(f64::to_bits),
            std.map(f64::to_bits),
            "{text}: ours {ours:?}, std {std:?}"
        );
    }

    #[test]
    fn agrees_with_std_on_hard_cases() {
        for text in [
            "0",
            "-0",
            "1",
            "-1",
            "0.1",
            "0.5",
            "1200",
            "24300",
            "1e21",
            "1e22",
            "1e23",
            "9007199254740992",
            "9007199254740993",
            "9007199254740995",
            "123456789012345678",
            "911.1599208089883",
            "1764409200123.4567",
            "2.2250738585072011e-308",
            "2.2250738585072014e-308",
            "4.9406564584124654e-324",
            "2.4703282292062327e-324",
            "2.4703282292062328e-324",
            "1e-400",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "1e309",
            "0.000001",
            "1e-7",
            "123.456e-2",
            "7.3177701707893310e+15",
            "0.30000000000000004",
            "100000000000000000000000000000000000001",
            "8.98846567431158e307",
            "1448997445238699",
            "5e-324",
            "3e-324",
        ] {
            same(text);
        }
    }

    #[test]
    fn very_long_inputs_stay_exact() {
        let long = format!("1.{}1e-5", "0".repeat(900));
        same(&long);
        let half = format!("9007199254740993{}", "0".repeat(5));
        same(&half);
        let just_over_half = format!("9007199254740993{}1e-30", "0".repeat(900));
        same(&just_over_half);
    }
}
