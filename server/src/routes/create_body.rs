//! The body of a create (PROTOCOL.md, "Create a task"), read and checked:
//! by `POST /v1/tasks` for its body, and by `POST /v1/batches` for each
//! item. Errors name their field under the body's own name (`body`, or
//! `body.items[3]`).

use serde::de::IgnoredAny;
use serde::Deserialize;
use taskwire_wire::from_json_serde_bytes;

use super::legacy_request::legacy_request;
use crate::error::ApiError;
use crate::store::EXACT_REQUEST;
use taskwire_wire::exact::{self, RawJson};

/// The create body. Unknown fields are ignored (PROTOCOL.md).
///
/// Read by taskwire-wire for the checks and their errors; `input` is then
/// taken from the body as text (see [`exact_body`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    ttl_ms: f64,
    /// A counter: checked to be a safe integer below.
    max_attempts: f64,
    kind: Option<String>,
    /// Skipped here (its text is taken as sent), but declared so that a
    /// second `input` is refused like any repeated field.
    #[serde(rename = "input")]
    _input: Option<IgnoredAny>,
    deadline_ms: Option<f64>,
    unknown_grace_ms: Option<f64>,
    auto_requeue: Option<bool>,
    workflow_version: Option<String>,
    steps: Option<Vec<String>>,
    budget: Option<taskwire_core::ledger::Budget>,
}

/// The optional lifecycle fields of a create (PROTOCOL.md, "Create a
/// task"); core validates them.
#[derive(Debug, Default, Clone)]
pub struct LifecycleOptions {
    /// Execution deadline from creation: past it the task is `timed_out`.
    pub deadline_ms: Option<f64>,
    /// Grace period of an `unknown` task (else the server's default).
    pub unknown_grace_ms: Option<f64>,
    /// `false`: an `unknown` task is never re-queued automatically.
    pub auto_requeue: Option<bool>,
    /// The plan's workflow version, with `steps` (PROTOCOL.md §Steps).
    pub workflow_version: Option<String>,
    /// The plan's step names, in order.
    pub steps: Option<Vec<String>>,
    /// What the task may spend (PROTOCOL.md §Budgets and side effects).
    pub budget: Option<taskwire_core::ledger::Budget>,
}

/// A create body, read and checked (PROTOCOL.md, "Create a task"): what
/// [`create_for`] takes, and the request's forms an `Idempotency-Key`
/// compares. A batch reads each of its items with it.
pub struct ParsedCreate {
    pub ttl_ms: f64,
    pub max_attempts: u64,
    pub lifecycle: LifecycleOptions,
    pub kind: Option<String>,
    pub input: Option<RawJson>,
    /// The exact canonical form (see [`exact_body`]).
    pub request: String,
    /// The form earlier servers compared (numbers as doubles).
    pub legacy_request: String,
}

/// Reads one create body; errors name their field under `field` (`body`,
/// or `body.items[3]` for an item of a batch).
pub fn parse_create(raw: &[u8], field: &str) -> Result<ParsedCreate, ApiError> {
    let req: CreateBody = from_json_serde_bytes(raw, field)?;
    let max_attempts = taskwire_core::value::to_safe_u64(req.max_attempts).ok_or_else(|| {
        taskwire_core::Error::invalid(format!(
            "{field}.maxAttempts: must be an integer from 0 to {}, got {}",
            taskwire_core::MAX_SAFE_INTEGER,
            taskwire_core::value::number(req.max_attempts)
        ))
    })?;
    // taskwire-wire accepted the body, so it is UTF-8 JSON.
    let text =
        std::str::from_utf8(raw).map_err(|_| ApiError::invalid(format!("{field}: not UTF-8")))?;
    let exact = exact_body(text, field)?;
    // Earlier servers compared bodies as parsed trees: numbers as
    // doubles, `null` kind or input as absent.
    let legacy_request = legacy_request(
        req.ttl_ms,
        max_attempts,
        req.kind.as_deref(),
        exact.input.as_ref().map(RawJson::as_str),
    )
    .map_err(|e| ApiError::invalid(format!("{field}.input: {e}")))?;
    Ok(ParsedCreate {
        ttl_ms: req.ttl_ms,
        max_attempts,
        lifecycle: LifecycleOptions {
            deadline_ms: req.deadline_ms,
            unknown_grace_ms: req.unknown_grace_ms,
            auto_requeue: req.auto_requeue,
            workflow_version: req.workflow_version,
            steps: req.steps,
            budget: req.budget,
        },
        kind: req.kind,
        input: exact.input,
        request: exact.request,
        legacy_request,
    })
}

/// What the create body says exactly: `input` as sent, and the request
/// in the canonical form that replays under one key are compared in.
struct ExactBody {
    input: Option<RawJson>,
    request: String,
}

/// Reads `ttlMs`, `maxAttempts`, `kind` and `input` from the body text.
/// Two bodies are the same request when these four are equal JSON values
/// with numbers compared exactly (PROTOCOL.md, "Create a task"); a `null`
/// `kind` or `input` is the same as none, and other fields do not count.
fn exact_body(text: &str, field: &str) -> Result<ExactBody, ApiError> {
    let members = exact::members(text).map_err(|e| ApiError::invalid(format!("{field}: {e}")))?;
    // taskwire-wire already refused duplicates of these four (serde's
    // derive does); `rev` keeps to JSON.parse's last-wins all the same.
    let member = |name: &str| {
        members
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
            .filter(|v| *v != "null")
    };
    let mut request = String::from(EXACT_REQUEST);
    for name in ["input", "kind", "maxAttempts", "ttlMs"] {
        let canonical = match member(name) {
            Some(v) => exact::canonical(v)
                .map_err(|e| ApiError::invalid(format!("{field}.{name}: {e}")))?,
            None => "null".to_string(),
        };
        request.push_str(&canonical);
        request.push('\n');
    }
    // The lifecycle fields count only when sent, named: a body without
    // them is the same request, in the same form, as before they existed.
    for name in [
        "autoRequeue",
        "deadlineMs",
        "steps",
        "unknownGraceMs",
        "workflowVersion",
    ] {
        if let Some(v) = member(name) {
            let canonical = exact::canonical(v)
                .map_err(|e| ApiError::invalid(format!("{field}.{name}: {e}")))?;
            request.push_str(&format!("{name}={canonical}\n"));
        }
    }
    let input = member("input")
        .map(|v| RawJson::parse(v).map_err(|e| ApiError::invalid(format!("{field}.input: {e}"))))
        .transpose()?;
    Ok(ExactBody { input, request })
}
