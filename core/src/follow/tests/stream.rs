//! The SSE decisions: messages across chunks, the fallback to long-poll,
//! the first-message and idle deadlines.

use super::*;

#[test]
fn sse_reads_messages_across_chunks_and_falls_back_after_short_streams() {
    let mut h = H::new(Transport::Sse, true);
    let r = h.sent[0].clone();
    assert_eq!(
        (r.kind, r.path.as_str(), r.last_event_id, r.query.as_str()),
        (RequestKind::Stream, "/v1/tasks/t/events", Some(0), "")
    );
    assert_eq!(r.accept(), "text/event-stream");
    h.f.handle_head(h.now, r.id, 200, None);
    let body = String::from_utf8(delta(&[entry(1, 0)], &view(1, "running", 0))).unwrap();
    let text = format!("event: resume\nid: 1\ndata: {body}\n\n: hb\n\n");
    let (a, b) = text.as_bytes().split_at(17);
    h.f.handle_chunk(h.now, r.id, a);
    h.f.handle_chunk(h.now, r.id, b);
    h.drain();
    assert_eq!(h.versions(), [1]);
    // Three streams in a row that end within a second: long-poll.
    for n in 0..3 {
        let id = h.last();
        assert_eq!(
            h.sent.last().unwrap().kind,
            RequestKind::Stream,
            "stream {n}"
        );
        h.f.handle_head(h.now, id, 200, None);
        h.f.handle_end(h.now, id);
        h.drain();
        if n < 2 {
            h.fire();
        }
    }
    let s = h.statuses().pop().unwrap();
    assert!(s.2.unwrap().contains("falling back to long-poll"));
    assert_eq!(h.sent.last().unwrap().query, "cursor=1&waitMs=25000");
    assert_eq!(h.f.transport(), Transport::LongPoll);
}

#[test]
fn a_stream_whose_first_message_never_comes_is_given_up() {
    let mut h = H::new(Transport::Sse, true);
    let id = h.last();
    assert_eq!(h.f.poll_timeout(), None, "no deadline before the head");
    h.f.handle_head(h.now, id, 200, None);
    assert_eq!(h.f.poll_timeout(), Some(h.now + SSE_FIRST_MESSAGE_MS));
    h.fire();
    assert_eq!(h.aborted, [id]);
    assert_eq!(
        h.statuses().pop().unwrap().2.as_deref(),
        Some("no event arrived: the stream looks buffered")
    );
}

#[test]
fn a_stream_that_goes_silent_after_its_first_message_is_presumed_dead() {
    let mut h = H::new(Transport::Sse, true);
    let id = h.last();
    h.f.handle_head(h.now, id, 200, None);
    let body = String::from_utf8(delta(&[entry(1, 0)], &view(1, "running", 0))).unwrap();
    h.f.handle_chunk(
        h.now,
        id,
        format!("event: resume\nid: 1\ndata: {body}\n\n").as_bytes(),
    );
    h.drain();
    assert_eq!(h.f.poll_timeout(), Some(h.now + SSE_IDLE_MS));
    // A heartbeat keeps it alive.
    h.advance(30_000.0);
    h.f.handle_chunk(h.now, id, b": hb\n\n");
    assert_eq!(h.f.poll_timeout(), Some(h.now + SSE_IDLE_MS));
    // Then nothing: the connection died without a word.
    h.fire();
    assert_eq!(h.aborted, [id]);
    let s = h.statuses().pop().unwrap();
    assert_eq!(s.0, ConnState::Reconnecting);
    assert_eq!(
        s.2.as_deref(),
        Some("the event stream went silent (no heartbeat for 45 s)")
    );
    h.fire();
    assert_eq!(h.sent.len(), 2, "reconnected");
    assert_eq!(h.sent[1].last_event_id, Some(1));
}

#[test]
fn a_stream_answered_204_on_a_terminal_mirror_ends_the_follow_without_another_request() {
    // A page reloaded after the task ended: its persisted mirror is
    // terminal, and the server answers the stream at that version 204.
    let mirror = Mirror::from_snapshot(view(5, "succeeded", 100));
    let mut h = H::starting_from(Transport::Sse, true, mirror, 0);
    assert_eq!(h.sent[0].last_event_id, Some(5));
    h.f.handle_head(h.now, h.last(), 204, None);
    h.drain();
    assert!(
        matches!(h.events.iter().rev().nth(1), Some(FollowEvent::Done(Some(t))) if t.version == 5),
        "{:?}",
        h.events
    );
    assert!(h.f.is_closed());
    assert_eq!(h.f.poll_timeout(), None, "no retry timer");
    assert_eq!(h.sent.len(), 1, "no further request");
}

#[test]
fn a_stream_answered_204_on_a_mirror_that_knows_nothing_asks_for_a_snapshot() {
    // Started from a cursor hint at the terminal version, with no task.
    let mut h = H::starting_from(Transport::Sse, true, Mirror::new("t").unwrap(), 5);
    assert_eq!(h.sent[0].last_event_id, Some(5));
    h.f.handle_head(h.now, h.last(), 204, None);
    h.drain();
    assert_eq!(h.sent.len(), 2, "asked again at once, without a backoff");
    assert_eq!(h.sent[1].kind, RequestKind::Snapshot);
    assert_eq!(h.sent[1].query, "cursor=5&snapshot=1");
    h.answer(&snapshot(&view(5, "succeeded", 100)));
    assert_eq!(h.versions(), [5]);
    assert!(h.f.is_closed());
}
