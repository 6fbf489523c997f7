//! When to retry: exponential backoff with full jitter, and `Retry-After`.

/// Delays between attempts: `random(0, min(max, initial · 2^n))` after the
/// n-th consecutive failure (full jitter, so that clients cut off together
/// do not come back together), reset after a success.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The ceiling of the first delay.
    pub initial_ms: f64,
    /// The ceiling of every delay.
    pub max_ms: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial_ms: 250.0,
            max_ms: 30_000.0,
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (≥ 1), given a
    /// uniform `random` in [0, 1), raised to `floor_ms` (a server's
    /// `Retry-After`) when there is one.
    pub fn delay(&self, failures: u32, random: f64, floor_ms: Option<f64>) -> f64 {
        let exponent = failures.saturating_sub(1).min(52);
        let ceiling = (self.initial_ms * f64::from(1u32 << exponent.min(31)))
            .min(self.max_ms)
            .max(0.0);
        let jittered = ceiling * random.clamp(0.0, 1.0);
        match floor_ms {
            Some(floor) if floor > jittered => floor,
            _ => jittered,
        }
    }
}

/// Parses a `Retry-After` header into milliseconds: delay-seconds
/// (`"120"`), or an HTTP date, given the current time and a date parser
/// (the browser's `Date.parse`). Unparsable values are ignored.
pub fn retry_after_ms(value: &str, now_ms: f64, parse_date: impl Fn(&str) -> f64) -> Option<f64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Integer seconds, saturating (no float parsing: it would link
        // std's 10 KB conversion tables into the bundle).
        let seconds = value.bytes().fold(0u64, |n, b| {
            n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
        });
        return Some((seconds as f64 * 1000.0).min(24.0 * 3600.0 * 1000.0));
    }
    let at = parse_date(value);
    if at.is_finite() {
        Some((at - now_ms).clamp(0.0, 24.0 * 3600.0 * 1000.0))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_under_an_exponential_ceiling() {
        let b = Backoff {
            initial_ms: 250.0,
            max_ms: 30_000.0,
        };
        assert_eq!(b.delay(1, 0.999_999, None).round(), 250.0);
        assert_eq!(b.delay(2, 0.5, None), 250.0);
        assert_eq!(b.delay(3, 1.0, None), 1000.0);
        assert_eq!(b.delay(20, 0.5, None), 15_000.0);
        assert_eq!(b.delay(60, 1.0, None), 30_000.0);
        assert_eq!(b.delay(5, 0.0, None), 0.0);
    }

    #[test]
    fn retry_after_is_a_floor() {
        let b = Backoff::default();
        assert_eq!(b.delay(1, 0.1, Some(2000.0)), 2000.0);
        assert_eq!(b.delay(9, 1.0, Some(2000.0)), 30_000.0 * 1.0_f64.min(1.0));
    }

    #[test]
    fn parses_seconds_and_dates() {
        let never = |_: &str| f64::NAN;
        assert_eq!(retry_after_ms("3", 0.0, never), Some(3000.0));
        assert_eq!(retry_after_ms(" 0 ", 0.0, never), Some(0.0));
        assert_eq!(retry_after_ms("soon", 0.0, never), None);
        assert_eq!(retry_after_ms("-1", 0.0, never), None);
        let date = |_: &str| 10_000.0;
        assert_eq!(
            retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 4_000.0, date),
            Some(6_000.0)
        );
        assert_eq!(
            retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 20_000.0, date),
            Some(0.0)
        );
    }
}
