//! Following a batch: the same loop, its own target (the batch routes,
//! the batch cursor, per-task updates, progress, done).

use super::*;
use crate::batch::BatchMirror;
use crate::mirror::RejectReason;

fn task(id: &str, version: u64, state: &str, progress: u8) -> TaskView {
    let mut t = view(version, state, progress);
    t.id = id.into();
    t
}

fn snap(t: &TaskView) -> String {
    to_json(&ResumeAnswer::Snapshot { task: t.clone() })
}

fn del(entries: &[String], t: &TaskView) -> String {
    String::from_utf8(delta(entries, t)).unwrap()
}

/// A batch answer about `b`, two tasks.
fn batch(mode: &str, cursor: u64, open: u64, tasks: &[String]) -> Vec<u8> {
    format!(
        r#"{{"batchId":"b","mode":"{mode}","cursor":{cursor},"size":2,"open":{open},"epoch":"e","tasks":[{}]}}"#,
        tasks.join(",")
    )
    .into_bytes()
}

fn fresh(transport: Transport) -> H {
    let f = Follow::batch(
        config(transport),
        BatchMirror::new("b").unwrap(),
        1_000.0,
        true,
    );
    H::following(f)
}

fn updated(h: &H) -> Vec<(String, u64)> {
    h.events
        .iter()
        .filter_map(|e| match e {
            FollowEvent::Update(u) => u.task.as_ref().map(|t| (t.id.clone(), t.version)),
            _ => None,
        })
        .collect()
}

fn progress(h: &H) -> Vec<(u64, [u64; 11], f64)> {
    h.events
        .iter()
        .filter_map(|e| match e {
            FollowEvent::Progress(p) => Some((p.terminal, p.counts, p.progress)),
            _ => None,
        })
        .collect()
}

fn counts(pairs: &[(crate::State, u64)]) -> [u64; 11] {
    let mut c = [0; 11];
    for &(state, n) in pairs {
        c[state as usize] = n;
    }
    c
}

#[test]
fn one_long_poll_follows_the_batch_with_per_task_updates_progress_and_done() {
    use crate::State::{Queued, Running, Succeeded};
    let mut h = fresh(Transport::LongPoll);
    assert_eq!(h.sent[0].path, "/v1/batches/b/resume");
    assert_eq!(h.sent[0].query, "cursor=0&waitMs=25000");
    let (a0, b0) = (task("a", 0, "queued", 0), task("z", 0, "queued", 0));
    h.answer(&batch("snapshot", 1, 2, &[snap(&a0), snap(&b0)]));
    assert_eq!(h.sent[1].query, "cursor=1&waitMs=25000&epoch=e");
    let a1 = task("a", 1, "running", 0);
    h.answer(&batch("delta", 2, 2, &[del(&[entry(1, 0)], &a1)]));
    let a2 = task("a", 2, "running", 60);
    let z5 = task("z", 5, "succeeded", 100);
    h.answer(&batch(
        "delta",
        3,
        1,
        &[del(&[entry(2, 60)], &a2), snap(&z5)],
    ));
    assert_eq!(h.sent[3].query, "cursor=3&waitMs=25000&epoch=e");
    let a3 = task("a", 3, "succeeded", 100);
    h.answer(&batch("delta", 4, 0, &[snap(&a3)]));
    let versions: Vec<(&str, u64)> =
        [("a", 0), ("z", 0), ("a", 1), ("a", 2), ("z", 5), ("a", 3)].to_vec();
    let got = updated(&h);
    assert_eq!(
        got.iter()
            .map(|(id, v)| (id.as_str(), *v))
            .collect::<Vec<_>>(),
        versions,
        "an update per task whose version rose"
    );
    assert_eq!(
        progress(&h),
        [
            (0, counts(&[(Queued, 2)]), 0.0),
            (0, counts(&[(Queued, 1), (Running, 1)]), 0.0),
            (1, counts(&[(Running, 1), (Succeeded, 1)]), 80.0),
            (2, counts(&[(Succeeded, 2)]), 100.0),
        ]
    );
    assert!(matches!(
        h.events.iter().rev().nth(1),
        Some(FollowEvent::Done(None))
    ));
    assert_eq!(
        h.statuses().iter().map(|s| s.0).collect::<Vec<_>>(),
        [ConnState::Connecting, ConnState::Live, ConnState::Closed]
    );
    assert!(
        h.f.is_closed() && h.sent.len() == 4,
        "one request per answer"
    );
    let m = h.f.batch_mirror().unwrap();
    assert_eq!((m.cursor(), m.tasks()[1].version()), (4, 5));
    assert!(h.f.mirror().is_none());
}

#[test]
fn a_task_whose_answer_does_not_apply_asks_for_one_snapshot_of_the_whole_batch() {
    let mut h = fresh(Transport::LongPoll);
    let (a0, b0) = (task("a", 0, "queued", 0), task("z", 0, "queued", 0));
    h.answer(&batch("snapshot", 1, 2, &[snap(&a0), snap(&b0)]));
    let a1 = task("a", 1, "running", 0);
    let z2 = task("z", 2, "running", 30);
    h.answer(&batch(
        "delta",
        2,
        2,
        &[del(&[entry(1, 0)], &a1), del(&[entry(2, 30)], &z2)],
    ));
    assert_eq!(h.sent[2].query, "cursor=1&snapshot=1", "the batch, at once");
    let Some(FollowEvent::Reject(r)) = h
        .events
        .iter()
        .find(|e| matches!(e, FollowEvent::Reject(_)))
    else {
        panic!("{:?}", h.events)
    };
    assert_eq!(
        (r.task_id.as_deref(), r.rejected[0].reason),
        (Some("z"), RejectReason::Gap)
    );
    h.answer(&batch("snapshot", 2, 2, &[snap(&a1), snap(&z2)]));
    assert_eq!(
        h.sent[3].query, "cursor=2&waitMs=25000&epoch=e",
        "back to deltas"
    );
    assert_eq!(updated(&h).last(), Some(&("z".into(), 2)));
}

#[test]
fn a_replayed_batch_answer_is_refused_whole_and_backed_off() {
    let mut h = fresh(Transport::LongPoll);
    let (a0, b0) = (task("a", 0, "queued", 0), task("z", 0, "queued", 0));
    let first = batch("snapshot", 1, 2, &[snap(&a0), snap(&b0)]);
    h.answer(&first);
    let a1 = task("a", 1, "running", 0);
    h.answer(&batch("delta", 2, 2, &[del(&[entry(1, 0)], &a1)]));
    h.answer(&first);
    let Some(FollowEvent::Reject(r)) = h.events.iter().rev().nth(1) else {
        panic!("{:?}", h.events)
    };
    assert_eq!(
        (r.task_id.as_deref(), r.version, r.rejected[0].reason),
        (None, 2, RejectReason::StaleSnapshot)
    );
    let s = h.statuses().pop().unwrap();
    assert_eq!(
        (s.1, s.2.as_deref()),
        (Some(1), Some("the server's answer was stale"))
    );
    assert_eq!(h.sent.len(), 3, "nothing before the delay");
}

#[test]
fn a_batch_streams_its_answers_as_batch_events() {
    let mut h = fresh(Transport::Sse);
    let r = h.sent[0].clone();
    assert_eq!(
        (r.kind, r.path.as_str(), r.last_event_id),
        (RequestKind::Stream, "/v1/batches/b/events", Some(0))
    );
    h.f.handle_head(h.now, r.id, 200, None);
    let (a0, b0) = (task("a", 0, "queued", 0), task("z", 0, "queued", 0));
    let snapshot = String::from_utf8(batch("snapshot", 1, 2, &[snap(&a0), snap(&b0)])).unwrap();
    // A task's `resume` event is not a batch answer.
    let task_answer = String::from_utf8(super::snapshot(&a0)).unwrap();
    let text =
        format!("event: resume\ndata: {task_answer}\n\nevent: batch\nid: 1\ndata: {snapshot}\n\n");
    h.f.handle_chunk(h.now, r.id, text.as_bytes());
    h.drain();
    assert_eq!(updated(&h).len(), 2);
    assert_eq!(h.f.batch_mirror().unwrap().cursor(), 1);
    assert_eq!(h.sent.len(), 1, "the stream goes on");
}

#[test]
fn refusals_and_stops_name_the_batch() {
    let mut h = fresh(Transport::LongPoll);
    let id = h.last();
    h.f.handle_head(h.now, id, 404, None);
    h.drain();
    let Some(FollowEvent::Fail(fail)) = h.events.iter().rev().nth(1) else {
        panic!("{:?}", h.events)
    };
    assert_eq!(fail.message, "the server has no such batch (404)");
    let mut h = fresh(Transport::LongPoll);
    h.f.stop();
    h.drain();
    let Some(FollowEvent::Fail(fail)) = h.events.iter().rev().nth(1) else {
        panic!("{:?}", h.events)
    };
    assert_eq!(fail.message, "the watch was stopped before the batch ended");
}

#[test]
fn a_known_batch_reports_its_progress_at_once_and_resumes_from_its_cursor() {
    let views = vec![task("a", 0, "queued", 0), task("z", 3, "succeeded", 100)];
    let mirror = BatchMirror::from_tasks("b", 5, Some("e".into()), views).unwrap();
    let h = H::following(Follow::batch(
        config(Transport::LongPoll),
        mirror,
        1_000.0,
        true,
    ));
    assert!(
        matches!(&h.events[..], [FollowEvent::Status(_), FollowEvent::Progress(p)] if p.progress == 50.0 && p.terminal == 1)
    );
    assert_eq!(h.sent[0].query, "cursor=5&waitMs=25000&epoch=e");
}

#[test]
fn a_stream_answered_204_ends_a_done_batch_and_asks_a_snapshot_otherwise() {
    let done = vec![task("a", 3, "succeeded", 100), task("z", 3, "failed", 0)];
    let mirror = BatchMirror::from_tasks("b", 7, None, done).unwrap();
    let mut h = H::following(Follow::batch(config(Transport::Sse), mirror, 1_000.0, true));
    let id = h.last();
    h.f.handle_head(h.now, id, 204, None);
    h.drain();
    assert!(h.f.is_closed() && h.sent.len() == 1);
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, FollowEvent::Done(None))));
    let mut h = fresh(Transport::Sse);
    let id = h.last();
    h.f.handle_head(h.now, id, 204, None);
    h.drain();
    assert_eq!(h.sent[1].query, "cursor=0&snapshot=1");
}
