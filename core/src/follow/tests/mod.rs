//! The watch loop's decisions, one by one, in virtual time (the SSE ones
//! in `stream.rs`). The seeded simulation (`core/tests/follow_sim.rs`)
//! checks them all together.

mod batch;
mod stream;
mod timeout;

use super::*;
use crate::json::testing::{from_json, to_json};
use crate::{Mirror, ResumeAnswer, TaskView};

pub(super) fn view(version: u64, state: &str, progress: u8) -> TaskView {
    let extra = if state == "succeeded" {
        r#","resultRef":"r","resultHash":"h""#
    } else {
        ""
    };
    let attempts = u8::from(version > 0);
    from_json(
        &format!(
            r#"{{"id":"t","state":"{state}","expiresAtMs":1e12,"attempts":{attempts},"maxAttempts":3,"progress":{progress},"version":{version}{extra}}}"#
        ),
        "view",
    )
    .unwrap()
}

pub(super) fn entry(version: u64, progress: u8) -> String {
    if version == 1 {
        return r#"{"version":1,"event":{"type":"start","atMs":1,"worker":"w"}}"#.into();
    }
    format!(
        r#"{{"version":{version},"event":{{"type":"progress","atMs":{version},"progress":{progress},"cursor":""}}}}"#
    )
}

pub(super) fn delta(entries: &[String], task: &TaskView) -> Vec<u8> {
    format!(
        r#"{{"mode":"delta","events":[{}],"task":{}}}"#,
        entries.join(","),
        to_json(task)
    )
    .into_bytes()
}

pub(super) fn snapshot(task: &TaskView) -> Vec<u8> {
    to_json(&ResumeAnswer::Snapshot { task: task.clone() }).into_bytes()
}

/// The tests' configuration: quick backoff, a 25 s wait, seed 1.
pub(super) fn config(transport: Transport) -> FollowConfig {
    FollowConfig {
        backoff: Backoff {
            initial_ms: 100.0,
            max_ms: 1000.0,
        },
        transport,
        wait_ms: 25_000,
        seed: 1,
        ..FollowConfig::new(|t| from_json(t, "answer"), |t| from_json(t, "answer"))
    }
}

pub(super) struct H {
    pub(super) f: Follow,
    pub(super) now: f64,
    pub(super) events: Vec<FollowEvent>,
    pub(super) sent: Vec<Request>,
    pub(super) aborted: Vec<RequestId>,
}

impl H {
    pub(super) fn new(transport: Transport, online: bool) -> H {
        H::starting_from(transport, online, Mirror::new("t").unwrap(), 0)
    }
    /// A follow of `mirror` (e.g. one persisted by an earlier page load).
    pub(super) fn starting_from(
        transport: Transport,
        online: bool,
        mirror: Mirror,
        cursor_hint: u64,
    ) -> H {
        H::following(Follow::new(
            config(transport),
            mirror,
            cursor_hint,
            1_000.0,
            online,
        ))
    }
    /// Drives `f`, made at 1,000 ms.
    pub(super) fn following(f: Follow) -> H {
        let mut h = H {
            f,
            now: 1_000.0,
            events: Vec::new(),
            sent: Vec::new(),
            aborted: Vec::new(),
        };
        h.drain();
        h
    }
    pub(super) fn drain(&mut self) {
        while let Some(e) = self.f.poll_event() {
            self.events.push(e);
        }
        while let Some(id) = self.f.poll_abort() {
            self.aborted.push(id);
        }
        if let Some(r) = self.f.poll_request() {
            self.sent.push(r);
        }
    }
    pub(super) fn last(&self) -> RequestId {
        self.sent.last().unwrap().id
    }
    pub(super) fn answer(&mut self, body: &[u8]) {
        let id = self.last();
        self.f.handle_head(self.now, id, 200, None);
        self.f.handle_body(self.now, id, body);
        self.drain();
    }
    pub(super) fn advance(&mut self, ms: f64) {
        self.now += ms;
    }
    pub(super) fn fire(&mut self) {
        let at = self.f.poll_timeout().expect("a timer");
        self.now = self.now.max(at);
        self.f.handle_timeout(self.now);
        self.drain();
    }
    pub(super) fn statuses(&self) -> Vec<(ConnState, Option<u32>, Option<String>)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                FollowEvent::Status(s) => Some((s.state, s.attempt, s.error.clone())),
                _ => None,
            })
            .collect()
    }
    pub(super) fn versions(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                FollowEvent::Update(u) => u.task.as_ref().map(|t| t.version),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn long_polls_from_the_mirror_version_and_ends_on_a_terminal_task() {
    let mut h = H::new(Transport::LongPoll, true);
    assert_eq!(h.sent[0].path, "/v1/tasks/t/resume");
    assert_eq!(h.sent[0].query, "cursor=0&waitMs=25000");
    assert_eq!(h.sent[0].timeout_ms, Some(40_000));
    h.answer(&delta(&[entry(1, 0)], &view(1, "running", 0)));
    assert_eq!(h.sent[1].query, "cursor=1&waitMs=25000");
    h.answer(&snapshot(&view(5, "succeeded", 100)));
    assert_eq!(h.versions(), [1, 5]);
    assert!(
        matches!(h.events.iter().rev().nth(1), Some(FollowEvent::Done(Some(t))) if t.version == 5)
    );
    assert_eq!(
        h.statuses().iter().map(|s| s.0).collect::<Vec<_>>(),
        [ConnState::Connecting, ConnState::Live, ConnState::Closed]
    );
    assert!(h.f.is_closed() && h.f.poll_timeout().is_none() && h.sent.len() == 2);
}

#[test]
fn each_long_poll_carries_the_epoch_the_mirror_holds() {
    let mut h = H::new(Transport::LongPoll, true);
    // No epoch held yet: none sent.
    assert_eq!(h.sent[0].query, "cursor=0&waitMs=25000");
    let answer = String::from_utf8(snapshot(&view(2, "running", 10))).unwrap();
    let with_epoch = answer.replacen('{', r#"{"epoch":"e/1 2","#, 1);
    h.answer(with_epoch.as_bytes());
    // Percent-encoded as one query value, so that a server from another
    // history can answer at once (PROTOCOL.md §Epoch).
    assert_eq!(h.sent[1].query, "cursor=2&waitMs=25000&epoch=e%2F1%202");
}

#[test]
fn failures_back_off_with_full_jitter_and_a_success_resets_them() {
    let mut h = H::new(Transport::LongPoll, true);
    for (i, error) in ["reset", "refused", "reset"].iter().enumerate() {
        let id = h.last();
        h.f.handle_failure(h.now, id, Failure::Network(error));
        h.drain();
        let s = h.statuses().pop().unwrap();
        assert_eq!((s.0, s.1), (ConnState::Reconnecting, Some(i as u32 + 1)));
        assert_eq!(
            s.2.as_deref(),
            Some(format!("network error: {error}").as_str())
        );
        let Some(FollowEvent::Status(Status {
            retry_in_ms: Some(ms),
            ..
        })) = h.events.last()
        else {
            panic!()
        };
        assert!(*ms <= 100.0 * f64::from(1u32 << i), "{ms}");
        assert_eq!(h.sent.len(), i + 1, "nothing before the delay");
        h.fire();
    }
    h.answer(&delta(&[entry(1, 0)], &view(1, "running", 0)));
    let id = h.last();
    h.f.handle_head(h.now, id, 502, None);
    h.drain();
    let s = h.statuses().pop().unwrap();
    assert_eq!(
        (s.1, s.2.as_deref()),
        (Some(1), Some("unexpected HTTP status 502"))
    );
    assert_eq!(h.aborted, [id], "the body of an error is not read");
}

#[test]
fn retry_after_is_a_floor_and_fatal_statuses_end_it() {
    let mut h = H::new(Transport::LongPoll, true);
    let id = h.last();
    h.f.handle_head(h.now, id, 429, Some("2"));
    h.drain();
    assert!(h.f.poll_timeout().unwrap() >= h.now + 2000.0);
    h.fire();
    let id = h.last();
    h.f.handle_head(h.now, id, 404, None);
    h.drain();
    let Some(FollowEvent::Fail(fail)) = h.events.iter().rev().nth(1) else {
        panic!("{:?}", h.events)
    };
    assert_eq!((fail.code, fail.status), (FailCode::NotFound, 404));
    assert_eq!(h.statuses().pop().unwrap().0, ConnState::Closed);
    assert!(h.f.is_closed() && h.sent.len() == 2);
}

#[test]
fn a_gap_asks_for_a_snapshot_and_a_refused_snapshot_backs_off() {
    let mut h = H::new(Transport::LongPoll, true);
    h.answer(&delta(&[entry(1, 0)], &view(1, "running", 0)));
    h.answer(&delta(&[entry(3, 50)], &view(3, "running", 50)));
    assert_eq!(h.sent[2].query, "cursor=1&snapshot=1", "at once, not held");
    let mut other = view(3, "running", 50);
    other.id = "another".into();
    h.answer(&snapshot(&other));
    let s = h.statuses().pop().unwrap();
    assert_eq!(s.2.as_deref(), Some("the server's snapshot was refused"));
    h.fire();
    assert_eq!(h.sent[3].query, "cursor=1&snapshot=1");
    h.answer(&snapshot(&view(3, "running", 50)));
    assert_eq!(h.sent[4].query, "cursor=3&waitMs=25000", "back to resumes");
    assert_eq!(h.versions(), [1, 3]);
}

#[test]
fn stale_answers_back_off_instead_of_looping() {
    let mut h = H::new(Transport::LongPoll, true);
    h.answer(&delta(
        &[entry(1, 0), entry(2, 20)],
        &view(2, "running", 20),
    ));
    for attempt in 1..=4 {
        h.answer(&snapshot(&view(1, "running", 0)));
        assert_eq!(h.statuses().pop().unwrap().1, Some(attempt));
        h.fire();
    }
    assert_eq!(h.versions(), [2]);
    let rejects = h
        .events
        .iter()
        .filter(|e| matches!(e, FollowEvent::Reject(_)))
        .count();
    assert_eq!(rejects, 4);
}

#[test]
fn a_network_event_restarts_a_stranded_request_at_once() {
    let mut h = H::new(Transport::LongPoll, true);
    let first = h.last();
    h.f.handle_network(h.now, true);
    h.drain();
    assert_eq!(h.aborted, [first]);
    assert_eq!(h.sent.len(), 2, "reconnected at once");
    assert!(
        h.statuses().iter().all(|s| s.0 != ConnState::Reconnecting),
        "not a failure"
    );
    // The aborted request's own error, arriving late, is ignored.
    h.f.handle_failure(h.now, first, Failure::Network("aborted"));
    h.f.handle_body(h.now, first, b"{}");
    h.drain();
    assert_eq!(h.sent.len(), 2);
    assert!(h.statuses().iter().all(|s| s.0 != ConnState::Reconnecting));
}

#[test]
fn offline_sends_nothing_until_the_network_is_back() {
    let mut h = H::new(Transport::LongPoll, false);
    assert!(h.sent.is_empty());
    assert_eq!(h.statuses().pop().unwrap().0, ConnState::Offline);
    h.f.handle_visibility(h.now, true);
    h.fire();
    h.drain();
    assert!(
        h.sent.is_empty(),
        "still offline: the recheck sends nothing"
    );
    assert_eq!(h.statuses().len(), 2, "offline is reported once");
    // A missed `online` event: the recheck timer finds the reading.
    h.f.set_online(true);
    h.fire();
    assert_eq!(h.sent.len(), 1);
}

#[test]
fn stop_aborts_drops_what_the_page_has_not_heard_and_reports_stopped() {
    let mut h = H::new(Transport::LongPoll, true);
    let id = h.last();
    h.f.handle_head(h.now, id, 200, None);
    h.f.handle_body(h.now, id, &snapshot(&view(2, "succeeded", 100)));
    // The page has not polled the update or the done yet: a listener
    // stops the watch first.
    h.f.stop();
    h.drain();
    assert!(
        matches!(h.events.as_slice(), [FollowEvent::Status(_), FollowEvent::Fail(f), FollowEvent::Status(Status { state: ConnState::Closed, .. })] if f.code == FailCode::Stopped),
        "{:?}",
        h.events
    );
    h.f.stop();
    h.f.handle_network(h.now, true);
    h.drain();
    assert_eq!(h.events.len(), 3);
    assert!(h.sent.len() == 1 && h.f.poll_timeout().is_none());
}

#[test]
fn a_clock_that_jumps_back_does_not_hold_timers_back() {
    let mut h = H::new(Transport::LongPoll, true);
    let id = h.last();
    h.f.handle_failure(h.now, id, Failure::Network("x"));
    h.drain();
    let due = h.f.poll_timeout().unwrap();
    // The wall clock jumps an hour back before the timer fires.
    h.advance(-3_600_000.0);
    h.f.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.sent.len(), 2, "the timer is trusted");
    assert!(due >= 1_000.0);
    assert_eq!(
        h.f.poll_timeout(),
        Some(h.now + 40_000.0),
        "new deadlines count from the new clock"
    );
}

#[test]
fn ids_and_numbers_are_written_without_fmt() {
    let mut s = String::new();
    for n in [0, 7, 10, 12_345, u64::MAX] {
        s.clear();
        crate::text::push_u64(&mut s, n);
        assert_eq!(s, n.to_string());
    }
    s.clear();
    encode_segment("a/b?c#d e-é~", &mut s);
    assert_eq!(s, "a%2Fb%3Fc%23d%20e-%C3%A9~");
    let r = Request {
        id: RequestId(0),
        kind: RequestKind::Poll,
        path: "/p".into(),
        query: "q=1".into(),
        last_event_id: None,
        timeout_ms: None,
    };
    assert_eq!(r.url("http://h:1//"), "http://h:1/p?q=1");
}

#[test]
fn a_long_poll_answered_at_once_with_nothing_new_is_paced() {
    let mut h = H::new(Transport::LongPoll, true);
    h.answer(&delta(&[entry(1, 0)], &view(1, "running", 0)));
    // A server that ignores waitMs: caught-up at once, every time.
    let caught_up = format!(
        r#"{{"mode":"caught-up","events":[],"task":{}}}"#,
        to_json(&view(1, "running", 0))
    );
    h.answer(caught_up.as_bytes());
    let s = h.statuses().pop().unwrap();
    assert_eq!((s.0, s.1), (ConnState::Reconnecting, Some(1)));
    assert_eq!(h.sent.len(), 2, "not asked again at once");
    // Held for its whole wait, the same answer is just a quiet poll.
    h.fire();
    h.advance(25_000.0);
    h.answer(caught_up.as_bytes());
    assert_eq!(h.sent.len(), 4, "asked again at once");
    assert_eq!(h.statuses().pop().unwrap().0, ConnState::Live);
}
