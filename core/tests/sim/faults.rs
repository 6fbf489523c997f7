//! What can go wrong in one seed's world, and how often.

use super::Rng;

/// The fault rates of one seed.
pub struct Faults {
    pub drop: f64,
    pub lost: f64,
    pub busy: f64,
    pub garbage: f64,
    pub replay: f64,
    pub slow: f64,
    pub cut: f64,
    pub duplicate: f64,
    pub late: f64,
    /// A proxy buffers the SSE path: no message gets through.
    pub buffering: bool,
    /// From, to (true ms): a replica frozen at the version of `from`
    /// answers every resume at once (it never holds a long-poll).
    pub replica: Option<(f64, f64)>,
    /// The cursor the replica froze at, once it did.
    pub frozen: Option<u64>,
    pub stop_in_listener: bool,
    /// How often a resume is answered by a replica that lost an entry
    /// of a task (batch worlds only).
    pub lossy: f64,
    /// The network is down: requests fail at once.
    pub down: bool,
}

impl Faults {
    pub fn new(rng: &mut Rng) -> Faults {
        let scale = rng.range(0.0, 1.5);
        let mut rate = |max: f64| rng.range(0.0, max) * scale;
        Faults {
            drop: rate(0.1),
            lost: rate(0.08),
            busy: rate(0.06),
            garbage: rate(0.03),
            replay: rate(0.1),
            slow: rate(0.1),
            cut: rate(0.1),
            duplicate: rate(0.1),
            late: rate(0.5),
            buffering: rng.chance(0.1),
            replica: rng.chance(0.2).then(|| {
                let from = rng.range(0.0, 400_000.0);
                (from, from + rng.range(10_000.0, 300_000.0))
            }),
            frozen: None,
            stop_in_listener: rng.chance(0.05),
            lossy: 0.0,
            down: false,
        }
    }
}
