//! `GET /metrics` on `--metrics-listen`: a listener of its own, so the
//! metrics are never served with the API by accident (the API's address
//! answers `/metrics` with 404, as any unknown path). Off unless the flag
//! is given.
//!
//! Served by the server's own loop ([`crate::serve`]) with the API's
//! timeouts and a connection cap of its own
//! ([`crate::limits::METRICS_MAX_CONNECTIONS`]): under `axum::serve`, with
//! neither, 21,000 half-sent requests here took every descriptor the API
//! needed.
//!
//! A scrape encodes the live set ([`super::Metrics`]) and then a set made
//! for this scrape from what is counted or known elsewhere: callbacks by
//! reason and quarantined rows ([`crate::stats::Stats`]), the PostgreSQL
//! pool and LISTEN connection, and, with a notify receiver, the outbox
//! backlog (one indexed store query per scrape, never per request).

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::counter_at;
use crate::clock::now_ms;
use crate::store::{OutboxBacklog, QueueDepth};
use crate::{AppState, Config, Inner};

/// Binds `--metrics-listen` when it is given; an address that does not
/// parse or bind, or that is the API's own, is an error naming the flag.
pub async fn bind(config: &Config) -> Result<Option<TcpListener>, String> {
    let Some(addr) = config.metrics_listen.as_deref() else {
        return Ok(None);
    };
    let flag = |e: &dyn std::fmt::Display| format!("--metrics-listen {addr}: {e}");
    let port = addr.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
    if !matches!(port, Some(Ok(_))) {
        return Err(flag(&"expected HOST:PORT, e.g. 127.0.0.1:9464"));
    }
    // Port 0 (any free port, as the tests ask) never collides.
    if addr.trim() == config.listen.trim() && port != Some(Ok(0)) {
        return Err(flag(
            &"must differ from --listen (metrics are never served with the API)",
        ));
    }
    crate::serve::bind(addr)
        .await
        .map(Some)
        .map_err(|e| flag(&e))
}

/// Serves `GET /metrics` on `listener` until `shutdown` fires, with the
/// API's timeouts and the metrics port's own connection cap.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let port = crate::serve::Port {
        flag: "--metrics-listen",
        limits: state.limits.for_metrics(),
        cors: None,
        tls: None,
    };
    let app = Router::new()
        .route("/metrics", get(scrape))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found: try GET /metrics\n") })
        .with_state(state);
    crate::serve::serve(listener, app, port, shutdown).await
}

async fn scrape(State(state): State<AppState>) -> Response {
    // The backlog only means something while a sender delivers it.
    let backlog = match state.notify_secret {
        Some(_) => match state.store.outbox_backlog().await {
            Ok(backlog) => Some(backlog),
            // An outage is logged once by the store (store/outage.rs),
            // not at every scrape.
            Err(crate::store::StoreError::Unavailable(_)) => None,
            Err(e) => {
                eprintln!("taskwire-server: metrics: outbox backlog: {e}");
                None
            }
        },
        None => None,
    };
    let queue = match state.store.queue_depth(now_ms()).await {
        Ok(queue) => queue,
        Err(crate::store::StoreError::Unavailable(_)) => Vec::new(),
        Err(e) => {
            eprintln!("taskwire-server: metrics: work queue: {e}");
            Vec::new()
        }
    };
    match render(&state, backlog, &queue) {
        Ok(text) => {
            let mut res = text.into_response();
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(prometheus_text::CONTENT_TYPE),
            );
            res
        }
        Err(std::fmt::Error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics: encoding failed\n",
        )
            .into_response(),
    }
}

/// The whole exposition: the live set, then this scrape's.
pub fn render(
    state: &Inner,
    backlog: Option<OutboxBacklog>,
    queue: &[QueueDepth],
) -> Result<String, std::fmt::Error> {
    let metrics = &state.hub.metrics;
    let mut out = String::new();
    prometheus_text::encode(&mut out, &metrics.registry)?;
    let mut read = Registry::with_prefix("taskwire");

    // Watchers counts long-polls and streams together; the streams have
    // their own gauge.
    let streams = u64::try_from(metrics.held_sse.get()).unwrap_or(0);
    let long_polls = (state.watchers.held() as u64).saturating_sub(streams);
    read.register(
        "held_long_polls",
        "Long-polls (resume with waitMs) held open now",
        gauge_at(long_polls),
    );

    let callbacks = Family::<[(&'static str, &'static str); 1], Counter>::default();
    for (reason, n) in state.stats.by_reason() {
        callbacks
            .get_or_create(&[("reason", reason.as_str())])
            .inc_by(n);
    }
    read.register(
        "callbacks",
        "Judged executor callbacks, by core reason (duplicates included)",
        callbacks,
    );
    read.register(
        "callback_signature_rejections",
        "Callbacks refused with 401 (bad or missing signature)",
        counter_at(state.stats.rejected_signatures()),
    );
    read.register(
        "quarantined_rows",
        "Rows a sweep or the notify sender set aside as unreadable",
        counter_at(state.stats.quarantined_rows()),
    );

    let depth = Family::<[(&'static str, String); 1], Gauge>::default();
    let age =
        Family::<[(&'static str, String); 1], Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    for kind in queue {
        let label = [("kind", kind.kind.clone())];
        depth
            .get_or_create(&label)
            .set(i64::try_from(kind.queued).unwrap_or(i64::MAX));
        age.get_or_create(&label).set(kind.oldest_age_secs);
    }
    read.register(
        "work_queued_tasks",
        "Tasks queued for workers' claims, by kind (PROTOCOL.md §Workers)",
        depth,
    );
    read.register_with_unit(
        "work_oldest_queued_age",
        "How long the oldest queued task of each kind has waited",
        Unit::Seconds,
        age,
    );

    if let Some(backlog) = backlog {
        read.register(
            "outbox_undelivered_notifications",
            "Notifications not yet delivered to their webhook receiver",
            gauge_at(backlog.undelivered),
        );
        let age_ms = backlog
            .oldest_at_ms
            .map_or(0.0, |at| (now_ms() - at).max(0.0));
        let age = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        age.set(age_ms / 1000.0);
        read.register_with_unit(
            "outbox_oldest_undelivered_age",
            "Age of the oldest undelivered notification (0 when none waits)",
            Unit::Seconds,
            age,
        );
    }

    if let Some(pool) = metrics.pool_status() {
        read.register(
            "pg_pool_max_connections",
            "Most connections the PostgreSQL pool opens (--pool)",
            gauge_at(pool.max_size as u64),
        );
        read.register(
            "pg_pool_connections",
            "Connections the PostgreSQL pool holds open now",
            gauge_at(pool.size as u64),
        );
        read.register(
            "pg_pool_idle_connections",
            "Open pool connections idle now",
            gauge_at(pool.available as u64),
        );
        read.register(
            "pg_pool_waiting_requests",
            "Writers and reads waiting for a pool connection now",
            gauge_at(pool.waiting as u64),
        );
        read.register(
            "pg_listen_connected",
            "1 while the LISTEN connection listens for other instances' commits, else 0",
            metrics.listen_connected.clone(),
        );
        read.register(
            "pg_listen_reconnects",
            "Times the LISTEN connection was lost and reconnected",
            metrics.listen_reconnects.clone(),
        );
    }
    prometheus_text::encode(&mut out, &read)?;
    Ok(out)
}

fn gauge_at(value: u64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}
