//! Time as the server sees it.
//!
//! A report's `atMs` and its `webhook-timestamp` must be within 5 minutes
//! of the server's clock (PROTOCOL.md §Workers, "An implausible `atMs` is
//! refused"), so a worker whose own clock is off would be refused on every
//! report. The worker keeps an offset to the server's clock instead,
//! measured from each claim answer's `nowMs`, and from the `Date` header
//! when a signature is refused for its timestamp.
//!
//! Only those two stamps use this clock. Waits (heartbeats, backoff, the
//! lease's estimated end) run on tokio's monotonic clock, which no
//! correction can make jump.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// The local wall clock in milliseconds since the Unix epoch. Injectable
/// ([`crate::WorkerBuilder::clock`]) so that tests can run a worker whose
/// clock is minutes off.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The system's wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0)
    })
}

/// The local clock plus the offset last measured to the server's.
pub(crate) struct ServerClock {
    local: Clock,
    offset_ms: Mutex<f64>,
}

impl ServerClock {
    pub(crate) fn new(local: Clock) -> Self {
        ServerClock {
            local,
            offset_ms: Mutex::new(0.0),
        }
    }

    fn offset(&self) -> f64 {
        *self.offset_ms.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server's time now, as best known, in whole milliseconds.
    pub(crate) fn now_ms(&self) -> f64 {
        ((self.local)() + self.offset()).floor().max(0.0)
    }

    /// The server's time now in whole seconds (a `webhook-timestamp`).
    pub(crate) fn now_secs(&self) -> i64 {
        (self.now_ms() / 1000.0).floor() as i64
    }

    /// Takes `server_ms` as the server's time now (a claim's `nowMs`).
    pub(crate) fn sync(&self, server_ms: f64) {
        if server_ms.is_finite() && server_ms > 0.0 {
            let offset = server_ms - (self.local)();
            *self.offset_ms.lock().unwrap_or_else(|e| e.into_inner()) = offset;
        }
    }

    /// Takes an HTTP `Date` header as the server's time now; false if it
    /// cannot be read. Exact to the second, which is what the 5 minutes of
    /// tolerance need.
    pub(crate) fn sync_from_date(&self, date: &str) -> bool {
        match parse_http_date(date) {
            Some(ms) => {
                // The header is truncated to the second: the middle of that
                // second is off by at most half a second either way.
                self.sync(ms + 500.0);
                true
            }
            None => false,
        }
    }
}

/// Reads an IMF-fixdate (`Wed, 02 Dec 2026 16:47:26 GMT`, RFC 9110
/// §5.6.7), the only form a current server sends, into milliseconds since
/// the epoch.
pub(crate) fn parse_http_date(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let _weekday = parts.next()?;
    let day: i64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let m: i64 = hms.next()?.parse().ok()?;
    let s: i64 = hms.next()?.parse().ok()?;
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 86_400 + h * 3_600 + m * 60 + s) * 1_000) as f64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard
/// Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_imf_fixdate() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0.0));
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000.0)
        );
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(""), None);
    }

    #[test]
    fn a_clock_ten_minutes_slow_reads_the_servers_time_after_a_sync() {
        let clock = ServerClock::new(Arc::new(|| 1_000_000.0 - 600_000.0));
        clock.sync(1_000_000.0);
        assert_eq!(clock.now_ms(), 1_000_000.0);
        assert_eq!(clock.now_secs(), 1_000);
    }
}
