//! A connection's phases, and the body timeout's error found under wrappers.

use super::*;

#[test]
fn every_change_is_seen_even_back_to_the_same_phase() {
    let activity = Activity::new();
    let start = activity.seen();
    assert_eq!(start.phase(), Phase::Head);
    let busy = Busy::start(&activity, false);
    assert_eq!(activity.seen().phase(), Phase::Busy);
    drop(busy);
    let idle = activity.seen();
    assert_eq!(idle.phase(), Phase::Idle);
    // A whole request within one poll: idle again, but not the same.
    activity.set(Phase::Head);
    drop(Busy::start(&activity, false));
    assert_eq!(activity.seen().phase(), Phase::Idle);
    assert_ne!(activity.seen(), idle);
}

#[test]
fn streams_side_by_side_keep_the_connection_busy_until_the_last_ends() {
    // HTTP/2: three requests at once on one connection.
    let activity = Activity::new();
    let streams: Vec<Busy> = (0..3).map(|_| Busy::start(&activity, false)).collect();
    let mut streams = streams.into_iter();
    drop(streams.next());
    drop(streams.next());
    assert_eq!(
        activity.seen().phase(),
        Phase::Busy,
        "one stream is still held"
    );
    assert!(!activity.reclaimable(clock_ms().wrapping_add(60_000), 0));
    drop(streams.next());
    assert_eq!(activity.seen().phase(), Phase::Idle);
}

#[test]
fn an_http2_socket_read_while_idle_starts_no_head() {
    use tokio::io::AsyncReadExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for (heads, want) in [(true, Phase::Head), (false, Phase::Idle)] {
            let activity = Activity::new();
            drop(Busy::start(&activity, false));
            let bytes: &[u8] = b"PING";
            let mut socket = if heads {
                Watched::new(bytes, Arc::clone(&activity))
            } else {
                Watched::without_heads(bytes, Arc::clone(&activity))
            };
            let mut got = [0u8; 4];
            socket.read_exact(&mut got).await.expect("read");
            assert_eq!(activity.seen().phase(), want, "heads: {heads}");
        }
    });
}

#[test]
fn a_timeout_is_found_under_wrappers() {
    let inner: Box<dyn StdError + Send + Sync> = Box::new(BodyTimedOut(Duration::from_millis(5)));
    let wrapped = axum::Error::new(axum::Error::new(inner));
    assert_eq!(
        body_timed_out(&wrapped),
        Some(BodyTimedOut(Duration::from_millis(5)))
    );
    assert_eq!(body_timed_out(&io::Error::other("x")), None);
}
