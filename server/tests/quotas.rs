//! Per-tenant quotas (server/README.md "Quotas", PROTOCOL.md "Quotas"):
//! the create rate, held watches and open tasks, each answered 429 with
//! Retry-After and its code past the limit, freed when it should be, and
//! never in another tenant's way; on a real server and SQLite file.

mod common;
mod quota_scenarios;
mod tokens;

use std::time::Duration;

use common::*;
use quota_scenarios::*;
use taskwire_server::client::Conn;
use taskwire_server::{start, Config};

fn quota(c: &mut Config, entries: &[&str]) {
    c.quotas.overrides = entries.iter().map(|s| s.to_string()).collect();
}

/// The tenant's tasks in the SQLite file, open and all.
fn tasks_in_file(h: &Harness, tenant: &str) -> (i64, i64) {
    let db = rusqlite::Connection::open(h.dir.path().join("taskwire.sqlite3")).unwrap();
    db.query_row(
        "SELECT count(*) FILTER (WHERE live = 1), count(*) FROM tasks WHERE tenant = ?1",
        [tenant],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_open_task_quota_a_tenant_gets_429_until_a_task_ends() {
    let h = harness(|c| quota(c, &[OPEN_TASKS_2])).await;
    open_task_scenario(&h).await;
    // A refused create wrote nothing: demo has its 2 open tasks and the
    // one cancelled, nothing more.
    assert_eq!(tasks_in_file(&h, "demo"), (2, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_task_count_survives_a_restart() {
    let mut h = harness(|c| quota(c, &[OPEN_TASKS_2])).await;
    let open = open_task_scenario(&h).await;
    h.restart().await;
    assert_quota(
        &create_plain(&h, "demo").await,
        "open-task-quota",
        "max-open-tasks",
        "2",
        Some("5"),
    );
    // A task that ends another way (its executor fails it) frees a slot.
    h.ok_callback(&open[0], "s", start_ev(10)).await;
    h.ok_callback(&open[0], "f", fail_ev(20, false)).await;
    assert_eq!(create_plain(&h, "demo").await.status, 201);
    assert_eq!(create_plain(&h, "demo").await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_before_the_quota_counts_its_open_tasks() {
    let mut h = harness(|_| {}).await;
    for _ in 0..2 {
        assert_eq!(create_plain(&h, "demo").await.status, 201);
    }
    end(&h, &id_of(&create_plain(&h, "demo").await)).await;
    h.server.take().unwrap().stop().await;
    // What a file written before the count existed looks like.
    let db = rusqlite::Connection::open(h.dir.path().join("taskwire.sqlite3")).unwrap();
    db.execute_batch(
        "DROP TRIGGER open_tasks_insert; DROP TRIGGER open_tasks_update;
         DROP TRIGGER open_tasks_delete; DROP TABLE open_tasks;",
    )
    .unwrap();
    drop(db);
    h.config.quotas.max_open_tasks = Some(3);
    h.restart().await;
    assert_eq!(create_plain(&h, "demo").await.status, 201);
    assert_eq!(create_plain(&h, "demo").await.status, 429, "2 + 1 open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_never_pass_the_open_task_quota() {
    let h = harness(|c| c.quotas.max_open_tasks = Some(5)).await;
    let mut racing = Vec::new();
    for _ in 0..40 {
        let addr = h.addr.clone();
        racing.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await.unwrap();
            let r = conn
                .send(
                    "POST",
                    "/v1/tasks",
                    &[("authorization", "Bearer demo")],
                    BODY,
                )
                .await
                .unwrap();
            r.status
        }));
    }
    let mut statuses = Vec::new();
    for r in racing {
        statuses.push(r.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 5);
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 35);
    assert_eq!(tasks_in_file(&h, "demo"), (5, 5));
    // The server-wide default holds for every tenant.
    for _ in 0..5 {
        assert_eq!(create_plain(&h, "other").await.status, 201);
    }
    assert_eq!(create_plain(&h, "other").await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_create_rate_a_tenant_gets_429_with_the_wait_for_its_next_token() {
    let h = harness(|c| quota(c, &[RATE_BURST_2])).await;
    rate_scenario(&h).await;
    assert_eq!(tasks_in_file(&h, "demo"), (2, 2), "refusals wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_create_gives_its_rate_token_back() {
    // Open-task quota 1 and a burst of 2 without refill: the create
    // refused for its open tasks must not spend a token.
    let h = harness(|c| {
        quota(
            c,
            &["demo:create-rate=0.01,create-burst=2,max-open-tasks=1"],
        )
    })
    .await;
    let first = create_plain(&h, "demo").await;
    assert_eq!(first.status, 201);
    for _ in 0..3 {
        assert_eq!(
            create_plain(&h, "demo").await.json()["error"]["code"],
            "open-task-quota"
        );
    }
    end(&h, &id_of(&first)).await;
    // Had the refusals spent tokens, this would be refused for the rate.
    let second = create_plain(&h, "demo").await;
    assert_eq!(second.status, 201, "{:?}", second.json());
    end(&h, &id_of(&second)).await;
    // Now both tokens are spent, by the two tasks made.
    assert_eq!(
        create_plain(&h, "demo").await.json()["error"]["code"],
        "create-rate-limited"
    );
    assert_eq!(tasks_in_file(&h, "demo"), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_token_comes_back_at_the_rate() {
    let h = harness(|c| quota(c, &["demo:create-rate=2,create-burst=1"])).await;
    assert_eq!(create_plain(&h, "demo").await.status, 201);
    let refused = create_plain(&h, "demo").await;
    assert_quota(
        &refused,
        "create-rate-limited",
        "create-rate",
        "2",
        Some("1"),
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(create_plain(&h, "demo").await.status, 201);
}

/// Holds a long-poll on `task` (at version 0) for `token`; resolves with
/// its answer's status.
fn hold(h: &Harness, token: &str, task: &str) -> tokio::task::JoinHandle<u16> {
    hold_at(h, token, task, 0)
}

fn hold_at(h: &Harness, token: &str, task: &str, cursor: u64) -> tokio::task::JoinHandle<u16> {
    let addr = h.addr.clone();
    let auth = format!("Bearer {token}");
    let path = format!("/v1/tasks/{task}/resume?cursor={cursor}&waitMs=30000");
    tokio::spawn(async move {
        let mut conn = Conn::open(&addr).await.unwrap();
        conn.send("GET", &path, &[("authorization", &auth)], "")
            .await
            .map(|r| r.status)
            .unwrap_or(0)
    })
}

async fn until_held(h: &Harness, tenant: &str, n: usize) {
    for _ in 0..200 {
        if h.state().watchers.held_by(tenant) == Some(n) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{tenant} never held {n}: {:?}",
        h.state().watchers.held_by(tenant)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_watch_quota_a_long_poll_or_stream_gets_429_until_one_ends() {
    let h = harness(|c| {
        quota(c, &["demo:max-watches=2", "other:max-watches=5"]);
        c.browser_tokens.keys = tokens::key_flags();
    })
    .await;
    let task = h.create_default().await;
    let held = [hold(&h, "demo", &task), hold(&h, "demo", &task)];
    until_held(&h, "demo", 2).await;
    let path = format!("/v1/tasks/{task}/resume?cursor=0&waitMs=30000");
    let refused = h.get("demo", &path).await;
    assert_quota(&refused, "watch-quota", "max-watches", "2", Some("2"));
    let stream = h.get("demo", &format!("/v1/tasks/{task}/events")).await;
    assert_quota(&stream, "watch-quota", "max-watches", "2", Some("2"));
    // A browser token counts against its tenant.
    let browser = tokens::hs256("k1", tokens::K1, &tokens::claims(&[&task], &["watch"]));
    assert_quota(
        &h.get(&browser, &path).await,
        "watch-quota",
        "max-watches",
        "2",
        Some("2"),
    );
    // Refused before the task is read (a flood past the quota costs no
    // store read): even an unknown task gets the 429.
    let unknown = h
        .get("demo", "/v1/tasks/no-such-task/resume?cursor=0&waitMs=1000")
        .await;
    assert_quota(&unknown, "watch-quota", "max-watches", "2", Some("2"));
    // An answer that is not held is no watch: still served.
    assert_eq!(
        h.get("demo", &format!("/v1/tasks/{task}/resume?cursor=0"))
            .await
            .status,
        200
    );
    assert_eq!(
        h.get("demo", &format!("/v1/tasks/{task}")).await.status,
        200
    );
    // A refusal keeps no slot, and the other tenant holds its own.
    assert_eq!(h.state().watchers.held(), 2);
    let other_task = h
        .create(
            "other",
            serde_json::json!({"ttlMs": 60_000, "maxAttempts": 1}),
        )
        .await;
    let others: Vec<_> = (0..3).map(|_| hold(&h, "other", &other_task)).collect();
    until_held(&h, "other", 3).await;
    // A wake ends demo's held polls and frees their slots.
    h.ok_callback(&task, "s", start_ev(10)).await;
    for poll in held {
        assert_eq!(poll.await.unwrap(), 200);
    }
    until_held(&h, "demo", 0).await;
    let again = [hold_at(&h, "demo", &task, 1), hold_at(&h, "demo", &task, 1)];
    until_held(&h, "demo", 2).await;
    h.ok_callback(&task, "p", progress_ev(20, 1)).await;
    h.ok_callback(&other_task, "s", start_ev(10)).await;
    for poll in again.into_iter().chain(others) {
        assert_eq!(poll.await.unwrap(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_wide_watch_cap_keeps_its_503() {
    let h = harness(|c| {
        c.max_watchers = Some(2);
        c.quotas.max_watches = Some(5);
    })
    .await;
    let task = h.create_default().await;
    let held = [hold(&h, "demo", &task), hold(&h, "demo", &task)];
    until_held(&h, "demo", 2).await;
    let r = h
        .get(
            "demo",
            &format!("/v1/tasks/{task}/resume?cursor=0&waitMs=30000"),
        )
        .await;
    assert_error(&r, 503, "watch-limit", "waitMs");
    assert_eq!(h.state().watchers.held_by("demo"), Some(2), "no slot kept");
    h.ok_callback(&task, "s", start_ev(10)).await;
    for poll in held {
        assert_eq!(poll.await.unwrap(), 200);
    }
}

#[tokio::test]
async fn bad_quota_flags_are_refused_at_start_naming_flag_and_key() {
    for (args, needle) in [
        (&["--tenant-create-rate", "0"][..], "--tenant-create-rate"),
        (
            &["--tenant-create-rate", "fast"][..],
            "--tenant-create-rate",
        ),
        (&["--tenant-create-burst", "0"][..], "--tenant-create-burst"),
        (&["--tenant-max-watches", "0"][..], "--tenant-max-watches"),
        (
            &["--tenant-max-open-tasks=-3"][..],
            "--tenant-max-open-tasks",
        ),
    ] {
        let mut argv = vec!["taskwire-server"];
        argv.extend_from_slice(args);
        let err = <Config as clap::Parser>::try_parse_from(argv).unwrap_err();
        assert!(err.to_string().contains(needle), "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    for (entry, needle) in [
        ("demo:open-tasks=3", "unknown key \"open-tasks\""),
        ("demo:max-open-tasks=0", "max-open-tasks"),
        ("nobody:max-watches=1", "\"nobody\" has no --token"),
    ] {
        let mut c = test_config(dir.path());
        quota(&mut c, &[entry]);
        let Err(err) = start(c).await else {
            panic!("{entry} was accepted");
        };
        assert!(err.starts_with("--tenant-quota: "), "{err}");
        assert!(err.contains(needle), "{entry}: {err}");
    }
    let mut c = test_config(dir.path());
    c.quotas.create_burst = Some(4);
    let Err(err) = start(c).await else {
        panic!("a burst without a rate was accepted");
    };
    assert!(err.contains("--tenant-create-burst"), "{err}");
}

/// A quota refusal is answered after `REFUSAL_DELAY`, so a tenant that
/// ignores `Retry-After` and asks again at once gets two answers a second
/// per connection, not thousands: its refusals cannot become load on the
/// cores other tenants share. A request within the quota is not delayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_answered_late_so_a_flooder_cannot_turn_refusals_into_load() {
    use std::time::Instant;
    use taskwire_server::quotas::REFUSAL_DELAY;
    // Whatever the constant says, a refusal must be held for a while.
    assert!(REFUSAL_DELAY >= Duration::from_millis(250));
    let h = harness(|c| quota(c, &["demo:create-rate=0.1,create-burst=1,max-watches=1"])).await;
    let body = r#"{"ttlMs": 60000, "maxAttempts": 1}"#;
    let t = Instant::now();
    let created = h.post("demo", "/v1/tasks", &[], body).await;
    assert_eq!(created.status, 201);
    assert!(
        t.elapsed() < REFUSAL_DELAY,
        "within the quota: answered at once"
    );
    let task = created.json()["id"].as_str().unwrap().to_string();
    // Back to back on one connection, ignoring Retry-After.
    let mut conn = Conn::open(&h.addr).await.unwrap();
    let auth = [
        ("authorization", "Bearer demo"),
        ("content-type", "application/json"),
    ];
    let t = Instant::now();
    for _ in 0..3 {
        let r = conn.send("POST", "/v1/tasks", &auth, body).await.unwrap();
        assert_eq!(r.status, 429);
    }
    assert!(t.elapsed() >= REFUSAL_DELAY * 3, "{:?}", t.elapsed());
    // The same for a watch past its quota.
    let held = hold(&h, "demo", &task);
    until_held(&h, "demo", 1).await;
    let t = Instant::now();
    let path = format!("/v1/tasks/{task}/resume?cursor=0&waitMs=30000");
    assert_eq!(h.get("demo", &path).await.status, 429);
    assert!(t.elapsed() >= REFUSAL_DELAY, "{:?}", t.elapsed());
    held.abort();
}
