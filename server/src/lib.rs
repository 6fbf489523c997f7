//! # taskwire-server
//!
//! The reference backend of PROTOCOL.md: axum + tokio over a SQLite store
//! with group commit (or PostgreSQL shared by several instances), waking
//! held long-polls and SSE streams from the commit itself.
//!
//! ## Map
//! - [`config`]: flags and their environment twins.
//! - [`store`]: the one storage interface; [`store::sqlite`] and
//!   [`store::postgres`] implement it.
//! - [`hub`]: wake-ups from local commits and, via LISTEN/NOTIFY, other
//!   instances' commits.
//! - [`routes`]: the HTTP API; [`auth`] (tenant and browser tokens),
//!   [`signature`] and [`keyring`] guard it.
//! - [`quotas`]: per-tenant limits on creates, held watches and open
//!   tasks (429 past them).
//! - [`serve`]: the HTTP/1 connection loop, keeping [`limits`] (timeouts,
//!   connection and held-watch caps).
//! - [`sweeper`]: expires tasks at their TTL.
//! - [`metrics`]: `GET /metrics` for operators, on `--metrics-listen`.
//! - [`notify`]: posts outbox rows to `--notify-url` / `--tenant-notify-url`.
//! - [`client`]: a small HTTP client (tests, load tool, webhook), and
//!   [`executor_event`]: the events the demo and the load tool send.
//! - [`wire_json`]: JSON answers written by taskwire-wire, the server's one
//!   JSON writer and reader.
//! - [`demo`]: `--demo`'s page, in-server executor and endpoints.

#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
pub mod clock;
pub mod config;
pub mod demo;
pub mod error;
pub mod executor_event;
pub mod hub;
pub mod ids;
pub mod keyring;
pub mod limits;
pub mod metrics;
pub mod notify;
pub mod pem;
pub mod query;
pub mod quotas;
pub mod routes;
pub mod serve;
pub mod signature;
pub mod stats;
pub mod store;
pub mod sweeper;
pub mod wire_json;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::Config;

use crate::auth::keys::BrowserKeys;
use crate::hub::Hub;
use crate::keyring::Keyring;
use crate::limits::{Limits, Watchers};
use crate::signature::Secret;
use crate::stats::Stats;
use crate::store::Store;

/// What every handler shares.
pub struct Inner {
    /// The storage interface (handlers know nothing else of storage).
    pub store: Arc<dyn Store>,
    /// Wake-ups.
    pub hub: Arc<Hub>,
    /// Bearer token → tenant.
    pub tokens: HashMap<String, String>,
    /// Callback secrets per tenant.
    pub keyring: Keyring,
    /// Browser-token keys (JWTs minted by the tenants' backends).
    pub browser_keys: BrowserKeys,
    /// What `--notify-url` posts are signed with (with `--notify-url`).
    pub notify_secret: Option<Secret>,
    /// Resume window, in versions.
    pub retention: u64,
    /// SSE heartbeat interval.
    pub heartbeat_ms: u64,
    /// Origins allowed by CORS.
    pub cors_origins: Vec<String>,
    /// Callback counters, all tenants together (never served to a tenant).
    pub stats: Stats,
    /// `--demo`'s per-tenant counters and workload limits.
    pub demo: Arc<demo::Demo>,
    /// The configuration it started with.
    pub config: Config,
    /// The address actually bound (the demo executor calls back to it).
    pub addr: SocketAddr,
    /// Timeouts and caps, resolved at start-up.
    pub limits: Limits,
    /// Held long-polls and SSE streams, counted against their cap.
    pub watchers: Arc<Watchers>,
    /// Per-tenant limits (`--tenant-*`).
    pub quotas: quotas::Quotas,
}

/// Shared application state.
pub type AppState = Arc<Inner>;

/// A running server.
pub struct Server {
    /// The address it listens on (the real port when 0 was asked).
    pub addr: SocketAddr,
    /// Where `GET /metrics` is served (`--metrics-listen`), if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Its state (tests peek at stats and the hub).
    pub state: AppState,
    shutdown: Option<oneshot::Sender<()>>,
    serve: JoinHandle<std::io::Result<()>>,
    /// The metrics port's loop and what stops it, with `--metrics-listen`.
    metrics_serve: Option<(oneshot::Sender<()>, JoinHandle<std::io::Result<()>>)>,
    background: Vec<JoinHandle<()>>,
}

impl Server {
    /// Stops: aborts held requests, finishes the rest, stops the sweeper.
    pub async fn stop(mut self) {
        self.state.hub.drop_connections();
        // The demo's workers first: they would only retry a closed port.
        self.state.demo.fleets.stop().await;
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.serve).await;
        if let Some((tx, serve)) = self.metrics_serve.take() {
            let _ = tx.send(());
            let _ = serve.await;
        }
        for task in &self.background {
            task.abort();
        }
    }

    /// Waits until the server stops by itself (it does not, short of an
    /// I/O error on the listener).
    pub async fn wait(self) -> std::io::Result<()> {
        self.serve
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?
    }
}

/// Opens the store, binds `config.listen` and starts serving.
pub async fn start(config: Config) -> Result<Server, String> {
    let tokens = config.token_map()?;
    let keyring = config.keyring(&tokens)?;
    let browser_keys = config.browser_keys(&tokens)?;
    let receivers = notify::receivers(config.notify_url.as_deref(), &config.tenant_notify_urls)?;
    let sending = notify::Sending::from_config(&config)?;
    let notify_secret = match receivers.is_empty() {
        false => Some(config.notify_secret(&keyring)?),
        true => None,
    };
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(serve::tls_acceptor(cert, key)?),
        (None, None) => None,
        _ => return Err("--tls-cert and --tls-key go together".into()),
    };
    if tls.is_some() && config.demo {
        // The demo's workers reach their own server over plain loopback
        // HTTP (src/demo/link.rs), as any outside worker would.
        return Err(
            "--demo cannot be served with --tls-cert: the demo's workers \
                    reach the server over plain HTTP; run the demo without TLS, \
                    or put a TLS proxy in front of it"
                .into(),
        );
    }
    let limits = Limits::resolve(&config);
    let tenant_names: std::collections::BTreeSet<&str> =
        tokens.values().map(String::as_str).collect();
    let watch_default = limits.default_tenant_watches(tenant_names.len());
    let quotas = quotas::Quotas::new(config.quotas.resolve_with(tenant_names, watch_default)?);
    let metrics = metrics::Metrics::new(tokens.values().map(String::as_str));
    let hub = Hub::with_metrics(config.retention, metrics);
    hub.work.set_limited(
        config
            .kind_limit
            .iter()
            .any(|(_, l)| l.max_running.is_some()),
    );
    let store = store::open(&config, Arc::clone(&hub)).await?;
    let listener = serve::bind(&config.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", config.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("--listen {}: {e}", config.listen))?;
    let metrics_listener = metrics::endpoint::bind(&config).await?;
    let metrics_addr = match &metrics_listener {
        Some(l) => Some(
            l.local_addr()
                .map_err(|e| format!("--metrics-listen: {e}"))?,
        ),
        None => None,
    };
    let state: AppState = Arc::new(Inner {
        store,
        hub,
        tokens,
        keyring,
        browser_keys,
        notify_secret,
        retention: config.retention,
        heartbeat_ms: config.heartbeat_ms,
        cors_origins: config.cors_origins.clone(),
        stats: Stats::default(),
        demo: Arc::default(),
        config: config.clone(),
        addr,
        watchers: Watchers::with_quotas(
            limits.max_watchers,
            quotas.max_watches(),
            limits.max_watchers_per_subject,
        ),
        limits,
        quotas,
    });
    let mut background = vec![tokio::spawn(sweeper::run(
        Arc::clone(&state),
        Duration::from_millis(config.sweep_ms.max(10)),
    ))];
    if !receivers.is_empty() {
        background.push(tokio::spawn(notify::run(
            Arc::clone(&state),
            receivers,
            sending,
        )));
    }
    let metrics_serve = metrics_listener.map(|listener| {
        let (tx, rx) = oneshot::channel::<()>();
        let serving = metrics::endpoint::serve(listener, Arc::clone(&state), rx);
        (tx, tokio::spawn(serving))
    });
    let app = routes::router(Arc::clone(&state));
    let (tx, rx) = oneshot::channel::<()>();
    let serve = tokio::spawn(serve::serve(
        listener,
        app,
        serve::Port::api(&state, tls),
        rx,
    ));
    Ok(Server {
        addr,
        metrics_addr,
        state,
        shutdown: Some(tx),
        serve,
        metrics_serve,
        background,
    })
}
