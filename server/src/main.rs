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

#[tokio::main]
async fn main() {
    let config = Config::parse();
    let server = match taskwire_server::start(config.clone()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("taskwire-server: {e}");
            std::process::exit(2);
        }
    };
    print_banner(&config, server.addr);
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

fn print_banner(config: &Config, addr: std::net::SocketAddr) {
    say!("taskwire-server listening on http://{addr}");
    say!(
        "  data:       {}",
        config.data.join("taskwire.sqlite3").display()
    );
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
    if config.callback_secret == DEV_SECRET {
        say!(
            "  callbacks:  signed with the DEVELOPMENT secret {DEV_SECRET} (set --callback-secret)"
        );
    } else {
        say!("  callbacks:  signed with the configured secret");
    }
    say!("  retention:  {} versions", config.retention);
    if !config.cors_origins.is_empty() {
        say!("  cors:       {}", config.cors_origins.join(", "));
    }
    if let Some(url) = &config.notify_url {
        say!("  notify:     {url}");
    }
    // Flushed line by line: tests and scripts wait for "listening on".
}
