//! Per-tenant quotas on PostgreSQL: the SQLite scenarios on one instance,
//! then the open-task count shared by two instances (one count, however
//! the creates are spread and however they race). Without PostgreSQL
//! binaries the tests skip (tests/common/pg.rs).

mod common;
mod quota_scenarios;

use common::*;
use quota_scenarios::*;
use taskwire_server::client::Conn;
use taskwire_server::Config;

async fn instances(n: usize, tweak: impl Fn(&mut Config)) -> Option<Vec<Harness>> {
    let url = pg::database().await?;
    let mut hs = Vec::new();
    for _ in 0..n {
        hs.push(
            harness(|c| {
                c.data = url.clone().into();
                tweak(c);
            })
            .await,
        );
    }
    Some(hs)
}

fn quota(entries: &'static [&'static str]) -> impl Fn(&mut Config) {
    move |c| c.quotas.overrides = entries.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_scenarios_hold_on_postgres() {
    let Some(hs) = instances(1, quota(&[OPEN_TASKS_2])).await else {
        return;
    };
    open_task_scenario(&hs[0]).await;
    let Some(hs) = instances(1, quota(&[RATE_BURST_2])).await else {
        return;
    };
    rate_scenario(&hs[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_open_task_count() {
    let Some(hs) = instances(2, quota(&["demo:max-open-tasks=3"])).await else {
        return;
    };
    let (a, b) = (&hs[0], &hs[1]);
    let first = create_plain(a, "demo").await;
    assert_eq!(first.status, 201);
    assert_eq!(create_plain(b, "demo").await.status, 201);
    assert_eq!(create_keyed(a, "demo", "k", BODY).await.status, 201);
    // Full, seen from either instance.
    for h in [a, b] {
        assert_quota(
            &create_plain(h, "demo").await,
            "open-task-quota",
            "max-open-tasks",
            "3",
            Some("5"),
        );
        // A replay made on the other instance is still answered.
        assert_eq!(create_keyed(h, "demo", "k", BODY).await.status, 200);
    }
    // Ended on one instance, freed on the other.
    end(b, &id_of(&first)).await;
    assert_eq!(create_plain(a, "demo").await.status, 201);
    assert_eq!(create_plain(b, "demo").await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_racing_on_two_instances_never_pass_the_open_task_quota() {
    let Some(hs) = instances(2, |c| {
        c.quotas.max_open_tasks = Some(5);
        c.pg_writers = 2;
    })
    .await
    else {
        return;
    };
    let mut racing = Vec::new();
    for i in 0..40 {
        let addr = hs[i % 2].addr.clone();
        racing.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await.unwrap();
            let key = format!("race-{i}");
            let auth = "Bearer demo";
            conn.send(
                "POST",
                "/v1/tasks",
                &[("authorization", auth), ("idempotency-key", &key)],
                BODY,
            )
            .await
            .unwrap()
            .status
        }));
    }
    let mut statuses = Vec::new();
    for r in racing {
        statuses.push(r.await.unwrap());
    }
    let made = statuses.iter().filter(|s| **s == 201).count();
    assert_eq!(made, 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 35);
    // Tenant other has its own count.
    for h in &hs {
        assert_eq!(create_plain(h, "other").await.status, 201);
    }
}
