//! The event kinds, as the wire spells them in `type`.

/// The event kinds, as spelled in `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each names the Event variant of the same name
pub enum EventKind {
    Start,
    Progress,
    Succeed,
    Fail,
    Expire,
    Heartbeat,
    Hold,
    AckCancel,
    CannotCancel,
    Lapse,
    Abandon,
    Timeout,
    Cancel,
    Decide,
    #[cfg(feature = "steps")]
    Step,
    #[cfg(feature = "steps")]
    Reserve,
    #[cfg(feature = "steps")]
    Settle,
    #[cfg(feature = "steps")]
    Effect,
    #[cfg(feature = "steps")]
    Exhaust,
}

/// How many event kinds this build knows (`step`, `reserve`, `settle`,
/// `effect` and `exhaust` are the `steps` feature's).
const KINDS: usize = if cfg!(feature = "steps") { 19 } else { 14 };

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; KINDS] = [
        EventKind::Start,
        EventKind::Progress,
        EventKind::Succeed,
        EventKind::Fail,
        EventKind::Expire,
        EventKind::Heartbeat,
        EventKind::Hold,
        EventKind::AckCancel,
        EventKind::CannotCancel,
        EventKind::Lapse,
        EventKind::Abandon,
        EventKind::Timeout,
        EventKind::Cancel,
        EventKind::Decide,
        #[cfg(feature = "steps")]
        EventKind::Step,
        #[cfg(feature = "steps")]
        EventKind::Reserve,
        #[cfg(feature = "steps")]
        EventKind::Settle,
        #[cfg(feature = "steps")]
        EventKind::Effect,
        #[cfg(feature = "steps")]
        EventKind::Exhaust,
    ];

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Progress => "progress",
            EventKind::Succeed => "succeed",
            EventKind::Fail => "fail",
            EventKind::Expire => "expire",
            EventKind::Heartbeat => "heartbeat",
            EventKind::Hold => "hold",
            EventKind::AckCancel => "ack_cancel",
            EventKind::CannotCancel => "cannot_cancel",
            EventKind::Lapse => "lapse",
            EventKind::Abandon => "abandon",
            EventKind::Timeout => "timeout",
            EventKind::Cancel => "cancel",
            EventKind::Decide => "decide",
            #[cfg(feature = "steps")]
            EventKind::Step => "step",
            #[cfg(feature = "steps")]
            EventKind::Reserve => "reserve",
            #[cfg(feature = "steps")]
            EventKind::Settle => "settle",
            #[cfg(feature = "steps")]
            EventKind::Effect => "effect",
            #[cfg(feature = "steps")]
            EventKind::Exhaust => "exhaust",
        }
    }

    /// True for the events only the system's sweeper produces (`expire`,
    /// `lapse`, `abandon`, `timeout`). A server should not accept them
    /// from an executor's callback.
    pub const fn is_system(self) -> bool {
        matches!(
            self,
            EventKind::Expire | EventKind::Lapse | EventKind::Abandon | EventKind::Timeout
        )
    }

    /// True for the events people send (`cancel`, `decide`).
    pub const fn is_personal(self) -> bool {
        matches!(self, EventKind::Cancel | EventKind::Decide)
    }
}
