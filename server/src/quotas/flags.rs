//! The quota flags (`--tenant-*`), flattened into [`crate::Config`], and
//! their resolution into each tenant's [`TenantLimits`]. Every flag has an
//! environment twin; a bad value is refused at start with a message that
//! names the flag (and, in `--tenant-quota`, the tenant and the key).

use std::collections::HashMap;

use clap::Args;

/// Per-tenant limits, all off by default (see server/README.md "Quotas").
/// Each server-wide default applies to every tenant of `--token`;
/// `--tenant-quota` overrides them for one tenant.
#[derive(Debug, Clone, Default, Args)]
pub struct QuotaFlags {
    /// Most task creations per second per tenant (sustained; fractions
    /// allowed, e.g. 0.5). Past it a create gets 429 `create-rate-limited`
    /// with Retry-After: the seconds until the tenant's next create is
    /// allowed. Only creates that make a task count: an idempotent replay
    /// or a refused create does not. Counted per instance. Default: off.
    #[arg(long = "tenant-create-rate", env = "TASKWIRE_TENANT_CREATE_RATE",
          value_name = "PER_SEC", value_parser = parse_rate)]
    pub create_rate: Option<f64>,

    /// Creates a tenant may make at once above the sustained rate (the
    /// token bucket's size). Default: the rate rounded up, at least 1.
    /// Needs --tenant-create-rate.
    #[arg(long = "tenant-create-burst", env = "TASKWIRE_TENANT_CREATE_BURST",
          value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub create_burst: Option<u32>,

    /// Most held long-polls and SSE streams per tenant (browser tokens
    /// count for their tenant). Past it a new one gets 429 `watch-quota`
    /// with Retry-After: 2; the server-wide --max-watchers (503
    /// `watch-limit`) still applies. Counted per instance. Default: off.
    #[arg(long = "tenant-max-watches", env = "TASKWIRE_TENANT_MAX_WATCHES",
          value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_watches: Option<u64>,

    /// Most open (not yet terminal) tasks per tenant, counted in the store:
    /// across restarts and, on PostgreSQL, across instances. Past it a
    /// create gets 429 `open-task-quota` with Retry-After: 5; a task that
    /// succeeds, fails, is cancelled, times out or expires frees its slot.
    /// Default: off.
    #[arg(long = "tenant-max-open-tasks", env = "TASKWIRE_TENANT_MAX_OPEN_TASKS",
          value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub max_open_tasks: Option<u64>,

    /// One tenant's own limits, overriding the defaults above:
    /// `TENANT:create-rate=N,create-burst=M,max-watches=K,max-open-tasks=L`
    /// (the keys are the flags' names without `tenant-`; any may be left
    /// out, and `off` lifts that default for this tenant). Repeatable,
    /// once per tenant; the tenant must be one of --token. The environment
    /// twin takes a `;`-separated list.
    #[arg(
        long = "tenant-quota",
        env = "TASKWIRE_TENANT_QUOTA",
        value_name = "TENANT:KEY=VALUE,…",
        value_delimiter = ';'
    )]
    pub overrides: Vec<String>,
}

/// Highest `--tenant-create-rate` (and `create-rate=`): beyond it the
/// store, not a quota, is the limit.
const MAX_RATE: f64 = 1_000_000.0;

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= MAX_RATE => Ok(r),
        _ => Err(format!(
            "must be a number of creates per second above 0 and at most {MAX_RATE}, got {text:?}"
        )),
    }
}

/// A tenant's create rate: the token bucket's refill and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreateRate {
    /// Sustained creates per second.
    pub per_sec: f64,
    /// Creates allowed at once.
    pub burst: u32,
}

/// One tenant's limits, resolved (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TenantLimits {
    /// `create-rate` and `create-burst`.
    pub create_rate: Option<CreateRate>,
    /// `max-watches`.
    pub max_watches: Option<usize>,
    /// `max-open-tasks`.
    pub max_open_tasks: Option<u64>,
}

impl TenantLimits {
    /// Whether any limit applies.
    pub fn any(&self) -> bool {
        self.create_rate.is_some() || self.max_watches.is_some() || self.max_open_tasks.is_some()
    }
}

/// A key of `--tenant-quota` as given: a value, or `off`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Setting<T> {
    Value(T),
    Off,
}

/// One `--tenant-quota` entry, parsed (absent keys: `None`).
#[derive(Debug, Default)]
struct Override {
    create_rate: Option<Setting<f64>>,
    create_burst: Option<Setting<u32>>,
    max_watches: Option<Setting<u64>>,
    max_open_tasks: Option<Setting<u64>>,
}

const KEYS: &str = "create-rate, create-burst, max-watches, max-open-tasks";

impl QuotaFlags {
    /// Each tenant's limits (tenants without any are left out), checked
    /// against `tenants` (those of `--token`).
    pub fn resolve<'a>(
        &self,
        tenants: impl IntoIterator<Item = &'a str>,
    ) -> Result<HashMap<String, TenantLimits>, String> {
        self.resolve_with(tenants, None)
    }

    /// [`Self::resolve`], with `watch_default` as the `max-watches` of
    /// every tenant for which neither `--tenant-max-watches` nor its own
    /// `max-watches=` (a number or `off`) says otherwise. The server passes
    /// half of its watch slots when it has several tenants, so that no
    /// tenant can take them all from the others by default.
    pub fn resolve_with<'a>(
        &self,
        tenants: impl IntoIterator<Item = &'a str>,
        watch_default: Option<u64>,
    ) -> Result<HashMap<String, TenantLimits>, String> {
        let flags = QuotaFlags {
            max_watches: self.max_watches.or(watch_default),
            ..self.clone()
        };
        flags.resolve_given(tenants)
    }

    fn resolve_given<'a>(
        &self,
        tenants: impl IntoIterator<Item = &'a str>,
    ) -> Result<HashMap<String, TenantLimits>, String> {
        if self.create_burst.is_some() && self.create_rate.is_none() {
            return Err("--tenant-create-burst: needs --tenant-create-rate".into());
        }
        let tenants: Vec<&str> = tenants.into_iter().collect();
        let mut overrides: HashMap<String, Override> = HashMap::new();
        for entry in &self.overrides {
            let (tenant, parsed) = parse_override(entry)?;
            if !tenants.contains(&tenant.as_str()) {
                return Err(format!(
                    "--tenant-quota: tenant {tenant:?} has no --token (in {entry:?})"
                ));
            }
            if overrides.insert(tenant.clone(), parsed).is_some() {
                return Err(format!(
                    "--tenant-quota: tenant {tenant:?} is given twice (one entry per tenant)"
                ));
            }
        }
        let mut out = HashMap::new();
        for tenant in tenants {
            let limits = match overrides.get(tenant) {
                Some(o) => self.apply(tenant, o)?,
                None => self.defaults(),
            };
            if limits.any() {
                out.insert(tenant.to_string(), limits);
            }
        }
        Ok(out)
    }

    fn defaults(&self) -> TenantLimits {
        TenantLimits {
            create_rate: self.create_rate.map(|per_sec| CreateRate {
                per_sec,
                burst: self.create_burst.unwrap_or_else(|| default_burst(per_sec)),
            }),
            max_watches: self.max_watches.map(to_usize),
            max_open_tasks: self.max_open_tasks,
        }
    }

    fn apply(&self, tenant: &str, o: &Override) -> Result<TenantLimits, String> {
        let rate = match o.create_rate {
            Some(Setting::Value(r)) => Some(r),
            Some(Setting::Off) => None,
            None => self.create_rate,
        };
        let create_rate = match (rate, o.create_burst) {
            (None, Some(Setting::Value(_))) => {
                return Err(format!(
                    "--tenant-quota: create-burst for tenant {tenant:?} needs a create-rate \
                     (its own or --tenant-create-rate)"
                ))
            }
            (None, _) => None,
            (Some(per_sec), burst) => Some(CreateRate {
                per_sec,
                burst: match burst {
                    Some(Setting::Value(b)) => b,
                    _ => self.create_burst.unwrap_or_else(|| default_burst(per_sec)),
                },
            }),
        };
        let pick = |own: Option<Setting<u64>>, default: Option<u64>| match own {
            Some(Setting::Value(v)) => Some(v),
            Some(Setting::Off) => None,
            None => default,
        };
        Ok(TenantLimits {
            create_rate,
            max_watches: pick(o.max_watches, self.max_watches).map(to_usize),
            max_open_tasks: pick(o.max_open_tasks, self.max_open_tasks),
        })
    }
}

/// One second's worth of creates, at least one.
fn default_burst(per_sec: f64) -> u32 {
    // `per_sec` is at most MAX_RATE, so the cast is exact.
    (per_sec.ceil() as u32).max(1)
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn parse_override(entry: &str) -> Result<(String, Override), String> {
    let bad = |why: String| format!("--tenant-quota: {why} in {entry:?}");
    let (tenant, keys) = entry
        .rsplit_once(':')
        .ok_or_else(|| bad(format!("expected TENANT:KEY=VALUE,… (keys: {KEYS})")))?;
    if tenant.is_empty() {
        return Err(bad("the tenant is empty".into()));
    }
    let mut o = Override::default();
    let mut seen = Vec::new();
    for pair in keys.split(',').map(str::trim) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("expected KEY=VALUE, got {pair:?} (keys: {KEYS})")))?;
        let (key, value) = (key.trim(), value.trim());
        if seen.contains(&key) {
            return Err(bad(format!("key {key} is given twice")));
        }
        seen.push(key);
        let at_least_one = |v: &str| -> Result<u64, String> {
            v.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                bad(format!(
                    "{key}: must be an integer of at least 1 or off, got {v:?}"
                ))
            })
        };
        let off = value == "off";
        match key {
            "create-rate" => {
                o.create_rate = Some(if off {
                    Setting::Off
                } else {
                    Setting::Value(parse_rate(value).map_err(|e| bad(format!("{key}: {e}")))?)
                })
            }
            "create-burst" => {
                o.create_burst = Some(if off {
                    Setting::Off
                } else {
                    let n = at_least_one(value)?;
                    Setting::Value(
                        u32::try_from(n)
                            .ok()
                            .filter(|n| *n <= 1_000_000)
                            .ok_or_else(|| {
                                bad(format!("{key}: must be at most 1000000, got {value:?}"))
                            })?,
                    )
                })
            }
            "max-watches" => {
                o.max_watches = Some(if off {
                    Setting::Off
                } else {
                    Setting::Value(at_least_one(value)?)
                })
            }
            "max-open-tasks" => {
                o.max_open_tasks = Some(if off {
                    Setting::Off
                } else {
                    Setting::Value(at_least_one(value)?)
                })
            }
            other => return Err(bad(format!("unknown key {other:?} (keys: {KEYS})"))),
        }
    }
    Ok((tenant.to_string(), o))
}

#[cfg(test)]
mod tests;
