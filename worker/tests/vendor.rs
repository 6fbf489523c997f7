//! The vendor helper (seed 004): submit once under the job's key, poll;
//! a submit with an unknown outcome is never blindly sent again.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{spawn, Server};
use serde_json::json;
use taskwire_worker::{Done, JobError, Lookup, PollOptions, Status, SubmitError, Vendor};

/// A vendor in this process: it deduplicates by key, finishes a job after
/// two polls, and (when `lose_answer`) loses the answer of every submit
/// it accepted, as a timeout after sending would.
#[derive(Default)]
struct Ocr {
    submits: AtomicU32,
    polls: AtomicU32,
    jobs: Mutex<Vec<String>>,
    lose_answer: bool,
    can_look_up: bool,
    never_done: bool,
}

impl Vendor for Ocr {
    type Handle = String;
    type Output = String;

    async fn submit(&self, key: &str) -> Result<String, SubmitError> {
        self.submits.fetch_add(1, Ordering::SeqCst);
        let mut jobs = self.jobs.lock().unwrap();
        if !jobs.iter().any(|k| k == key) {
            jobs.push(key.to_string());
        }
        if self.lose_answer {
            // A timeout after sending: `?` sorts it as an unknown outcome.
            let lost = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 10 s");
            Err(lost)?;
        }
        Ok(key.to_string())
    }

    async fn poll(&self, handle: &String) -> Result<Status<String>, JobError> {
        if self.polls.fetch_add(1, Ordering::SeqCst) < 2 || self.never_done {
            Ok(Status::Pending)
        } else {
            Ok(Status::Done(format!("text of {handle}")))
        }
    }

    async fn lookup(&self, key: &str) -> Result<Lookup<String>, JobError> {
        if !self.can_look_up {
            return Ok(Lookup::Unsupported);
        }
        let jobs = self.jobs.lock().unwrap();
        Ok(match jobs.iter().find(|k| *k == key) {
            Some(k) => Lookup::Found(k.clone()),
            None => Lookup::NotFound,
        })
    }
}

fn fast() -> PollOptions {
    PollOptions {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        timeout: Some(Duration::from_secs(20)),
        ..PollOptions::default()
    }
}

async fn run_with(ocr: Arc<Ocr>) -> (serde_json::Value, Arc<Ocr>) {
    run_with_options(ocr, fast()).await
}

async fn run_with_options(ocr: Arc<Ocr>, options: PollOptions) -> (serde_json::Value, Arc<Ocr>) {
    let server = Server::start(&[]);
    let worker = server.worker("w-vendor").build().unwrap();
    let vendor = Arc::clone(&ocr);
    worker
        .handle("ocr", move |job| {
            let vendor = Arc::clone(&vendor);
            async move {
                let text = job.vendor("ocr", vendor.as_ref(), options).await?;
                Ok(Done::result(format!("blob://{text}"), "sha256:o"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server.create("ocr", json!(null), json!({})).await;
    let task = server
        .wait_for(&id, "ended", |t| {
            t["state"] == "succeeded" || t["state"] == "failed"
        })
        .await;
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
    (task, ocr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_is_sent_once_and_polled_until_done() {
    let (task, ocr) = run_with(Arc::new(Ocr::default())).await;
    let id = task["id"].as_str().unwrap();
    assert_eq!(task["state"], "succeeded", "{task}");
    assert_eq!(task["resultRef"], format!("blob://text of {id}:ocr:submit"));
    assert_eq!(ocr.submits.load(Ordering::SeqCst), 1);
    assert_eq!(ocr.polls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_submit_is_never_sent_again_without_a_lookup() {
    let ocr = Arc::new(Ocr {
        lose_answer: true,
        ..Ocr::default()
    });
    let (task, ocr) = run_with(ocr).await;
    assert_eq!(task["state"], "failed", "final, not retried: {task}");
    assert_eq!(task["attempts"], 1);
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("unknown outcome"), "{error}");
    assert!(error.contains(":ocr:submit"), "names the key: {error}");
    assert_eq!(ocr.submits.load(Ordering::SeqCst), 1);
    assert_eq!(ocr.polls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_submit_found_by_lookup_is_polled_not_resubmitted() {
    let ocr = Arc::new(Ocr {
        lose_answer: true,
        can_look_up: true,
        ..Ocr::default()
    });
    let (task, ocr) = run_with(ocr).await;
    assert_eq!(task["state"], "succeeded", "{task}");
    assert_eq!(ocr.submits.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vendor_job_still_pending_at_the_timeout_fails_final() {
    let ocr = Arc::new(Ocr {
        never_done: true,
        ..Ocr::default()
    });
    let options = PollOptions {
        timeout: Some(Duration::from_millis(300)),
        ..fast()
    };
    let (task, ocr) = run_with_options(ocr, options).await;
    assert_eq!(task["state"], "failed", "{task}");
    assert_eq!(task["attempts"], 1, "final: no second attempt");
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("still pending"), "{error}");
    assert_eq!(ocr.submits.load(Ordering::SeqCst), 1);
}
