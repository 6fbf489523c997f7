//! Differential test against the seed: seed 000's `applyAsyncEvent`,
//! ported line by line below (with the deliberate fixes 4 to 6 of
//! `lib.rs`, the only ones at this level), and the core must agree on
//! every outcome, every field and every history entry, for random
//! streams of the seed's five events without `attempt` or `leaseMs`. It
//! pins "events without attempt behave exactly as in the seed" as the
//! lifecycle grows: no new state, field or lease may leak into a seed
//! task. (The book-level fixes are pinned by the shared vectors.)

use proptest::prelude::*;
use serde_json::Value;
use taskwire_core::{create_task, CreateTask, Event, Millis, NonBlank, Percent, Task};
use taskwire_wire::to_json;

const TTL: f64 = 1_000.0;

/// The seed's task, as `AsyncTask` holds it.
#[derive(Debug, Clone)]
struct Seed {
    state: &'static str,
    expires_at_ms: f64,
    attempts: u64,
    max_attempts: u64,
    progress: u8,
    version: u64,
    result_ref: Option<String>,
    result_hash: Option<String>,
    error: Option<String>,
    history: Vec<Event>,
}

/// `{changed, duplicate, notify, reason}`.
type Outcome = (bool, bool, bool, &'static str);

fn unchanged(reason: &'static str, duplicate: bool) -> Outcome {
    (false, duplicate, false, reason)
}

impl Seed {
    fn advance(&mut self, event: Event) {
        self.version += 1;
        self.history.push(event);
    }

    /// `applyAsyncEvent`, in the seed's order.
    fn apply(&mut self, event: &Event) -> Outcome {
        let terminal = matches!(self.state, "succeeded" | "failed" | "expired");
        if terminal {
            if let Event::Succeed { result_hash, .. } = event {
                if self.state == "succeeded" {
                    // Fix 6: another hash is a conflict, not terminal-conflict.
                    return if self.result_hash.as_deref() == Some(result_hash.as_str()) {
                        unchanged("duplicate-result", true)
                    } else {
                        unchanged("result-conflict", false)
                    };
                }
            }
            if matches!(event, Event::Expire { .. }) && self.state == "expired" {
                return unchanged("duplicate-expire", true);
            }
            return unchanged("terminal-conflict", false);
        }
        if matches!(event, Event::Expire { .. }) || event.at_ms().get() >= self.expires_at_ms {
            self.state = "expired";
            let at_ms = Millis::new(self.expires_at_ms, "e").unwrap();
            self.advance(Event::Expire { at_ms });
            return (true, false, true, "expired");
        }
        match event {
            Event::Start { .. } => {
                if self.state == "running" {
                    return unchanged("already-running", true);
                }
                if self.state != "queued" || self.attempts >= self.max_attempts {
                    return unchanged("not-startable", false);
                }
                self.state = "running";
                self.attempts += 1;
                self.progress = 0;
                self.advance(event.clone());
                (true, false, false, "started")
            }
            Event::Progress { progress, .. } => {
                if self.state != "running" {
                    return unchanged("not-running", false);
                }
                let p = progress.get();
                if p < self.progress {
                    return unchanged("stale-progress", false);
                }
                if p == self.progress {
                    return unchanged("duplicate-progress", true);
                }
                self.progress = p;
                self.advance(event.clone());
                (true, false, false, "progress")
            }
            _ if self.state != "running" => unchanged("not-running", false),
            Event::Succeed {
                result_ref,
                result_hash,
                ..
            } => {
                self.state = "succeeded";
                self.progress = 100;
                self.result_ref = Some(result_ref.to_string());
                self.result_hash = Some(result_hash.to_string());
                self.error = None; // fix 5
                self.advance(event.clone());
                (true, false, true, "succeeded")
            }
            Event::Fail {
                error, retryable, ..
            } => {
                self.error = Some(error.clone());
                self.advance(event.clone());
                if *retryable && self.attempts < self.max_attempts {
                    self.state = "queued";
                    self.progress = 0;
                    (true, false, false, "requeued")
                } else {
                    self.state = "failed";
                    (true, false, true, "failed")
                }
            }
            _ => unreachable!("only the seed's events are generated"),
        }
    }

    /// The task as the seed's JSON.stringify writes it.
    fn json(&self, id: &str) -> Value {
        // JSON.stringify writes an integral number without a fraction.
        let expires: Value = match self.expires_at_ms.fract() == 0.0 {
            true => (self.expires_at_ms as i64).into(),
            false => self.expires_at_ms.into(),
        };
        let mut v = serde_json::json!({
            "id": id, "state": self.state, "expiresAtMs": expires,
            "attempts": self.attempts, "maxAttempts": self.max_attempts,
            "progress": self.progress, "version": self.version,
        });
        for (k, f) in [
            ("resultRef", &self.result_ref),
            ("resultHash", &self.result_hash),
            ("error", &self.error),
        ] {
            if let Some(s) = f {
                v[k] = Value::from(s.as_str());
            }
        }
        v
    }
}

/// The seed's five events, never with `attempt` or `leaseMs`.
fn seed_event() -> impl Strategy<Value = Event> {
    let at = prop_oneof![9 => 0.0..TTL, 1 => TTL..TTL * 1.5]
        .prop_map(|ms| Millis::new(ms, "atMs").unwrap());
    let hash = prop_oneof![Just("h1"), Just("h2")].prop_map(|h| NonBlank::new(h, "h").unwrap());
    prop_oneof![
        3 => at.clone().prop_map(|at_ms| Event::Start { at_ms, worker: "w".into(), attempt: None, lease_ms: None, plan: None }),
        6 => (at.clone(), 0u8..=100).prop_map(|(at_ms, p)| Event::Progress {
            at_ms, progress: Percent::new(f64::from(p), "p").unwrap(), cursor: "c".into(), attempt: None }),
        1 => (at.clone(), hash).prop_map(|(at_ms, result_hash)| Event::Succeed {
            at_ms, result_ref: NonBlank::new("r", "r").unwrap(), result_hash, attempt: None }),
        2 => (at.clone(), any::<bool>()).prop_map(|(at_ms, retryable)| Event::Fail {
            at_ms, error: "e".into(), retryable, attempt: None }),
        1 => at.prop_map(|at_ms| Event::Expire { at_ms }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn seed_events_behave_exactly_as_in_the_seed(
        max_attempts in 1u64..4,
        events in proptest::collection::vec(seed_event(), 0..60),
    ) {
        let mut core: Task = create_task(&CreateTask::new("t", 0.0, TTL, max_attempts)).unwrap();
        let mut seed = Seed {
            state: "queued", expires_at_ms: TTL, attempts: 0, max_attempts, progress: 0,
            version: 0, result_ref: None, result_hash: None, error: None, history: Vec::new(),
        };
        for event in events {
            let expected = seed.apply(&event);
            let o = core.apply(event.clone());
            prop_assert_eq!((o.changed, o.duplicate, o.notify, o.reason.as_str()), expected, "{:?}", event);
            let actual: Value = serde_json::from_str(&to_json(core.view())).unwrap();
            prop_assert_eq!(&actual, &seed.json("t"), "the task differs from the seed's, or grew a field");
            prop_assert!(core.lease().is_none(), "a seed task holds a lease");
            let history: Vec<&Event> = core.history().iter().map(|e| &e.event).collect();
            prop_assert_eq!(history, seed.history.iter().collect::<Vec<_>>());
        }
        // The full task keeps the seed's shape too: no lease, no new keys.
        let full: Value = serde_json::from_str(&to_json(&core)).unwrap();
        let mut keys: Vec<&str> = full.as_object().unwrap().keys().map(String::as_str).collect();
        keys.retain(|k| !matches!(*k, "resultRef" | "resultHash" | "error"));
        keys.sort_unstable();
        prop_assert_eq!(keys, ["attempts", "expiresAtMs", "history", "id", "maxAttempts", "progress", "state", "version"]);
    }
}
