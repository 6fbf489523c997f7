//! Command-line flags, each with an environment twin (`--listen` /
//! `TASKWIRE_LISTEN`). Defaults make `cargo run -p taskwire-server` work
//! out of the box on a laptop: token `demo` for tenant `demo`, the
//! documented development callback secret, data in `./data/`.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Parser;

use crate::auth::keys::BrowserKeys;
use crate::keyring::Keyring;
use crate::signature::Secret;

/// The reference taskwire backend: follow long-running tasks through
/// disconnects, retries and duplicates (see PROTOCOL.md).
#[derive(Debug, Clone, Parser)]
#[command(name = "taskwire-server", version)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "TASKWIRE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// Serve `GET /metrics` (Prometheus text format) on this address of its
    /// own, e.g. 127.0.0.1:9464; never on --listen, whose /metrics stays
    /// 404. Off by default. The metrics name tenants: keep the address
    /// away from them (loopback or an operators' network).
    #[arg(long, env = "TASKWIRE_METRICS_LISTEN", value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,

    /// Serve --listen over TLS with this certificate (PEM: the server's
    /// certificate, then any intermediates), offering HTTP/2 and HTTP/1.1
    /// by ALPN, so a browser carries every request a page holds on one
    /// connection instead of at most 6 (docs/backend.md, "HTTP/2"). With
    /// --tls-key. Leave it off behind a front proxy that terminates TLS.
    #[arg(
        long,
        env = "TASKWIRE_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "TASKWIRE_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Where tasks are stored: a directory for the SQLite database (created
    /// if missing; one instance), or a postgres://user:pass@host:port/db URL
    /// to share one PostgreSQL database between several instances.
    #[arg(
        long,
        env = "TASKWIRE_DATA",
        default_value = "./data",
        value_name = "DIR|URL"
    )]
    pub data: PathBuf,

    /// SQLite only: let an existing empty (0-byte) taskwire.sqlite3 become
    /// a new database. Without it such a file is refused at start: it is
    /// more often a copy or restore that failed than a wish to start over.
    /// A --data directory without the file needs no flag.
    #[arg(long, env = "TASKWIRE_NEW_DATABASE")]
    pub new_database: bool,

    /// SQLite only: start without reading the whole file first (PRAGMA
    /// quick_check, which refuses a damaged database). For a file so large
    /// that the check delays every start too long; damage is then found
    /// only by the requests that read it.
    #[arg(long, env = "TASKWIRE_SKIP_INTEGRITY_CHECK")]
    pub skip_integrity_check: bool,

    /// PostgreSQL only: pooled connections per instance (writers and reads).
    /// Held long-polls and SSE streams use none; one more connection LISTENs
    /// for other instances' commits.
    #[arg(long, env = "TASKWIRE_PG_POOL", default_value_t = 16)]
    pub pool: usize,

    /// PostgreSQL only: group-commit writers per instance, each committing
    /// one batch at a time on a pooled connection.
    #[arg(long, env = "TASKWIRE_PG_WRITERS", default_value_t = 1)]
    pub pg_writers: usize,

    /// Bearer token and the tenant it maps to, as TOKEN=TENANT. Repeatable;
    /// the environment twin takes a comma-separated list.
    #[arg(
        long = "token",
        env = "TASKWIRE_TOKEN",
        value_name = "TOKEN=TENANT",
        value_delimiter = ',',
        default_value = "demo=demo"
    )]
    pub tokens: Vec<String>,

    /// Standard Webhooks secret (whsec_<base64>) executor callbacks are
    /// signed with: TENANT=whsec_… for that tenant's tasks, or a bare whsec_…
    /// shared by every tenant without one of its own. Repeatable; give a
    /// tenant two during a rotation (both are accepted). The environment
    /// twin takes a comma-separated list. Default: the public development
    /// secret, shared.
    #[arg(
        long = "callback-secret",
        env = "TASKWIRE_CALLBACK_SECRET",
        value_name = "[TENANT=]whsec_…",
        value_delimiter = ','
    )]
    pub callback_secrets: Vec<String>,

    /// Standard Webhooks secret the --notify-url posts are signed with.
    /// Default: the shared callback secret (a bare --callback-secret, or the
    /// development secret); required when every tenant has its own.
    #[arg(long, env = "TASKWIRE_NOTIFY_SECRET", value_name = "whsec_…")]
    pub notify_secret: Option<String>,

    /// How long a callback's body may take to arrive once its headers
    /// passed, in milliseconds; past it the answer is 408 (hidden: tests
    /// shorten it).
    #[arg(
        long,
        env = "TASKWIRE_CALLBACK_BODY_TIMEOUT_MS",
        default_value_t = 10_000,
        hide = true
    )]
    pub callback_body_timeout_ms: u64,

    /// Lease given to a `start` that carries `attempt` but no `leaseMs`, in
    /// milliseconds: the attempt counts as alive this long after each of
    /// its reports, then its task is `unknown`. A `start` without
    /// `attempt` (a seed-000 executor) opens no lease and never lapses.
    #[arg(long, env = "TASKWIRE_LEASE_MS", default_value_t = 30_000)]
    pub lease_ms: u64,

    /// Limits of one task kind for workers' claims (PROTOCOL.md §Workers),
    /// across every tenant and instance: `KIND:max-running=N,per-second=R`
    /// (either or both; repeatable, `;`-separated in the environment).
    /// Past them, work waits in the queue; a claim is never refused.
    #[arg(long = "kind-limit", env = "TASKWIRE_KIND_LIMIT", value_delimiter = ';',
          value_parser = parse_kind_limit)]
    pub kind_limit: Vec<(String, crate::store::KindLimit)>,

    /// How long an `unknown` task waits for word from its attempt before it
    /// is re-queued (or failed, with no attempt left), in milliseconds, for
    /// a task created without `unknownGraceMs` (and without
    /// `autoRequeue: false`, which keeps it waiting).
    #[arg(long, env = "TASKWIRE_UNKNOWN_GRACE_MS", default_value_t = 60_000)]
    pub unknown_grace_ms: u64,

    /// Resume window in versions: a client further behind gets a snapshot.
    #[arg(long, env = "TASKWIRE_RETENTION", default_value_t = 8)]
    pub retention: u64,

    /// Browser origin allowed by CORS (e.g. http://localhost:5173).
    /// Repeatable; the environment twin takes a comma-separated list.
    #[arg(
        long = "cors-origin",
        env = "TASKWIRE_CORS_ORIGIN",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,

    /// POST each committed notification to this http:// or https:// URL,
    /// signed like callbacks (webhook-id = notification key), retried with
    /// backoff; for every tenant without a --tenant-notify-url of its own.
    /// An https:// receiver's certificate must be valid for the URL's host
    /// (Mozilla's roots, built in, or --notify-ca-file); a bad one fails
    /// the attempt, which is logged and retried.
    #[arg(long, env = "TASKWIRE_NOTIFY_URL")]
    pub notify_url: Option<String>,

    /// POST this tenant's notifications to its own http(s):// URL instead,
    /// as TENANT=URL. Repeatable; the environment twin takes a
    /// comma-separated list. Each receiver has its own posts in flight, so
    /// a slow one never holds back the others.
    #[arg(
        long = "tenant-notify-url",
        env = "TASKWIRE_TENANT_NOTIFY_URL",
        value_name = "TENANT=URL",
        value_delimiter = ','
    )]
    pub tenant_notify_urls: Vec<String>,

    /// PEM file of CA certificates (one or more) that https:// notify
    /// receivers' certificates may chain to, trusted in addition to
    /// Mozilla's roots: for a private CA.
    #[arg(long, env = "TASKWIRE_NOTIFY_CA_FILE", value_name = "PATH")]
    pub notify_ca_file: Option<PathBuf>,

    /// Notify posts: most posts in flight at once per receiver URL.
    #[arg(long, env = "TASKWIRE_NOTIFY_IN_FLIGHT", default_value_t = 8)]
    pub notify_in_flight: usize,

    /// Notify posts: milliseconds to connect to a receiver (with https://,
    /// the TLS handshake included) before the attempt counts as failed
    /// (and is retried with backoff).
    #[arg(
        long,
        env = "TASKWIRE_NOTIFY_CONNECT_TIMEOUT_MS",
        default_value_t = 2_000
    )]
    pub notify_connect_timeout_ms: u64,

    /// Notify posts: milliseconds from the connection to a receiver's full
    /// answer before the attempt counts as failed (and is retried with
    /// backoff).
    #[arg(long, env = "TASKWIRE_NOTIFY_TIMEOUT_MS", default_value_t = 5_000)]
    pub notify_timeout_ms: u64,

    /// Serve the demo page and enable the in-server demo executor and the
    /// /v1/demo endpoints (see server/README.md).
    #[arg(long, env = "TASKWIRE_DEMO")]
    pub demo: bool,

    /// The tenant the demo page works for with --demo: the demo endpoints
    /// called without Authorization act for it, and mint the page's browser
    /// tokens for its tasks (the page holds no tenant token). Must be a
    /// tenant of --token.
    #[arg(long, env = "TASKWIRE_DEMO_TENANT", default_value = "demo")]
    pub demo_tenant: String,

    /// The static directory served at / with --demo.
    #[arg(long, env = "TASKWIRE_DEMO_DIR", default_value = "web-demo")]
    pub demo_dir: PathBuf,

    /// The built `taskwire/client` package (`npm run build`), served at
    /// /pkg/ with --demo so the page loads the real package build.
    #[arg(long, env = "TASKWIRE_DEMO_PKG_DIR", default_value = "dist/client")]
    pub demo_pkg_dir: PathBuf,

    /// SSE heartbeat interval in milliseconds (hidden: tests shorten it).
    #[arg(
        long,
        env = "TASKWIRE_HEARTBEAT_MS",
        default_value_t = 15_000,
        hide = true
    )]
    pub heartbeat_ms: u64,

    /// How often the TTL sweeper looks for due tasks, in milliseconds.
    #[arg(long, env = "TASKWIRE_SWEEP_MS", default_value_t = 250, hide = true)]
    pub sweep_ms: u64,

    /// Most callbacks committed in one group-commit transaction (hidden:
    /// 1 disables group commit, for the benchmark).
    #[arg(long, env = "TASKWIRE_MAX_BATCH", default_value_t = 256, hide = true)]
    pub max_batch: usize,

    /// Milliseconds a client has to send a whole request head: from the
    /// connection's start for its first request, from the first byte for
    /// the next ones. A slower head is cut off without an answer, so
    /// half-sent heads (slowloris) cannot hold connections.
    #[arg(long, env = "TASKWIRE_HEADER_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..), value_name = "MS")]
    pub header_timeout_ms: u64,

    /// Milliseconds a client has to send a request body once the server
    /// reads it (bodies are at most 64 KiB); slower gets 408
    /// `request-timeout` and the connection is closed.
    #[arg(long, env = "TASKWIRE_BODY_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..), value_name = "MS")]
    pub body_timeout_ms: u64,

    /// Milliseconds a keep-alive connection may sit idle between requests
    /// before the server closes it. Held long-polls and SSE streams are
    /// not idle: they stay open.
    #[arg(long, env = "TASKWIRE_IDLE_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..), value_name = "MS")]
    pub idle_timeout_ms: u64,

    /// Most open client connections; past it a new connection gets 503
    /// `connection-limit` with Retry-After. Default and ceiling: the file
    /// descriptor limit (RLIMIT_NOFILE, raised to its hard limit at
    /// start-up) minus a reserve for the database, files and outgoing
    /// connections, so accept never runs out of descriptors.
    #[arg(long, env = "TASKWIRE_MAX_CONNECTIONS", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,

    /// Browser tokens (`--browser-token-*`, see src/auth/flags.rs).
    #[command(flatten)]
    pub browser_tokens: crate::auth::flags::BrowserTokenFlags,

    /// Per-tenant quotas (`--tenant-*`, see src/quotas/flags.rs).
    #[command(flatten)]
    pub quotas: crate::quotas::QuotaFlags,

    /// Most held long-polls and SSE streams at once (all tenants); past it
    /// a new one gets 503 `watch-limit` with Retry-After. Default: three
    /// quarters of the connection limit, so the rest stays free for
    /// creates, callbacks and reads.
    #[arg(long, env = "TASKWIRE_MAX_WATCHERS", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_watchers: Option<u64>,

    /// Most held long-polls and SSE streams of one end user (the `sub` of
    /// browser tokens, within its tenant); past it a new one gets 429
    /// `watch-quota` with Retry-After: 2. On by default, so that one page
    /// cannot take every slot of the server (a tenant token is its
    /// backend's, and counts only for its tenant).
    #[arg(long, env = "TASKWIRE_SUBJECT_MAX_WATCHES", value_name = "N",
          default_value_t = crate::limits::DEFAULT_SUBJECT_MAX_WATCHES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub subject_max_watches: u64,

    /// Marks the data in --data as restored from a backup, then exits
    /// without serving: draws a new epoch (PROTOCOL.md §Epoch), so that
    /// clients holding versions of the lost history start over from the
    /// restored one. Run it after the restore, with every instance
    /// stopped. A one-shot command, so it has no environment twin.
    #[arg(long)]
    pub mark_restored: bool,
}

impl Config {
    /// The config with every default (no command line, no environment):
    /// what the tests start from.
    pub fn defaults() -> Self {
        Config::parse_from(["taskwire-server"])
    }

    /// The PostgreSQL URL when `--data` is one.
    pub fn postgres_url(&self) -> Option<&str> {
        self.data
            .to_str()
            .filter(|d| d.starts_with("postgres://") || d.starts_with("postgresql://"))
    }

    /// What `--data` is, for the banner (a URL's password hidden).
    pub fn data_description(&self) -> String {
        match self.postgres_url() {
            Some(url) => format!("PostgreSQL {}", crate::store::postgres::redact(url)),
            None => self.data.join("taskwire.sqlite3").display().to_string(),
        }
    }

    /// Token → tenant, checked.
    pub fn token_map(&self) -> Result<HashMap<String, String>, String> {
        let mut map = HashMap::new();
        for pair in &self.tokens {
            let (token, tenant) = pair
                .split_once('=')
                .ok_or_else(|| format!("--token: expected TOKEN=TENANT, got {pair:?}"))?;
            if token.is_empty() || tenant.is_empty() {
                return Err(format!(
                    "--token: token and tenant must not be empty in {pair:?}"
                ));
            }
            map.insert(token.to_string(), tenant.to_string());
        }
        if map.is_empty() {
            return Err("--token: at least one TOKEN=TENANT is needed".into());
        }
        Ok(map)
    }

    /// The callback secrets per tenant, checked against the tenants of
    /// `tokens` (see [`Keyring`]).
    pub fn keyring(&self, tokens: &HashMap<String, String>) -> Result<Keyring, String> {
        Keyring::new(&self.callback_secrets, tokens.values().map(String::as_str))
    }

    /// The browser-token keys, checked against the tenants of `tokens`
    /// (see [`BrowserKeys`]); with `--demo`, the demo's own key too.
    pub fn browser_keys(&self, tokens: &HashMap<String, String>) -> Result<BrowserKeys, String> {
        let demo_tenant = self.demo.then_some(self.demo_tenant.as_str());
        if let Some(tenant) = demo_tenant {
            if !tokens.values().any(|t| t == tenant) {
                return Err(format!(
                    "--demo-tenant: tenant {tenant:?} has no --token (the demo works for one of them)"
                ));
            }
        }
        BrowserKeys::new(
            &self.browser_tokens,
            tokens.values().map(String::as_str),
            demo_tenant,
        )
    }

    /// The secret `--notify-url` posts are signed with.
    pub fn notify_secret(&self, keyring: &Keyring) -> Result<Secret, String> {
        match &self.notify_secret {
            Some(text) => Secret::parse(text).map_err(|e| format!("--notify-secret: {e}")),
            None => keyring.shared().cloned().ok_or_else(|| {
                "--notify-secret: required with --notify-url when every tenant has its own \
                 --callback-secret"
                    .to_string()
            }),
        }
    }
}

/// One `--kind-limit KIND:max-running=N,per-second=R`.
fn parse_kind_limit(text: &str) -> Result<(String, crate::store::KindLimit), String> {
    let (kind, spec) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?}: expected KIND:max-running=N,per-second=R"))?;
    let mut limit = crate::store::KindLimit::default();
    for part in spec.split(',') {
        match part.split_once('=') {
            Some(("max-running", n)) => {
                let n: u64 = n
                    .parse()
                    .map_err(|_| format!("{text:?}: max-running must be an integer, got {n:?}"))?;
                limit.max_running = Some(n);
            }
            Some(("per-second", r)) => {
                let r: f64 = r
                    .parse()
                    .ok()
                    .filter(|r: &f64| r.is_finite() && *r > 0.0)
                    .ok_or_else(|| {
                        format!("{text:?}: per-second must be a number > 0, got {r:?}")
                    })?;
                limit.per_second = Some(r);
            }
            _ => {
                return Err(format!(
                    "{text:?}: unknown limit {part:?} (max-running, per-second)"
                ))
            }
        }
    }
    Ok((kind.to_string(), limit))
}

impl Config {
    /// `--kind-limit`s by kind (the last one given for a kind wins).
    pub fn kind_limits(&self) -> crate::store::KindLimits {
        crate::store::KindLimits(self.kind_limit.iter().cloned().collect())
    }
}
