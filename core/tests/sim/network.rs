//! The simulated network between the executor and the server: latency,
//! drops before and after the server saw a request, busy answers with
//! `Retry-After`, garbage bodies, replays of old answers (a cache, a
//! lagging replica), answers that lost an entry, duplicated deliveries,
//! late answers to aborted requests (reordering), streams cut
//! mid-message or held back by a buffering proxy, and connections
//! stranded when the network goes away.

use taskwire_core::follow::{Request, RequestId, RequestKind};

use super::date::http_date;
pub use super::faults::Faults;
use super::{Ev, Served, World};

/// A request as the network sees it.
pub struct Flight {
    kind: RequestKind,
    /// The cursor it asked with; for a stream, the id of its last message.
    cursor: u64,
    state: State,
    /// Scheduled deliveries, cancelled when the request is aborted.
    slots: Vec<usize>,
    /// A stream's last delivery time: chunks arrive in order.
    last_delivery: f64,
}

#[derive(PartialEq)]
enum State {
    Transit,
    Held,
    Streaming,
    /// The network went away under it: nothing will ever arrive.
    Stranded,
}

fn latency<S: Served>(w: &mut World<S>) -> f64 {
    let base = w.rng.range(1.0, 30.0);
    if w.rng.chance(w.faults.slow) {
        base + w.rng.range(100.0, 3_000.0)
    } else {
        base
    }
}

fn schedule<S: Served>(w: &mut World<S>, id: RequestId, t: f64, ev: Ev) {
    let slot = w.at(t, ev);
    if let Some(flight) = w.flights.get_mut(&id) {
        flight.slots.push(slot);
    }
}

/// The cursor a request carries; also checks its shape.
fn cursor_of(request: &Request, encoded: &str) -> u64 {
    match request.kind {
        RequestKind::Stream => {
            assert_eq!(request.path, format!("{encoded}/events"));
            assert!(request.query.is_empty());
            request.last_event_id.expect("a stream sends Last-Event-ID")
        }
        RequestKind::Poll | RequestKind::Snapshot => {
            assert_eq!(request.path, format!("{encoded}/resume"));
            let value = request.query.strip_prefix("cursor=").expect("cursor first");
            let end = value.find('&').unwrap_or(value.len());
            assert_eq!(
                request.kind == RequestKind::Snapshot,
                request.query.ends_with("&snapshot=1"),
                "{}",
                request.query
            );
            value[..end].parse().expect("cursor is an integer")
        }
    }
}

pub fn send<S: Served>(w: &mut World<S>, request: Request) {
    let id = request.id;
    let cursor = cursor_of(&request, w.server.path());
    w.flights.insert(
        id,
        Flight {
            kind: request.kind,
            cursor,
            state: State::Transit,
            slots: Vec::new(),
            last_delivery: 0.0,
        },
    );
    let t = w.t + latency(w);
    if w.faults.down {
        return schedule(
            w,
            id,
            w.t + 1.0,
            Ev::Failure {
                id,
                error: "network is down",
            },
        );
    }
    if w.rng.chance(w.faults.drop) {
        return schedule(
            w,
            id,
            t,
            Ev::Failure {
                id,
                error: "dropped before sending",
            },
        );
    }
    if w.rng.chance(w.faults.busy) {
        let status = [429, 503, 500, 502][w.rng.below(4) as usize];
        let retry_after = match w.rng.below(3) {
            0 => None,
            1 => Some(w.rng.below(5).to_string()),
            // An HTTP date on the server's clock (true time, from 2030 on).
            _ => Some(http_date(
                1_893_456_000_000.0 + w.t + w.rng.range(0.0, 5_000.0),
            )),
        };
        return schedule(
            w,
            id,
            t,
            Ev::Head {
                id,
                status,
                retry_after,
            },
        );
    }
    if w.rng.chance(w.faults.garbage) {
        schedule(
            w,
            id,
            t,
            Ev::Head {
                id,
                status: 200,
                retry_after: None,
            },
        );
        let ev = match request.kind {
            RequestKind::Stream => Ev::Chunk {
                id,
                chunk: b"event: resume\ndata: {nope\n\n".to_vec(),
            },
            _ => Ev::Body {
                id,
                body: b"<html>proxy error</html>".to_vec(),
            },
        };
        return schedule(w, id, t + 1.0, ev);
    }
    if let Some(body) = replica(w, request.kind, cursor) {
        return respond(w, id, t, body);
    }
    if request.kind != RequestKind::Stream && !w.replays.is_empty() && w.rng.chance(w.faults.replay)
    {
        let pick = w.rng.below(w.replays.len() as u64) as usize;
        let mut body = w.replays[pick].clone();
        if w.rng.chance(0.5) {
            // A lagging replica: the old state, served as a snapshot.
            body = w.server.as_snapshot(&body);
        }
        w.seen.triggers.push(w.t);
        return respond(w, id, t, body);
    }
    match request.kind {
        RequestKind::Snapshot => {
            let body = w.server.resume(cursor, true);
            respond(w, id, t, body)
        }
        RequestKind::Poll => {
            let waits = cursor == w.server.cursor() && !w.server.terminal();
            if waits {
                if let Some(flight) = w.flights.get_mut(&id) {
                    flight.state = State::Held;
                }
                let until = t + f64::from(w.config.wait_ms);
                schedule(w, id, until, Ev::HoldOver { id });
            } else {
                // A replica that lost an entry of a task: a gap, which
                // must cost one snapshot of the whole batch.
                let lossy = w.faults.lossy > 0.0 && w.rng.chance(w.faults.lossy);
                let body = match w.server.lossy(cursor).filter(|_| lossy) {
                    Some(body) => {
                        w.seen.triggers.push(w.t);
                        body
                    }
                    None => w.server.resume(cursor, false),
                };
                respond(w, id, t, body);
            }
        }
        RequestKind::Stream => {
            schedule(
                w,
                id,
                t,
                Ev::Head {
                    id,
                    status: 200,
                    retry_after: None,
                },
            );
            if let Some(flight) = w.flights.get_mut(&id) {
                flight.state = State::Streaming;
                flight.last_delivery = t;
            }
            push_message(w, id);
            w.at(t + 15_000.0, Ev::Heartbeat { id });
        }
    }
}

/// The frozen replica's answer, while it answers.
fn replica<S: Served>(w: &mut World<S>, kind: RequestKind, cursor: u64) -> Option<Vec<u8>> {
    let (from, to) = w.faults.replica?;
    if kind == RequestKind::Stream || w.t < from || w.t > to {
        return None;
    }
    let at = *w.faults.frozen.get_or_insert(w.server.cursor());
    Some(w.server.frozen(at, cursor))
}

/// A 200 answer with `body`, maybe lost on the way back, maybe delivered twice.
fn respond<S: Served>(w: &mut World<S>, id: RequestId, t: f64, body: Vec<u8>) {
    if let Some(flight) = w.flights.get_mut(&id) {
        flight.state = State::Transit;
    }
    if w.replays.len() < 64 {
        w.replays.push(body.clone());
    }
    let back = t + latency(w);
    if w.rng.chance(w.faults.lost) {
        return schedule(
            w,
            id,
            back,
            Ev::Failure {
                id,
                error: "response lost",
            },
        );
    }
    schedule(
        w,
        id,
        back,
        Ev::Head {
            id,
            status: 200,
            retry_after: None,
        },
    );
    let times = if w.rng.chance(w.faults.duplicate) {
        2
    } else {
        1
    };
    for i in 0..times {
        schedule(
            w,
            id,
            back + 1.0 + f64::from(i) * 50.0,
            Ev::Body {
                id,
                body: body.clone(),
            },
        );
    }
}

/// The next SSE message of stream `id`, cut into chunks anywhere.
fn push_message<S: Served>(w: &mut World<S>, id: RequestId) {
    let Some(cursor) = w.flights.get(&id).map(|f| f.cursor) else {
        return;
    };
    let (mut bytes, last_id, terminal) = w.server.message(cursor);
    if w.rng.chance(0.2) {
        let mut with_heartbeat = b": hb\n\n".to_vec();
        with_heartbeat.extend(bytes);
        bytes = with_heartbeat;
    }
    if let Some(flight) = w.flights.get_mut(&id) {
        flight.cursor = last_id;
    }
    if w.faults.buffering {
        return; // held back by the proxy, forever
    }
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let cut = 1 + w.rng.below(rest.len() as u64) as usize;
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        let t = next_delivery(w, id);
        if w.rng.chance(w.faults.cut / 3.0) {
            if let Some(flight) = w.flights.get_mut(&id) {
                flight.state = State::Stranded;
            }
            return schedule(
                w,
                id,
                t,
                Ev::Failure {
                    id,
                    error: "connection reset",
                },
            );
        }
        schedule(
            w,
            id,
            t,
            Ev::Chunk {
                id,
                chunk: chunk.to_vec(),
            },
        );
    }
    if terminal {
        // The server ends the stream after the terminal message.
        let t = next_delivery(w, id);
        if let Some(flight) = w.flights.get_mut(&id) {
            flight.state = State::Stranded;
        }
        schedule(w, id, t, Ev::End { id });
    }
}

fn next_delivery<S: Served>(w: &mut World<S>, id: RequestId) -> f64 {
    let step = w.rng.range(0.0, 30.0);
    let now = w.t;
    let Some(flight) = w.flights.get_mut(&id) else {
        return now;
    };
    flight.last_delivery = flight.last_delivery.max(now) + step;
    flight.last_delivery
}

/// The server's task changed: held long-polls answer, streams send.
pub fn server_changed<S: Served>(w: &mut World<S>) {
    let mut ids: Vec<RequestId> = w.flights.keys().copied().collect();
    ids.sort();
    for id in ids {
        let Some(flight) = w.flights.get(&id) else {
            continue;
        };
        match flight.state {
            State::Held => {
                let body = w.server.resume(flight.cursor, false);
                respond(w, id, w.t, body);
            }
            State::Streaming => push_message(w, id),
            State::Transit | State::Stranded => {}
        }
    }
}

/// `: hb` every 15 s on an open stream, as the reference server sends.
pub fn heartbeat<S: Served>(w: &mut World<S>, id: RequestId) {
    if !w
        .flights
        .get(&id)
        .is_some_and(|f| f.state == State::Streaming)
    {
        return;
    }
    if !w.faults.buffering {
        let t = next_delivery(w, id);
        schedule(
            w,
            id,
            t,
            Ev::Chunk {
                id,
                chunk: b": hb\n\n".to_vec(),
            },
        );
    }
    w.at(w.t + 15_000.0, Ev::Heartbeat { id });
}

pub fn hold_over<S: Served>(w: &mut World<S>, id: RequestId) {
    if let Some(flight) = w.flights.get(&id).filter(|f| f.state == State::Held) {
        let body = w.server.resume(flight.cursor, false);
        respond(w, id, w.t, body);
    }
}

/// The executor aborted `id`. Usually nothing more arrives; sometimes a
/// late answer does (it raced the abort), which the follow must ignore.
pub fn abort<S: Served>(w: &mut World<S>, id: RequestId) {
    let Some(flight) = w.flights.remove(&id) else {
        return;
    };
    if !w.rng.chance(w.faults.late) || flight.kind == RequestKind::Stream {
        for slot in flight.slots {
            w.cancel(slot);
        }
    }
}

/// The network went away: what is in flight hangs forever.
pub fn strand<S: Served>(w: &mut World<S>) {
    let mut slots = Vec::new();
    for flight in w.flights.values_mut() {
        flight.state = State::Stranded;
        slots.append(&mut flight.slots);
    }
    for slot in slots {
        w.cancel(slot);
    }
}
