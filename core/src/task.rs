//! The task record: its current fields ([`TaskView`]) and its history.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::event::Event;
use crate::json::{self, Fields, FromJson, Path, Value};
use crate::value::{self, is_blank, Millis, NonBlank, MAX_SAFE_INTEGER};
use crate::Error;

/// Where a task is in its life. The last three are terminal: a terminal
/// task absorbs every later event as a duplicate or a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Created, or requeued after a retryable failure; waiting for a worker.
    Queued,
    /// A worker is on it and may report progress.
    Running,
    /// Done with a result (`resultRef`, `resultHash`).
    Succeeded,
    /// Failed for good: not retryable, or out of attempts.
    Failed,
    /// The time to live ran out before a result arrived.
    Expired,
}

impl State {
    /// True for `succeeded`, `failed` and `expired`.
    pub const fn is_terminal(self) -> bool {
        matches!(self, State::Succeeded | State::Failed | State::Expired)
    }

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::Expired => "expired",
        }
    }
}

/// A task's current fields, without its history: what a client holds, and
/// what resume answers carry. It stays O(1) in size however long the task
/// runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// Unique id, never blank.
    pub id: String,
    /// Current state.
    pub state: State,
    /// Results are accepted strictly before this time; an event at or
    /// after it expires the task. Fixed at creation.
    pub expires_at_ms: f64,
    /// How many times a worker started the task.
    pub attempts: u64,
    /// How many starts are allowed. Fixed at creation.
    pub max_attempts: u64,
    /// Percent done in the current attempt (100 once succeeded).
    pub progress: u8,
    /// Number of changes so far; every change adds exactly one.
    pub version: u64,
    /// Where the result is, once succeeded.
    pub result_ref: Option<String>,
    /// Content hash of the result, once succeeded.
    pub result_hash: Option<String>,
    /// The last failure's message (cleared by a success).
    pub error: Option<String>,
}

/// One change in a task's life: the version it produced and the event that
/// produced it. Expiry is recorded as `expire` at `expiresAtMs`, whatever
/// event triggered it, so a replay reproduces it exactly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    /// The version after this change.
    pub version: u64,
    /// What happened.
    pub event: Event,
}

/// A task with its full history, as the server (or a [`crate::Book`])
/// keeps it. `history[i].version == i + 1` and `history.len() == version`
/// always hold, which is what makes a resume delta a plain slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    view: TaskView,
    history: Vec<HistoryEntry>,
}

/// What [`create_task`] needs. On the wire:
/// `{"id":"t1","nowMs":0,"ttlMs":3600000,"maxAttempts":3}`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTask {
    /// Task id, not blank.
    pub id: String,
    /// Creation time, finite and ≥ 0.
    pub now_ms: f64,
    /// Time to live, finite and > 0.
    pub ttl_ms: f64,
    /// Allowed starts, an integer ≥ 1.
    pub max_attempts: u64,
}

/// Creates a queued task at version 0 that expires at `nowMs + ttlMs`.
///
/// Unlike the seed, a sum that is not finite (`1e308 + 1e308`) is rejected
/// (fix 11): such a task could never expire.
pub fn create_task(input: &CreateTask) -> Result<Task, Error> {
    if is_blank(&input.id) {
        return Err(Error::invalid("id: must not be blank"));
    }
    Millis::new(input.now_ms, "nowMs")?;
    if !(input.ttl_ms.is_finite() && input.ttl_ms > 0.0) {
        return Err(Error::invalid(format!(
            "ttlMs: must be a finite number > 0, got {}",
            crate::value::number(input.ttl_ms)
        )));
    }
    if !(1..=MAX_SAFE_INTEGER).contains(&input.max_attempts) {
        return Err(Error::invalid(format!(
            "maxAttempts: must be an integer from 1 to {MAX_SAFE_INTEGER}, got {}",
            input.max_attempts
        )));
    }
    let expires_at_ms = input.now_ms + input.ttl_ms;
    if !expires_at_ms.is_finite() {
        return Err(Error::invalid(
            "ttlMs: nowMs + ttlMs must be a finite number",
        ));
    }
    Ok(Task {
        view: TaskView {
            id: input.id.clone(),
            state: State::Queued,
            expires_at_ms,
            attempts: 0,
            max_attempts: input.max_attempts,
            progress: 0,
            version: 0,
            result_ref: None,
            result_hash: None,
            error: None,
        },
        history: Vec::new(),
    })
}

impl Task {
    /// The current fields.
    pub fn view(&self) -> &TaskView {
        &self.view
    }

    /// Every change so far, oldest first.
    pub fn history(&self) -> &[HistoryEntry] {
        &self.history
    }

    /// The changes after version `cursor`, as a slice: O(1) to find, O(k)
    /// to copy.
    pub fn history_after(&self, cursor: u64) -> &[HistoryEntry] {
        let start = usize::try_from(cursor).unwrap_or(usize::MAX);
        self.history.get(start..).unwrap_or(&[])
    }

    /// Splits the task into its fields and its history.
    pub fn into_parts(self) -> (TaskView, Vec<HistoryEntry>) {
        (self.view, self.history)
    }

    pub(crate) fn view_mut(&mut self) -> &mut TaskView {
        &mut self.view
    }

    /// Appends the entry for the version the view now has.
    pub(crate) fn record(&mut self, event: Event) {
        self.history.push(HistoryEntry {
            version: self.view.version,
            event,
        });
    }
}

impl std::ops::Deref for Task {
    type Target = TaskView;
    fn deref(&self) -> &TaskView {
        &self.view
    }
}

impl TaskView {
    /// Writes the fields shared by [`TaskView`] and [`Task`]; absent
    /// optional fields are left out, as `JSON.stringify` leaves out
    /// `undefined`.
    fn write_fields<S: SerializeStruct>(&self, s: &mut S) -> Result<(), S::Error> {
        s.serialize_field("id", &self.id)?;
        s.serialize_field("state", &self.state)?;
        s.serialize_field("expiresAtMs", &Ms(self.expires_at_ms))?;
        s.serialize_field("attempts", &self.attempts)?;
        s.serialize_field("maxAttempts", &self.max_attempts)?;
        s.serialize_field("progress", &self.progress)?;
        s.serialize_field("version", &self.version)?;
        for (name, value) in [
            ("resultRef", &self.result_ref),
            ("resultHash", &self.result_hash),
            ("error", &self.error),
        ] {
            match value {
                Some(v) => s.serialize_field(name, v)?,
                None => s.skip_field(name)?,
            }
        }
        Ok(())
    }
}

/// f64 milliseconds, encoded as [`value::ms`] does.
struct Ms(f64);

impl Serialize for Ms {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        value::ms::serialize(&self.0, s)
    }
}

impl Serialize for TaskView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TaskView", 10)?;
        self.write_fields(&mut st)?;
        st.end()
    }
}

impl Serialize for Task {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Task", 11)?;
        self.view.write_fields(&mut st)?;
        st.serialize_field("history", &self.history)?;
        st.end()
    }
}

impl FromJson for State {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        use State::*;
        json::variant(
            value,
            at,
            &[
                ("queued", Queued),
                ("running", Running),
                ("succeeded", Succeeded),
                ("failed", Failed),
                ("expired", Expired),
            ],
        )
    }
}

impl FromJson for TaskView {
    /// Reads the fields and checks what the state machine guarantees of
    /// every task it produces, so that a foreign or corrupted task cannot
    /// start out impossible. A `history` field, if any, is ignored.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let id: NonBlank = f.req("id")?;
        let expires_at_ms: f64 = f.req("expiresAtMs")?;
        let progress: value::Percent = f.req("progress")?;
        let view = TaskView {
            id: id.into_string(),
            state: f.req("state")?,
            expires_at_ms,
            attempts: f.req("attempts")?,
            max_attempts: f.req("maxAttempts")?,
            progress: progress.get(),
            version: f.req("version")?,
            result_ref: f.get("resultRef")?,
            result_hash: f.get("resultHash")?,
            error: f.get("error")?,
        };
        let bad = |field: &str, why: String| Err(f.missing(field, &why));
        if view.expires_at_ms < 0.0 {
            return bad("expiresAtMs", "must be >= 0".into());
        }
        if view.max_attempts == 0 {
            return bad("maxAttempts", "must be >= 1".into());
        }
        if view.attempts > view.max_attempts {
            return bad(
                "attempts",
                format!(
                    "{} exceeds maxAttempts {}",
                    view.attempts, view.max_attempts
                ),
            );
        }
        if view.state == State::Succeeded {
            let has = |v: &Option<String>| v.as_deref().is_some_and(|s| !is_blank(s));
            if !has(&view.result_ref) || !has(&view.result_hash) {
                return bad(
                    "resultRef",
                    "a succeeded task needs resultRef and resultHash".into(),
                );
            }
            if view.progress != 100 {
                return bad("progress", "a succeeded task is at 100".into());
            }
        }
        Ok(view)
    }
}

impl FromJson for HistoryEntry {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(HistoryEntry {
            version: f.req("version")?,
            event: f.req("event")?,
        })
    }
}

impl FromJson for Task {
    /// A view plus its history, which must be exactly versions
    /// `1..=version`.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let view = TaskView::from_json(value, at)?;
        let f = Fields::of(value, at)?;
        let history: Vec<HistoryEntry> = f
            .get("history")?
            .ok_or_else(|| f.missing("history", "required for a full task"))?;
        if history.len() as u64 != view.version {
            return Err(f.missing(
                "history",
                &format!(
                    "holds {} entries but version is {}",
                    history.len(),
                    view.version
                ),
            ));
        }
        if let Some((i, entry)) = history
            .iter()
            .enumerate()
            .find(|(i, entry)| entry.version != *i as u64 + 1)
        {
            let list = Path::Key(&at, "history");
            return Err(json::invalid(
                format!("expected {}, got {}", i + 1, entry.version),
                Path::Key(&Path::Index(&list, i), "version"),
            ));
        }
        Ok(Task { view, history })
    }
}

impl FromJson for CreateTask {
    /// Only the types are checked here; [`create_task`] checks the values.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(CreateTask {
            id: f.req("id")?,
            now_ms: f.req("nowMs")?,
            ttl_ms: f.req("ttlMs")?,
            max_attempts: f.req("maxAttempts")?,
        })
    }
}

json::impl_deserialize!(State, TaskView, HistoryEntry, Task, CreateTask);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{from_json, to_json};
    use crate::ErrorCode;

    fn input(id: &str, now_ms: f64, ttl_ms: f64, max_attempts: u64) -> CreateTask {
        CreateTask {
            id: id.into(),
            now_ms,
            ttl_ms,
            max_attempts,
        }
    }

    #[test]
    fn creates_a_queued_task_at_version_zero() {
        let task = create_task(&input("t1", 0.0, 3_600_000.0, 3)).unwrap();
        assert_eq!(
            to_json(&task),
            r#"{"id":"t1","state":"queued","expiresAtMs":3600000,"attempts":0,"maxAttempts":3,"progress":0,"version":0,"history":[]}"#
        );
        assert_eq!(
            to_json(task.view()),
            r#"{"id":"t1","state":"queued","expiresAtMs":3600000,"attempts":0,"maxAttempts":3,"progress":0,"version":0}"#
        );
    }

    #[test]
    fn every_create_error_names_its_field() {
        let cases = [
            (input(" \u{FEFF}", 0.0, 1.0, 1), "id:"),
            (input("t", -1.0, 1.0, 1), "nowMs:"),
            (input("t", f64::NAN, 1.0, 1), "nowMs:"),
            (input("t", 0.0, 0.0, 1), "ttlMs:"),
            (input("t", 0.0, f64::INFINITY, 1), "ttlMs:"),
            (input("t", 0.0, 1.0, 0), "maxAttempts:"),
            (input("t", 0.0, 1.0, MAX_SAFE_INTEGER + 1), "maxAttempts:"),
            (input("t", f64::MAX, f64::MAX, 1), "ttlMs:"),
        ];
        for (bad, field) in cases {
            let err = create_task(&bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest);
            assert!(err.message.starts_with(field), "{}", err.message);
        }
    }

    #[test]
    fn create_input_from_json_rejects_fractional_attempts() {
        let err = from_json::<CreateTask>(
            r#"{"id":"t","nowMs":0,"ttlMs":1,"maxAttempts":2.5}"#,
            "input",
        )
        .unwrap_err();
        assert!(
            err.message.starts_with("input.maxAttempts:"),
            "{}",
            err.message
        );
        let ok: CreateTask = from_json(
            r#"{"id":"t","nowMs":0,"ttlMs":1,"maxAttempts":2.0}"#,
            "input",
        )
        .unwrap();
        assert_eq!(ok.max_attempts, 2);
    }

    #[test]
    fn a_task_round_trips_and_checks_its_history() {
        let json = r#"{"id":"t","state":"running","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":0,"version":1,"history":[{"version":1,"event":{"type":"start","atMs":1,"worker":"w"}}]}"#;
        let task: Task = from_json(json, "task").unwrap();
        assert_eq!(to_json(&task), json);

        let gap = json.replace(r#""version":1,"event""#, r#""version":2,"event""#);
        let err = from_json::<Task>(&gap, "task").unwrap_err();
        assert_eq!(err.message, "task.history[0].version: expected 1, got 2");

        let short = json.replace(r#""version":1,"history""#, r#""version":2,"history""#);
        let err = from_json::<Task>(&short, "task").unwrap_err();
        assert_eq!(
            err.message,
            "task.history: holds 1 entries but version is 2"
        );
    }

    #[test]
    fn a_view_ignores_history_and_checks_invariants() {
        let view: TaskView = from_json(
            r#"{"id":"t","state":"queued","expiresAtMs":10,"attempts":0,"maxAttempts":1,"progress":0,"version":3,"history":"junk"}"#,
            "task",
        )
        .unwrap();
        assert_eq!(view.version, 3);

        for (json, prefix) in [
            (
                r#"{"id":"t","state":"running","expiresAtMs":10,"attempts":2,"maxAttempts":1,"progress":0,"version":3}"#,
                "task.attempts:",
            ),
            (
                r#"{"id":"t","state":"succeeded","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":100,"version":3}"#,
                "task.resultRef:",
            ),
            (
                r#"{"id":"t","state":"done","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":100,"version":3}"#,
                "task.state:",
            ),
            (
                r#"{"id":"t","state":"queued","expiresAtMs":10,"attempts":0,"maxAttempts":1,"progress":0,"version":3.5}"#,
                "task.version:",
            ),
            (
                r#"{"id":"","state":"queued","expiresAtMs":10,"attempts":0,"maxAttempts":1,"progress":0,"version":3}"#,
                "task.id:",
            ),
        ] {
            let err = from_json::<TaskView>(json, "task").unwrap_err();
            assert!(err.message.starts_with(prefix), "{}", err.message);
        }
    }

    #[test]
    fn history_after_is_a_safe_slice() {
        let task = create_task(&input("t", 0.0, 1.0, 1)).unwrap();
        assert!(task.history_after(0).is_empty());
        assert!(task.history_after(u64::MAX).is_empty());
    }
}
