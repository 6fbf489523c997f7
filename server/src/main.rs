//! `taskwire-server`: see `--help` and server/README.md.

use std::io::Write;

use clap::Parser;

/// `println!` that ignores a closed stdout (a supervisor that stopped
/// reading must not crash the server).
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}
use taskwire_server::signature::DEV_SECRET;
use taskwire_server::Config;

/// jemalloc: 40 % less RSS than glibc malloc with 10,000 held long-polls,
/// measured (see the note in server/Cargo.toml and server/README.md).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let config = Config::parse();
    if config.mark_restored {
        return mark_restored(&config);
    }
    // Store reads run on the blocking pool, at most 8 at once; a small cap
    // keeps idle pool threads (and their stacks) from piling up under
    // 10,000 held requests.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(16)
        .build();
    match runtime {
        Ok(rt) => rt.block_on(serve(config)),
        Err(e) => {
            eprintln!("taskwire-server: runtime: {e}");
            std::process::exit(2);
        }
    }
}

/// `--mark-restored`: a new epoch for the data, then exit (no server).
fn mark_restored(config: &Config) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let marked = match runtime {
        Ok(rt) => rt.block_on(taskwire_server::store::epoch::mark_restored(config)),
        Err(e) => Err(format!("runtime: {e}")),
    };
    match marked {
        Ok(marked) => say!(
            "taskwire-server: {} marked restored: epoch {} -> {}",
            config.data_description(),
            marked.before.as_deref().unwrap_or("(none)"),
            marked.after
        ),
        Err(e) => {
            eprintln!("taskwire-server: --mark-restored: {e}");
            std::process::exit(2);
        }
    }
}

async fn serve(config: Config) {
    let server = match taskwire_server::start(config.clone()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("taskwire-server: {e}");
            std::process::exit(2);
        }
    };
    print_banner(&config, &server);
    print_limits(&server.state.limits);
    tokio::select! {
        res = server.wait() => {
            if let Err(e) = res {
                eprintln!("taskwire-server: {e}");
                std::process::exit(1);
            }
        }
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn print_banner(config: &Config, server: &taskwire_server::Server) {
    let scheme = match config.tls_cert {
        Some(_) => "https (HTTP/2 and HTTP/1.1)",
        None => "http",
    };
    say!("taskwire-server listening on {scheme}://{}", server.addr);
    say!("  data:       {}", config.data_description());
    say!("  epoch:      {}", server.state.store.epoch());
    if let Some(addr) = server.metrics_addr {
        say!(
            "  metrics:    http://{addr}/metrics (at most {} connections, the API's timeouts)",
            taskwire_server::limits::METRICS_MAX_CONNECTIONS
        );
    }
    let tenants: Vec<String> = config
        .tokens
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((token, tenant)) => {
                format!("{}…={tenant}", token.chars().take(4).collect::<String>())
            }
            None => pair.clone(),
        })
        .collect();
    say!("  tokens:     {}", tenants.join(", "));
    let keyring = &server.state.keyring;
    if keyring.is_development() {
        say!(
            "  callbacks:  signed with the DEVELOPMENT secret {DEV_SECRET} (set --callback-secret)"
        );
    } else {
        say!("  callbacks:  signed with {}", keyring.describe());
    }
    let kids = server.state.browser_keys.kids_by_tenant();
    if kids.is_empty() {
        say!("  browser:    no --browser-token-key (browser tokens refused)");
    } else {
        let list: Vec<String> = kids
            .iter()
            .map(|(tenant, kids)| format!("{tenant} [{}]", kids.join(", ")))
            .collect();
        say!(
            "  browser:    tokens (aud {:?}) verified for {}",
            config.browser_tokens.audience,
            list.join(", ")
        );
    }
    say!("  retention:  {} versions", config.retention);
    if !config.cors_origins.is_empty() {
        say!("  cors:       {}", config.cors_origins.join(", "));
    }
    if config.demo {
        let dir = &config.demo_dir;
        let note = if dir.join("index.html").is_file() {
            ""
        } else {
            " (no index.html there yet)"
        };
        say!(
            "  demo:       page from {}{note}; executor and /v1/demo/* enabled",
            dir.display()
        );
        let pkg = &config.demo_pkg_dir;
        let note = if pkg.join("index.js").is_file() {
            ""
        } else {
            " (not built yet: npm run build)"
        };
        say!("  demo pkg:   /pkg/ from {}{note}", pkg.display());
    }
    if let Some(url) = &config.notify_url {
        say!("  notify:     {url}");
    }
    for pair in &config.tenant_notify_urls {
        say!("  notify:     {pair}");
    }
    // Flushed line by line: tests and scripts wait for "listening on".
}

fn print_limits(limits: &taskwire_server::limits::Limits) {
    let fds = limits
        .fds
        .soft
        .map_or(String::new(), |soft| format!(" (RLIMIT_NOFILE {soft})"));
    say!(
        "  limits:     {} connections{fds}, {} held watches; head {} ms, body {} ms, idle {} ms",
        limits.max_connections,
        limits.max_watchers,
        limits.header_timeout.as_millis(),
        limits.body_timeout.as_millis(),
        limits.idle_timeout.as_millis()
    );
    for note in &limits.notes {
        say!("              {note}");
    }
}
