//! An 8-step document summary, run by a taskwire worker.
//!
//! ```text
//! cargo run -p taskwire-server &                  # the reference server
//! cargo run -p taskwire-worker --example summary  # this worker
//! curl -s localhost:8080/v1/tasks -H 'authorization: Bearer demo' \
//!   -d '{"ttlMs":600000,"maxAttempts":3,"kind":"summary","input":{"doc":"…","approval":true}}'
//! ```
//!
//! Each step sleeps a little (the "tool call"), checks the cancellation
//! signal before and after it, and reports progress with the step as its
//! cursor. With `"approval": true` the draft (step 4) is held for a
//! person; after `approve` or `request_changes` the next attempt reads
//! the decision and goes on from the draft. Ctrl-C shuts the worker down
//! gracefully: unfinished tasks are handed back for another worker.
//!
//! Environment: `TASKWIRE_URL` (default `http://127.0.0.1:8080`),
//! `TASKWIRE_TENANT` (`demo`), `TASKWIRE_SECRET` (the server's public
//! development secret), `STEP_MS` (300).

use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use taskwire_worker::{Done, FatalError, Job, JobError, Worker};

/// The development secret of the reference server (server/README.md).
const DEV_SECRET: &str = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q=";

const STEPS: [&str; 8] = [
    "fetch", "split", "extract", "draft", "refine", "cite", "format", "publish",
];
/// The step after which a draft is held for approval.
const DRAFT: usize = 3;

#[derive(Deserialize)]
struct Input {
    doc: String,
    #[serde(default)]
    approval: bool,
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

async fn summarize(job: Job, step_ms: u64) -> Result<Done, JobError> {
    let input: Input = job.input()?;
    if input.doc.trim().is_empty() {
        Err(FatalError("input.doc: must not be blank".into()))?;
    }
    // A later attempt after a decision goes on from the held draft.
    let decision = job.task().decision.clone();
    let first = if decision.is_some() { DRAFT + 1 } else { 0 };
    if let Some(d) = &decision {
        println!(
            "{}: attempt {} goes on after {} ({})",
            job.id(),
            job.attempt(),
            d.kind.as_str(),
            d.reason.as_deref().unwrap_or("no reason")
        );
    }
    let mut summary = String::new();
    for (i, step) in STEPS.iter().enumerate().skip(first) {
        job.check()?; // before the tool call
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(step_ms)) => {}
            _ = job.token().cancelled_owned() => {}
        }
        job.check()?; // and after it
        summary.push_str(step);
        summary.push(' ');
        let percent = ((i + 1) * 100 / STEPS.len()) as u8;
        job.progress(percent.min(99), Some(step)).await?;
        if i == DRAFT && input.approval && decision.is_none() {
            let draft = format!("draft of {} words", input.doc.split_whitespace().count());
            let artifact = format!("memory://{}/draft", job.id());
            return job
                .hold(&artifact, &hash(&draft), Some("Publish this summary?"))
                .await;
        }
    }
    summary.push_str(&input.doc);
    Ok(Done::result(
        format!("memory://{}/summary", job.id()),
        hash(&summary),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let step_ms: u64 = env("STEP_MS", "300").parse()?;
    let worker = Worker::builder(
        env("TASKWIRE_URL", "http://127.0.0.1:8080"),
        env("TASKWIRE_TENANT", "demo"),
        env("TASKWIRE_SECRET", DEV_SECRET),
    )
    .concurrency(4)
    .build()?;
    worker.handle("summary", move |job| summarize(job, step_ms))?;
    println!("worker {} claiming kind summary", worker.name());
    let running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run().await }
    });
    tokio::signal::ctrl_c().await?;
    println!("shutting down (10 s of grace)");
    worker.shutdown(Duration::from_secs(10)).await;
    running.await??;
    Ok(())
}
