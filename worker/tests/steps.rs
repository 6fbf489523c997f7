//! Steps with checkpoints (PROTOCOL.md §Steps) against the real server:
//! attempt 1 finishes two of three steps and fails, or its process is
//! killed; attempt 2 gets their checkpoints with its claim and starts at
//! the third, so no step runs twice.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{spawn, Server};
use serde_json::json;
use taskwire_worker::{Done, Job, JobError, RetryableError, StepOutput, StepRefused};

const STEPS: [&str; 3] = ["load", "classify", "publish"];

/// A `pack` task with the plan `v1` of [`STEPS`]; its id.
async fn create_planned(server: &Server) -> String {
    server
        .create(
            "pack",
            json!({}),
            json!({"workflowVersion": "v1", "steps": STEPS}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_attempt_resumes_at_the_first_unfinished_step_and_runs_no_step_twice() {
    let server = Server::start(&[]);
    let worker = server.worker("w-steps").build().unwrap();
    let runs: Arc<Mutex<HashMap<(u64, String), u32>>> = Arc::default();
    let seen = Arc::clone(&runs);
    worker
        .handle("pack", move |job| {
            let seen = Arc::clone(&seen);
            async move {
                let mut facts = Vec::new();
                for (n, name) in STEPS.into_iter().enumerate() {
                    let label = format!("{}/3: {name}", n + 1);
                    let checkpoint = job
                        .step_labelled(name, &label, || async {
                            *seen
                                .lock()
                                .unwrap()
                                .entry((job.attempt(), name.to_string()))
                                .or_default() += 1;
                            Ok(StepOutput::new(
                                format!("blob://{}/{name}", job.id()),
                                format!("sha256:{name}"),
                            ))
                        })
                        .await?;
                    facts.push(checkpoint.output_hash.to_string());
                    if job.attempt() == 1 && name == "classify" {
                        // Attempt 1 dies after its second step.
                        Err(RetryableError("worker lost its vendor session".into()))?;
                    }
                }
                Ok(Done::result(
                    format!("blob://{}", job.id()),
                    facts.join(","),
                ))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server
        .create(
            "pack",
            json!({}),
            json!({"workflowVersion": "2026-09-17.1", "steps": STEPS}),
        )
        .await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 2, "{task}");
    assert_eq!(task["progress"], 100);
    // Attempt 2 used the checkpoints of attempt 1 for the steps it skipped.
    assert_eq!(
        task["resultHash"],
        "sha256:load,sha256:classify,sha256:publish"
    );
    let ran = runs.lock().unwrap().clone();
    let expected: HashMap<(u64, String), u32> = [
        ((1, "load".to_string()), 1),
        ((1, "classify".to_string()), 1),
        ((2, "publish".to_string()), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        ran, expected,
        "each step ran once, in the attempt that finished it"
    );
    let attempts: Vec<_> = task["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].clone(), s["status"].clone(), s["attempt"].clone()))
        .collect();
    let labels: Vec<_> = task["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].clone())
        .collect();
    assert_eq!(
        labels,
        [
            json!("1/3: load"),
            json!("2/3: classify"),
            json!("3/3: publish")
        ],
        "each step keeps the label its running report gave"
    );
    assert_eq!(
        attempts,
        [
            (json!("load"), json!("succeeded"), json!(1)),
            (json!("classify"), json!("succeeded"), json!(1)),
            (json!("publish"), json!("succeeded"), json!(2)),
        ]
    );
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

type Runs = Arc<Mutex<HashMap<(u64, String), u32>>>;

/// Runs the three steps, counting each run by attempt; attempt 1 stops
/// after `classify` and waits forever (its process is killed meanwhile).
async fn three_steps(job: Job, runs: Runs) -> Result<Done, JobError> {
    let mut facts = Vec::new();
    for name in STEPS {
        let checkpoint = job
            .step(name, || async {
                *runs
                    .lock()
                    .unwrap()
                    .entry((job.attempt(), name.to_string()))
                    .or_default() += 1;
                Ok(StepOutput::new(
                    format!("blob://{}/{name}", job.id()),
                    format!("sha256:{name}"),
                ))
            })
            .await?;
        facts.push(checkpoint.output_hash.to_string());
        if job.attempt() == 1 && name == "classify" {
            std::future::pending::<()>().await;
        }
    }
    Ok(Done::result(
        format!("blob://{}", job.id()),
        facts.join(","),
    ))
}

/// Attempt 1's process is killed after its second step (its run dropped:
/// no more heartbeats); the lease lapses, the grace period passes, and
/// another worker's attempt 2 starts at the third step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_killed_worker_the_next_attempt_resumes_at_the_first_unfinished_step() {
    let server = Server::start(&[]);
    let runs: Runs = Arc::default();
    let doomed = server.worker("w-doomed").build().unwrap();
    let seen = Arc::clone(&runs);
    doomed
        .handle("pack", move |job| three_steps(job, Arc::clone(&seen)))
        .unwrap();
    let run = spawn(&doomed);
    let id = server
        .create(
            "pack",
            json!({}),
            json!({"workflowVersion": "v1", "steps": STEPS, "unknownGraceMs": 1000}),
        )
        .await;
    server
        .wait_for(&id, "classify succeeded", |t| {
            t["steps"][1]["status"] == "succeeded"
        })
        .await;
    run.abort();
    let _ = run.await;
    let lapsed = server.wait_state(&id, "unknown").await;
    assert_eq!(lapsed["progress"], 66, "{lapsed}");
    let heir = server.worker("w-heir").build().unwrap();
    let seen = Arc::clone(&runs);
    heir.handle("pack", move |job| three_steps(job, Arc::clone(&seen)))
        .unwrap();
    let run_heir = spawn(&heir);
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 2, "{task}");
    assert_eq!(
        task["resultHash"],
        "sha256:load,sha256:classify,sha256:publish"
    );
    let ran = runs.lock().unwrap().clone();
    let expected: HashMap<(u64, String), u32> = [
        ((1, "load".to_string()), 1),
        ((1, "classify".to_string()), 1),
        ((2, "publish".to_string()), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(ran, expected, "no step ran twice");
    heir.shutdown(Duration::from_secs(1)).await;
    run_heir.await.unwrap();
}

/// A step report the server refuses is answered `continue` (the attempt
/// is alive), so the library reads whether it was taken: a step the plan
/// lacks, or any step of a task without a plan, is never run, and the
/// handler gets [`StepRefused`] naming the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_step_is_never_run_and_its_reason_reaches_the_handler() {
    let server = Server::start(&[]);
    let worker = server.worker("w-refused").build().unwrap();
    let runs = Arc::new(Mutex::new(0u32));
    let refusals: Arc<Mutex<Vec<String>>> = Arc::default();
    let (counted, heard) = (Arc::clone(&runs), Arc::clone(&refusals));
    worker
        .handle("pack", move |job| {
            let (counted, heard) = (Arc::clone(&counted), Arc::clone(&heard));
            async move {
                let step = job.step("not-in-the-plan", || async {
                    *counted.lock().unwrap() += 1;
                    Ok(StepOutput::new("blob://x", "sha256:x"))
                });
                let e = step.await.expect_err("refused");
                let refused = e
                    .source()
                    .and_then(|s| s.downcast_ref::<StepRefused>())
                    .expect("a StepRefused");
                assert_eq!(refused.step, "not-in-the-plan");
                heard.lock().unwrap().push(refused.reason.clone());
                Err(e)
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let planned = create_planned(&server).await;
    let task = server.wait_state(&planned, "failed").await;
    assert_eq!(
        task["error"], "step \"not-in-the-plan\" refused: unknown-step",
        "{task}"
    );
    let unplanned = server.create("pack", json!({}), json!({})).await;
    server.wait_state(&unplanned, "failed").await;
    assert_eq!(*runs.lock().unwrap(), 0, "no refused step ran");
    assert_eq!(*refusals.lock().unwrap(), ["unknown-step", "no-plan"]);
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

/// A step this attempt finished is finished: asked again in the same
/// attempt, it answers its checkpoint without running (the claimed task
/// only knows what earlier attempts did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_asked_twice_in_one_attempt_runs_once() {
    let server = Server::start(&[]);
    let worker = server.worker("w-twice").build().unwrap();
    let runs = Arc::new(Mutex::new(0u32));
    let counted = Arc::clone(&runs);
    worker
        .handle("pack", move |job| {
            let counted = Arc::clone(&counted);
            async move {
                let mut got = Vec::new();
                for _ in 0..2 {
                    let checkpoint = job
                        .step("load", || async {
                            *counted.lock().unwrap() += 1;
                            Ok(StepOutput::new("blob://load", "sha256:load"))
                        })
                        .await?;
                    got.push(checkpoint.output_ref.to_string());
                }
                assert!(job.step_done("load"));
                assert_eq!(
                    job.step_checkpoint("load")
                        .map(|c| c.output_hash.to_string()),
                    Some("sha256:load".to_string())
                );
                Ok(Done::result(got.join(","), "sha256:twice"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = create_planned(&server).await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["resultRef"], "blob://load,blob://load");
    assert_eq!(*runs.lock().unwrap(), 1, "the second ask did not run it");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

/// A cancel carried by the answer to a step's `succeeded` report: the step
/// is recorded all the same, so a handler that goes on after
/// `cannot_cancel` gets its checkpoint when it asks again, and the step
/// does not run twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_recorded_with_a_cancel_in_its_answer_stays_finished() {
    let server = Arc::new(Server::start(&[]));
    let worker = server.worker("w-cancelled").build().unwrap();
    let runs = Arc::new(Mutex::new(0u32));
    let (counted, api) = (Arc::clone(&runs), Arc::clone(&server));
    worker
        .handle("pack", move |job| {
            let (counted, api) = (Arc::clone(&counted), Arc::clone(&api));
            async move {
                let id = job.id().to_string();
                let first = job
                    .step("load", || async {
                        *counted.lock().unwrap() += 1;
                        // A person cancels while the step finishes: the
                        // answer to its `succeeded` report says `cancel`.
                        let (status, _) = api
                            .call("POST", &format!("/v1/tasks/{id}/cancel"), Some(json!({})))
                            .await;
                        assert_eq!(status, 200);
                        Ok(StepOutput::new("blob://load", "sha256:load"))
                    })
                    .await;
                assert!(first.is_err(), "the cancel reaches the handler");
                // The write cannot be undone: the work goes on.
                job.cannot_cancel(Some("the summary was sent")).await?;
                let again = job
                    .step("load", || async {
                        *counted.lock().unwrap() += 1;
                        Ok(StepOutput::new("blob://other", "sha256:other"))
                    })
                    .await?;
                Ok(Done::result(again.output_ref.to_string(), "sha256:done"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = create_planned(&server).await;
    let task = server.wait_state(&id, "cancelled").await;
    assert_eq!(
        *runs.lock().unwrap(),
        1,
        "the recorded step did not run again"
    );
    assert_eq!(task["resultRef"], "blob://load", "{task}");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}
