//! A watch opened with a browser token lasts no longer than the token.

use std::time::Duration;

use futures_util::{Stream, StreamExt};

use crate::clock::now_secs;

/// `stream`, ended at `deadline` (seconds since the epoch) if there is
/// one: an SSE stream opened with a browser token closes when the token
/// is no longer accepted, so a token cannot be stretched past its expiry
/// by keeping one stream open. The client reconnects with a fresh token.
pub fn until_expiry<S: Stream>(stream: S, deadline: Option<u64>) -> impl Stream<Item = S::Item> {
    let now = u64::try_from(now_secs()).unwrap_or(0);
    let expired = async move {
        match deadline {
            // +1: the token is accepted through its last whole second.
            Some(at) => tokio::time::sleep(Duration::from_secs(at.saturating_sub(now) + 1)).await,
            None => std::future::pending().await,
        }
    };
    stream.take_until(expired)
}
