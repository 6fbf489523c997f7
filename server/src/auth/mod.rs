//! Who is asking, and what they may do: the [`Credential`] every client
//! handler takes.
//!
//! Two kinds of credential reach the client endpoints (PROTOCOL.md,
//! "Credentials"):
//! - a **tenant token** (`--token TOKEN=TENANT`), long-lived, for the
//!   application's backend: every right on every task of its tenant, and
//!   the tenant-wide endpoints (create, the notifications feed). Its actor
//!   is `tenant:<name>`.
//! - a **browser token** (a JWT the application's backend mints, verified
//!   in [`keys`]): short-lived, scoped to some tasks or a batch and some
//!   [`Right`]s, for one end user (`sub`). Its actor is `user:<sub>`.
//!
//! Handlers ask the credential, never the request: [`Credential::require`]
//! answers 404 for a task out of scope (the answer for another tenant's
//! task, so a token reveals nothing about tasks it does not cover) and 403
//! `right-not-granted` for a right the token lacks; the actor of a cancel
//! or a decision is [`Credential::actor`], never a field of the body.
//!
//! Credentials travel in `Authorization: Bearer …`. The watch routes
//! (`/resume`, `/events`) also take `?access_token=` ([`WatchCredential`])
//! for clients that cannot set headers (a native `EventSource`), and only
//! a browser token there: a tenant token in a URL is 401
//! `browser-token-required`, so long-lived credentials never reach URLs,
//! logs or browser history.

mod expiry;
mod extract;
pub mod flags;
pub mod keys;
mod mint;

pub use expiry::until_expiry;
pub use extract::{Tenant, WatchCredential};
pub use mint::MintScope;

use axum::http::StatusCode;

use crate::error::{quoted, ApiError};

/// A right a browser token may grant (its `rights` claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// Read and follow: get, resume (long-poll), events (SSE).
    Watch,
    /// Cancel the task.
    Cancel,
    /// Answer the task's decisions.
    Decide,
    /// Take the result: deliveries.
    Deliver,
}

impl Right {
    /// Every right, in claim order.
    pub const ALL: [Right; 4] = [Right::Watch, Right::Cancel, Right::Decide, Right::Deliver];

    /// The claim's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Watch => "watch",
            Right::Cancel => "cancel",
            Right::Decide => "decide",
            Right::Deliver => "deliver",
        }
    }

    /// A right from its claim spelling.
    pub fn parse(name: &str) -> Option<Right> {
        Right::ALL.into_iter().find(|r| r.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Right`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rights(u8);

impl Rights {
    /// No right.
    pub const NONE: Rights = Rights(0);

    /// This set and `right`.
    pub fn with(self, right: Right) -> Rights {
        Rights(self.0 | right.bit())
    }

    /// Whether `right` is in the set.
    pub fn has(self, right: Right) -> bool {
        self.0 & right.bit() != 0
    }
}

/// What a browser token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserGrant {
    /// The end user (`sub`).
    pub subject: String,
    /// The tasks in scope (`tasks`).
    pub tasks: Vec<String>,
    /// The batch in scope (`batch`): batch watches check it with
    /// [`Credential::require_batch`]; it covers no single-task route.
    pub batch: Option<String>,
    /// The rights (`rights`).
    pub rights: Rights,
    /// `exp`, seconds since the epoch.
    pub expires_at: u64,
}

/// How the request was authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// A static tenant token: everything of its tenant.
    Tenant,
    /// A browser token: its scope only.
    Browser(Box<BrowserGrant>),
}

/// The caller: its tenant and what it may do there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    tenant: String,
    grant: Grant,
}

impl Credential {
    /// A tenant token's credential.
    pub fn tenant_token(tenant: impl Into<String>) -> Self {
        Credential {
            tenant: tenant.into(),
            grant: Grant::Tenant,
        }
    }

    /// A verified browser token's credential.
    pub fn browser(tenant: impl Into<String>, grant: BrowserGrant) -> Self {
        Credential {
            tenant: tenant.into(),
            grant: Grant::Browser(Box::new(grant)),
        }
    }

    /// The tenant every task, key and feed is looked up in.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The tenant, owned.
    pub fn into_tenant(self) -> String {
        self.tenant
    }

    /// The end user of a browser token (`sub`); a tenant token has none.
    pub fn subject(&self) -> Option<&str> {
        match &self.grant {
            Grant::Tenant => None,
            Grant::Browser(b) => Some(&b.subject),
        }
    }

    /// How it was authenticated.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Who acts, as recorded for cancels and decisions: `user:<sub>` for a
    /// browser token, `tenant:<name>` for a tenant token (its backend acts
    /// for the tenant as a whole).
    pub fn actor(&self) -> String {
        match &self.grant {
            Grant::Tenant => format!("tenant:{}", self.tenant),
            Grant::Browser(b) => format!("user:{}", b.subject),
        }
    }

    /// When the credential stops being valid (seconds since the epoch), for
    /// a browser token; a tenant token does not expire.
    pub fn expires_at(&self) -> Option<u64> {
        match &self.grant {
            Grant::Tenant => None,
            Grant::Browser(b) => Some(b.expires_at),
        }
    }

    /// May the caller use `right` on task `task_id`? A tenant token may on
    /// every task of its tenant (whether the task exists is the store's
    /// answer). A browser token: 404 for a task out of its scope (as for
    /// another tenant's), 403 `right-not-granted` for a right it lacks.
    pub fn require(&self, right: Right, task_id: &str) -> Result<(), ApiError> {
        match &self.grant {
            Grant::Tenant => Ok(()),
            Grant::Browser(b) if !b.tasks.iter().any(|t| t == task_id) => {
                Err(ApiError::no_task(task_id))
            }
            Grant::Browser(b) => granted(b, right),
        }
    }

    /// May the caller use `right` on batch `batch_id`? For batch watches
    /// (none is served yet): a tenant token on every batch of its tenant; a
    /// browser token only on the batch of its `batch` claim (404 otherwise),
    /// with the right granted (403 otherwise).
    pub fn require_batch(&self, right: Right, batch_id: &str) -> Result<(), ApiError> {
        match &self.grant {
            Grant::Tenant => Ok(()),
            Grant::Browser(b) if b.batch.as_deref() != Some(batch_id) => Err(ApiError::not_found(
                format!("batchId: no batch with id {}", quoted(batch_id)),
            )),
            Grant::Browser(b) => granted(b, right),
        }
    }

    /// For the tenant-wide endpoints (create, the notifications feed, the
    /// demo's): a browser token is 403 `tenant-token-required`.
    pub fn require_tenant_token(&self, what: &str) -> Result<(), ApiError> {
        match &self.grant {
            Grant::Tenant => Ok(()),
            Grant::Browser(_) => Err(ApiError {
                status: StatusCode::FORBIDDEN,
                code: "tenant-token-required",
                message: format!(
                    "Authorization: {what} takes the tenant token (a backend's), not a browser token"
                ),
                retry_after: None,
            }),
        }
    }
}

fn granted(grant: &BrowserGrant, right: Right) -> Result<(), ApiError> {
    if grant.rights.has(right) {
        return Ok(());
    }
    Err(ApiError {
        status: StatusCode::FORBIDDEN,
        code: "right-not-granted",
        message: format!("token.rights: does not grant {}", quoted(right.as_str())),
        retry_after: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn browser(tasks: &[&str], rights: &[Right]) -> Credential {
        let rights = rights.iter().fold(Rights::NONE, |set, r| set.with(*r));
        Credential::browser(
            "acme",
            BrowserGrant {
                subject: "alice".into(),
                tasks: tasks.iter().map(|t| t.to_string()).collect(),
                batch: Some("b1".into()),
                rights,
                expires_at: 0,
            },
        )
    }

    #[test]
    fn a_tenant_token_has_every_right_on_every_task() {
        let c = Credential::tenant_token("acme");
        for right in Right::ALL {
            assert!(c.require(right, "any").is_ok());
            assert!(c.require_batch(right, "any").is_ok());
        }
        assert_eq!(c.actor(), "tenant:acme");
        assert!(c.require_tenant_token("create").is_ok());
    }

    #[test]
    fn a_browser_token_is_404_out_of_scope_and_403_without_the_right() {
        let c = browser(&["t1"], &[Right::Watch]);
        assert!(c.require(Right::Watch, "t1").is_ok());
        let out = c.require(Right::Watch, "t2").unwrap_err();
        assert_eq!((out.status.as_u16(), out.code), (404, "not-found"));
        // Out of scope is 404 even for a right it lacks: nothing leaks.
        let out = c.require(Right::Cancel, "t2").unwrap_err();
        assert_eq!(out.status.as_u16(), 404);
        for right in [Right::Cancel, Right::Decide, Right::Deliver] {
            let e = c.require(right, "t1").unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (403, "right-not-granted"));
            assert!(e.message.contains(right.as_str()), "{}", e.message);
        }
        assert_eq!(c.actor(), "user:alice");
        let e = c.require_tenant_token("create").unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "tenant-token-required"));
    }

    #[test]
    fn a_batch_claim_covers_its_batch_only() {
        let c = browser(&["t1"], &[Right::Watch]);
        assert!(c.require_batch(Right::Watch, "b1").is_ok());
        assert_eq!(c.require_batch(Right::Watch, "b2").unwrap_err().status, 404);
        assert_eq!(
            c.require_batch(Right::Deliver, "b1").unwrap_err().status,
            403
        );
    }

    #[test]
    fn rights_round_trip_their_names() {
        for right in Right::ALL {
            assert_eq!(Right::parse(right.as_str()), Some(right));
        }
        assert_eq!(Right::parse("Watch"), None);
    }
}
