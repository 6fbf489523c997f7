//! How both stores remember a callback id without storing its event a
//! second time.
//!
//! Core remembers a `webhook-id` only when its event changed the task
//! (fix 1), so every remembered id produced exactly one history entry.
//! That entry usually holds the very event the callback carried: the row
//! in `callbacks` then names its `version` and stores no event. The one
//! exception is an event that expired its task (it arrived at or after
//! `expiresAtMs`): the history records `expire` instead, so the row keeps
//! the callback's own event. Reading joins the two, and a repeated id is
//! judged (`check_callback`) against exactly the event it first carried.

use taskwire_core::{Event, HistoryEntry};
use taskwire_wire::{from_json, to_json};

use super::StoreError;

/// The `callbacks` columns for one remembered id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackRef {
    /// `callbacks.version`: the history entry holding the event.
    pub version: Option<i64>,
    /// `callbacks.event`: the event, when the history holds another one.
    pub event: Option<String>,
}

impl CallbackRef {
    /// The row for a callback carrying `event` whose change wrote `entry`.
    pub fn of(event: &Event, entry: &HistoryEntry) -> Self {
        if entry.event == *event {
            CallbackRef {
                version: Some(i64::try_from(entry.version).unwrap_or(i64::MAX)),
                event: None,
            }
        } else {
            CallbackRef {
                version: None,
                event: Some(to_json(event)),
            }
        }
    }
}

/// Parses what `coalesce(callbacks.event, history.event)` read for a
/// remembered id. `None` there means the row names a history entry that
/// does not exist: the database was damaged, and guessing would break
/// exactly-once, so it is an error.
pub fn remembered_event(
    text: Option<String>,
    task_id: &str,
    callback_id: &str,
) -> Result<Event, StoreError> {
    let text = text.ok_or_else(|| {
        StoreError::Internal(format!(
            "callbacks row ({task_id}, {callback_id}) names a missing history entry"
        ))
    })?;
    from_json::<Event>(&text, "callbacks.event")
        .map_err(|e| StoreError::Internal(format!("stored row does not parse: {}", e.message)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_core::Millis;

    fn start(at: f64) -> Event {
        Event::Start {
            at_ms: Millis::new(at, "atMs").unwrap(),
            worker: "w".into(),
            attempt: None,
            lease_ms: None,
            plan: None,
        }
    }

    #[test]
    fn an_event_the_history_holds_is_a_reference_and_any_other_is_kept() {
        let entry = HistoryEntry {
            version: 3,
            event: start(1.0),
        };
        assert_eq!(
            CallbackRef::of(&start(1.0), &entry),
            CallbackRef {
                version: Some(3),
                event: None
            }
        );
        // An expiry is recorded as `expire`: the callback's event is kept.
        let expired = HistoryEntry {
            version: 3,
            event: Event::Expire {
                at_ms: Millis::new(5.0, "atMs").unwrap(),
            },
        };
        let kept = CallbackRef::of(&start(9.0), &expired);
        assert_eq!(kept.version, None);
        assert_eq!(remembered_event(kept.event, "t", "c").unwrap(), start(9.0));
        assert!(matches!(
            remembered_event(None, "t", "c"),
            Err(StoreError::Internal(m)) if m.contains("missing history entry")
        ));
    }
}
