//! Live output under faults (proptest): executors of two attempts append
//! a text in random chunks through a network that resends, reorders and
//! drops, a zombie attempt keeps sending, and a follower receives what the
//! server took through another such network, resuming from its offset.
//!
//! Whatever happens, the server's text and the follower's are always a
//! prefix of the text of the attempt they show (never two attempts mixed,
//! never a character doubled or lost in the middle), and once everything
//! is delivered both equal the last attempt's text exactly.

use proptest::prelude::*;
use taskwire_core::output::utf16_len;
use taskwire_core::{AppendReason, Chunk, OutputLog, OutputMirror};

/// The texts of attempts 1 and 2 (with characters of 1, 2 and 3 bytes
/// and a surrogate pair).
fn texts() -> impl Strategy<Value = (String, String)> {
    let text = proptest::collection::vec(
        prop_oneof![Just("a"), Just("b "), Just("é"), Just("😀"), Just("中文")],
        1..40,
    )
    .prop_map(|parts| parts.concat());
    (text.clone(), text)
}

/// `text` cut into chunks at the character counts in `cuts`.
fn chunks(attempt: u64, text: &str, cuts: &[usize]) -> Vec<Chunk> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut at, mut offset, mut k) = (0usize, 0u64, 0usize);
    while at < chars.len() {
        let n = cuts[k % cuts.len()].clamp(1, chars.len() - at);
        k += 1;
        let piece: String = chars[at..at + n].iter().collect();
        let units = utf16_len(&piece);
        out.push(Chunk::new(attempt, offset, piece, "chunk").unwrap());
        at += n;
        offset += units;
    }
    out
}

/// What the follower's network carries: `(attempt, offset, text)`.
type Piece = (u64, u64, String);

fn is_prefix_of_its_attempt(shown: &str, attempt: u64, texts: &(String, String)) -> bool {
    match attempt {
        0 => shown.is_empty(),
        1 => texts.0.starts_with(shown),
        _ => texts.1.starts_with(shown),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn output_is_never_doubled_lost_or_mixed(
        texts in texts(),
        cuts in proptest::collection::vec(1usize..6, 1..8),
        // Per delivery: 0 = deliver, 1 = deliver twice, 2 = hold back
        // (delivered later, out of order), 3 = drop (resent later).
        fate in proptest::collection::vec(0u8..4, 1..64),
        // When attempt 2 starts, in chunks of attempt 1 sent.
        switch in 0usize..20,
    ) {
        let first = chunks(1, &texts.0, &cuts);
        let second = chunks(2, &texts.1, &cuts);
        let mut log = OutputLog::new();
        let mut mirror = OutputMirror::new();
        let mut to_page: Vec<Piece> = Vec::new();
        let mut late: Vec<Piece> = Vec::new();
        let mut f = 0usize;
        let mut next_fate = || { f += 1; fate[f % fate.len()] };

        // The page gets what the server took, through its faulty network.
        let deliver = |mirror: &mut OutputMirror, piece: Piece, fate: u8, late: &mut Vec<Piece>| {
            match fate {
                1 => { mirror.apply(piece.0, piece.1, &piece.2); mirror.apply(piece.0, piece.1, &piece.2); }
                2 => late.push(piece),
                3 => {}
                _ => { mirror.apply(piece.0, piece.1, &piece.2); }
            }
        };

        // Attempt 1 sends until the switch; each chunk is resent until the
        // server accepts it (a drop or a gap is retried in order).
        let cut = switch.min(first.len());
        for chunk in &first[..cut] {
            // A drop (3) is lost on the way and resent once: the resend
            // arrives.
            let fate = next_fate();
            let a = log.append(chunk, 1, true);
            if fate == 1 { prop_assert_eq!(log.append(chunk, 1, true).reason, AppendReason::DuplicateChunk); }
            prop_assert!(a.reason.accepted(), "{:?}", a);
            if !a.added.is_empty() { to_page.push((a.attempt, a.offset, a.added)); }
            prop_assert!(texts.0.starts_with(log.text()));
        }
        for piece in to_page.drain(..) { let fate = next_fate(); deliver(&mut mirror, piece, fate, &mut late); }
        prop_assert!(is_prefix_of_its_attempt(mirror.text(), mirror.attempt(), &texts));

        // Attempt 2 starts; attempt 1 is a zombie whose chunks keep coming.
        log.begin(2);
        for (i, chunk) in second.iter().enumerate() {
            if let Some(zombie) = first.get(cut + i) {
                prop_assert_eq!(log.append(zombie, 2, true).reason, AppendReason::StaleAttempt);
            }
            // Out of order: the next chunk first is a gap, changing nothing.
            if let Some(ahead) = second.get(i + 1) {
                if next_fate() == 2 {
                    let before = log.text().to_string();
                    prop_assert_eq!(log.append(ahead, 2, true).reason, AppendReason::OutputGap);
                    prop_assert_eq!(log.text(), before.as_str());
                }
            }
            let a = log.append(chunk, 2, true);
            prop_assert!(a.reason.accepted(), "{:?}", a);
            if !a.added.is_empty() { to_page.push((a.attempt, a.offset, a.added)); }
            prop_assert!(texts.1.starts_with(log.text()));
            for piece in to_page.drain(..) { let fate = next_fate(); deliver(&mut mirror, piece, fate, &mut late); }
            prop_assert!(is_prefix_of_its_attempt(mirror.text(), mirror.attempt(), &texts));
        }
        log.close();
        prop_assert_eq!(log.text(), texts.1.as_str());

        // Held-back pieces arrive late, in reverse; then the page resumes
        // from its offset and gets the rest of the text in one piece.
        for piece in late.into_iter().rev() {
            mirror.apply(piece.0, piece.1, &piece.2);
            prop_assert!(is_prefix_of_its_attempt(mirror.text(), mirror.attempt(), &texts));
        }
        let (attempt, offset) = mirror.resume_from();
        let resumed_attempt = if attempt == log.attempt() { attempt } else { log.attempt() };
        let from = if attempt == log.attempt() { offset } else { 0 };
        let rest: String = {
            let idx = taskwire_core::output::byte_index(log.text(), from).unwrap();
            log.text()[idx..].to_string()
        };
        if !rest.is_empty() { mirror.apply(resumed_attempt, from, &rest); }
        mirror.close(log.attempt());
        prop_assert_eq!(mirror.text(), texts.1.as_str());
        prop_assert!(mirror.is_closed());
    }
}
