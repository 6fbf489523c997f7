//! The worlds a seed makes: one task's (`World::new`) or one batch's
//! (`World::batch`), each with the follow's configuration, the faults and
//! where the page starts from drawn from the seed.

use taskwire_core::follow::{Follow, FollowConfig};
use taskwire_core::{BatchMirror, Mirror};

use super::batch_server::{self, BatchServer};
use super::server::{self, Server};
use super::{Faults, Rng, Served, World, EPOCH_MS};

/// A follow's configuration drawn from the seed.
fn config(rng: &mut Rng) -> FollowConfig {
    let initial_ms = rng.range(50.0, 1000.0).round();
    FollowConfig {
        backoff: taskwire_core::follow::Backoff {
            initial_ms,
            max_ms: rng.range(5_000.0, 30_000.0).round().max(initial_ms),
        },
        transport: if rng.chance(0.4) {
            taskwire_core::follow::Transport::Sse
        } else {
            taskwire_core::follow::Transport::LongPoll
        },
        wait_ms: rng.range(2_000.0, 30_000.0) as u32,
        seed: rng.next(),
        ..taskwire_wire::follow_config()
    }
}

impl World<Server> {
    /// A world of one task.
    pub fn new(seed: u64) -> World<Server> {
        let mut rng = Rng::new(seed);
        let mut server = Server::new(&mut rng);
        let config = config(&mut rng);
        let faults = Faults::new(&mut rng);
        // Sometimes the client comes back from an earlier page: the server
        // is ahead, and the mirror restored from a version it really had.
        let mut mirror = Mirror::new(server::TASK).expect("mirror");
        let mut hint = 0;
        if rng.chance(0.3) {
            for _ in 0..rng.below(12) {
                server.step(&mut rng);
            }
            let pick = rng.below(server.views.len() as u64) as usize;
            match server.views.get(pick) {
                Some(view) if rng.chance(0.7) => mirror = Mirror::from_snapshot(view.clone()),
                Some(view) => hint = view.version,
                None => {}
            }
        }
        let online = !rng.chance(0.1);
        let follow = Follow::new(config.clone(), mirror, hint, EPOCH_MS, online);
        World::with(rng, server, follow, config, faults, online)
    }
}

impl World<BatchServer> {
    /// A world of one batch.
    pub fn batch(seed: u64) -> World<BatchServer> {
        let mut rng = Rng::new(seed);
        let mut server = BatchServer::new(&mut rng);
        let config = config(&mut rng);
        let mut faults = Faults::new(&mut rng);
        faults.lossy = rng.range(0.0, 0.1);
        // Sometimes the page starts from the create's answer, or from an
        // earlier page's stored batch: the server may be ahead of it.
        let mut mirror = BatchMirror::new(batch_server::BATCH).expect("mirror");
        if rng.chance(0.4) {
            for _ in 0..rng.below(12) {
                server.step(&mut rng);
            }
            let cursor = server.some_cursor(&mut rng);
            let epoch = rng.chance(0.5).then(|| String::from(batch_server::EPOCH));
            mirror = BatchMirror::from_tasks(
                batch_server::BATCH,
                cursor,
                epoch,
                server.views_at(cursor).to_vec(),
            )
            .expect("mirror");
        }
        let online = !rng.chance(0.1);
        let follow = Follow::batch(config.clone(), mirror, EPOCH_MS, online);
        World::with(rng, server, follow, config, faults, online)
    }
}
