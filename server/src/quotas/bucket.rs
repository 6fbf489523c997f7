//! The token bucket behind `--tenant-create-rate`: pure (time comes in as
//! an argument), so its arithmetic is tested without a clock.

use std::time::{Duration, Instant};

/// `burst` tokens at most, refilled at `rate` per second; a create takes
/// one. A full bucket lets `burst` creates through at once, then `rate`
/// per second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. `rate` must be positive and `burst` at
    /// least 1 (the flags are checked before).
    pub fn new(rate: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = self.last.max(now);
    }

    /// Takes a token, or says how long until the next one arrives.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let missing = 1.0 - self.tokens;
        Err(Duration::from_secs_f64(missing / self.rate))
    }

    /// Puts back a token taken for a create that did not create a task
    /// (a replay, a refusal): only new tasks spend the rate.
    pub fn give_back(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }

    /// The sustained rate, per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The most tokens held.
    pub fn burst(&self) -> u32 {
        self.burst as u32
    }
}

/// `Retry-After` for a wait: whole seconds, rounded up, at least 1 (a
/// client waiting that long finds a token).
pub fn retry_after_secs(wait: Duration) -> u32 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_gives_its_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(2.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.take(t0), Ok(()));
        }
        let wait = b.take(t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        // Half a second later one token has arrived, not two.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(b.take(t1), Ok(()));
        assert!(b.take(t1).is_err());
        // A long pause refills to the burst, never past it.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(t2), Ok(()));
        }
        assert!(b.take(t2).is_err());
    }

    #[test]
    fn a_token_given_back_is_there_for_the_next_create() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0.1, 1, t0);
        assert_eq!(b.take(t0), Ok(()));
        assert_eq!(b.take(t0).unwrap_err(), Duration::from_secs(10));
        b.give_back();
        assert_eq!(b.take(t0), Ok(()));
        b.give_back();
        b.give_back();
        assert_eq!(b.take(t0), Ok(()), "never more than the burst");
        assert!(b.take(t0).is_err());
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(10)), 10);
    }
}
