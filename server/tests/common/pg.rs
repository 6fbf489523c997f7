//! A throwaway PostgreSQL server for the tests, started once per test
//! binary through `scripts/pg.sh run` (initdb in a temp dir, loopback
//! port, as the `postgres` user when root). The script stops the server
//! and deletes its directory when this process ends, however it ends: it
//! waits for its standard input, a pipe only this process holds.
//!
//! Without PostgreSQL binaries the tests skip with a message, unless
//! `TASKWIRE_PG_REQUIRED=1` (set by `npm test`), where they fail.

use std::io::{BufRead, BufReader};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

pub struct Cluster {
    /// `postgres://postgres@127.0.0.1:PORT`, without a database.
    pub base: String,
    _stdin: Mutex<ChildStdin>,
}

static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn start() -> Option<Cluster> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg.sh");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!("taskwire-pg-test-{}-{nanos}", std::process::id()));
    let mut child = Command::new("bash")
        .arg(script)
        .arg("run")
        .arg(&dir)
        .arg(free_port().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run scripts/pg.sh");
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    match line.trim().strip_prefix("ready ") {
        Some(url) => {
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            let base = url.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
            Some(Cluster {
                base,
                _stdin: Mutex::new(stdin),
            })
        }
        None => {
            let status = child.wait().unwrap();
            let required = std::env::var("TASKWIRE_PG_REQUIRED").is_ok_and(|v| v == "1");
            if status.code() == Some(3) && !required {
                eprintln!(
                    "SKIPPED: PostgreSQL server binaries not found (scripts/setup.sh postgres installs them)"
                );
                return None;
            }
            panic!("scripts/pg.sh could not start PostgreSQL ({status})");
        }
    }
}

/// The shared server, or `None` (test skipped) without PostgreSQL.
pub fn cluster() -> Option<&'static Cluster> {
    CLUSTER.get_or_init(start).as_ref()
}

/// A fresh, empty database on the shared server: its URL.
pub async fn database() -> Option<String> {
    static N: AtomicU32 = AtomicU32::new(0);
    let cluster = cluster()?;
    let name = format!("tw_{}", N.fetch_add(1, Ordering::Relaxed));
    let admin = admin(&format!("{}/postgres", cluster.base)).await;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    Some(format!("{}/{name}", cluster.base))
}

/// A plain client (for checks straight in the database).
pub async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    tokio::spawn(conn);
    client
}
