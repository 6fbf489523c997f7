//! Live output from a worker against the real server (PROTOCOL.md §Live
//! output): a draft written word by word reaches a follower exactly, and
//! a replaced worker's draft is superseded by its replacement's.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{spawn, Server};
use serde_json::{json, Value};
use taskwire_core::OutputMirror;
use taskwire_worker::{Done, Output};

/// Follows `draft` by long-poll as a page would (core's `OutputMirror`
/// assembles it), until the server says it is complete. Returns the text
/// and how many times it was replaced.
async fn follow(server: &Server, id: &str) -> (String, usize) {
    let mut mirror = OutputMirror::new();
    let mut replaced = 0;
    let mut cursor = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !mirror.is_closed() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never complete: {}",
            mirror.text()
        );
        let (attempt, offset) = mirror.resume_from();
        let (status, answer) = server
            .call(
                "GET",
                &format!(
                    "/v1/tasks/{id}/resume?cursor={cursor}&waitMs=5000&output=draft\
                     &outputAttempt={attempt}&outputOffset={offset}"
                ),
                None,
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        cursor = answer["task"]["version"].as_u64().unwrap();
        let out: &Value = &answer["output"];
        let at = out["attempt"].as_u64().unwrap();
        let update = mirror.apply(
            at,
            out["offset"].as_u64().unwrap(),
            out["text"].as_str().unwrap(),
        );
        assert_eq!(update.gap, None, "the server never sends past the end");
        replaced += usize::from(update.replaced);
        if out["complete"] == true {
            replaced += usize::from(mirror.close(at).replaced);
        }
    }
    (mirror.text().to_string(), replaced)
}

const DRAFT: &str = "The summary, written word by word: naïve café 😀 done.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_written_word_by_word_reaches_the_follower_exactly() {
    let server = Server::start(&[]);
    let worker = server.worker("w-draft").build().unwrap();
    worker
        .handle("summary", |job| async move {
            let draft = job.output("draft")?;
            for word in DRAFT.split_inclusive(' ') {
                draft.write(word).await?;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            // No flush: the last words go before the succeed.
            Ok(Done::result("blob://summary", "sha256:s"))
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server.create("summary", json!({}), json!({})).await;
    let (text, replaced) = follow(&server, &id).await;
    assert_eq!(text, DRAFT);
    assert_eq!(replaced, 0);
    assert_eq!(server.get(&id).await["state"], "succeeded");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_workers_draft_is_superseded_and_its_later_writes_fenced() {
    let server = Server::start(&[]);
    // The first worker writes part of a draft, then hangs until it is
    // shut down (its task is handed back, retryable).
    let first = server.worker("w-first").build().unwrap();
    let kept: Arc<Mutex<Option<Output>>> = Arc::default();
    let keep = Arc::clone(&kept);
    first
        .handle("summary", move |job| {
            let keep = Arc::clone(&keep);
            async move {
                let draft = job.output("draft")?;
                draft.write("The old draft, never finished").await?;
                draft.flush().await?;
                *keep.lock().unwrap() = Some(draft);
                job.cancelled().await;
                Err(taskwire_worker::JobError::cancelled())
            }
        })
        .unwrap();
    let run_first = spawn(&first);
    let id = server.create("summary", json!({}), json!({})).await;
    server
        .wait_for(&id, "old draft", |_| kept.lock().unwrap().is_some())
        .await;
    first.shutdown(Duration::from_millis(200)).await;
    run_first.await.unwrap();
    server.wait_state(&id, "queued").await;

    let second = server.worker("w-second").build().unwrap();
    second
        .handle("summary", |job| async move {
            assert_eq!(job.attempt(), 2);
            let draft = job.output("draft")?;
            draft.write("The new draft.").await?;
            Ok(Done::result("blob://new", "sha256:n"))
        })
        .unwrap();
    let run_second = spawn(&second);
    let (text, _) = follow(&server, &id).await;
    assert_eq!(text, "The new draft.", "never mixed with the old one");
    // The first attempt's writer is fenced off (or the output is closed).
    let old = kept.lock().unwrap().clone().unwrap();
    old.write(" zombie").await.unwrap();
    let fenced = old.flush().await.unwrap_err();
    assert_eq!(
        fenced.class(),
        taskwire_worker::ErrorClass::Cancelled,
        "{fenced:?}"
    );
    let (_, answer) = server
        .call(
            "GET",
            &format!("/v1/tasks/{id}/resume?cursor=0&output=draft"),
            None,
        )
        .await;
    assert_eq!(answer["output"]["text"], "The new draft.");
    second.shutdown(Duration::from_secs(1)).await;
    run_second.await.unwrap();
}
