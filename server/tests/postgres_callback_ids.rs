//! A tenant's callback id belongs to one task, on PostgreSQL with several
//! instances (PROTOCOL.md §Executor callback): refused on another task
//! whichever instance remembered it, and when the same id races on two
//! tasks through two instances at once, exactly one task takes it (the
//! UNIQUE `(tenant, callback_id)` index; the loser's batch runs again and
//! finds the winner's row). Fresh database per test (tests/common/pg.rs);
//! without PostgreSQL binaries they skip. In its own file: postgres.rs is
//! long already.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::Value;
use taskwire_server::client;
use taskwire_server::signature::callback_body;
use tokio::sync::Barrier;

/// `n` instances on one fresh database (`None`: no PostgreSQL, skip).
async fn instances(n: usize) -> Option<Vec<Harness>> {
    let url = pg::database().await?;
    let mut hs = Vec::new();
    for _ in 0..n {
        hs.push(harness(|c| c.data = url.clone().into()).await);
    }
    Some(hs)
}

/// Posts `event` for `task` to `h` under exactly `callback_id`.
async fn post(h: &Harness, task: &str, callback_id: &str, event: &Value) -> client::Reply {
    let body = callback_body(task, event);
    h.callback_raw(task, callback_id, now_secs(), body.as_bytes())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_id_remembered_on_one_instance_is_refused_for_another_task_on_the_other() {
    let Some(hs) = instances(2).await else {
        return;
    };
    let (a, b) = (&hs[0], &hs[1]);
    let t1 = a.create_default().await;
    let t2 = a.create_default().await;
    assert_eq!(post(a, &t1, "once", &start_ev(1)).await.status, 200);
    let r = post(b, &t2, "once", &start_ev(1)).await;
    assert_error(&r, 422, "callback-id-reused-for-other-task", "webhook-id");
    assert_eq!(
        b.get("demo", &format!("/v1/tasks/{t2}")).await.json()["version"],
        0
    );
    // A redelivery to its own task, on either instance, is a duplicate.
    for h in [a, b] {
        assert_eq!(
            post(h, &t1, "once", &start_ev(1)).await.json()["reason"],
            "duplicate-callback"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_callback_id_raced_on_two_tasks_through_two_instances_is_taken_once() {
    let Some(hs) = instances(2).await else {
        return;
    };
    let hs = Arc::new(hs);
    for round in 0..20 {
        let tasks = [hs[0].create_default().await, hs[1].create_default().await];
        let id = format!("raced-{round}");
        // Each task gets the id from both instances, all four at once.
        let barrier = Arc::new(Barrier::new(4));
        let mut sends = Vec::new();
        for (t, task) in tasks.iter().enumerate() {
            for i in 0..2 {
                let (hs, barrier) = (Arc::clone(&hs), Arc::clone(&barrier));
                let (task, id) = (task.clone(), id.clone());
                sends.push(tokio::spawn(async move {
                    barrier.wait().await;
                    let r = post(&hs[i], &task, &id, &start_ev(1)).await;
                    (t, r.status, r.json())
                }));
            }
        }
        let mut changed = Vec::new();
        let mut refused = Vec::new();
        for s in sends {
            let (t, status, body) = s.await.unwrap();
            match status {
                200 if body["changed"] == true => changed.push(t),
                200 => assert_eq!(body["reason"], "duplicate-callback", "{body}"),
                422 => {
                    assert_eq!(body["error"]["code"], "callback-id-reused-for-other-task");
                    refused.push(t);
                }
                _ => panic!("round {round}: {status} {body}"),
            }
        }
        assert_eq!(
            changed.len(),
            1,
            "round {round}: one transition, got {changed:?}"
        );
        let winner = changed[0];
        assert!(
            !refused.is_empty() && refused.iter().all(|t| *t != winner),
            "{refused:?}"
        );
        // The loser was not touched, as every instance reads it.
        let loser = &tasks[1 - winner];
        for h in hs.iter() {
            let v = h.get("demo", &format!("/v1/tasks/{loser}")).await.json();
            assert_eq!(v["version"], 0, "round {round}: {v}");
        }
    }
}
