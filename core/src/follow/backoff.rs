//! When to retry: exponential backoff with full jitter, `Retry-After`, and
//! the seeded generator that draws the jitter.

/// Delays between attempts: `random(0, min(max, initial · 2^n))` after the
/// n-th consecutive failure (full jitter, so that clients cut off together
/// do not come back together), reset after a success.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The ceiling of the first delay, in ms.
    pub initial_ms: f64,
    /// The ceiling of every delay, in ms.
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
    /// The ceiling of the delay after `failures` consecutive failures (≥ 1).
    pub fn ceiling(&self, failures: u32) -> f64 {
        let exponent = failures.saturating_sub(1).min(31);
        (self.initial_ms * f64::from(1u32 << exponent))
            .min(self.max_ms)
            .max(0.0)
    }

    /// The delay after `failures` consecutive failures (≥ 1), given a
    /// uniform `random` in [0, 1), raised to `floor_ms` (a server's
    /// `Retry-After`) when there is one.
    pub fn delay(&self, failures: u32, random: f64, floor_ms: Option<f64>) -> f64 {
        let jittered = self.ceiling(failures) * random.clamp(0.0, 1.0);
        match floor_ms {
            Some(floor) if floor > jittered => floor,
            _ => jittered,
        }
    }
}

/// The longest wait a `Retry-After` may impose: a day.
const RETRY_AFTER_MAX_MS: f64 = 24.0 * 3600.0 * 1000.0;

/// Reads an HTTP date as ms since the Unix epoch: [`http_date_ms`], or the
/// runtime's own reader (a browser executor passes `Date.parse`, which
/// costs the page nothing).
pub type DateReader = fn(&str) -> Option<f64>;

/// Parses a `Retry-After` header into milliseconds from `now_ms` (the
/// wall clock, ms since the Unix epoch): delay-seconds (`"120"`) or an
/// HTTP date read by `read_date`. Unparsable values are ignored; the wait
/// is cut to a day.
pub fn retry_after_ms(value: &str, now_ms: f64, read_date: DateReader) -> Option<f64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Integer seconds, saturating (no float parsing: it would link
        // std's 10 KB conversion tables into the bundle).
        let seconds = value.bytes().fold(0u64, |n, b| {
            n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
        });
        return Some((seconds as f64 * 1000.0).min(RETRY_AFTER_MAX_MS));
    }
    let at = read_date(value)?;
    Some((at - now_ms).clamp(0.0, RETRY_AFTER_MAX_MS))
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// An HTTP date as ms since the Unix epoch: IMF-fixdate (`Sun, 06 Nov
/// 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) or
/// asctime (`Sun Nov  6 08:49:37 1994`). The fields are told apart by
/// their shape, so all three share one reader.
pub fn http_date_ms(value: &str) -> Option<f64> {
    let (mut day, mut month, mut year, mut time) = (None, None, None, None);
    for token in value.split([' ', ',', '-']).filter(|t| !t.is_empty()) {
        if token.contains(':') {
            time = Some(clock(token)?);
        } else if let Some(n) = digits(token) {
            match token.len() {
                1 | 2 if day.is_none() => day = Some(n),
                2 => year = Some(if n < 70 { 2000 + n } else { 1900 + n }),
                4 => year = Some(n),
                _ => return None,
            }
        } else if let Some(m) = token
            .get(..3)
            .filter(|_| token.len() == 3)
            .and_then(|t| MONTHS.iter().position(|m| t.eq_ignore_ascii_case(m)))
        {
            month = Some(m as u64 + 1);
        }
        // Weekday names and "GMT" carry nothing needed.
    }
    let (day, month, year, seconds) = (day?, month?, year?, time?);
    if !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((days as f64 * 86_400.0 + seconds as f64) * 1000.0)
}

fn digits(token: &str) -> Option<u64> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) || token.len() > 4 {
        return None;
    }
    Some(token.bytes().fold(0, |n, b| n * 10 + u64::from(b - b'0')))
}

/// `hh:mm:ss` as seconds of the day.
fn clock(token: &str) -> Option<u64> {
    let mut parts = token.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (h, m, s) = (digits(h)?, digits(m)?, digits(s)?);
    (h < 24 && m < 60 && s < 61).then_some(h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`), for years from 1970 on.
fn days_from_civil(year: u64, month: u64, day: u64) -> i64 {
    let y = year as i64 - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The jitter source: SplitMix64 from a seed the executor draws once (the
/// core never draws randomness itself), so a seeded run replays exactly.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Jitter(seed)
    }

    /// The next uniform value in [0, 1).
    pub fn draw(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
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
        assert_eq!(b.delay(9, 1.0, Some(2000.0)), 30_000.0);
    }

    #[test]
    fn parses_seconds_and_the_three_date_forms() {
        assert_eq!(retry_after_ms("3", 0.0, http_date_ms), Some(3000.0));
        assert_eq!(retry_after_ms(" 0 ", 0.0, http_date_ms), Some(0.0));
        assert_eq!(
            retry_after_ms("99999999999999999999", 0.0, http_date_ms),
            Some(RETRY_AFTER_MAX_MS)
        );
        assert_eq!(retry_after_ms("soon", 0.0, http_date_ms), None);
        assert_eq!(retry_after_ms("-1", 0.0, http_date_ms), None);
        assert_eq!(retry_after_ms("", 0.0, http_date_ms), None);
        // 2015-10-21T07:28:00Z, as JavaScript's Date.UTC gives it.
        let at = 1_445_412_480_000.0;
        for form in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(http_date_ms(form), Some(at), "{form}");
        }
        assert_eq!(
            http_date_ms("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000.0)
        );
        assert_eq!(http_date_ms("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0.0));
        assert_eq!(
            http_date_ms("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(1_835_481_599_000.0)
        );
        assert_eq!(
            retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", at - 6_000.0, http_date_ms),
            Some(6_000.0)
        );
        assert_eq!(
            retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", at + 9.0, http_date_ms),
            Some(0.0)
        );
        for bad in [
            "Wed, 21 Oct 2015 GMT",
            "21 Foo 2015 07:28:00",
            "Wed, 99 Oct 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 25:00:00 GMT",
            "1:2:3:4",
        ] {
            assert_eq!(http_date_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn jitter_is_uniform_in_the_unit_interval_and_replays() {
        let mut a = Jitter::new(7);
        let mut b = Jitter::new(7);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let x = a.draw();
            assert!((0.0..1.0).contains(&x));
            assert_eq!(x, b.draw());
            sum += x;
        }
        assert!((sum / 10_000.0 - 0.5).abs() < 0.02, "{}", sum / 10_000.0);
    }
}
