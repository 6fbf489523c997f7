use alloc::string::{String, ToString};

use super::*;

fn chunk(attempt: u64, offset: u64, text: &str) -> Chunk {
    Chunk::new(attempt, offset, text.to_string(), "chunk").unwrap()
}

#[test]
fn appends_extend_and_resends_are_duplicates() {
    let mut log = OutputLog::new();
    let a = log.append(&chunk(1, 0, "Hello"), 1, true);
    assert_eq!(
        (a.reason, a.added.as_str(), a.offset),
        (AppendReason::Appended, "Hello", 0)
    );
    let b = log.append(&chunk(1, 5, ", world"), 1, true);
    assert_eq!((b.reason, b.expected), (AppendReason::Appended, 12));
    assert_eq!(log.text(), "Hello, world");
    let again = log.append(&chunk(1, 5, ", world"), 1, true);
    assert_eq!(
        (again.reason, again.added.as_str()),
        (AppendReason::DuplicateChunk, "")
    );
    assert!(again.reason.accepted());
    assert_eq!(log.text(), "Hello, world", "a duplicate changes nothing");
}

#[test]
fn a_different_chunk_at_a_written_offset_is_a_conflict_and_a_gap_is_refused() {
    let mut log = OutputLog::new();
    log.append(&chunk(1, 0, "abc"), 1, true);
    let conflict = log.append(&chunk(1, 1, "X"), 1, true);
    assert_eq!(conflict.reason, AppendReason::ChunkConflict);
    assert!(!conflict.reason.accepted());
    let gap = log.append(&chunk(1, 5, "d"), 1, true);
    assert_eq!((gap.reason, gap.expected), (AppendReason::OutputGap, 3));
    // An overlap that agrees appends only what is new.
    let overlap = log.append(&chunk(1, 1, "bcde"), 1, true);
    assert_eq!(
        (overlap.reason, overlap.added.as_str(), overlap.offset),
        (AppendReason::Appended, "de", 3)
    );
    let disagree = log.append(&chunk(1, 2, "Xfg"), 1, true);
    assert_eq!(disagree.reason, AppendReason::ChunkConflict);
    assert_eq!(log.text(), "abcde");
}

#[test]
fn offsets_count_utf16_units_and_never_split_a_character() {
    let mut log = OutputLog::new();
    // "é" is 1 unit, "😀" is 2 (a surrogate pair).
    log.append(&chunk(1, 0, "é😀"), 1, true);
    assert_eq!(log.units(), 3);
    let inside = log.append(&chunk(1, 2, "x"), 1, true);
    assert_eq!(
        inside.reason,
        AppendReason::ChunkConflict,
        "offset 2 is inside the pair"
    );
    let next = log.append(&chunk(1, 3, "ü"), 1, true);
    assert_eq!((next.reason, next.offset), (AppendReason::Appended, 3));
    assert_eq!(utf16_len(log.text()), 4);
    assert_eq!(byte_index("é😀", 1), Some(2));
    assert_eq!(byte_index("é😀", 2), None);
    assert_eq!(byte_index("é😀", 3), Some(6));
    assert_eq!(byte_index("é😀", 4), None);
}

#[test]
fn attempts_are_fenced_and_a_new_one_supersedes_the_old_text() {
    let mut log = OutputLog::new();
    log.append(&chunk(1, 0, "draft one"), 1, true);
    let early = log.append(&chunk(2, 0, "x"), 1, true);
    assert_eq!(early.reason, AppendReason::NotStarted);
    // Attempt 2 started: attempt 1 is a zombie now, even for a resend.
    let zombie = log.append(&chunk(1, 0, "draft one"), 2, true);
    assert_eq!(zombie.reason, AppendReason::StaleAttempt);
    let gap = log.append(&chunk(2, 3, "two"), 2, true);
    assert_eq!((gap.reason, gap.expected), (AppendReason::OutputGap, 0));
    assert_eq!(log.text(), "draft one", "a refusal changes nothing");
    let first = log.append(&chunk(2, 0, "draft two"), 2, true);
    assert_eq!(
        (first.reason, first.superseded, first.attempt),
        (AppendReason::Appended, true, 2)
    );
    assert_eq!(log.text(), "draft two");
    // A start drops the old text before the new attempt writes any.
    assert!(log.begin(3));
    assert_eq!((log.attempt(), log.text()), (3, ""));
    assert!(!log.begin(3), "once");
}

#[test]
fn a_finished_task_closes_its_output_but_a_resend_is_still_a_duplicate() {
    let mut log = OutputLog::new();
    log.append(&chunk(1, 0, "done"), 1, true);
    assert!(log.close());
    assert!(!log.close());
    assert_eq!(
        log.append(&chunk(1, 0, "done"), 1, false).reason,
        AppendReason::DuplicateChunk
    );
    assert_eq!(
        log.append(&chunk(1, 4, "!"), 1, false).reason,
        AppendReason::OutputClosed
    );
    assert_eq!(
        log.append(&chunk(1, 2, "ne!"), 1, false).reason,
        AppendReason::OutputClosed
    );
    assert!(!log.begin(2), "a closed stream is not reopened");
    let mut live_ended = OutputLog::new();
    assert_eq!(
        live_ended.append(&chunk(1, 0, "a"), 1, false).reason,
        AppendReason::OutputClosed
    );
}

#[test]
fn bad_chunks_and_names_are_errors_naming_the_field() {
    let e = Chunk::new(0, 0, "a".into(), "chunk").unwrap_err();
    assert!(e.message.starts_with("chunk.attempt:"), "{e}");
    let e = Chunk::new(1, 0, String::new(), "chunk").unwrap_err();
    assert!(e.message.starts_with("chunk.text:"), "{e}");
    let big = "x".repeat(MAX_CHUNK_UNITS as usize + 1);
    assert!(Chunk::new(1, 0, big, "chunk")
        .unwrap_err()
        .message
        .starts_with("chunk.text:"));
    let e = Chunk::new(1, MAX_STREAM_UNITS, "x".into(), "chunk").unwrap_err();
    assert!(e.message.starts_with("chunk.offset:"), "{e}");
    assert!(
        Chunk::new(1, u64::MAX, "x".into(), "chunk").is_err(),
        "no overflow"
    );
    assert_eq!(
        StreamName::new("draft_2", "stream").unwrap().as_str(),
        "draft_2"
    );
    for bad in ["", "Draft", "a b", "a/b", &"x".repeat(65)] {
        let e = StreamName::new(bad, "stream").unwrap_err();
        assert!(e.message.starts_with("stream:"), "{bad:?}: {e}");
    }
}

#[test]
fn the_mirror_assembles_repeats_and_reordering_and_asks_for_gaps() {
    let mut m = OutputMirror::new();
    assert_eq!(m.apply(1, 0, "Hel").delta, "Hel");
    let gap = m.apply(1, 5, ", w");
    assert_eq!((gap.gap, gap.changed()), (Some(3), false));
    assert_eq!(m.apply(1, 0, "Hel"), OutputUpdate::default(), "a repeat");
    assert_eq!(m.apply(1, 2, "llo, w").delta, "lo, w", "only what is new");
    assert_eq!(m.text(), "Hello, w");
    assert_eq!(m.resume_from(), (1, 8));
    assert_eq!(m.apply(1, 8, "😀").delta, "😀");
    assert_eq!(m.text(), "Hello, w😀");
    assert_eq!(m.apply(1, 8, "😀z").delta, "z", "units, not bytes");
    assert_eq!(m.resume_from(), (1, 11));
}

#[test]
fn the_mirror_never_mixes_two_attempts() {
    let mut m = OutputMirror::new();
    m.apply(1, 0, "old draft");
    let new = m.apply(2, 0, "new");
    assert!(new.replaced && new.changed());
    assert_eq!((m.text(), m.attempt()), ("new", 2));
    assert_eq!(
        m.apply(1, 9, " more"),
        OutputUpdate::default(),
        "the dead attempt is ignored"
    );
    assert_eq!(m.text(), "new");
    let late = m.apply(3, 4, "x");
    assert!(late.replaced);
    assert_eq!((late.gap, m.text()), (Some(0), ""));
    assert!(!m.is_closed());
    assert!(!m.close(2).changed(), "an older attempt's close");
    assert!(!m.is_closed());
    m.close(3);
    assert!(m.is_closed());
    let mut shown = OutputMirror::new();
    shown.apply(1, 0, "abandoned");
    assert!(shown.close(2).replaced, "the last attempt wrote nothing");
    assert_eq!(shown.text(), "");
}

#[test]
fn a_follower_is_sent_what_it_lacks_and_a_newer_attempts_text_whole() {
    let mut log = OutputLog::new();
    log.append(&chunk(1, 0, "Hello, w😀rld"), 1, true);
    let rest = log.since(1, 5);
    assert_eq!(
        (rest.attempt, rest.offset, rest.text.as_str()),
        (1, 5, ", w😀rld")
    );
    assert!(rest.is_news(1));
    let none = log.since(1, utf16_len("Hello, w😀rld"));
    assert_eq!(none.text, "");
    assert!(!none.is_news(1), "an up-to-date follower is held");
    let past = log.since(1, 99);
    assert_eq!((past.offset, past.text.as_str()), (log.units(), ""));
    // Inside the surrogate pair: the whole text, never half a character.
    let inside = log.since(1, 9);
    assert_eq!((inside.offset, inside.text.as_str()), (0, "Hello, w😀rld"));
    // A new attempt started: the follower of attempt 1 learns it at once,
    // with no text yet, and then gets the new text from 0.
    log.begin(2);
    let replaced = log.since(1, 13);
    assert_eq!(
        (replaced.attempt, replaced.offset, replaced.text.as_str()),
        (2, 0, "")
    );
    assert!(replaced.is_news(1));
    log.append(&chunk(2, 0, "Bonjour"), 2, true);
    assert_eq!(log.since(1, 13).text, "Bonjour");
    log.close();
    let end = log.since(2, 7);
    assert!(end.complete && end.is_news(2), "the end is news");
}

#[test]
fn a_stream_follows_its_task_a_newer_attempt_replaces_the_text_and_an_end_completes_it() {
    let stored = || OutputLog::restore(1, "abc".to_string(), false);
    // The task is still on attempt 1 and live: the follower is up to date.
    let mut log = stored();
    log.follow_task(1, true);
    let c = log.since(1, 3);
    assert_eq!((c.attempt, c.text.as_str(), c.complete), (1, "", false));
    assert!(!c.is_news(1));
    // Attempt 2 started and wrote nothing: the old text is replaced by none.
    let mut log = stored();
    log.follow_task(2, true);
    let c = log.since(1, 3);
    assert_eq!(
        (c.attempt, c.offset, c.text.as_str(), c.complete),
        (2, 0, "", false)
    );
    assert!(c.is_news(1));
    // The task ended on attempt 1: the stream is complete.
    let mut log = stored();
    log.follow_task(1, false);
    let c = log.since(1, 3);
    assert_eq!((c.attempt, c.complete), (1, true));
    assert!(c.is_news(1));
}
