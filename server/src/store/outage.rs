//! One log line when the storage stops taking writes, one when it takes
//! them again: an outage is an episode, not a stream of errors.
//!
//! Why here and not in the callers: during a full disk every write fails
//! (HTTP writes, the TTL sweeper's, the notify sender's records of its
//! attempts), and each caller logging its own failures wrote 49 lines in
//! 16 s (issue 24, N5): the sender's outbox read still succeeds, so it
//! forgot it was failing and logged again at every retry tick, and an
//! error message that changes (`database or disk is full`, `disk I/O
//! error`) defeated the per-caller "same as last time" check. Every write
//! goes through a store's writer, so the stores report each write here
//! and the callers log only errors that are not an outage.
//!
//! Only a write that changed rows ends an episode: on a full disk an
//! empty sweep (nothing due), a replayed create or a duplicate callback
//! commits nothing and succeeds, which says nothing about the disk. And
//! only once no write was refused for [`QUIET`]: a nearly full disk takes
//! a small write (an outbox row marked, into WAL pages SQLite reuses)
//! between two refused large ones, and ending the episode at each would
//! log a pair of lines every few hundred milliseconds (measured under a
//! file size limit: three episodes in 3 s).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::StoreError;

/// How long writes must go without a refusal for a committed write to
/// end the episode: as long as a refused client is told to wait
/// (`Retry-After`), so a retry that fails again keeps the episode open.
pub const QUIET: Duration = Duration::from_secs(crate::error::STORAGE_RETRY_AFTER_SECS as u64);

/// Where the lines go: stderr in the server, a buffer in tests.
pub type Log = Box<dyn Fn(&str) + Send + Sync>;

/// The current outage, if any, and where its two lines go.
pub struct Outage {
    episode: Mutex<Option<Episode>>,
    log: Log,
}

/// Since when writes are refused, how many so far, and the last one.
struct Episode {
    since: Instant,
    refused: u64,
    last_refused: Instant,
}

impl std::fmt::Debug for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outage")
            .field("ongoing", &self.ongoing())
            .finish_non_exhaustive()
    }
}

impl Default for Outage {
    fn default() -> Self {
        Outage::with_log(Box::new(|line| eprintln!("{line}")))
    }
}

impl Outage {
    /// An outage tracker that writes its lines to `log`.
    pub fn with_log(log: Log) -> Self {
        Outage {
            episode: Mutex::new(None),
            log,
        }
    }

    /// `writes` writes failed with `error`. Only
    /// [`StoreError::Unavailable`] is an outage (anything else is the
    /// request's or a bug, answered and logged where it happens); the
    /// first one of an episode is logged, the others counted.
    pub fn refused(&self, writes: usize, error: &StoreError) {
        self.refused_at(writes, error, Instant::now());
    }

    fn refused_at(&self, writes: usize, error: &StoreError, now: Instant) {
        let StoreError::Unavailable(why) = error else {
            return;
        };
        if writes == 0 {
            return;
        }
        let mut episode = self.lock();
        match episode.as_mut() {
            Some(e) => {
                e.refused = e.refused.saturating_add(writes as u64);
                e.last_refused = now;
            }
            None => {
                *episode = Some(Episode {
                    since: now,
                    refused: writes as u64,
                    last_refused: now,
                });
                (self.log)(&format!(
                    "taskwire-server: storage unavailable, writes refused with 503 until it \
                     clears: {why} (logged once; a line follows when writes succeed again)"
                ));
            }
        }
    }

    /// A write committed changed rows: the storage takes writes again,
    /// if none was refused for [`QUIET`].
    pub fn wrote(&self) {
        self.wrote_at(Instant::now());
    }

    fn wrote_at(&self, now: Instant) {
        let mut episode = self.lock();
        let Some(e) = episode.as_ref() else {
            return;
        };
        if now.saturating_duration_since(e.last_refused) < QUIET {
            return;
        }
        (self.log)(&format!(
            "taskwire-server: storage writable again after {:.1} s, {} writes refused",
            now.saturating_duration_since(e.since).as_secs_f64(),
            e.refused
        ));
        *episode = None;
    }

    /// Whether writes are being refused now.
    pub fn ongoing(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Episode>> {
        // A poisoned lock only means a logger panicked; the state is two
        // numbers, still usable.
        self.episode.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::{Outage, QUIET};
    use crate::store::StoreError;

    fn logged() -> (Outage, Arc<Mutex<Vec<String>>>) {
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&lines);
        let outage = Outage::with_log(Box::new(move |l| sink.lock().unwrap().push(l.into())));
        (outage, lines)
    }

    fn full() -> StoreError {
        StoreError::Unavailable("database or disk is full".into())
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn many_refused_writes_log_one_line_and_the_first_write_after_one_more() {
        let (outage, lines) = logged();
        let t0 = Instant::now();
        for i in 0..40 {
            // The message changes during the episode: still one line.
            let e = match i % 2 {
                0 => full(),
                _ => StoreError::Unavailable("disk I/O error".into()),
            };
            outage.refused_at(1, &e, t0 + ms(100 * i));
            // Small writes get through between the refused ones.
            outage.wrote_at(t0 + ms(100 * i + 50));
        }
        outage.refused_at(9, &full(), t0 + ms(4_000));
        assert!(outage.ongoing());
        assert_eq!(lines.lock().unwrap().len(), 1, "{lines:?}");
        let end = t0 + ms(4_000) + QUIET;
        outage.wrote_at(end);
        outage.wrote_at(end + ms(1));
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("storage unavailable"), "{}", lines[0]);
        assert!(
            lines[0].contains("database or disk is full"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "taskwire-server: storage writable again after 9.0 s, 49 writes refused"
        );
    }

    #[test]
    fn errors_that_are_not_an_outage_and_writes_while_healthy_log_nothing() {
        let (outage, lines) = logged();
        outage.wrote();
        outage.refused(3, &StoreError::Internal("no such table".into()));
        outage.refused(1, &StoreError::Overloaded);
        outage.refused(0, &full());
        assert!(!outage.ongoing());
        assert_eq!(*lines.lock().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_second_outage_is_a_second_episode() {
        let (outage, lines) = logged();
        let t0 = Instant::now();
        for start in [t0, t0 + ms(60_000)] {
            outage.refused_at(5, &full(), start);
            outage.refused_at(5, &full(), start + ms(10));
            outage.wrote_at(start + ms(10) + QUIET);
        }
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[3].ends_with(" s, 10 writes refused"), "{}", lines[3]);
    }
}
