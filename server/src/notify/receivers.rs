//! Where notifications go: `--notify-url` (every tenant) and
//! `--tenant-notify-url TENANT=URL` (one tenant's own receiver). One
//! [`Receiver`] per distinct URL, with the tenants it gets; each gets its
//! own posts in flight in the sender. A URL is `http://` or `https://`
//! (see [`super::tls`]); any other scheme is refused at start.

use axum::http::Uri;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::store::TenantScope;

/// One receiver URL and the tenants routed to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Receiver {
    /// The URL as configured.
    pub url: String,
    /// `host:port` to connect to.
    pub authority: String,
    /// The Host header: the URL's authority as written.
    pub host: String,
    /// The request target.
    pub path: String,
    /// For `https://`: the name its certificate must be valid for (the
    /// URL's host, a DNS name or an IP address).
    pub tls: Option<ServerName<'static>>,
    /// The tenants whose notifications it gets.
    pub scope: TenantScope,
}

impl Receiver {
    fn new(url: &str, scope: TenantScope, flag: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{flag} {url}: {why}");
        let uri: Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
        let (tls, default_port) = match uri.scheme_str() {
            Some("http") => (false, 80),
            Some("https") => (true, 443),
            _ => return Err(bad("only http:// and https:// URLs are supported")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad(
                "user credentials in the URL are not supported (posts are signed with \
                 --notify-secret)",
            ));
        }
        let host = authority.host();
        let port = authority.port_u16().unwrap_or(default_port);
        // An IPv6 host keeps its brackets in `host:port`, and loses them
        // as a certificate name.
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let tls = match tls {
            true => Some(
                ServerName::try_from(name.to_string())
                    .map_err(|e| bad(&format!("{name:?} is no host name: {e}")))?,
            ),
            false => None,
        };
        Ok(Receiver {
            url: url.to_string(),
            authority: format!("{host}:{port}"),
            host: match tls {
                Some(_) => authority.as_str().to_string(),
                // Unchanged from before https: `host:port`.
                None => format!("{host}:{port}"),
            },
            path: uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
            tls,
            scope,
        })
    }
}

/// The receivers of `--notify-url` (`default`) and `--tenant-notify-url`
/// (`per_tenant`, `TENANT=URL` each); none when neither is given. A tenant
/// with neither gets no posts (its rows wait in the outbox, and in its
/// feed). Tenants given the same URL share one receiver.
pub fn receivers(default: Option<&str>, per_tenant: &[String]) -> Result<Vec<Receiver>, String> {
    const FLAG: &str = "--tenant-notify-url";
    let mut seen: Vec<&str> = Vec::new();
    let mut elsewhere: Vec<String> = Vec::new();
    let mut by_url: Vec<(&str, Vec<String>)> = Vec::new();
    for pair in per_tenant {
        let (tenant, url) = pair
            .split_once('=')
            .ok_or_else(|| format!("{FLAG}: expected TENANT=URL, got {pair:?}"))?;
        if tenant.is_empty() || url.is_empty() {
            return Err(format!(
                "{FLAG}: tenant and URL must not be empty in {pair:?}"
            ));
        }
        if seen.contains(&tenant) {
            return Err(format!("{FLAG}: tenant {tenant:?} is given twice"));
        }
        seen.push(tenant);
        if Some(url) == default {
            continue; // the default receiver gets it anyway
        }
        elsewhere.push(tenant.to_string());
        match by_url.iter_mut().find(|(u, _)| *u == url) {
            Some((_, tenants)) => tenants.push(tenant.to_string()),
            None => by_url.push((url, vec![tenant.to_string()])),
        }
    }
    let mut out = Vec::new();
    if let Some(url) = default {
        out.push(Receiver::new(
            url,
            TenantScope::AllBut(elsewhere),
            "--notify-url",
        )?);
    }
    for (url, tenants) in by_url {
        out.push(Receiver::new(url, TenantScope::Only(tenants), FLAG)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tenants_go_to_their_own_receiver_and_the_rest_to_the_default() {
        let r = receivers(
            Some("http://127.0.0.1:9/all"),
            &list(&[
                "a=http://127.0.0.1:9/a",
                "b=http://127.0.0.1:9/all",
                "c=http://127.0.0.1:9/a",
                "d=http://127.0.0.1:9/d",
            ]),
        )
        .expect("valid");
        let scopes: Vec<(&str, &TenantScope)> =
            r.iter().map(|r| (r.path.as_str(), &r.scope)).collect();
        assert_eq!(
            scopes,
            vec![
                ("/all", &TenantScope::AllBut(list(&["a", "c", "d"]))),
                ("/a", &TenantScope::Only(list(&["a", "c"]))),
                ("/d", &TenantScope::Only(list(&["d"]))),
            ]
        );
        assert_eq!(r[0].authority, "127.0.0.1:9");
        assert_eq!(r[0].tls, None);
        assert_eq!(receivers(None, &[]), Ok(Vec::new()));
    }

    #[test]
    fn https_urls_name_the_host_their_certificate_must_be_valid_for() {
        let r = receivers(
            Some("https://hooks.example.com/in?x=1"),
            &list(&[
                "a=https://127.0.0.1:8443/a",
                "b=https://[::1]/b",
                "c=http://hooks.example.com/c",
            ]),
        )
        .expect("valid");
        let seen: Vec<(&str, &str, &str, Option<String>)> = r
            .iter()
            .map(|r| {
                let name = r.tls.as_ref().map(|n| n.to_str().to_string());
                (r.authority.as_str(), r.host.as_str(), r.path.as_str(), name)
            })
            .collect();
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            seen,
            vec![
                (
                    "hooks.example.com:443",
                    "hooks.example.com",
                    "/in?x=1",
                    some("hooks.example.com")
                ),
                ("127.0.0.1:8443", "127.0.0.1:8443", "/a", some("127.0.0.1")),
                ("[::1]:443", "[::1]", "/b", some("::1")),
                ("hooks.example.com:80", "hooks.example.com:80", "/c", None),
            ]
        );
    }

    #[test]
    fn bad_flags_name_the_flag() {
        for (default, pairs) in [
            (None, list(&["nourl"])),
            (None, list(&["=http://h:1/"])),
            (None, list(&["a=wss://h/"])),
            (None, list(&["a=https://u:p@h/"])),
            (Some("https:///nohost"), list(&[])),
            (None, list(&["a=http://h:1/", "a=http://h:2/"])),
            (Some("ftp://h/"), list(&[])),
        ] {
            let e = receivers(default, &pairs).expect_err("invalid");
            assert!(e.contains("notify-url"), "{e}");
        }
    }
}
