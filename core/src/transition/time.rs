//! Rule 3: the two clocks, kept apart.
//!
//! The TTL (`expiresAtMs`) is the deadline for delivering a result, as in
//! the seed: past it a result is worthless and the task `expired`. The
//! execution deadline (`deadlineAtMs`, optional) bounds the work itself:
//! past it the task is `timed_out`, and the remote work may still be
//! running (002 `timed_out`, 004 `TRACKING_TIMED_OUT`). Both are judged
//! on the event's time before anything else, so the outcome never depends
//! on when a sweeper happened to run; both are recorded at their own time,
//! so a replay reproduces them.

use super::{Outcome, Reason, Recorded};
use crate::event::Event;
use crate::task::{State, TaskView};
use crate::value::Millis;

impl TaskView {
    /// Whether `event` ends the task in time on a live task, and how it
    /// is recorded. When both clocks have run out, the earlier wins; a
    /// tie goes to the TTL.
    pub(crate) fn time_rule(&self, event: &Event) -> Option<Recorded> {
        let is_expire = matches!(event, Event::Expire { .. });
        // An `expire` says the TTL ran out (the seed applies it whatever
        // its time), so it is judged when it is recorded: at expiresAtMs
        // or later. Otherwise its replay could judge the deadline
        // differently from the original.
        let at = match is_expire {
            true => event.at_ms().get().max(self.expires_at_ms),
            false => event.at_ms().get(),
        };
        let ttl = is_expire || at >= self.expires_at_ms;
        match self.deadline_at_ms.filter(|deadline| at >= *deadline) {
            Some(deadline) if !ttl || deadline < self.expires_at_ms => Some(Recorded::Timeout),
            _ if ttl => Some(Recorded::Expiry),
            _ => None,
        }
    }

    /// Ends a live task as `recorded` says.
    pub(super) fn end_in_time(&mut self, recorded: Recorded) -> Outcome {
        let (state, reason) = match recorded {
            Recorded::Timeout => (State::TimedOut, Reason::TimedOut),
            _ => (State::Expired, Reason::Expired),
        };
        self.state = state;
        Outcome::changed(reason, true)
    }

    /// The event the history records for an expiry.
    pub fn expiry_event(&self) -> Event {
        Event::Expire {
            // expiresAtMs is finite and ≥ 0 for every task that passed
            // create_task or parsing; a hand-built view gets 0 instead of
            // a panic.
            at_ms: Millis::new(self.expires_at_ms, "expiresAtMs").unwrap_or_default(),
        }
    }

    /// The event the history records for a passed execution deadline.
    pub fn timeout_event(&self) -> Event {
        Event::Timeout {
            at_ms: self
                .deadline_at_ms
                .and_then(|d| Millis::new(d, "deadlineAtMs").ok())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::task::{create_task, CreateTask, State};
    use crate::transition::Reason;
    use crate::{Event, Millis, Task};

    fn task(ttl: f64, deadline: Option<f64>) -> Task {
        let mut input = CreateTask::new("t", 0.0, ttl, 1);
        input.deadline_ms = deadline;
        create_task(&input).unwrap()
    }

    fn cancel_at(ms: f64) -> Event {
        Event::Cancel {
            at_ms: Millis::new(ms, "a").unwrap(),
            reason: None,
            actor: None,
        }
    }

    #[test]
    fn the_earlier_clock_wins_and_is_recorded_at_its_own_time() {
        // Deadline first: any late event times the task out, at 50.
        let mut t = task(100.0, Some(50.0));
        assert_eq!(t.apply(cancel_at(200.0)).reason, Reason::TimedOut);
        assert_eq!(t.state, State::TimedOut);
        assert_eq!(t.history()[0].event, t.timeout_event());
        assert_eq!(t.history()[0].event.at_ms().get(), 50.0);
        // TTL first: expired, at 100.
        let mut t = task(100.0, Some(150.0));
        assert_eq!(t.apply(cancel_at(200.0)).reason, Reason::Expired);
        assert_eq!(t.history()[0].event, t.expiry_event());
        // A tie goes to the TTL (the seed's rule).
        let mut t = task(100.0, Some(100.0));
        assert_eq!(t.apply(cancel_at(100.0)).reason, Reason::Expired);
        // Before both: the event's own rule.
        let mut t = task(100.0, Some(50.0));
        assert_eq!(t.apply(cancel_at(49.0)).reason, Reason::Cancelled);
    }

    #[test]
    fn a_timeout_before_the_deadline_or_without_one_is_not_due() {
        let timeout = |ms: f64| Event::Timeout {
            at_ms: Millis::new(ms, "a").unwrap(),
        };
        let mut t = task(100.0, Some(50.0));
        assert_eq!(t.apply(timeout(10.0)).reason, Reason::NotDue);
        assert_eq!(t.version, 0);
        let mut t = task(100.0, None);
        assert_eq!(t.apply(timeout(90.0)).reason, Reason::NotDue);
        // An expire is the seed's: unconditional, but a deadline that
        // passed earlier still comes first, even for an early expire (it
        // says the TTL ran out, so the deadline has too).
        let mut early = task(100.0, Some(50.0));
        let expire_at_10 = Event::Expire {
            at_ms: Millis::new(10.0, "a").unwrap(),
        };
        assert_eq!(early.apply(expire_at_10).reason, Reason::TimedOut);
        let mut replayed = early.initial();
        assert!(replayed.apply(&early.history()[0].event).changed);
        assert_eq!(&replayed, early.view());
        let mut t = task(100.0, Some(50.0));
        let expire = Event::Expire {
            at_ms: Millis::new(60.0, "a").unwrap(),
        };
        assert_eq!(t.apply(expire).reason, Reason::TimedOut);
        assert_eq!(t.apply(timeout(70.0)).reason, Reason::DuplicateTimeout);
    }
}
