//! Callback secrets per tenant (`--callback-secret [TENANT=]whsec_…`).
//!
//! Each tenant's executors sign with the tenant's own secrets, so one
//! tenant's executor cannot move another tenant's tasks, and a captured
//! callback of one tenant is refused on every task of another. Rules:
//! - `TENANT=whsec_…` is a secret of that tenant. Repeat it for a
//!   rotation: every listed secret is accepted (Standard Webhooks), so
//!   executors move to the new one at their pace, then the old one is
//!   removed and refused from the next start.
//! - A bare `whsec_…` is shared by every tenant that has none of its own
//!   (one executor fleet serving every tenant). The body still names its
//!   task, so a shared secret does not let a callback move another task.
//! - No secret at all: the public development secret, shared (the
//!   out-of-the-box `--demo` and `npm run demo`).
//!
//! Checked at start: every tenant (from `--token`) ends up with a secret,
//! every `TENANT=` names a known tenant, and no secret of a tenant's own is
//! also another tenant's (that would quietly undo the separation).

use std::collections::{BTreeMap, BTreeSet};

use crate::signature::{Secret, DEV_SECRET};

/// The callback secrets of every tenant.
#[derive(Debug)]
pub struct Keyring {
    /// Tenants with secrets of their own.
    own: BTreeMap<String, Vec<Secret>>,
    /// For every other tenant.
    shared: Vec<Secret>,
    /// Every tenant (from `--token`), and those without a secret of
    /// their own: a claim signed with the shared secret takes their work.
    tenants: BTreeSet<String>,
    sharing: Vec<String>,
    /// Hashes like a secret for a task with none (see
    /// [`crate::signature::SignedHeaders::decoy`]); nobody holds it.
    decoy: Secret,
    /// Only the public development secret is configured.
    development: bool,
}

impl Keyring {
    /// Builds the keyring from `--callback-secret` values and the tenants
    /// the `--token`s name.
    pub fn new<'t>(
        specs: &[String],
        tenants: impl IntoIterator<Item = &'t str>,
    ) -> Result<Self, String> {
        let tenants: BTreeSet<&str> = tenants.into_iter().collect();
        let mut own: BTreeMap<String, Vec<Secret>> = BTreeMap::new();
        let mut shared = Vec::new();
        for spec in specs {
            // A base64 key may end in '=', and never holds one before it.
            let (tenant, text) = match spec.split_once('=') {
                Some((tenant, text)) if !spec.starts_with("whsec_") => (Some(tenant), text),
                _ => (None, spec.as_str()),
            };
            let secret = Secret::parse(text).map_err(|e| format!("--callback-secret: {e}"))?;
            let into = match tenant {
                Some(tenant) => {
                    if !tenants.contains(tenant) {
                        return Err(format!(
                            "--callback-secret: tenant {tenant:?} has no --token (tenants: {})",
                            list(&tenants)
                        ));
                    }
                    own.entry(tenant.to_string()).or_default()
                }
                None => &mut shared,
            };
            if !into.contains(&secret) {
                into.push(secret);
            }
        }
        let development = specs.is_empty();
        if development {
            shared.push(Secret::parse(DEV_SECRET)?);
        }
        let without: Vec<&str> = tenants
            .iter()
            .copied()
            .filter(|t| !own.contains_key(*t))
            .collect();
        if shared.is_empty() && !without.is_empty() {
            return Err(format!(
                "--callback-secret: no secret for tenant(s) {}: give each TENANT=whsec_…, or one \
                 shared whsec_… for every tenant without one",
                without.join(", ")
            ));
        }
        for (tenant, secrets) in &own {
            for secret in secrets {
                let other = own
                    .iter()
                    .find(|(t, s)| *t != tenant && s.contains(secret))
                    .map(|(t, _)| format!("tenant {t:?}"))
                    .or_else(|| {
                        shared
                            .contains(secret)
                            .then(|| String::from("the shared secret"))
                    });
                if let Some(other) = other {
                    return Err(format!(
                        "--callback-secret: a secret of tenant {tenant:?} is also {other}; \
                         each tenant's secrets must be its own"
                    ));
                }
            }
        }
        let sharing = without.iter().map(|t| t.to_string()).collect();
        Ok(Keyring {
            tenants: tenants.iter().map(|t| t.to_string()).collect(),
            sharing,
            own,
            shared,
            decoy: Secret::random()?,
            development,
        })
    }

    /// The secrets a callback for one of `tenant`'s tasks may be signed
    /// with (several during a rotation).
    pub fn secrets_of(&self, tenant: &str) -> &[Secret] {
        self.own.get(tenant).map_or(&self.shared, Vec::as_slice)
    }

    /// The secrets a worker's claim is checked against, and the tenants
    /// it claims from: `tenant`'s own (or the shared ones, if it has
    /// none), or, without a tenant, the shared secrets and every tenant
    /// that uses them. `None` for a tenant nobody configured.
    pub fn claim_scope(&self, tenant: Option<&str>) -> Option<(&[Secret], Vec<String>)> {
        match tenant {
            Some(t) if self.tenants.contains(t) => Some((self.secrets_of(t), vec![t.to_string()])),
            Some(_) => None,
            None if self.shared.is_empty() || self.sharing.is_empty() => None,
            None => Some((&self.shared, self.sharing.clone())),
        }
    }

    /// The key for tasks without a tenant (see [`Self::decoy`]'s field).
    pub fn decoy(&self) -> &Secret {
        &self.decoy
    }

    /// The shared secret a `--notify-url` post is signed with when no
    /// `--notify-secret` is given (the first one), if there is one.
    pub fn shared(&self) -> Option<&Secret> {
        self.shared.first()
    }

    /// Only the public development secret is configured.
    pub fn is_development(&self) -> bool {
        self.development
    }

    /// For the start-up banner: who has which secrets (never the keys).
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .own
            .iter()
            .map(|(tenant, s)| match s.len() {
                1 => format!("{tenant} (own)"),
                n => format!("{tenant} (own, {n} accepted: rotating)"),
            })
            .collect();
        match self.shared.len() {
            0 => {}
            1 if self.own.is_empty() => parts.push("one shared secret".into()),
            1 => parts.push("a shared secret for the others".into()),
            n => parts.push(format!("{n} shared secrets (rotating) for the others")),
        }
        parts.join(", ")
    }
}

fn list(tenants: &BTreeSet<&str>) -> String {
    tenants.iter().copied().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const A1: &str = "whsec_YS1vbmU=";
    const A2: &str = "whsec_YS10d28=";
    const B: &str = "whsec_Yi1vbmU=";
    const SHARED: &str = "whsec_c2hhcmVk";

    fn ring(specs: &[&str]) -> Result<Keyring, String> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        Keyring::new(&specs, ["a", "b", "c"])
    }

    fn secret(text: &str) -> Secret {
        Secret::parse(text).unwrap()
    }

    #[test]
    fn tenants_get_their_own_else_the_shared() {
        let a1 = format!("a={A1}");
        let a2 = format!("a={A2}");
        let b = format!("b={B}");
        let k = ring(&[&a1, &a2, &b, SHARED]).unwrap();
        assert_eq!(k.secrets_of("a"), &[secret(A1), secret(A2)]);
        assert_eq!(k.secrets_of("b"), &[secret(B)]);
        assert_eq!(k.secrets_of("c"), &[secret(SHARED)]);
        assert!(!k.is_development());
        assert_eq!(k.shared(), Some(&secret(SHARED)));
        assert!(
            k.describe().contains("a (own, 2 accepted: rotating)"),
            "{}",
            k.describe()
        );
    }

    #[test]
    fn nothing_configured_is_the_development_secret_for_all() {
        let k = ring(&[]).unwrap();
        assert!(k.is_development());
        assert_eq!(k.secrets_of("b"), &[secret(DEV_SECRET)]);
        // A bare secret ending in '=' is not read as TENANT=.
        let k = ring(&[B]).unwrap();
        assert_eq!(k.secrets_of("a"), &[secret(B)]);
    }

    #[test]
    fn mistakes_are_refused_at_start() {
        let a = format!("a={A1}");
        let b_same = format!("b={A1}");
        let shared_same = A1;
        let unknown = format!("nobody={B}");
        let bad = "a=secret".to_string();
        for (specs, says) in [
            (vec![a.as_str()], "no secret for tenant(s) b, c"),
            (
                vec![a.as_str(), b_same.as_str(), SHARED],
                "is also tenant \"b\"",
            ),
            (vec![a.as_str(), shared_same], "is also the shared secret"),
            (vec![unknown.as_str()], "tenant \"nobody\" has no --token"),
            (vec![bad.as_str()], "must start with whsec_"),
        ] {
            let err = ring(&specs).unwrap_err();
            assert!(err.starts_with("--callback-secret: "), "{err}");
            assert!(err.contains(says), "{specs:?}: {err}");
        }
    }
}
