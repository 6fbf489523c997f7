//! Result delivery, idempotent by key: the same key gets the same receipt.

use alloc::{string::String, string::ToString};
use serde::Serialize;

use crate::json::{self, Fields, FromJson, Path, Value};
use crate::task::{State, TaskView};
use crate::value::{Millis, NonBlank};
use crate::Error;

/// Proof that a task's result was handed over under an idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The task whose result was delivered.
    pub task_id: String,
    /// Where the result is.
    pub result_ref: String,
    /// The result's content hash.
    pub result_hash: String,
    /// The key the delivery was made under.
    pub idempotency_key: String,
    /// When the first delivery under this key happened.
    #[serde(serialize_with = "crate::value::ms::serialize")]
    pub delivered_at_ms: f64,
}

impl FromJson for Receipt {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(Receipt {
            task_id: f.req("taskId")?,
            result_ref: f.req("resultRef")?,
            result_hash: f.req("resultHash")?,
            idempotency_key: f.req("idempotencyKey")?,
            delivered_at_ms: f.req("deliveredAtMs")?,
        })
    }
}

json::impl_deserialize!(Receipt);

/// Why a delivery did or did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryReason {
    /// First delivery under this key: a new receipt.
    Delivered,
    /// The key was used for this task before: the same receipt again.
    DuplicateDelivery,
    /// The key was used for another task: refused, and that task's receipt
    /// is not revealed (fix 9).
    KeyReusedForOtherTask,
    /// The task has no result yet (or never will).
    NotSucceeded,
}

impl DeliveryReason {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryReason::Delivered => "delivered",
            DeliveryReason::DuplicateDelivery => "duplicate-delivery",
            DeliveryReason::KeyReusedForOtherTask => "key-reused-for-other-task",
            DeliveryReason::NotSucceeded => "not-succeeded",
        }
    }
}

/// The answer to a delivery request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// A receipt is in hand.
    pub ok: bool,
    /// The key was seen before.
    pub duplicate: bool,
    /// Why.
    pub reason: DeliveryReason,
    /// The receipt, for `delivered` and `duplicate-delivery` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
}

/// Checks a delivery request's own fields, in the seed's order.
pub fn check_delivery_input(key: &str, now_ms: f64) -> Result<(NonBlank, Millis), Error> {
    Ok((
        NonBlank::new(key, "idempotencyKey")?,
        Millis::new(now_ms, "nowMs")?,
    ))
}

/// Decides a delivery. `existing` is the receipt already stored under the
/// key, if any; `task` is the task, if it exists. The caller stores the
/// receipt when the reason is `delivered`.
///
/// As in the seed, a known key is judged before the task is looked up.
pub fn decide_delivery(
    existing: Option<&Receipt>,
    task_id: &str,
    task: Option<&TaskView>,
    key: &NonBlank,
    now: Millis,
) -> Result<Delivery, Error> {
    if let Some(existing) = existing {
        return Ok(if existing.task_id == task_id {
            Delivery {
                ok: true,
                duplicate: true,
                reason: DeliveryReason::DuplicateDelivery,
                receipt: Some(existing.clone()),
            }
        } else {
            Delivery {
                ok: false,
                duplicate: true,
                reason: DeliveryReason::KeyReusedForOtherTask,
                receipt: None,
            }
        });
    }
    let task = task.ok_or_else(|| Error::not_found(task_id))?;
    match (task.state, &task.result_ref, &task.result_hash) {
        (State::Succeeded, Some(result_ref), Some(result_hash)) => Ok(Delivery {
            ok: true,
            duplicate: false,
            reason: DeliveryReason::Delivered,
            receipt: Some(Receipt {
                task_id: task_id.to_string(),
                result_ref: result_ref.clone(),
                result_hash: result_hash.clone(),
                idempotency_key: key.to_string(),
                delivered_at_ms: now.get(),
            }),
        }),
        _ => Ok(Delivery {
            ok: false,
            duplicate: false,
            reason: DeliveryReason::NotSucceeded,
            receipt: None,
        }),
    }
}
