//! `f64::fract` and `f64::round` without std: both are std's, and the
//! crate is `no_std` in the browser build (see the crate docs).

/// Every f64 from 2^52 up is an integer.
const ALL_INTEGERS: f64 = 4_503_599_627_370_496.0;

/// `v.fract() == 0.0`, without std (`fract` is std's: the crate is
/// `no_std` in the browser): true for finite integers, false for
/// fractions, NaN and infinities.
pub fn is_integral(v: f64) -> bool {
    if v.is_finite() && (v >= ALL_INTEGERS || v <= -ALL_INTEGERS) {
        return true;
    }
    // Below 2^52 in magnitude, `as i64` truncates exactly (NaN gives 0,
    // which differs from NaN, so NaN is not integral).
    v == (v as i64) as f64
}

/// `v.round()` (half away from zero), without std, for the follow's
/// delays (`round` is std's).
pub fn round(v: f64) -> f64 {
    if !(v > -ALL_INTEGERS && v < ALL_INTEGERS) {
        return v; // already integral, or NaN
    }
    let whole = (v as i64) as f64;
    let rest = v - whole; // exact below 2^52
    let rounded = if rest >= 0.5 {
        whole + 1.0
    } else if rest <= -0.5 {
        whole - 1.0
    } else {
        whole
    };
    if rounded == 0.0 && v.is_sign_negative() {
        -0.0
    } else {
        rounded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The no_std helpers agree with std's `fract` and `round` on every
    /// kind of f64: edges, then a seeded sweep of bit patterns.
    #[test]
    fn float_helpers_match_std() {
        let mut edges = vec![
            0.0,
            -0.0,
            0.3,
            -0.3,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4503599627370495.5,
            -4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            1e300,
            -1e300,
            5e-324,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            // splitmix64
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            edges.push(f64::from_bits(z ^ (z >> 31)));
            // Small magnitudes with fractions, where rounding is decided.
            edges.push((z % 20_000) as f64 / 8.0 - 1250.0);
        }
        for v in edges {
            assert_eq!(is_integral(v), v.fract() == 0.0, "is_integral({v:e})");
            let (ours, std) = (round(v), v.round());
            assert!(
                ours.to_bits() == std.to_bits() || (ours.is_nan() && std.is_nan()),
                "round({v:e}) = {ours:e}, std {std:e}"
            );
        }
    }
}
