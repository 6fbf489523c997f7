//! What keeps clients, alone or by the thousand, from exhausting the
//! server: the timeouts, the connection cap and the cap on held watches,
//! resolved once at start-up from the flags and the file descriptor limit.
//!
//! - **Timeouts** (enforced per connection by [`crate::serve`]): a request
//!   head must arrive whole within `--header-timeout-ms` (from the
//!   connection's start, then from the first byte of each later request),
//!   a body within `--body-timeout-ms` once it is read, and a keep-alive
//!   connection may be idle for `--idle-timeout-ms`. A held long-poll or
//!   SSE stream is neither: it is bounded by `waitMs` and by the cap below.
//! - **Connections** ([`Limits::max_connections`]): below `RLIMIT_NOFILE`
//!   minus [`reserved_fds`], so `accept` never fails with EMFILE; past it
//!   a new connection is answered 503 `connection-limit` on the spot.
//!   With `--metrics-listen`, the metrics port has a cap of its own,
//!   [`METRICS_MAX_CONNECTIONS`], carved out of the same budget (the API's
//!   cap is that much lower): every listening port is capped, and all of
//!   them together stay under the descriptor limit.
//! - **Held watches** ([`Watchers`]): long-polls being held and SSE
//!   streams, counted for the whole server; past the cap 503 `watch-limit`.
//!   Counted per tenant too when it has a `max-watches` quota
//!   ([`crate::quotas`]; by default half of the slots when the server has
//!   several tenants), and per end user (`--subject-max-watches`); past
//!   either, 429 `watch-quota`. Every such refusal is answered late
//!   ([`crate::quotas::answered_late`]), the 503 too.

use std::time::Duration;

use crate::Config;

mod watchers;
pub use watchers::{
    WatchPermit, Watcher, Watchers, DEFAULT_SUBJECT_MAX_WATCHES, WATCH_RETRY_AFTER_SECS,
};

/// Descriptors kept out of the connection cap: the SQLite writer and
/// reader connections (each a database, WAL and shm file: ~27), the demo's
/// static files and blocking threads (≤ 16), outgoing connections (notify
/// webhook, the demo executor's callbacks), the listener, epoll, stdio,
/// the sockets being answered 503 (at most 32 linger) and the connections
/// closing to make room at the cap (at most 128; see `serve/reclaim.rs`).
/// PostgreSQL adds its pool and the LISTEN connection. The metrics port
/// lingers and reclaims too (at most 32 + 64 more).
const RESERVED_FDS: u64 = 512;

/// Connections the metrics port (`--metrics-listen`) holds at once: a
/// scraper or two and an operator's curl need a few, and a flood there
/// must not take the API's descriptors (21,000 half-sent requests on an
/// uncapped metrics port once left the API unable to `accept`). Past it,
/// 503 `connection-limit`, as on the API.
pub const METRICS_MAX_CONNECTIONS: usize = 64;

/// The limits every connection and handler works under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// A request head must arrive whole within this.
    pub header_timeout: Duration,
    /// A request body must arrive whole within this once it is read.
    pub body_timeout: Duration,
    /// A keep-alive connection is closed after this long without a request.
    pub idle_timeout: Duration,
    /// Open client connections allowed at once (on the API's port; the
    /// metrics port has [`Limits::for_metrics`]).
    pub max_connections: usize,
    /// Held long-polls and SSE streams allowed at once.
    pub max_watchers: usize,
    /// Held long-polls and SSE streams one end user may hold.
    pub max_watchers_per_subject: usize,
    /// The descriptor limit the connection cap was derived from.
    pub fds: FdLimit,
    /// What start-up changed or lowered, for the banner.
    pub notes: Vec<String>,
}

/// `RLIMIT_NOFILE` after start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit now in force (`None`: unknown on this platform).
    pub soft: Option<u64>,
    /// The soft limit before it was raised, when it was.
    pub raised_from: Option<u64>,
}

impl Limits {
    /// Resolves the flags against the descriptor limit (raising the soft
    /// limit to the hard one first, when allowed).
    pub fn resolve(config: &Config) -> Limits {
        let fds = raise_nofile();
        let mut limits = Limits::from_fd_limit(config, fds);
        if let (Some(from), Some(to)) = (fds.raised_from, fds.soft) {
            limits
                .notes
                .insert(0, format!("RLIMIT_NOFILE raised from {from} to {to}"));
        }
        limits
    }

    /// The limits of the metrics port: the same timeouts, its own cap.
    pub fn for_metrics(&self) -> Limits {
        Limits {
            max_connections: METRICS_MAX_CONNECTIONS,
            notes: Vec::new(),
            ..self.clone()
        }
    }

    /// [`Limits::resolve`] for a given descriptor limit (pure: tested).
    pub fn from_fd_limit(config: &Config, fds: FdLimit) -> Limits {
        let mut notes = Vec::new();
        let ceiling = fds
            .soft
            .map(|soft| connection_ceiling(soft, reserved_fds(config)));
        let max_connections = match (config.max_connections, ceiling) {
            (Some(asked), Some(ceiling)) if asked > ceiling => {
                notes.push(format!(
                    "--max-connections {asked} lowered to {ceiling} (RLIMIT_NOFILE {})",
                    fds.soft.unwrap_or(0)
                ));
                ceiling
            }
            (Some(asked), _) => asked,
            (None, Some(ceiling)) => ceiling,
            // No descriptor limit to derive it from (not Unix).
            (None, None) => 10_000,
        };
        let max_connections = usize::try_from(max_connections).unwrap_or(usize::MAX);
        let default_watchers = (max_connections / 4 * 3).max(1);
        let max_watchers = config.max_watchers.map_or(default_watchers, |w| {
            usize::try_from(w).unwrap_or(usize::MAX)
        });
        Limits {
            header_timeout: Duration::from_millis(config.header_timeout_ms),
            body_timeout: Duration::from_millis(config.body_timeout_ms),
            idle_timeout: Duration::from_millis(config.idle_timeout_ms),
            max_connections,
            max_watchers,
            max_watchers_per_subject: usize::try_from(config.subject_max_watches)
                .unwrap_or(usize::MAX),
            fds,
            notes,
        }
    }
}

impl Limits {
    /// The `max-watches` of a tenant that sets none: half of the server's
    /// slots when it has `tenants` ≥ 2 tenants, so that another tenant
    /// always finds room; none for a server of one tenant (nobody to keep
    /// room for; its users are still capped one by one).
    pub fn default_tenant_watches(&self, tenants: usize) -> Option<u64> {
        (tenants >= 2).then(|| (self.max_watchers as u64 / 2).max(1))
    }
}

/// Descriptors reserved for everything but the API's client connections:
/// [`RESERVED_FDS`], PostgreSQL's pool, and the metrics port's cap.
pub fn reserved_fds(config: &Config) -> u64 {
    let postgres = match config.postgres_url() {
        Some(_) => config.pool as u64 + 1,
        None => 0,
    };
    let metrics = match config.metrics_listen {
        Some(_) => METRICS_MAX_CONNECTIONS as u64,
        None => 0,
    };
    RESERVED_FDS + postgres + metrics
}

/// The most connections a soft descriptor limit allows: the limit minus
/// the reserve, and never more than half of a limit too small to hold it.
pub fn connection_ceiling(soft: u64, reserved: u64) -> u64 {
    soft.saturating_sub(reserved).max(soft / 2).max(1)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, if allowed, and
/// returns what is in force. Also used by the load tools, which need as
/// many descriptors as the connections they open.
#[cfg(unix)]
pub fn raise_nofile() -> FdLimit {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let before = getrlimit(Resource::Nofile);
    // An infinite hard limit is not a valid soft limit for descriptors
    // (Linux caps it at fs.nr_open, 1,048,576 by default; macOS at
    // OPEN_MAX): ask for that much, and keep the old limit if refused.
    let target = before.maximum.unwrap_or(1 << 20);
    let Some(soft) = before.current else {
        return FdLimit {
            soft: None,
            raised_from: None,
        };
    };
    if target > soft {
        let raised = rustix::process::Rlimit {
            current: Some(target),
            maximum: before.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return FdLimit {
                soft: Some(target),
                raised_from: Some(soft),
            };
        }
    }
    FdLimit {
        soft: Some(soft),
        raised_from: None,
    }
}

/// No descriptor limit to read outside Unix.
#[cfg(not(unix))]
pub fn raise_nofile() -> FdLimit {
    FdLimit {
        soft: None,
        raised_from: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fds(soft: u64) -> FdLimit {
        FdLimit {
            soft: Some(soft),
            raised_from: None,
        }
    }

    #[test]
    fn the_connection_cap_stays_under_the_descriptor_limit() {
        let mut config = Config::defaults();
        let limits = Limits::from_fd_limit(&config, fds(20_000));
        assert_eq!(limits.max_connections, 20_000 - 512);
        assert_eq!(limits.max_watchers, (20_000 - 512) / 4 * 3);
        assert!(limits.notes.is_empty());
        // Asking for more than the descriptors allow is lowered, and said.
        config.max_connections = Some(50_000);
        let limits = Limits::from_fd_limit(&config, fds(20_000));
        assert_eq!(limits.max_connections, 20_000 - 512);
        assert_eq!(limits.notes.len(), 1, "{:?}", limits.notes);
        config.max_connections = Some(100);
        config.max_watchers = Some(7);
        let limits = Limits::from_fd_limit(&config, fds(20_000));
        assert_eq!((limits.max_connections, limits.max_watchers), (100, 7));
        // A tiny limit still leaves half of it for everything else.
        assert_eq!(connection_ceiling(300, 512), 150);
        assert_eq!(connection_ceiling(1, 512), 1);
        // PostgreSQL's pool is reserved too.
        config.data = "postgres://u@h:1/d".into();
        assert_eq!(reserved_fds(&config), 512 + 16 + 1);
    }

    #[test]
    fn the_metrics_port_cap_is_carved_out_of_the_api_cap() {
        let mut config = Config::defaults();
        config.metrics_listen = Some("127.0.0.1:9464".into());
        let limits = Limits::from_fd_limit(&config, fds(20_000));
        let metrics = limits.for_metrics();
        assert_eq!(limits.max_connections, 20_000 - 512 - 64);
        assert_eq!(metrics.max_connections, METRICS_MAX_CONNECTIONS);
        assert_eq!(
            limits.max_connections + metrics.max_connections,
            20_000 - 512
        );
        assert_eq!(metrics.header_timeout, limits.header_timeout);
        assert_eq!(metrics.idle_timeout, limits.idle_timeout);
        assert_eq!(metrics.body_timeout, limits.body_timeout);
    }
}
