//! Where notifications go: `--notify-url` (every tenant) and
//! `--tenant-notify-url TENANT=URL` (one tenant's own receiver). One
//! [`Receiver`] per distinct URL, with the tenants it gets; each gets its
//! own posts in flight in the sender.

use crate::client;
use crate::store::TenantScope;

/// One receiver URL and the tenants routed to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Receiver {
    /// The URL as configured.
    pub url: String,
    /// `host:port` to connect to.
    pub authority: String,
    /// The request target.
    pub path: String,
    /// The tenants whose notifications it gets.
    pub scope: TenantScope,
}

impl Receiver {
    fn new(url: &str, scope: TenantScope, flag: &str) -> Result<Self, String> {
        let (authority, path) = client::split_http_url(url).map_err(|e| format!("{flag} {e}"))?;
        Ok(Receiver {
            url: url.to_string(),
            authority,
            path,
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
        assert_eq!(receivers(None, &[]), Ok(Vec::new()));
    }

    #[test]
    fn bad_flags_name_the_flag() {
        for (default, pairs) in [
            (None, list(&["nourl"])),
            (None, list(&["=http://h:1/"])),
            (None, list(&["a=https://h/"])),
            (None, list(&["a=http://h:1/", "a=http://h:2/"])),
            (Some("ftp://h/"), list(&[])),
        ] {
            let e = receivers(default, &pairs).expect_err("invalid");
            assert!(e.contains("notify-url"), "{e}");
        }
    }
}
