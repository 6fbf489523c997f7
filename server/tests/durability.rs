//! Crash durability: the real binary is killed with SIGKILL in the middle
//! of a callback load and restarted on the same data. Every acknowledged
//! callback must be there, versions contiguous (history 1..=version), no
//! notification twice, and clients resume correctly.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_core::{Mirror, ResumeAnswer, ResumeMode};
use taskwire_server::client::Conn;
use taskwire_wire::from_json;

struct Acked {
    task: String,
    callback_id: String,
    event: Value,
    version: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_load_loses_no_acknowledged_callback() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn_binary(dir.path().as_os_str());
    let auth = [("authorization", "Bearer demo")];
    let mut tasks = Vec::new();
    for _ in 0..24 {
        tasks.push(create_at(&addr).await);
    }
    // Workers: each drives its task start → progress 1..=99 → succeed,
    // recording every acknowledged callback, until the connection dies.
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let mut workers = Vec::new();
    for (i, task) in tasks.iter().cloned().enumerate() {
        let addr = addr.clone();
        let acked = Arc::clone(&acked);
        workers.push(tokio::spawn(async move {
            let Ok(mut conn) = Conn::open(&addr).await else {
                return;
            };
            // Half the tasks are short so that some succeed before the kill.
            let last = if i % 2 == 0 { 20 } else { 99 };
            let mut events = vec![start_ev(1)];
            events.extend((1..=last).map(|p| progress_ev(1 + p, p)));
            events.push(succeed_ev(200, "sha256:ab12"));
            for (n, event) in events.into_iter().enumerate() {
                let callback_id = format!("cb-{n}");
                match signed(&mut conn, &task, &callback_id, &event).await {
                    Ok(answer) => {
                        assert_eq!(answer["changed"], true, "{answer}");
                        acked.lock().unwrap().push(Acked {
                            task: task.clone(),
                            callback_id,
                            event,
                            version: answer["version"].as_u64().unwrap(),
                        });
                    }
                    Err(_) => return,
                }
                // Slow the long tasks down so the kill lands mid-load.
                if i % 2 == 1 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }));
    }
    // Kill once a good share of the load is acknowledged.
    let t = Instant::now();
    while acked.lock().unwrap().len() < 600 && t.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
    child.wait().unwrap();
    for w in workers {
        w.await.unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(acked.len() >= 600, "load was acknowledged: {}", acked.len());
    let unfinished = tasks.len()
        - acked
            .iter()
            .filter(|a| a.event["type"] == "succeed")
            .count();
    assert!(unfinished > 0, "the kill must land mid-load");

    let (mut child, addr) = spawn_binary(dir.path().as_os_str());
    let mut conn = Conn::open(&addr).await.unwrap();
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
        assert_eq!(r.status, 200);
        let answer: ResumeAnswer =
            from_json(std::str::from_utf8(&r.body).unwrap(), "answer").unwrap();
        let view = answer.task().unwrap().clone();
        // History is exactly 1..=version.
        let versions: Vec<u64> = answer.events().iter().map(|e| e.version).collect();
        assert_eq!(versions, (1..=view.version).collect::<Vec<_>>(), "{task}");
        // A fresh client replays it through core's reducer.
        let mut mirror = Mirror::new(task).unwrap();
        let out = mirror.merge(&answer);
        assert!(out.rejected.is_empty(), "{out:?}");
        assert_eq!(mirror.task(), Some(&view));
        views.insert(task.clone(), (view, answer));
    }
    // Every acknowledged callback is there, at the version it was answered.
    for a in &acked {
        let (view, answer) = &views[&a.task];
        assert!(
            a.version <= view.version,
            "acked v{} but task at v{}",
            a.version,
            view.version
        );
        let entry = &answer.events()[(a.version - 1) as usize];
        assert_eq!(serde_json::to_value(&entry.event).unwrap(), a.event);
        // And its callback id is remembered.
        let again = signed(&mut conn, &a.task, &a.callback_id, &a.event)
            .await
            .unwrap();
        assert_eq!(again["reason"], "duplicate-callback", "{again}");
    }
    // A client that saw an acknowledged version resumes from it cleanly.
    for a in acked.iter().step_by(37) {
        let r = conn
            .send(
                "GET",
                &format!("/v1/tasks/{}/resume?cursor={}", a.task, a.version),
                &auth,
                "",
            )
            .await
            .unwrap();
        let answer: ResumeAnswer =
            from_json(std::str::from_utf8(&r.body).unwrap(), "answer").unwrap();
        assert!(matches!(
            answer.mode(),
            ResumeMode::Delta | ResumeMode::CaughtUp
        ));
    }
    // Finish every task after the restart; then exactly one notification each.
    for task in &tasks {
        let (view, _) = &views[task];
        if !view.state.is_terminal() {
            let ev = if view.state == taskwire_core::State::Queued {
                start_ev(1)
            } else {
                json!({"type":"fail","atMs":300,"error":"crash","retryable":false})
            };
            signed(&mut conn, task, "after-restart-1", &ev)
                .await
                .unwrap();
            let fail = json!({"type":"fail","atMs":300,"error":"crash","retryable":false});
            signed(&mut conn, task, "after-restart-2", &fail)
                .await
                .unwrap();
        }
    }
    let feed = conn
        .send("GET", "/v1/notifications?limit=1000", &auth, "")
        .await
        .unwrap()
        .json();
    let keys: Vec<String> = feed["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["key"].as_str().unwrap().to_string())
        .collect();
    let unique: HashSet<&String> = keys.iter().collect();
    assert_eq!(unique.len(), keys.len(), "duplicate notification: {keys:?}");
    assert_eq!(keys.len(), tasks.len());
    child.kill().unwrap();
    child.wait().unwrap();
}
