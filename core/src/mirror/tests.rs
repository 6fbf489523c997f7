//! The epoch rule of the mirror (issue 14): another history's snapshot is
//! taken even at a lower version; within one epoch, or without one, the
//! rules are as before.

use super::*;
use crate::book::Book;
use crate::json::testing::from_json;
use crate::resume::{EpochAnswer, ResumeMode};

/// A book whose task `t` went through `starts` start/fail rounds: each
/// round is two versions (a retryable failure re-queues it).
fn book_at(starts: u64) -> Book {
    let mut book = Book::new();
    book.create(&crate::CreateTask::new("t", 0.0, 1e12, starts + 1))
        .unwrap();
    for i in 0..starts {
        let at = (i * 10) as f64;
        let start = format!(r#"{{"type":"start","atMs":{at},"worker":"w"}}"#);
        let fail = format!(
            r#"{{"type":"fail","atMs":{},"error":"x","retryable":true}}"#,
            at + 1.0
        );
        book.apply("t", from_json(&start, "event").unwrap(), None)
            .unwrap();
        book.apply("t", from_json(&fail, "event").unwrap(), None)
            .unwrap();
    }
    book
}

fn snapshot_of(book: &Book) -> ResumeAnswer {
    ResumeAnswer::Snapshot {
        task: book.get("t").unwrap().view().clone(),
    }
}

/// A mirror of epoch `epoch` holding task `t` at the book's version.
fn mirror_at(book: &Book, epoch: &str) -> Mirror {
    let mut mirror = Mirror::new("t").unwrap();
    let out = mirror.merge_from(Some(epoch), &snapshot_of(book));
    assert!(out.changed);
    assert_eq!(mirror.epoch(), Some(epoch));
    mirror
}

#[test]
fn a_snapshot_of_another_epoch_is_taken_even_at_a_lower_version() {
    let newer = book_at(3);
    let restored = book_at(1);
    let mut mirror = mirror_at(&newer, "e1");
    assert_eq!(mirror.version(), 6);
    let out = mirror.merge_from(Some("e2"), &snapshot_of(&restored));
    assert!(out.changed);
    assert_eq!(out.applied, vec![2]);
    assert!(out.rejected.is_empty());
    assert_eq!(out.next, Next::None);
    assert_eq!(out.reason, Some(UpdateReason::EpochChanged));
    assert_eq!(mirror.version(), 2);
    assert_eq!(mirror.epoch(), Some("e2"));
    // Attempts went back too: the regress rule does not cross epochs.
    assert_eq!(mirror.task().unwrap().attempts, 1);
}

#[test]
fn a_delta_or_caught_up_of_another_epoch_is_refused_and_asks_for_a_snapshot() {
    let newer = book_at(3);
    let restored = book_at(4);
    let mut mirror = mirror_at(&newer, "e1");
    // The restored history is ahead: a delta from the client's cursor
    // would replay another history's entries on this task.
    let delta = restored.resume("t", mirror.version()).unwrap();
    assert_eq!(delta.mode(), ResumeMode::Delta);
    let out = mirror.merge_from(Some("e2"), &delta);
    assert!(!out.changed);
    assert_eq!(
        out.rejected,
        vec![Rejection {
            version: 8,
            reason: RejectReason::OtherEpoch
        }]
    );
    assert_eq!(out.next, Next::Snapshot);
    assert_eq!(mirror.version(), 6);
    assert_eq!(mirror.epoch(), Some("e1"));
    let caught_up = ResumeAnswer::CaughtUp {
        task: Some(restored.get("t").unwrap().view().clone()),
    };
    let out = mirror.merge_from(Some("e2"), &caught_up);
    assert_eq!(out.next, Next::Snapshot);
    assert_eq!(out.rejected[0].reason, RejectReason::OtherEpoch);
    // The snapshot then moves it over.
    let out = mirror.merge_from(Some("e2"), &snapshot_of(&restored));
    assert_eq!(out.reason, Some(UpdateReason::EpochChanged));
    assert_eq!(mirror.version(), 8);
}

#[test]
fn within_one_epoch_a_stale_snapshot_is_still_refused() {
    let newer = book_at(3);
    let older = book_at(1);
    let mut mirror = mirror_at(&newer, "e1");
    let out = mirror.merge_from(Some("e1"), &snapshot_of(&older));
    assert!(!out.changed);
    assert_eq!(
        out.rejected,
        vec![Rejection {
            version: 2,
            reason: RejectReason::StaleSnapshot
        }]
    );
    assert_eq!(out.reason, None);
    assert_eq!(mirror.version(), 6);
    assert_eq!(mirror.epoch(), Some("e1"));
}

#[test]
fn an_answer_without_an_epoch_is_judged_as_before_and_keeps_the_epoch() {
    let newer = book_at(3);
    let older = book_at(1);
    let mut mirror = mirror_at(&newer, "e1");
    let out = mirror.merge_from(None, &snapshot_of(&older));
    assert_eq!(out.rejected[0].reason, RejectReason::StaleSnapshot);
    assert_eq!(mirror.version(), 6);
    let out = mirror.merge(&snapshot_of(&book_at(4)));
    assert!(out.changed);
    assert_eq!(out.reason, None);
    assert_eq!(mirror.epoch(), Some("e1"));
}

#[test]
fn a_mirror_without_an_epoch_learns_it_only_from_an_answer_it_accepts() {
    let newer = book_at(3);
    let mut mirror = Mirror::from_snapshot(newer.get("t").unwrap().view().clone());
    // Refused as stale: nothing says the task is of that history.
    let out = mirror.merge_from(Some("e2"), &snapshot_of(&book_at(1)));
    assert_eq!(out.rejected[0].reason, RejectReason::StaleSnapshot);
    assert_eq!(mirror.epoch(), None);
    let out = mirror.merge_from(Some("e1"), &newer.resume("t", 6).unwrap());
    assert!(out.rejected.is_empty());
    assert_eq!(mirror.epoch(), Some("e1"));
}

#[test]
fn the_epoch_is_persisted_and_read_back() {
    let mirror = mirror_at(&book_at(1), "e1");
    let text = crate::json::testing::to_json(&mirror);
    assert!(text.ends_with(r#","epoch":"e1"}"#), "{text}");
    let back: Mirror = from_json(&text, "mirror").unwrap();
    assert_eq!(back, mirror);
    assert_eq!(crate::json::write(&mirror), text);
    // A mirror persisted before epochs existed reads as one without.
    let old: Mirror = from_json(r#"{"taskId":"t","task":null}"#, "mirror").unwrap();
    assert_eq!(old.epoch(), None);
    let err =
        from_json::<Mirror>(r#"{"taskId":"t","task":null,"epoch":" "}"#, "mirror").unwrap_err();
    assert_eq!(err.message, "mirror.epoch: must not be blank");
}

#[test]
fn an_answer_reads_and_writes_its_epoch() {
    let text = r#"{"mode":"caught-up","events":[],"epoch":"e1"}"#;
    let answer: EpochAnswer = from_json(text, "answer").unwrap();
    assert_eq!(answer.epoch.as_deref(), Some("e1"));
    assert_eq!(crate::json::testing::to_json(&answer), text);
    let answer: EpochAnswer = from_json(r#"{"mode":"caught-up"}"#, "answer").unwrap();
    assert_eq!(answer.epoch, None);
    let err = from_json::<EpochAnswer>(r#"{"mode":"caught-up","epoch":7}"#, "answer").unwrap_err();
    assert!(err.message.starts_with("answer.epoch: "), "{}", err.message);
}
