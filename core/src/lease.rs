//! The worker's lease: operational state, deliberately not versioned.
//!
//! A lease says until when the current attempt counts as alive. It is
//! opened by a `start` that carries `leaseMs`, extended by every
//! `heartbeat` and `progress` of that attempt, and ends with the attempt.
//!
//! Why it is not a field of [`crate::TaskView`]: a heartbeat every 10 s
//! for an hour would otherwise be 360 versions and 360 history entries,
//! and every client would see a "change" that changes nothing it shows.
//! Seed 003 draws the same line: the execution state (what the page sees)
//! and the operational state (is the worker online, its lease) are
//! separate layers. So the lease lives next to the task: a store keeps it
//! in its own column, [`crate::Task`] and [`crate::Book`] keep it beside
//! the view, and a transition reports what to write as a
//! [`LeaseChange`], independently of its history entry:
//!
//! | step says | store writes |
//! |---|---|
//! | `entry: Some(..)` | the view and the entry (one version) |
//! | `lease: Set(..)` | the lease column only, no version, no entry |
//! | both | both, in one transaction |
//!
//! What the page must see is versioned: `running → unknown` when the lease
//! lapses (a `lapse` entry) and `unknown → running` when the attempt
//! reports again.

use serde::Serialize;

use crate::json::{self, Fields, FromJson, Path, Value};
use crate::value::Millis;

/// The current attempt's lease. On the wire:
/// `{"attempt":2,"expiresAtMs":41000,"leaseMs":30000}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The attempt that holds it; a lease of an older attempt is inert.
    pub attempt: u64,
    /// The attempt counts as alive strictly before this time.
    pub expires_at_ms: Millis,
    /// How far each report extends it (from the `leaseMs` last given).
    pub lease_ms: Millis,
}

impl Lease {
    /// The lease of `attempt` extended by a report at `at_ms`, for
    /// `lease_ms` (or this lease's own length): it never shrinks, so a
    /// late, reordered heartbeat cannot shorten it.
    pub(crate) fn extended(
        current: Option<&Lease>,
        attempt: u64,
        at_ms: Millis,
        lease_ms: Option<Millis>,
    ) -> Option<Lease> {
        let same = current.filter(|l| l.attempt == attempt);
        let lease_ms = lease_ms.or(same.map(|l| l.lease_ms))?;
        // Finite + finite: a large sum still compares correctly; a sum
        // that overflows is clamped to the largest finite time.
        let until = (at_ms.get() + lease_ms.get()).min(f64::MAX);
        let until = same.map_or(until, |l| until.max(l.expires_at_ms.get()));
        Some(Lease {
            attempt,
            expires_at_ms: Millis::new(until, "expiresAtMs").unwrap_or(at_ms),
            lease_ms,
        })
    }
}

/// What a transition did to the lease, for the store to write. `Keep`
/// writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LeaseChange {
    /// Leave the stored lease as it is.
    #[default]
    Keep,
    /// Store this lease (opened or renewed).
    Set(Lease),
    /// Remove the lease: the attempt ended.
    Clear,
}

impl LeaseChange {
    /// The change from `before` to `after`.
    pub(crate) fn between(before: Option<&Lease>, after: Option<Lease>) -> Self {
        match (before, after) {
            (b, Some(a)) if b != Some(&a) => LeaseChange::Set(a),
            (Some(_), None) => LeaseChange::Clear,
            _ => LeaseChange::Keep,
        }
    }

    /// Applies the change to a stored lease.
    pub fn apply_to(self, lease: &mut Option<Lease>) {
        match self {
            LeaseChange::Keep => {}
            LeaseChange::Set(l) => *lease = Some(l),
            LeaseChange::Clear => *lease = None,
        }
    }

    /// True unless `Keep`.
    pub const fn is_write(self) -> bool {
        !matches!(self, LeaseChange::Keep)
    }
}

impl FromJson for Lease {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let lease_ms: Millis = f.req("leaseMs")?;
        if lease_ms.get() <= 0.0 {
            return Err(f.missing("leaseMs", "must be a finite number > 0"));
        }
        Ok(Lease {
            attempt: f.req("attempt")?,
            expires_at_ms: f.req("expiresAtMs")?,
            lease_ms,
        })
    }
}

json::impl_deserialize!(Lease);

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Millis {
        Millis::new(v, "t").unwrap()
    }

    #[test]
    fn a_lease_only_grows_and_belongs_to_its_attempt() {
        let opened = Lease::extended(None, 1, ms(10.0), Some(ms(100.0))).unwrap();
        assert_eq!(opened.expires_at_ms, ms(110.0));
        // A reordered, older heartbeat does not shorten it.
        let late = Lease::extended(Some(&opened), 1, ms(5.0), None).unwrap();
        assert_eq!(late, opened);
        let renewed = Lease::extended(Some(&opened), 1, ms(50.0), None).unwrap();
        assert_eq!(renewed.expires_at_ms, ms(150.0));
        // Another attempt's lease is no base: without leaseMs, nothing.
        assert_eq!(Lease::extended(Some(&opened), 2, ms(50.0), None), None);
        // Huge values stay finite.
        let far = Lease::extended(None, 1, ms(f64::MAX), Some(ms(f64::MAX))).unwrap();
        assert!(far.expires_at_ms.get().is_finite());
    }

    #[test]
    fn changes_say_what_to_write() {
        let l = Lease::extended(None, 1, ms(0.0), Some(ms(1.0))).unwrap();
        assert_eq!(LeaseChange::between(None, None), LeaseChange::Keep);
        assert_eq!(LeaseChange::between(Some(&l), Some(l)), LeaseChange::Keep);
        assert_eq!(LeaseChange::between(None, Some(l)), LeaseChange::Set(l));
        assert_eq!(LeaseChange::between(Some(&l), None), LeaseChange::Clear);
        let mut stored = None;
        LeaseChange::Set(l).apply_to(&mut stored);
        assert_eq!(stored, Some(l));
        LeaseChange::Clear.apply_to(&mut stored);
        assert_eq!(stored, None);
    }

    #[test]
    fn the_wire_form_names_bad_fields() {
        use crate::json::testing::{from_json, to_json};
        let json = r#"{"attempt":2,"expiresAtMs":41000,"leaseMs":30000}"#;
        let lease: Lease = from_json(json, "lease").unwrap();
        assert_eq!(to_json(&lease), json);
        let err = from_json::<Lease>(r#"{"attempt":2,"expiresAtMs":1,"leaseMs":0}"#, "lease")
            .unwrap_err();
        assert_eq!(err.message, "lease.leaseMs: must be a finite number > 0");
        let err = from_json::<Lease>(r#"{"attempt":-1,"expiresAtMs":1,"leaseMs":1}"#, "lease")
            .unwrap_err();
        assert!(err.message.starts_with("lease.attempt:"), "{}", err.message);
    }
}
