use taskwire_core::{create_task, CreateTask, Event, State};
use taskwire_wire::from_json;

use super::*;
use crate::store::SignedRequest;
use crate::store::EXACT_REQUEST;

fn record() -> TaskRecord {
    let task = create_task(&CreateTask::new("t1", 0.0, 1e9, 2)).expect("a task");
    TaskRecord {
        tenant: "acme".into(),
        view: task.view().clone(),
        kind: None,
        input: None,
        lease: None,
        batch: None,
    }
}

fn event(json: &str) -> Event {
    from_json(json, "event").expect("an event")
}

fn start() -> Event {
    event(r#"{"type":"start","atMs":10,"worker":"w"}"#)
}

fn callback(event: Event) -> Callback {
    Callback {
        tenant: "acme".into(),
        task_id: "t1".into(),
        callback_id: "msg_1".into(),
        event,
        received: taskwire_core::Millis::new(10.0, "t").unwrap(),
        signed: SignedRequest {
            at: 1_000,
            body_sha256: [7; 32],
        },
    }
}

fn never() -> Result<bool, StoreError> {
    panic!("a fact was asked for an id this task already knows")
}

fn unused() -> Result<bool, StoreError> {
    Ok(false)
}

fn idempotency() -> Idempotency {
    Idempotency {
        key: "k".into(),
        request: format!("{EXACT_REQUEST}{{\"ttlMs\":1}}"),
        legacy_request: "{\"ttlMs\":1.0}".into(),
    }
}

#[test]
fn a_key_on_file_replays_the_same_create_and_refuses_another_body() {
    let idem = idempotency();
    assert_eq!(check_key(&idem, None), Ok(KeyCheck::Create));
    let exact = Some((idem.request.clone(), "t1".to_string()));
    assert_eq!(check_key(&idem, exact), Ok(KeyCheck::Replay("t1".into())));
    // A row an earlier server wrote is compared in its legacy form.
    let legacy = Some((idem.legacy_request.clone(), "t1".to_string()));
    assert_eq!(check_key(&idem, legacy), Ok(KeyCheck::Replay("t1".into())));
    let other = Some((format!("{EXACT_REQUEST}{{\"ttlMs\":2}}"), "t1".to_string()));
    assert_eq!(
        check_key(&idem, other),
        Err(StoreError::IdempotencyKeyReused("k".into()))
    );
}

#[test]
fn a_replay_answers_the_task_it_made_and_a_missing_one_is_internal() {
    let replay = replayed("t1", Some(record())).expect("a replay");
    assert!(!replay.created);
    assert_eq!(replay.record, record());
    assert_eq!(
        replayed("t9", None).map(|c| c.created),
        Err(StoreError::Internal(
            "idempotency row points at missing task t9".into()
        ))
    );
}

#[test]
fn a_seen_callback_id_is_answered_without_asking_for_its_owner() {
    let mut r = record();
    let cb = callback(start());
    let Ok(CallbackStep::Answered(same)) =
        judge_callback(&mut r, &cb, Some(&start()), never, never)
    else {
        panic!("a redelivery is answered")
    };
    assert!(same.duplicate_callback);
    assert_eq!(same.reason, Reason::DuplicateCallback);
    let other = event(r#"{"type":"start","atMs":11,"worker":"w2"}"#);
    let Ok(CallbackStep::Answered(conflict)) =
        judge_callback(&mut r, &cb, Some(&other), never, never)
    else {
        panic!("a reused id with another event is answered")
    };
    assert!(!conflict.duplicate_callback);
    assert_eq!(conflict.reason, Reason::CallbackConflict);
    assert_eq!(r, record(), "nothing moved");
}

#[test]
fn an_id_owned_by_another_task_is_refused_before_core_steps() {
    let mut r = record();
    let refused = judge_callback(&mut r, &callback(start()), None, unused, || Ok(true));
    assert!(matches!(refused, Err(StoreError::CallbackIdReused(id)) if id == "msg_1"));
    assert_eq!(r, record(), "nothing moved");
    // The owner lookup's own failure is the callback's.
    let failed = judge_callback(&mut r, &callback(start()), None, unused, || {
        Err(StoreError::Unavailable("disk".into()))
    });
    assert!(matches!(failed, Err(StoreError::Unavailable(m)) if m == "disk"));
}

#[test]
fn a_changing_callback_is_judged_and_its_id_remembered_by_reference() {
    let mut r = record();
    let Ok(CallbackStep::Judged(JudgedCallback {
        judged,
        remember,
        remember_request,
        answer,
    })) = judge_callback(&mut r, &callback(start()), None, unused, || Ok(false))
    else {
        panic!("a new callback is judged")
    };
    assert!(judged.write);
    assert_eq!(judged.appended.len(), 1);
    assert_eq!(
        remember,
        Some(CallbackRef {
            version: Some(1),
            event: None
        })
    );
    assert!(!remember_request, "its id is remembered instead");
    assert!(answer.changed && !answer.duplicate_callback);
    assert_eq!((answer.version, answer.state), (1, State::Running));
    assert_eq!(r.view.version, 1, "the record moved in place");
    // The same start again changes nothing: its id is not remembered.
    let again = callback(start());
    let Ok(CallbackStep::Judged(step)) = judge_callback(&mut r, &again, None, unused, || Ok(false))
    else {
        panic!("judged")
    };
    let (remember, answer) = (step.remember, step.answer);
    assert_eq!(remember, None);
    assert!(step.remember_request, "the request is remembered instead");
    assert!(!answer.changed && answer.duplicate);
}

#[test]
fn a_signed_request_used_before_is_a_duplicate_callback_and_changes_nothing() {
    // A `fail` while queued changed nothing: the request is remembered.
    let mut r = record();
    let fail = callback(event(
        r#"{"type":"fail","atMs":20,"error":"e","retryable":false}"#,
    ));
    let Ok(CallbackStep::Judged(first)) = judge_callback(&mut r, &fail, None, unused, unused)
    else {
        panic!("judged")
    };
    assert!(first.remember_request && first.remember.is_none());
    assert_eq!(first.answer.reason, Reason::NotRunning);
    // After a start, the same signed request again changes nothing, and
    // no owner is asked.
    judge_event(&mut r, &start(), None);
    let before = r.clone();
    let Ok(CallbackStep::Answered(replayed)) =
        judge_callback(&mut r, &fail, None, || Ok(true), never)
    else {
        panic!("a used request is answered")
    };
    assert!(replayed.duplicate_callback && replayed.duplicate && !replayed.changed);
    assert_eq!(replayed.reason, Reason::DuplicateCallback);
    assert_eq!((replayed.version, replayed.state), (1, State::Running));
    assert_eq!(r, before, "nothing moved");
    // Signed again (not used): core fix 1, the event applies.
    let Ok(CallbackStep::Judged(resent)) = judge_callback(&mut r, &fail, None, unused, unused)
    else {
        panic!("judged")
    };
    assert!(resent.answer.changed && !resent.remember_request);
    // An id remembered on the task is answered from it, the fact unasked.
    let Ok(CallbackStep::Answered(again)) =
        judge_callback(&mut r, &fail, Some(&fail.event), never, never)
    else {
        panic!("answered")
    };
    assert_eq!(again.reason, Reason::DuplicateCallback);
}

#[test]
fn delivery_errors_become_store_errors_and_only_a_new_receipt_is_filed() {
    assert!(matches!(
        delivery_input(" ", 1.0),
        Err(StoreError::Invalid(e)) if e.message.contains("idempotencyKey")
    ));
    let (key, now) = delivery_input("d1", 100.0).expect("valid input");
    assert_eq!(
        judge_delivery(None, "t9", None, &key, now).map(|d| d.ok),
        Err(StoreError::NotFound("t9".into()))
    );
    let mut r = record();
    let early = judge_delivery(None, "t1", Some(&r.view), &key, now).expect("an answer");
    assert_eq!(early.reason, DeliveryReason::NotSucceeded);
    assert_eq!(receipt_to_store(&early), None, "nothing to file");
    judge_event(&mut r, &start(), None);
    judge_event(
        &mut r,
        &event(r#"{"type":"succeed","atMs":20,"resultRef":"r","resultHash":"h"}"#),
        None,
    );
    let first = judge_delivery(None, "t1", Some(&r.view), &key, now).expect("delivered");
    assert_eq!(first.reason, DeliveryReason::Delivered);
    let filed = receipt_to_store(&first)
        .expect("a new receipt is filed")
        .clone();
    let again = judge_delivery(Some(&filed), "t1", Some(&r.view), &key, now).expect("a repeat");
    assert_eq!(again.reason, DeliveryReason::DuplicateDelivery);
    assert_eq!(receipt_to_store(&again), None, "already on file");
}

#[test]
fn a_forced_snapshot_overrides_core_plan() {
    assert_eq!(resume_plan(5, 5, 8, false), ResumePlan::CaughtUp);
    assert_eq!(resume_plan(5, 3, 8, false), ResumePlan::Delta);
    assert_eq!(resume_plan(5, 5, 8, true), ResumePlan::Snapshot);
    assert_eq!(resume_plan(5, 3, 8, true), ResumePlan::Snapshot);
}
