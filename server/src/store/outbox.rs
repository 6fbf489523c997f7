//! The outbox as the notification feed and the notify sender read it.

use serde::Serialize;
use taskwire_core::Notification;

/// One outbox row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxEntry {
    /// Commit order, per server (feeds page by it).
    pub seq: u64,
    /// `taskId:state:version`, unique.
    pub key: String,
    /// The notification.
    #[serde(flatten)]
    pub notification: Notification,
    /// The owning tenant (not on the wire).
    #[serde(skip)]
    pub tenant: String,
    /// Webhook delivery attempts so far (not on the wire).
    #[serde(skip)]
    pub attempts: u32,
}
