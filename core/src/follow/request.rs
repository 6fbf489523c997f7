//! Which request comes next, and how its URL is written.

use super::{sse, ConnState};
use super::{
    Flight, Follow, Phase, Request, RequestId, RequestKind, Transport, OFFLINE_RECHECK_MS,
    POLL_GRACE_MS,
};
use alloc::string::String;

impl Follow {
    pub(super) fn flight(&mut self, id: RequestId) -> Option<&mut Flight> {
        match &mut self.phase {
            Phase::Flight(flight) if flight.id == id => Some(flight),
            _ => None,
        }
    }

    pub(super) fn abort(&mut self, id: RequestId) {
        if self.request.as_ref().is_some_and(|r| r.id == id) {
            // Never sent: nothing to abort.
            self.request = None;
        } else {
            self.aborts.push(id);
        }
    }

    /// Decides what comes next when nothing is in flight or waited for.
    pub(super) fn advance(&mut self, t: f64) {
        if self.stopped || self.finished {
            self.phase = Phase::Closed;
            return;
        }
        if !self.online {
            self.status(ConnState::Offline, None, None, None);
            self.phase = Phase::Offline {
                recheck_at: t + OFFLINE_RECHECK_MS,
            };
            return;
        }
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let cursor = self.target.cursor();
        let mut query = String::from("cursor=");
        let (kind, suffix, timeout_ms) =
            if self.need_snapshot || self.transport == Transport::LongPoll {
                push_u64(&mut query, cursor);
                let timeout = self.config.wait_ms.saturating_add(POLL_GRACE_MS);
                if self.need_snapshot {
                    query.push_str("&snapshot=1");
                    (RequestKind::Snapshot, "/resume", Some(timeout))
                } else {
                    query.push_str("&waitMs=");
                    push_u64(&mut query, u64::from(self.config.wait_ms));
                    if let Some(epoch) = self.target.epoch() {
                        query.push_str("&epoch=");
                        encode_segment(epoch, &mut query);
                    }
                    (RequestKind::Poll, "/resume", Some(timeout))
                }
            } else {
                query.clear();
                (RequestKind::Stream, "/events", None)
            };
        let mut path = self.path.clone();
        path.push_str(suffix);
        self.request = Some(Request {
            id,
            kind,
            path,
            query,
            last_event_id: (kind == RequestKind::Stream).then_some(cursor),
            timeout_ms,
        });
        self.phase = Phase::Flight(Flight {
            id,
            kind,
            started: t,
            deadline: timeout_ms.map(|ms| t + f64::from(ms)),
            head: false,
            parser: sse::Parser::default(),
            messages: 0,
        });
    }
}

/// `s` without its trailing slashes. By byte: a `char` pattern
/// (`trim_end_matches('/')`) encodes its char at each use, which brought
/// UTF-8 encoding into the page; ASCII patterns are given as `&str`
/// (`starts_with(":")`) on the page's paths for the same reason.
pub fn trim_slashes(s: &str) -> &str {
    let mut end = s.len();
    while end > 0 && s.as_bytes().get(end - 1) == Some(&b'/') {
        end -= 1;
    }
    s.get(..end).unwrap_or(s)
}

use crate::text::{push_ascii, push_u64};

/// Percent-encodes everything but RFC 3986's unreserved characters onto
/// `out`, so an id with `/`, `?`, `#` or spaces stays one path segment.
pub fn encode_segment(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            push_ascii(out, &[b]);
        } else {
            push_ascii(
                out,
                &[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_trailing_slashes_only() {
        for (s, trimmed) in [
            ("", ""),
            ("/", ""),
            ("//", ""),
            ("http://a", "http://a"),
            ("http://a/", "http://a"),
            ("http://a/b//", "http://a/b"),
            ("http://é/", "http://é"),
        ] {
            assert_eq!(trim_slashes(s), s.trim_end_matches('/'), "{s}");
            assert_eq!(trim_slashes(s), trimmed, "{s}");
        }
    }

    #[test]
    fn writes_digits_and_segments_as_before() {
        for n in [0, 7, 10, 99, 12_345, u64::MAX] {
            assert_eq!(crate::text::decimal(n), n.to_string());
        }
        let mut out = String::new();
        encode_segment("a-Z_0.~ /?#%é", &mut out);
        assert_eq!(out, "a-Z_0.~%20%2F%3F%23%25%C3%A9");
    }
}
