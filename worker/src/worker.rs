//! The worker's configuration, its handlers, and the handle that stops it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskwire_core::ClaimRequest as Limits;
use tokio::sync::watch;

use crate::clock::{system_clock, Clock, ServerClock};
use crate::error::{ConfigError, JobError};
use crate::http::Transport;
use crate::job::{Done, Job};
use crate::sign::Secret;

/// A handler's future, boxed so handlers of any type fit in one map.
pub(crate) type JobFuture = Pin<Box<dyn Future<Output = Result<Done, JobError>> + Send>>;
/// A registered handler.
pub(crate) type Handler = Arc<dyn Fn(Job) -> JobFuture + Send + Sync>;

/// Builds a [`Worker`]; every value is checked by [`WorkerBuilder::build`],
/// whose error names the field.
pub struct WorkerBuilder {
    url: String,
    tenant: String,
    secret: String,
    name: Option<String>,
    concurrency: usize,
    lease_ms: u64,
    wait_ms: u64,
    clock: Clock,
    roots_pem: Option<Vec<u8>>,
    workflow_versions: Vec<String>,
}

impl WorkerBuilder {
    /// The workflow versions this code runs (default: any). Its claims
    /// leave the tasks planned for other versions to their own workers,
    /// so new code never takes over an older task (PROTOCOL.md §Workers ›
    /// Claim work). At most 16, each non-blank and at most 255 bytes.
    pub fn workflow_versions<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        versions: I,
    ) -> Self {
        self.workflow_versions = versions.into_iter().map(Into::into).collect();
        self
    }

    /// The worker's name, recorded as each `start`'s `worker` (default
    /// `<hostname>-<pid>`): non-blank, at most 255 bytes.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Jobs in flight at once, 1 to 100 (default 1): each claim asks for
    /// as many tasks as there are free slots.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// The lease of each attempt, 1,000 to 3,600,000 ms (default 30,000):
    /// heartbeats go every third of it, so a cancel reaches a job within
    /// a third of the lease.
    pub fn lease_ms(mut self, ms: u64) -> Self {
        self.lease_ms = ms;
        self
    }

    /// How long the server holds a claim while there is no work, 0 to
    /// 30,000 ms (default 25,000).
    pub fn wait_ms(mut self, ms: u64) -> Self {
        self.wait_ms = ms;
        self
    }

    /// The local wall clock (ms since the epoch), for tests of a worker
    /// whose clock is off; the worker corrects it by the server's.
    pub fn clock(mut self, clock: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// PEM certificates to trust for an `https://` server beside
    /// Mozilla's roots (a private CA, a test certificate).
    pub fn root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.roots_pem = Some(pem.into());
        self
    }

    /// Checks the configuration and makes the worker.
    pub fn build(self) -> Result<Worker, ConfigError> {
        let base = self.url.trim_end_matches('/').to_string();
        let scheme = ["http://", "https://"]
            .into_iter()
            .find(|p| base.starts_with(p) && base.len() > p.len());
        if scheme.is_none() {
            return Err(ConfigError::new(
                "url",
                format!(
                    "must be an http:// or https:// URL of the server, got {:?}",
                    self.url
                ),
            ));
        }
        if scheme == Some("https://") && !cfg!(feature = "tls") {
            return Err(ConfigError::new(
                "url",
                "https:// needs the crate's `tls` feature (on by default)",
            ));
        }
        if self.tenant.trim().is_empty() || self.tenant.len() > 255 {
            return Err(ConfigError::new(
                "tenant",
                "must be non-blank, at most 255 bytes",
            ));
        }
        if !self.tenant.bytes().all(|b| (0x21..0x7f).contains(&b)) {
            return Err(ConfigError::new(
                "tenant",
                "must be visible ASCII (it is sent as a header)",
            ));
        }
        let secret = Secret::parse(&self.secret)?;
        let name = self.name.unwrap_or_else(default_name);
        if name.trim().is_empty() || name.len() > 255 {
            return Err(ConfigError::new(
                "name",
                "must be non-blank, at most 255 bytes",
            ));
        }
        if !(1..=100).contains(&self.concurrency) {
            return Err(ConfigError::new(
                "concurrency",
                format!("must be from 1 to 100, got {}", self.concurrency),
            ));
        }
        if !(1_000..=3_600_000).contains(&self.lease_ms) {
            return Err(ConfigError::new(
                "leaseMs",
                format!("must be from 1000 to 3600000, got {}", self.lease_ms),
            ));
        }
        if self.wait_ms > 30_000 {
            return Err(ConfigError::new(
                "waitMs",
                format!("must be from 0 to 30000, got {}", self.wait_ms),
            ));
        }
        if self.workflow_versions.len() > 16
            || self
                .workflow_versions
                .iter()
                .any(|v| v.trim().is_empty() || v.len() > 255)
        {
            return Err(ConfigError::new(
                "workflowVersions",
                "must list at most 16 versions, each non-blank and at most 255 bytes",
            ));
        }
        let clock = Arc::new(ServerClock::new(self.clock));
        let transport = Arc::new(Transport::new(
            base,
            self.tenant,
            secret,
            clock,
            self.roots_pem.as_deref(),
        )?);
        let (stop, _) = watch::channel(None);
        Ok(Worker {
            inner: Arc::new(Inner {
                transport,
                name,
                concurrency: self.concurrency,
                lease: Duration::from_millis(self.lease_ms),
                wait_ms: self.wait_ms,
                workflow_versions: self.workflow_versions,
                handlers: Mutex::new(BTreeMap::new()),
                stop,
                running: Mutex::new(false),
                finished: tokio::sync::Notify::new(),
            }),
        })
    }
}

/// `<hostname>-<pid>`, or `worker-<pid>` without a readable hostname.
fn default_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_string());
    format!("{host}-{}", std::process::id())
}

/// A worker: claims tasks of the kinds it has handlers for, runs each as
/// a [`Job`], and reports for it. Cheap to clone: every clone is the same
/// worker, so one task can [`Worker::run`] it while another calls
/// [`Worker::shutdown`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use taskwire_worker::{Done, Worker};
/// let worker = Worker::builder("http://127.0.0.1:8080", "demo", "whsec_…").build()?;
/// worker.handle("summary", |job| async move {
///     job.check()?;
///     job.progress(50, Some("half")).await?;
///     Ok(Done::result("blob://r", "sha256:ab"))
/// })?;
/// worker.run().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Worker {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) transport: Arc<Transport>,
    pub(crate) name: String,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) wait_ms: u64,
    pub(crate) workflow_versions: Vec<String>,
    pub(crate) handlers: Mutex<BTreeMap<String, Handler>>,
    /// `Some(grace)` once a shutdown was asked for.
    pub(crate) stop: watch::Sender<Option<Duration>>,
    pub(crate) running: Mutex<bool>,
    pub(crate) finished: tokio::sync::Notify,
}

impl Worker {
    /// A builder for a worker of `tenant` on the server at `url`
    /// (`http://host:port`), whose credential is the tenant's callback
    /// secret `whsec_…`.
    pub fn builder(
        url: impl Into<String>,
        tenant: impl Into<String>,
        secret: impl Into<String>,
    ) -> WorkerBuilder {
        WorkerBuilder {
            url: url.into(),
            tenant: tenant.into(),
            secret: secret.into(),
            name: None,
            concurrency: 1,
            lease_ms: 30_000,
            wait_ms: 25_000,
            clock: system_clock(),
            roots_pem: None,
            workflow_versions: Vec::new(),
        }
    }

    /// Runs `handler` for tasks of `kind` (replacing an earlier one). The
    /// handler's `Ok(Done)` is reported as `succeed` (or was a `hold`);
    /// its error as `fail`, retryable by [`crate::ErrorClass`]. Handlers
    /// added while the worker runs are claimed for from its next claim.
    /// A kind over 64 bytes, or a 33rd kind, is an error naming `kind`
    /// (a claim names at most 32).
    pub fn handle<F, Fut>(&self, kind: impl Into<String>, handler: F) -> Result<(), ConfigError>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Done, JobError>> + Send + 'static,
    {
        let kind = kind.into();
        if kind.len() > Limits::MAX_KIND_BYTES {
            return Err(ConfigError::new(
                "kind",
                format!(
                    "must be at most {} bytes, got {:?}",
                    Limits::MAX_KIND_BYTES,
                    kind
                ),
            ));
        }
        let mut handlers = self
            .inner
            .handlers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !handlers.contains_key(&kind) && handlers.len() >= Limits::MAX_KINDS {
            return Err(ConfigError::new(
                "kind",
                format!("a worker runs at most {} kinds", Limits::MAX_KINDS),
            ));
        }
        let handler: Handler = Arc::new(move |job| Box::pin(handler(job)));
        handlers.insert(kind, handler);
        Ok(())
    }

    /// The worker's name, as recorded in each `start`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Stops the worker: no more claims; running jobs get `grace` to
    /// finish, then their signals fire ([`crate::StopReason::Shutdown`])
    /// and each unfinished task is reported `fail`, retryable, with error
    /// `"worker shut down"`, so that another worker takes it at once.
    /// Returns once [`Worker::run`] has returned (at once if it is not
    /// running). A worker that was shut down stays so: a later `run()`
    /// returns at once.
    pub async fn shutdown(&self, grace: Duration) {
        let finished = self.inner.finished.notified();
        self.inner.stop.send_replace(Some(grace));
        if *self.inner.running.lock().unwrap_or_else(|e| e.into_inner()) {
            finished.await;
        }
    }
}
