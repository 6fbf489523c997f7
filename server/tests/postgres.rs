//! Several instances on one PostgreSQL database (`--data postgres://…`):
//! cross-instance wake-ups, racing callbacks, a lost LISTEN connection,
//! racing sweepers, idempotency across instances and SIGKILL of one
//! instance under load. Each test gets a fresh database on a throwaway
//! server (tests/common/pg.rs); without PostgreSQL binaries they skip.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_core::{Mirror, ResumeAnswer, ResumeMode};
use taskwire_server::client::{self, Conn};
use taskwire_server::Config;
use taskwire_wire::from_json;

/// Instances on one fresh database (`None`: no PostgreSQL, skip).
async fn cluster(n: usize, tweak: impl Fn(&mut Config)) -> Option<(Vec<Harness>, String)> {
    let url = pg::database().await?;
    let mut instances = Vec::new();
    for _ in 0..n {
        instances.push(
            harness(|c| {
                c.data = url.clone().into();
                c.retention = 1000;
                tweak(c);
            })
            .await,
        );
    }
    Some((instances, url))
}

async fn history(h: &Harness, id: &str) -> (taskwire_core::TaskView, Vec<u64>, ResumeAnswer) {
    let (_, answer) = h.resume("demo", id, "cursor=0").await;
    let view = answer.task().unwrap().clone();
    let versions = answer.events().iter().map(|e| e.version).collect();
    (view, versions, answer)
}

async fn feed(h: &Harness) -> Vec<Value> {
    let r = h.get("demo", "/v1/notifications?limit=1000").await;
    assert_eq!(r.status, 200);
    r.json()["notifications"].as_array().unwrap().clone()
}

/// Reads SSE frames until a message with `id: {want}` arrived; returns the
/// whole text and when that message came.
async fn sse_until(
    mut res: hyper::Response<hyper::body::Incoming>,
    want: &str,
    deadline: Duration,
) -> (String, Option<Instant>) {
    use http_body_util::BodyExt;
    let mut text = String::new();
    let needle = format!("id: {want}\n");
    let got = tokio::time::timeout(deadline, async {
        while let Some(Ok(frame)) = res.body_mut().frame().await {
            if let Some(d) = frame.data_ref() {
                text.push_str(std::str::from_utf8(d).unwrap());
                if text.contains(&needle) || text.contains(&format!("id:{want}\n")) {
                    return Some(Instant::now());
                }
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    (text, got)
}

fn sse_data(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|b| b.contains("event:"))
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("data:")))
        .map(|d| serde_json::from_str(d.trim_start()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_on_one_instance_wake_from_commits_on_the_other() {
    let Some((hs, _)) = cluster(2, |_| {}).await else {
        return;
    };
    let (a, b) = (&hs[0], &hs[1]);
    let id = a.create_default().await;
    assert_eq!(b.get("demo", &format!("/v1/tasks/{id}")).await.status, 200);
    b.ok_callback(&id, "s", start_ev(1)).await;

    // A long-poll and an SSE stream held on A, both at version 1.
    let poll = {
        let addr = a.addr.clone();
        let path = format!("/v1/tasks/{id}/resume?cursor=1&waitMs=10000");
        tokio::spawn(async move {
            let r = client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
                .await
                .unwrap();
            (r, Instant::now())
        })
    };
    let mut conn = Conn::open(&a.addr).await.unwrap();
    let res = conn
        .stream(
            "GET",
            &format!("/v1/tasks/{id}/events?cursor=1"),
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let sse = tokio::spawn(sse_until(res, "2", Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!poll.is_finished(), "the long-poll must be held");

    // The change is committed through B.
    let t0 = Instant::now();
    b.ok_callback(&id, "p1", progress_ev(2, 10)).await;
    let (r, at) = poll.await.unwrap();
    let body = r.json();
    assert_eq!(body["mode"], "delta", "{body}");
    assert_eq!(body["events"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["events"][0]["version"], 2);
    assert_eq!(body["task"]["progress"], 10);
    let waited = at.duration_since(t0);
    assert!(
        waited < Duration::from_secs(1),
        "long-poll woke after {waited:?}"
    );

    let (text, at) = sse.await.unwrap();
    let at = at.unwrap_or_else(|| panic!("no SSE message for version 2: {text}"));
    assert!(at.duration_since(t0) < Duration::from_secs(1));
    let messages = sse_data(&text);
    assert_eq!(messages[0]["mode"], "caught-up", "{text}");
    assert_eq!(messages[1]["mode"], "delta", "{text}");
    assert_eq!(messages[1]["events"][0]["version"], 2);

    // The other way round, with many watchers of one task: held on B,
    // committed on A; all of them get the delta from one re-read.
    let mut polls = Vec::new();
    for _ in 0..50 {
        let addr = b.addr.clone();
        let path = format!("/v1/tasks/{id}/resume?cursor=2&waitMs=10000");
        polls.push(tokio::spawn(async move {
            client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
                .await
                .unwrap()
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    a.ok_callback(&id, "ok", succeed_ev(3, "sha256:ab12")).await;
    for p in polls {
        let body = p.await.unwrap().json();
        assert_eq!(body["mode"], "delta", "{body}");
        assert_eq!(body["task"]["state"], "succeeded");
        assert_eq!(body["events"][0]["version"], 3);
    }
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_callbacks_on_two_instances_apply_once_and_stay_contiguous() {
    let Some((hs, _)) = cluster(2, |_| {}).await else {
        return;
    };
    let hs = Arc::new(hs);
    let mut tasks = Vec::new();
    for i in 0..12 {
        let id = hs[i % 2].create_default().await;
        hs[(i + 1) % 2].ok_callback(&id, "s", start_ev(1)).await;
        tasks.push(id);
    }

    // The same webhook-id, sent three times to each instance at once.
    async fn race(hs: &Arc<Vec<Harness>>, id: &str, cb: &str, ev: Value) -> Vec<Value> {
        let mut sends = Vec::new();
        for n in 0..6 {
            let hs = Arc::clone(hs);
            let (id, cb, ev) = (id.to_string(), cb.to_string(), ev.clone());
            sends.push(tokio::spawn(async move {
                hs[n % 2].ok_callback(&id, &cb, ev).await
            }));
        }
        let mut out = Vec::new();
        for s in sends {
            out.push(s.await.unwrap());
        }
        out
    }
    for id in &tasks {
        let answers = race(&hs, id, "p1", progress_ev(2, 40)).await;
        let changed: Vec<&Value> = answers.iter().filter(|a| a["changed"] == true).collect();
        assert_eq!(changed.len(), 1, "{answers:?}");
        assert_eq!(changed[0]["version"], 2);
        for a in answers.iter().filter(|a| a["changed"] == false) {
            assert_eq!(a["reason"], "duplicate-callback", "{a}");
            assert_eq!(a["version"], 2);
        }
        // Terminal: one transition, at most (exactly) one notification.
        let answers = race(&hs, id, "ok", succeed_ev(3, "sha256:ab12")).await;
        let changed: Vec<&Value> = answers.iter().filter(|a| a["changed"] == true).collect();
        assert_eq!(changed.len(), 1, "{answers:?}");
        assert_eq!(changed[0]["notify"], true);
        assert_eq!(answers.iter().filter(|a| a["notify"] == true).count(), 1);
        // The same result under other ids: duplicates, not changes.
        let mut others = Vec::new();
        for n in 0..4 {
            let hs = Arc::clone(&hs);
            let id = id.clone();
            others.push(tokio::spawn(async move {
                hs[n % 2]
                    .ok_callback(&id, &format!("again-{n}"), succeed_ev(4, "sha256:ab12"))
                    .await
            }));
        }
        for o in others {
            let a = o.await.unwrap();
            assert_eq!(a["reason"], "duplicate-result", "{a}");
        }
        for h in hs.iter() {
            let (view, versions, _) = history(h, id).await;
            assert_eq!(view.version, 3);
            assert_eq!(versions, vec![1, 2, 3]);
        }
    }
    let keys: Vec<String> = feed(&hs[0])
        .await
        .iter()
        .map(|n| n["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), tasks.len(), "{keys:?}");
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len());
    assert_eq!(feed(&hs[1]).await, feed(&hs[0]).await);

    // Different callbacks racing on both instances: each acknowledged
    // change has its own version, and they are exactly 2..=version.
    for _ in 0..4 {
        let id = hs[0].create_default().await;
        hs[1].ok_callback(&id, "s", start_ev(1)).await;
        let acked: Arc<Mutex<Vec<u64>>> = Arc::default();
        let mut workers = Vec::new();
        for w in 0..4u64 {
            let (hs, id, acked) = (Arc::clone(&hs), id.clone(), Arc::clone(&acked));
            workers.push(tokio::spawn(async move {
                for k in 0..10u64 {
                    let p = 1 + k * 4 + w;
                    let a = hs[(w % 2) as usize]
                        .ok_callback(&id, &format!("w{w}-{k}"), progress_ev(1 + p, p))
                        .await;
                    if a["changed"] == true {
                        acked.lock().unwrap().push(a["version"].as_u64().unwrap());
                    }
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
        let mut acked = acked.lock().unwrap().clone();
        acked.sort_unstable();
        let (view, versions, _) = history(&hs[1], &id).await;
        assert_eq!(acked, (2..=view.version).collect::<Vec<_>>());
        assert_eq!(versions, (1..=view.version).collect::<Vec<_>>());
        assert!(view.version > 10, "most progress applies: {}", view.version);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_creates_and_deliveries_race_across_instances() {
    let Some((hs, _)) = cluster(2, |_| {}).await else {
        return;
    };
    let hs = Arc::new(hs);
    for round in 0..5 {
        let key = format!("idem-{round}");
        let mut sends = Vec::new();
        for n in 0..6 {
            let (hs, key) = (Arc::clone(&hs), key.clone());
            sends.push(tokio::spawn(async move {
                hs[n % 2]
                    .post(
                        "demo",
                        "/v1/tasks",
                        &[("idempotency-key", &key)],
                        r#"{"ttlMs":3600000,"maxAttempts":1,"kind":"race"}"#,
                    )
                    .await
            }));
        }
        let mut ids = HashSet::new();
        let mut created = 0;
        for s in sends {
            let r = s.await.unwrap();
            assert!(r.status == 201 || r.status == 200, "{:?}", r.json());
            created += usize::from(r.status == 201);
            ids.insert(r.json()["id"].as_str().unwrap().to_string());
        }
        assert_eq!(created, 1);
        assert_eq!(ids.len(), 1);
        let id = ids.into_iter().next().unwrap();

        hs[0].ok_callback(&id, "s", start_ev(1)).await;
        hs[1]
            .ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12"))
            .await;
        let mut sends = Vec::new();
        for n in 0..6 {
            let (hs, id) = (Arc::clone(&hs), id.clone());
            sends.push(tokio::spawn(async move {
                hs[n % 2]
                    .post(
                        "demo",
                        &format!("/v1/tasks/{id}/deliveries"),
                        &[("idempotency-key", &format!("d-{round}"))],
                        "",
                    )
                    .await
            }));
        }
        let mut receipts = HashSet::new();
        let mut first = 0;
        for s in sends {
            let r = s.await.unwrap();
            assert!(r.status == 201 || r.status == 200, "{:?}", r.json());
            first += usize::from(r.status == 201);
            receipts.insert(r.json()["receipt"].to_string());
        }
        assert_eq!(first, 1);
        assert_eq!(receipts.len(), 1, "{receipts:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listen_connection_reconnects_and_wakes_waiters() {
    let Some((hs, url)) = cluster(2, |_| {}).await else {
        return;
    };
    let (a, b) = (&hs[0], &hs[1]);
    let id = a.create_default().await;
    a.ok_callback(&id, "s", start_ev(1)).await;
    let poll = {
        let addr = a.addr.clone();
        let path = format!("/v1/tasks/{id}/resume?cursor=1&waitMs=15000");
        tokio::spawn(async move {
            client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Cut every instance's LISTEN connection, then commit on B at once:
    // the commit's NOTIFY is lost for A; A must notice, reconnect, re-read.
    let admin = pg::admin(&url).await;
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = $1 AND datname = current_database()",
            &[&taskwire_server::store::postgres::LISTENER_NAME],
        )
        .await
        .unwrap();
    assert_eq!(killed.len(), 2, "one LISTEN connection per instance");
    let t0 = Instant::now();
    b.ok_callback(&id, "p1", progress_ev(2, 10)).await;
    let body = poll.await.unwrap().json();
    assert_eq!(body["mode"], "delta", "{body}");
    assert_eq!(body["events"][0]["version"], 2);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());

    // Listening again: the next commit on B wakes a new waiter on A.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let listeners = admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
            &[&taskwire_server::store::postgres::LISTENER_NAME],
        )
        .await
        .unwrap();
    assert_eq!(listeners.len(), 2);
    let poll = {
        let addr = a.addr.clone();
        let path = format!("/v1/tasks/{id}/resume?cursor=2&waitMs=10000");
        tokio::spawn(async move {
            client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    b.ok_callback(&id, "p2", progress_ev(3, 20)).await;
    let body = poll.await.unwrap().json();
    assert_eq!(body["events"][0]["version"], 3, "{body}");
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweepers_racing_on_three_instances_expire_each_task_once() {
    let Some((hs, _)) = cluster(3, |c| c.sweep_ms = 10).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..60 {
        let id = hs[i % 3]
            .create("demo", json!({"ttlMs": 400, "maxAttempts": 1}))
            .await;
        if i % 2 == 0 {
            hs[(i + 1) % 3].ok_callback(&id, "s", start_ev(1)).await;
        }
        ids.push(id);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if feed(&hs[0]).await.len() >= ids.len() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let all three keep sweeping a little longer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (i, id) in ids.iter().enumerate() {
        let (view, versions, answer) = history(&hs[i % 3], id).await;
        assert_eq!(view.state, taskwire_core::State::Expired, "{id}");
        let expected = if i % 2 == 0 { 2 } else { 1 };
        assert_eq!(versions, (1..=expected).collect::<Vec<_>>(), "{id}");
        let expiries = answer
            .events()
            .iter()
            .filter(|e| matches!(e.event, taskwire_core::Event::Expire { .. }))
            .count();
        assert_eq!(expiries, 1, "{id}");
    }
    let notes = feed(&hs[2]).await;
    let keys: HashSet<&str> = notes.iter().map(|n| n["key"].as_str().unwrap()).collect();
    assert_eq!(notes.len(), ids.len());
    assert_eq!(keys.len(), ids.len());
    assert!(notes.iter().all(|n| n["state"] == "expired"));
    let seqs: Vec<u64> = notes.iter().map(|n| n["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    // Each expiry counted by exactly one instance's sweeper.
    let swept: u64 = hs
        .iter()
        .map(|h| h.state().stats.totals().expired_by_sweeper)
        .sum();
    assert_eq!(swept, ids.len() as u64);
}

struct Acked {
    task: String,
    callback_id: String,
    event: Value,
    /// The version it was answered with, when it changed the task there.
    version: Option<u64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_one_instance_mid_load_loses_nothing_and_the_other_serves_on() {
    let Some(url) = pg::database().await else {
        return;
    };
    let (mut a, addr_a) = spawn_binary(url.as_ref());
    let (mut b, addr_b) = spawn_binary(url.as_ref());
    let auth = [("authorization", "Bearer demo")];
    let mut tasks = Vec::new();
    for i in 0..24 {
        let addr = if i % 2 == 0 { &addr_a } else { &addr_b };
        tasks.push(create_at(addr).await);
    }
    // Each worker drives its task start → progress → succeed, alternating
    // instances; once A is gone it re-sends the same callback to B.
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let mut workers = Vec::new();
    for (i, task) in tasks.iter().cloned().enumerate() {
        let (addr_a, addr_b) = (addr_a.clone(), addr_b.clone());
        let acked = Arc::clone(&acked);
        workers.push(tokio::spawn(async move {
            let mut conn_a = Conn::open(&addr_a).await.ok();
            let mut conn_b = Conn::open(&addr_b).await.unwrap();
            let last = if i % 2 == 0 { 30 } else { 80 };
            let mut events = vec![start_ev(1)];
            events.extend((1..=last).map(|p| progress_ev(1 + p, p)));
            events.push(succeed_ev(200, "sha256:ab12"));
            for (n, event) in events.into_iter().enumerate() {
                let callback_id = format!("cb-{n}");
                let mut answer = None;
                if n % 2 == 0 {
                    if let Some(conn) = conn_a.as_mut() {
                        match signed(conn, &task, &callback_id, &event).await {
                            Ok(a) => answer = Some(a),
                            Err(_) => conn_a = None, // A died: B from now on
                        }
                    }
                }
                let answer = match answer {
                    Some(a) => a,
                    None => signed(&mut conn_b, &task, &callback_id, &event)
                        .await
                        .expect("B keeps serving"),
                };
                let version = if answer["changed"] == true {
                    Some(answer["version"].as_u64().unwrap())
                } else {
                    // Only a re-send of what A committed before dying.
                    assert_eq!(answer["reason"], "duplicate-callback", "{answer}");
                    None
                };
                acked.lock().unwrap().push(Acked {
                    task: task.clone(),
                    callback_id,
                    event,
                    version,
                });
                if i % 2 == 1 {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
            }
        }));
    }
    let t = Instant::now();
    while acked.lock().unwrap().len() < 400 && t.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.kill().expect("SIGKILL");
    a.wait().unwrap();
    let killed_at = acked.lock().unwrap().len();
    for w in workers {
        w.await.unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let total: usize = (0..24).map(|i| if i % 2 == 0 { 32 } else { 82 }).sum();
    assert_eq!(acked.len(), total, "every callback acknowledged in the end");
    assert!(killed_at < total, "the kill must land mid-load");

    let mut conn = Conn::open(&addr_b).await.unwrap();
    let mut views = HashMap::new();
    for task in &tasks {
        let r = conn
            .send(
                "GET",
                &format!("/v1/tasks/{task}/resume?cursor=0"),
                &auth,
                "",
            )
            .await
            .unwrap();
        let answer: ResumeAnswer =
            from_json(std::str::from_utf8(&r.body).unwrap(), "answer").unwrap();
        let view = answer.task().unwrap().clone();
        assert_eq!(view.state, taskwire_core::State::Succeeded, "{task}");
        let versions: Vec<u64> = answer.events().iter().map(|e| e.version).collect();
        assert_eq!(versions, (1..=view.version).collect::<Vec<_>>(), "{task}");
        let mut mirror = Mirror::new(task).unwrap();
        assert!(mirror.merge(&answer).rejected.is_empty());
        assert_eq!(mirror.task(), Some(&view));
        views.insert(task.clone(), answer);
    }
    for a in &acked {
        let answer = &views[&a.task];
        let entry = match a.version {
            Some(v) => &answer.events()[(v - 1) as usize],
            None => answer
                .events()
                .iter()
                .find(|e| serde_json::to_value(&e.event).unwrap() == a.event)
                .expect("a duplicate-callback re-send was committed by A"),
        };
        assert_eq!(serde_json::to_value(&entry.event).unwrap(), a.event);
    }
    for a in acked.iter().step_by(23) {
        let again = signed(&mut conn, &a.task, &a.callback_id, &a.event)
            .await
            .unwrap();
        assert_eq!(again["reason"], "duplicate-callback", "{again}");
    }
    let r = conn
        .send("GET", "/v1/notifications?limit=1000", &auth, "")
        .await
        .unwrap();
    let keys: Vec<String> = r.json()["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), tasks.len(), "{keys:?}");
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len());
    // A client resumes from B by delta.
    let r = conn
        .send(
            "GET",
            &format!("/v1/tasks/{}/resume?cursor=3", tasks[0]),
            &auth,
            "",
        )
        .await
        .unwrap();
    let answer: ResumeAnswer = from_json(std::str::from_utf8(&r.body).unwrap(), "answer").unwrap();
    assert_eq!(answer.mode(), ResumeMode::Delta);
    b.kill().unwrap();
    b.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_post_each_notification_to_the_webhook_once() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = Arc::clone(&seen2);
            async move {
                let id = headers["webhook-id"].to_str().unwrap().to_string();
                seen.lock().unwrap().push(id);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let Some((hs, _)) = cluster(2, |c| c.notify_url = Some(hook.clone())).await else {
        return;
    };
    let mut keys = Vec::new();
    for i in 0..20 {
        let id = hs[i % 2].create_default().await;
        hs[(i + 1) % 2].ok_callback(&id, "s", start_ev(1)).await;
        hs[i % 2]
            .ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12"))
            .await;
        keys.push(format!("{id}:succeeded:2"));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().len() < keys.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Both senders keep running a little: nothing is posted twice.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut posted = seen.lock().unwrap().clone();
    posted.sort();
    keys.sort();
    assert_eq!(posted, keys);
}

/// As tests/isolation.rs on SQLite: another tenant's row is filtered out
/// by the query, never parsed (a broken row answers B with a 404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_row_is_never_parsed_on_postgres() {
    let Some((hs, url)) = cluster(1, |_| {}).await else {
        return;
    };
    let h = &hs[0];
    let id = h
        .create(
            "demo",
            json!({"ttlMs": 3_600_000, "maxAttempts": 1, "input": {"blob": "x".repeat(54 * 1024)}}),
        )
        .await;
    let admin = pg::admin(&url).await;
    let n = admin
        .execute(
            "UPDATE tasks SET view = '{\"id\": broken' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_error(
        &h.get("demo", &format!("/v1/tasks/{id}")).await,
        500,
        "internal",
        "tasks.view",
    );
    for path in [
        format!("/v1/tasks/{id}"),
        format!("/v1/tasks/{id}/resume?cursor=0"),
        format!("/v1/tasks/{id}/resume?cursor=0&snapshot=1"),
        format!("/v1/tasks/{id}/events"),
    ] {
        assert_error(&h.get("other", &path).await, 404, "not-found", "taskId");
    }
    let delivery = h
        .post(
            "other",
            &format!("/v1/tasks/{id}/deliveries"),
            &[("idempotency-key", "d1")],
            "",
        )
        .await;
    assert_error(&delivery, 404, "not-found", "taskId");
}

/// As tests/exact_input.rs on SQLite: `input` comes back byte for byte,
/// and a body differing only beyond double precision is another request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_input_and_exact_idempotency_on_postgres() {
    let Some((hs, _url)) = cluster(2, |_| {}).await else {
        return;
    };
    let input = r#"{"n": 9007199254740993, "big": 123456789012345678901234567890}"#;
    let body = format!(r#"{{"ttlMs":3600000,"maxAttempts":1,"input":{input}}}"#);
    let key = [("idempotency-key", "exact-pg")];
    let created = hs[0].post("demo", "/v1/tasks", &key, &body).await;
    assert_eq!(created.status, 201);
    let id = created.json()["id"].as_str().unwrap().to_string();
    let got = hs[1].get("demo", &format!("/v1/tasks/{id}")).await;
    let text = std::str::from_utf8(&got.body).unwrap();
    assert!(text.ends_with(&format!(",\"input\":{input}}}")), "{text}");
    let replay = hs[1].post("demo", "/v1/tasks", &key, &body).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.json()["id"], id.as_str());
    let other = body.replace("9007199254740993", "9007199254740992");
    assert_error(
        &hs[1].post("demo", "/v1/tasks", &key, &other).await,
        422,
        "idempotency-key-reused",
        "Idempotency-Key",
    );
}
