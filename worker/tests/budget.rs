//! Budgets and side effects (PROTOCOL.md §Budgets and side effects)
//! against the real server: `Job::spend` reserves before a call and
//! settles after, a call the budget cannot cover is never made, a failed
//! call releases its reservation, `Job::effect` makes a write once across
//! attempts, and `Done::budget_exhausted` ends the task with its partial
//! result.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use common::{spawn, Server};
use serde_json::json;
use taskwire_worker::{Amount, Done, JobError, OverBudget, RetryableError, Usage};

fn tokens(n: u64) -> Amount {
    Amount {
        tokens: n,
        cost_cents: 0,
    }
}

fn used(n: u64) -> Usage {
    Usage {
        tokens: n,
        cost_cents: 1,
        tool_calls: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_within_the_budget_and_an_exhausted_one_ends_the_task_with_its_partial_result() {
    let server = Server::start(&[]);
    let worker = server.worker("w-budget").build().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let made = Arc::clone(&calls);
    worker
        .handle("summarize", move |job| {
            let made = Arc::clone(&made);
            async move {
                // A failing call releases its whole reservation.
                let failed: Result<(), JobError> = job
                    .spend("outline", Some("draft"), tokens(600), || async {
                        Err(RetryableError("model timed out".into()).into())
                    })
                    .await;
                assert!(failed.is_err());
                for part in 0..3 {
                    let spent = job
                        .spend(
                            &format!("part-{part}"),
                            Some("draft"),
                            tokens(400),
                            || async {
                                made.fetch_add(1, Ordering::SeqCst);
                                Ok((part, used(300)))
                            },
                        )
                        .await;
                    match spent {
                        Ok(_) => {}
                        Err(e) => {
                            let refused = e.source().and_then(|s| s.downcast_ref::<OverBudget>());
                            assert_eq!(
                                refused.map(|r| (r.reservation.as_str(), r.reason.as_str())),
                                Some(("1:part-2", "over-budget")),
                                "{e}"
                            );
                            return Ok(Done::budget_exhausted(Some((
                                "blob://partial".into(),
                                "sha256:two-parts".into(),
                            ))));
                        }
                    }
                }
                Ok(Done::result("blob://all", "sha256:all"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server
        .create(
            "summarize",
            json!({}),
            json!({"budget": {"maxTokens": 900}}),
        )
        .await;
    let task = server.wait_state(&id, "failed").await;
    run.abort();
    assert_eq!(
        (&task["error"], &task["resultRef"], &task["resultHash"]),
        (
            &json!("budget-exhausted"),
            &json!("blob://partial"),
            &json!("sha256:two-parts")
        ),
        "{task}"
    );
    // Two calls of 300 were made; the third (400 more on 600 spent, of
    // 900) was not.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        task["used"],
        json!({"tokens": 600, "costCents": 2, "toolCalls": 0})
    );
    let settled: Vec<_> = task["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(
        settled,
        [json!("1:outline"), json!("1:part-0"), json!("1:part-1")]
    );
    // The failed call settled nothing used: its 600 were released.
    assert_eq!(
        task["reservations"][0]["settled"],
        json!({"tokens": 0, "costCents": 0, "toolCalls": 0})
    );
    assert!(
        task.get("reserved").is_none(),
        "nothing is left reserved: {task}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_made_once_across_attempts_and_answered_with_the_first_id() {
    let server = Server::start(&[]);
    let worker = server.worker("w-effects").build().unwrap();
    let writes = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&writes);
    worker
        .handle("publish", move |job| {
            let seen = Arc::clone(&seen);
            async move {
                let key_seen = Arc::new(std::sync::Mutex::new(String::new()));
                let k = Arc::clone(&key_seen);
                let id = job
                    .effect("publish", "post-report", |key| async move {
                        seen.fetch_add(1, Ordering::SeqCst);
                        *k.lock().unwrap() = key;
                        Ok("REP-7".to_string())
                    })
                    .await?;
                assert_eq!(id, "REP-7");
                if job.attempt() == 1 {
                    assert_eq!(*key_seen.lock().unwrap(), job.key("publish", "post-report"));
                    Err(RetryableError("crashed after the write".into()))?;
                }
                Ok(Done::result("blob://r", format!("sha256:{id}")))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server
        .create("publish", json!({}), json!({"maxAttempts": 2}))
        .await;
    let task = server.wait_state(&id, "succeeded").await;
    run.abort();
    assert_eq!(task["attempts"], 2);
    assert_eq!(task["resultHash"], "sha256:REP-7");
    assert_eq!(
        writes.load(Ordering::SeqCst),
        1,
        "attempt 2 read the record and did not write again"
    );
    assert_eq!(
        task["effects"],
        json!([{"step": "publish", "action": "post-report", "resourceId": "REP-7", "attempt": 1}])
    );
}
