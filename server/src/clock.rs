//! The server's clock, a leaf every part reads (routes, the store, the
//! sweeper, auth, notify, the demo): kept out of `routes` so that none
//! of them imports the HTTP layer for the time.

use std::time::{SystemTime, UNIX_EPOCH};

/// The server's clock in whole milliseconds since the epoch (whole, so
/// `expiresAtMs` reads cleanly; f64 holds them exactly).
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

/// The server's clock in whole seconds (for webhook timestamps).
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
