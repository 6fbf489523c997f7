//! What the SQLite file must be for the server to start on it (issue 24,
//! N6): a damaged database and an existing empty file are refused with a
//! message naming the file and what to do; `--new-database` lets an empty
//! file become a database; a healthy file starts, checked.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rusqlite::Connection;
use serde_json::json;
use taskwire_server::client;

fn file_of(dir: &Path) -> PathBuf {
    dir.join("taskwire.sqlite3")
}

/// Starts `cmd` and expects it to exit by itself within 20 s (a refused
/// start); returns its exit code and stderr. A server that starts
/// serving instead is killed and the test fails.
fn refused_start(mut cmd: Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "the server started instead of refusing: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A server file in `dir` with `n` tasks (4 KB of input each, so the
/// tables span many pages), checkpointed into the main file; their ids.
async fn database_with_tasks(dir: &Path, n: usize) -> Vec<String> {
    let server = spawn_logged(server_command(dir, &[]));
    let mut ids = Vec::new();
    for _ in 0..n {
        let r = client::request(
            &server.addr,
            "POST",
            "/v1/tasks",
            &[("authorization", "Bearer demo")],
            json!({"ttlMs": 3_600_000, "maxAttempts": 1, "input": "y".repeat(4_000)}).to_string(),
        )
        .await
        .expect("create");
        assert_eq!(r.status, 201, "{:?}", r.json());
        ids.push(r.json()["id"].as_str().expect("id").to_string());
    }
    server.kill();
    let conn = Connection::open(file_of(dir)).expect("open");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    ids
}

/// Writes garbage over the middle leaf page of the `tasks` table;
/// returns the page number.
fn damage_a_middle_page(file: &Path) -> i64 {
    let conn = Connection::open(file).expect("open");
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page_size");
    let leaves: Vec<i64> = {
        let mut stmt = conn
            .prepare(
                "SELECT pageno FROM dbstat WHERE name = 'tasks' AND pagetype = 'leaf'
                 ORDER BY pageno",
            )
            .expect("dbstat");
        let rows = stmt.query_map([], |r| r.get(0)).expect("pages");
        rows.collect::<Result<_, _>>().expect("pages")
    };
    drop(conn);
    assert!(leaves.len() > 10, "{} leaf pages", leaves.len());
    let page = leaves[leaves.len() / 2];
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .expect("open the file");
    let offset = u64::try_from((page - 1) * page_size).expect("offset");
    f.seek(SeekFrom::Start(offset)).expect("seek");
    let garbage: Vec<u8> = (0..page_size).map(|i| (i * 7 + 13) as u8).collect();
    f.write_all(&garbage).expect("garbage");
    f.sync_all().expect("sync");
    page
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_with_a_damaged_page_is_refused_at_start_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let ids = database_with_tasks(dir.path(), 300).await;
    let file = file_of(dir.path());
    let page = damage_a_middle_page(&file);
    // The damage is in a page no start-up query reads: before, the
    // server started and served the other tasks.
    let (code, stderr) = refused_start(server_command(dir.path(), &[]));
    assert_eq!(code, Some(2), "{stderr}");
    let shown = file.display().to_string();
    assert!(
        stderr.contains(&format!("{shown}: the database file is damaged")),
        "page {page}: {stderr}"
    );
    assert!(
        stderr.contains("restore it from your last backup"),
        "{stderr}"
    );
    assert!(stderr.contains("Restoring from a backup"), "{stderr}");
    assert!(stderr.contains("--mark-restored"), "{stderr}");
    assert!(!stderr.contains("\n\n"), "one message: {stderr}");

    // The operator may start without the check (and meet the damage in
    // requests): the other tasks are served.
    let server = spawn_logged(server_command(dir.path(), &["--skip-integrity-check"]));
    let r = client::request(
        &server.addr,
        "GET",
        &format!("/v1/tasks/{}", ids[0]),
        &[("authorization", "Bearer demo")],
        "",
    )
    .await
    .expect("get");
    assert_eq!(r.status, 200);
    assert!(server.stderr_lines("integrity check").is_empty());
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_empty_file_is_refused_unless_started_with_new_database() {
    let dir = tempfile::tempdir().unwrap();
    let file = file_of(dir.path());
    std::fs::write(&file, b"").unwrap();
    let (code, stderr) = refused_start(server_command(dir.path(), &[]));
    assert_eq!(code, Some(2), "{stderr}");
    let shown = file.display().to_string();
    assert!(
        stderr.contains(&format!("{shown}: the file exists but is empty (0 bytes)")),
        "{stderr}"
    );
    assert!(stderr.contains("Restoring from a backup"), "{stderr}");
    assert!(stderr.contains("--new-database"), "{stderr}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 0, "left as it was");

    // Asked for: it becomes a database (the flag, or its environment twin).
    let mut cmd = server_command(dir.path(), &[]);
    cmd.env("TASKWIRE_NEW_DATABASE", "true");
    let server = spawn_logged(cmd);
    create_at(&server.addr).await;
    server.kill();
    // Not empty any more: no flag needed from now on.
    let server = spawn_logged(server_command(dir.path(), &[]));
    create_at(&server.addr).await;
    server.kill();

    let other = tempfile::tempdir().unwrap();
    std::fs::write(file_of(other.path()), b"").unwrap();
    let server = spawn_logged(server_command(other.path(), &["--new-database"]));
    create_at(&server.addr).await;
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_database_is_checked_at_start_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let ids = database_with_tasks(dir.path(), 50).await;
    let server = spawn_logged(server_command(dir.path(), &[]));
    for id in &ids {
        let r = client::request(
            &server.addr,
            "GET",
            &format!("/v1/tasks/{id}"),
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .expect("get");
        assert_eq!(r.status, 200, "{id}");
    }
    // The check's line is written before the address; its reader thread
    // may not have passed it on yet.
    let t0 = Instant::now();
    let mut checked = server.stderr_lines("integrity check");
    while checked.is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        checked = server.stderr_lines("integrity check");
    }
    let shown = file_of(dir.path()).display().to_string();
    assert_eq!(checked.len(), 1, "{checked:?}");
    assert!(
        checked[0].starts_with(&format!(
            "taskwire-server: {shown}: integrity check (PRAGMA quick_check) ok in "
        )),
        "{}",
        checked[0]
    );
    server.kill();
}
