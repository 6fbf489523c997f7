//! Event builders for the unit tests.

use crate::event::{DecisionKind, Event};
use crate::value::{Millis, NonBlank, Percent};

pub(crate) fn at(ms: f64) -> Millis {
    Millis::new(ms, "atMs").unwrap()
}

fn text(s: &str) -> NonBlank {
    NonBlank::new(s, "s").unwrap()
}

pub(crate) fn start(ms: f64, attempt: Option<u64>, lease_ms: Option<f64>) -> Event {
    Event::Start {
        at_ms: at(ms),
        worker: "w".into(),
        attempt,
        lease_ms: lease_ms.map(at),
        #[cfg(feature = "steps")]
        plan: None,
    }
}

pub(crate) fn heartbeat(ms: f64, attempt: Option<u64>, lease_ms: Option<f64>) -> Event {
    Event::Heartbeat {
        at_ms: at(ms),
        attempt,
        lease_ms: lease_ms.map(at),
    }
}

pub(crate) fn progress(ms: f64, p: u8, attempt: Option<u64>) -> Event {
    Event::Progress {
        at_ms: at(ms),
        progress: Percent::new(f64::from(p), "p").unwrap(),
        cursor: String::new(),
        attempt,
    }
}

pub(crate) fn succeed(ms: f64, hash: &str, attempt: Option<u64>) -> Event {
    Event::Succeed {
        at_ms: at(ms),
        result_ref: text("r"),
        result_hash: text(hash),
        attempt,
    }
}

pub(crate) fn fail(ms: f64, retryable: bool, attempt: Option<u64>) -> Event {
    Event::Fail {
        at_ms: at(ms),
        error: "e".into(),
        retryable,
        attempt,
    }
}

pub(crate) fn hold(ms: f64, hash: &str, attempt: Option<u64>) -> Event {
    Event::Hold {
        at_ms: at(ms),
        artifact_ref: text("draft"),
        artifact_hash: text(hash),
        question: None,
        attempt,
    }
}

pub(crate) fn cancel(ms: f64) -> Event {
    Event::Cancel {
        at_ms: at(ms),
        reason: None,
        actor: Some(text("user:ann")),
    }
}

pub(crate) fn decide(ms: f64, decision: DecisionKind, hash: &str, version: u64) -> Event {
    Event::Decide {
        at_ms: at(ms),
        decision,
        artifact_hash: text(hash),
        version,
        reason: None,
        actor: None,
    }
}

pub(crate) fn lapse(ms: f64, attempt: Option<u64>) -> Event {
    Event::Lapse {
        at_ms: at(ms),
        attempt,
    }
}
