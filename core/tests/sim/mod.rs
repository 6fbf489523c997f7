//! A seeded world in virtual time for `Follow`: a simulated server, of
//! one task (`server.rs`) or of a batch (`batch_server.rs`), a network
//! that drops, delays, duplicates, reorders and replays answers and cuts
//! streams (`network.rs`), a runtime whose clock jumps and whose network
//! goes away, and an executor that drives the follow exactly as the
//! browser executor does.

pub mod batch_server;
mod date;
mod executor;
mod faults;
pub mod network;
mod rng;
pub mod server;
mod worlds;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use taskwire_core::follow::{BatchProgress, Fail, Follow, FollowConfig, Request, RequestId};
use taskwire_core::{BatchMirror, TaskView};

pub use network::Faults;
pub use rng::Rng;
use server::Server;

/// What the network needs of a simulated server, of a task or a batch.
pub trait Served {
    /// The followed resource's path, percent-encoded: `/v1/tasks/…`.
    fn path(&self) -> &'static str;
    /// The version (task) or the batch cursor now.
    fn cursor(&self) -> u64;
    /// Nothing will change any more.
    fn terminal(&self) -> bool;
    /// The resume answer for a client at `cursor`, as JSON bytes.
    fn resume(&self, cursor: u64, snapshot: bool) -> Vec<u8>;
    /// One SSE message answering `cursor`: (bytes, its id, terminal).
    fn message(&self, cursor: u64) -> (Vec<u8>, u64, bool);
    /// What a replica frozen at cursor `at` answers a client at `cursor`.
    fn frozen(&self, at: u64, cursor: u64) -> Vec<u8>;
    /// An old answer served again by a lagging replica, as a snapshot.
    fn as_snapshot(&self, old: &[u8]) -> Vec<u8>;
    /// The resume answer for `cursor` from a replica that lost an entry
    /// of one task, if there is one to lose.
    fn lossy(&self, _cursor: u64) -> Option<Vec<u8>> {
        None
    }
    /// `batch` holds what the server had at its cursor, or later.
    fn agrees(&self, _batch: &BatchMirror) -> bool {
        true
    }
    /// Applies the next step of the timeline; false when it is over.
    fn step(&mut self, rng: &mut Rng) -> bool;
    /// Steps left in the timeline.
    fn steps_left(&self) -> usize;
}

/// Something that happens at a moment of true (monotonic) time.
#[derive(Debug, Clone)]
pub enum Ev {
    /// The executor applies the next timeline event on the server.
    ServerStep,
    Head {
        id: RequestId,
        status: u16,
        retry_after: Option<String>,
    },
    Body {
        id: RequestId,
        body: Vec<u8>,
    },
    Chunk {
        id: RequestId,
        chunk: Vec<u8>,
    },
    End {
        id: RequestId,
    },
    Failure {
        id: RequestId,
        error: &'static str,
    },
    /// An open stream's heartbeat is due.
    Heartbeat {
        id: RequestId,
    },
    /// A held long-poll's wait is over.
    HoldOver {
        id: RequestId,
    },
    Timer {
        generation: u64,
    },
    NetworkDown {
        event: bool,
    },
    NetworkUp {
        event: bool,
    },
    Visible,
    ClockJump {
        by_ms: f64,
    },
    Stop,
}

/// What the page saw, and when (true time).
#[derive(Default, Debug)]
pub struct Seen {
    /// Every update's task (a batch's tasks interleaved).
    pub updates: Vec<TaskView>,
    /// A batch's aggregates, as reported.
    pub progress: Vec<BatchProgress>,
    /// Requests sent while another was still in flight.
    pub overlapping: usize,
    /// Requests whose cursor was not the one the follow held.
    pub wrong_cursor: usize,
    /// The batch cursor held, and how often it went back.
    pub cursor: u64,
    pub cursor_back: usize,
    /// Requests that resumed a batch from a state the server never had at
    /// that cursor.
    pub inconsistent: usize,
    pub done: Option<Option<TaskView>>,
    pub fail: Option<Fail>,
    pub after_end: usize,
    pub statuses: Vec<String>,
    /// Start times of every request sent.
    pub requests: Vec<f64>,
    /// Times of the `online` events delivered to the follow.
    pub online_events: Vec<f64>,
    /// Times of everything that legitimately triggers a request at once.
    pub triggers: Vec<f64>,
    pub stopped_at: Option<f64>,
    /// Snapshot requests sent.
    pub snapshots: usize,
    /// The first output the two JSON writers disagreed on.
    pub writer_mismatch: Option<String>,
}

pub struct World<S: Served = Server> {
    pub rng: Rng,
    pub t: f64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slots: Vec<Option<Ev>>,
    pub server: S,
    pub follow: Follow,
    pub config: FollowConfig,
    pub faults: Faults,
    /// Client clock = true time + offset (it jumps).
    pub offset: f64,
    /// The runtime's network reading (`navigator.onLine`).
    pub online: bool,
    timer: Option<u64>,
    generation: u64,
    /// Requests in flight, as the network sees them.
    pub flights: HashMap<RequestId, network::Flight>,
    pub seen: Seen,
    /// Old answers the network may replay.
    pub replays: Vec<Vec<u8>>,
}

/// The client's wall clock starts here (2030-01-01), so that HTTP dates
/// mean something; it then jumps.
pub const EPOCH_MS: f64 = 1_893_456_000_000.0;

fn key(t: f64) -> u64 {
    // Virtual times are ≥ 0 and far below 2^52 ms: µs as an integer key.
    (t.max(0.0) * 1000.0) as u64
}

impl<S: Served> World<S> {
    pub(super) fn with(
        rng: Rng,
        server: S,
        follow: Follow,
        config: FollowConfig,
        faults: Faults,
        online: bool,
    ) -> World<S> {
        let mut world = World {
            rng,
            t: 0.0,
            seq: 0,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            server,
            follow,
            config,
            faults,
            offset: EPOCH_MS,
            online,
            timer: None,
            generation: 0,
            flights: HashMap::new(),
            seen: Seen::default(),
            replays: Vec::new(),
        };
        world.plan();
        world.drain();
        world
    }

    pub fn now(&self) -> f64 {
        self.t + self.offset
    }

    /// Schedules `ev` at true time `t` (never before now); its slot can
    /// be cancelled.
    pub fn at(&mut self, t: f64, ev: Ev) -> usize {
        self.seq += 1;
        self.slots.push(Some(ev));
        let slot = self.slots.len() - 1;
        self.queue
            .push(Reverse((key(t.max(self.t)), self.seq, slot)));
        slot
    }

    pub fn cancel(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = None;
        }
    }

    /// The server's timeline and the runtime's weather.
    fn plan(&mut self) {
        let mut t = 0.0;
        for _ in 0..self.server.steps_left() {
            t += self.rng.range(0.0, 20_000.0);
            self.at(t, Ev::ServerStep);
        }
        let horizon = t + 60_000.0;
        if !self.online {
            let back = self.rng.range(0.0, 30_000.0);
            let event = !self.rng.chance(0.1);
            self.at(back, Ev::NetworkUp { event });
        }
        let mut w = 0.0;
        while w < horizon {
            w += self.rng.range(1_000.0, 60_000.0);
            match self.rng.below(4) {
                0 => {
                    let event = !self.rng.chance(0.1);
                    self.at(w, Ev::NetworkDown { event });
                    let back = w + self.rng.range(100.0, 40_000.0);
                    let event = !self.rng.chance(0.1);
                    self.at(back, Ev::NetworkUp { event });
                    w = back;
                }
                1 => {
                    self.at(w, Ev::Visible);
                }
                2 => {
                    let by_ms = self.rng.range(-120_000.0, 120_000.0);
                    self.at(w, Ev::ClockJump { by_ms });
                }
                _ => {}
            }
        }
        if self.rng.chance(0.03) {
            let when = self.rng.range(0.0, horizon);
            self.at(when, Ev::Stop);
        }
    }

    /// Runs until the follow is over or `limit` (true ms) passes.
    pub fn run(&mut self, limit: f64) {
        while let Some(Reverse((k, _, slot))) = self.queue.pop() {
            let t = k as f64 / 1000.0;
            if t > limit {
                break;
            }
            self.t = self.t.max(t);
            let Some(ev) = self.slots.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            self.step(ev);
            if self.follow.is_closed() && self.server.steps_left() == 0 {
                break;
            }
        }
    }

    fn step(&mut self, ev: Ev) {
        let now = self.now();
        if std::env::var_os("FOLLOW_TRACE").is_some() {
            let shown = format!("{ev:?}");
            eprintln!("{:>12.1} {}", self.t, shown.get(..160).unwrap_or(&shown));
        }
        self.follow.set_online(self.online);
        match ev {
            Ev::ServerStep => {
                if self.server.step(&mut self.rng) {
                    self.seen.triggers.push(self.t);
                    self.server_changed();
                }
                return;
            }
            Ev::Head {
                id,
                status,
                retry_after,
            } => self
                .follow
                .handle_head(now, id, status, retry_after.as_deref()),
            Ev::Body { id, body } => {
                self.flights.remove(&id);
                self.follow.handle_body(now, id, &body)
            }
            Ev::Chunk { id, chunk } => self.follow.handle_chunk(now, id, &chunk),
            Ev::End { id } => {
                self.flights.remove(&id);
                self.follow.handle_end(now, id)
            }
            Ev::Failure { id, error } => {
                self.flights.remove(&id);
                self.follow
                    .handle_failure(now, id, taskwire_core::follow::Failure::Network(error))
            }
            Ev::HoldOver { id } => return self.hold_over(id),
            Ev::Heartbeat { id } => return network::heartbeat(self, id),
            Ev::Timer { generation } => {
                if self.timer != Some(generation) {
                    return;
                }
                self.timer = None;
                self.follow.handle_timeout(now);
            }
            Ev::NetworkDown { event } => {
                self.online = false;
                self.faults.down = true;
                self.strand();
                if !event {
                    return;
                }
                self.seen.triggers.push(self.t);
                self.follow.handle_network(now, false);
            }
            Ev::NetworkUp { event } => {
                self.online = true;
                self.faults.down = false;
                if !event {
                    return;
                }
                self.seen.triggers.push(self.t);
                if !self.follow.is_closed() {
                    self.seen.online_events.push(self.t);
                }
                self.follow.handle_network(now, true);
            }
            Ev::Visible => {
                self.seen.triggers.push(self.t);
                self.follow.handle_visibility(now, true);
            }
            Ev::ClockJump { by_ms } => {
                self.offset += by_ms;
                return;
            }
            Ev::Stop => {
                if self.seen.stopped_at.is_none() {
                    self.seen.stopped_at = Some(self.t);
                }
                self.follow.stop();
            }
        }
        self.drain();
    }

    fn send(&mut self, request: Request) {
        network::send(self, request);
    }

    fn abort(&mut self, id: RequestId) {
        network::abort(self, id);
    }

    fn strand(&mut self) {
        network::strand(self);
    }

    fn server_changed(&mut self) {
        network::server_changed(self);
    }

    fn hold_over(&mut self, id: RequestId) {
        network::hold_over(self, id);
    }
}
