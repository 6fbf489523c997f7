//! The token parser under thousands of malformed tokens: no panic, and
//! every one is 401 (through the verifier directly, and a sample over
//! HTTP, where nothing may be a 500 either).

mod common;
mod tokens;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::*;
use serde_json::json;
use tokens::*;

/// xorshift64*: a seeded generator, so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const ALPHABET: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ %\"{}";

/// One malformed token: a valid one mutated, or one assembled from odd
/// headers and claims.
fn malformed(rng: &mut Rng, valid: &[String], task: &str) -> String {
    let base = rng.pick(valid).clone();
    match rng.below(8) {
        // Flip, drop or insert characters.
        0 => {
            let mut bytes = base.into_bytes();
            for _ in 0..=rng.below(4) {
                let i = rng.below(bytes.len());
                match rng.below(3) {
                    0 => bytes[i] = *rng.pick(ALPHABET),
                    1 => {
                        bytes.remove(i);
                    }
                    _ => bytes.insert(i, *rng.pick(ALPHABET)),
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        // Truncated anywhere.
        1 => base[..rng.below(base.len())].to_string(),
        // Segments swapped, repeated or missing.
        2 => {
            let parts: Vec<&str> = base.split('.').collect();
            let n = rng.below(6);
            (0..n)
                .map(|_| *rng.pick(&parts))
                .collect::<Vec<_>>()
                .join(".")
        }
        // Random base64 segments.
        3 => (0..=rng.below(4))
            .map(|_| {
                let len = rng.below(80);
                let raw: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                URL_SAFE_NO_PAD.encode(raw)
            })
            .collect::<Vec<_>>()
            .join("."),
        // Odd headers over a real signature.
        4 => {
            let headers = [
                json!({"alg": "none", "kid": "k1"}),
                json!({"alg": "HS256"}),
                json!({"alg": "RS256", "kid": "k1"}),
                json!({"alg": "HS256", "kid": 7}),
                json!({"alg": ["HS256"], "kid": "k1"}),
                json!({"alg": "EdDSA", "kid": "k1"}),
                json!({"alg": "HS256", "kid": "k1", "crit": ["exp"]}),
                json!({"alg": "HS256", "kid": "x".repeat(5000)}),
                json!([]),
                json!(null),
            ];
            let sig = base.rsplit('.').next().unwrap_or("");
            let payload = base.split('.').nth(1).unwrap_or("");
            format!("{}.{payload}.{sig}", b64(rng.pick(&headers)))
        }
        // Odd claims, signed for real: valid signature, bad contents.
        5 => {
            let odd = [
                json!({}),
                json!([]),
                json!("claims"),
                json!({"sub": "a", "aud": "taskwire", "exp": -1, "tasks": [task], "rights": ["watch"]}),
                json!({"sub": "a", "aud": "taskwire", "exp": 1e300, "tasks": [task], "rights": ["watch"]}),
                json!({"sub": "a", "aud": "taskwire", "exp": u64::MAX, "tasks": [task], "rights": ["watch"]}),
                json!({"sub": "a", "aud": ["x"], "exp": now_secs() + 60, "tasks": [task], "rights": []}),
                json!({"sub": 5, "aud": "taskwire", "exp": now_secs() + 60, "tasks": [task], "rights": []}),
                json!({"sub": "a", "aud": "taskwire", "exp": now_secs() + 60, "tasks": task, "rights": []}),
                json!({"sub": "a", "aud": "taskwire", "exp": now_secs() + 60, "tasks": [1], "rights": []}),
                json!({"sub": "a", "aud": "taskwire", "exp": now_secs() + 60, "rights": ["watch"]}),
                json!({"sub": "a", "aud": "taskwire", "exp": now_secs() + 60, "nbf": "x", "tasks": [task], "rights": []}),
                json!({"sub": "a", "aud": "taskwire", "exp": now_secs() - 3600, "tasks": [task], "rights": ["watch"]}),
            ];
            hs256("k1", K1, rng.pick(&odd))
        }
        // Odd claims, unsigned or signed with a wrong key.
        6 => {
            let c = claims(&[task], &["watch", "deliver"]);
            match rng.below(3) {
                0 => {
                    let kid = *rng.pick(&["k1", "ed", "ec"]);
                    alg_none(kid, &c)
                }
                1 => {
                    let kid = *rng.pick(&["k1", "k2", "ed", "ec", "o9"]);
                    hs256(kid, K0_RETIRED, &c)
                }
                _ => tampered(
                    &base,
                    &json!({"sub": "x", "aud": "taskwire", "exp": now_secs() + 60, "tasks": ["*"], "rights": ["watch"]}),
                ),
            }
        }
        // Junk of every length.
        _ => {
            let len = rng.below(300);
            (0..len).map(|_| *rng.pick(ALPHABET) as char).collect()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_malformed_tokens_are_401_and_never_panic() {
    let h = harness(|c| c.browser_tokens.keys = key_flags()).await;
    let task = h.create_default().await;
    let c = claims(&[&task], &["watch", "deliver"]);
    let valid = vec![
        hs256("k1", K1, &c),
        hs256("k2", K2, &c),
        eddsa(&c),
        es256(&c),
    ];
    let keys = &h.state().browser_keys;
    let now = u64::try_from(now_secs()).unwrap();
    for token in &valid {
        assert!(keys.verify(token, now).is_ok());
    }
    let seed = 0x7a5c_0de5_u64 ^ now;
    let mut rng = Rng(seed | 1);
    let mut over_http = 0;
    for i in 0..5_000 {
        let token = malformed(&mut rng, &valid, &task);
        if valid.contains(&token) {
            continue;
        }
        match keys.verify(&token, now) {
            Ok(grant) => panic!("seed {seed:#x}, case {i}: accepted {token:?} as {grant:?}"),
            Err(e) => assert_eq!(
                e.status.as_u16(),
                401,
                "seed {seed:#x}, case {i}: {token:?}: {e:?}"
            ),
        }
        // A sample over HTTP too (headers must be visible ASCII).
        if i % 20 == 0 && token.bytes().all(|b| b.is_ascii_graphic()) && !token.is_empty() {
            let r = h.get(&token, &format!("/v1/tasks/{task}")).await;
            assert_eq!(
                r.status,
                401,
                "seed {seed:#x}, case {i}: {token:?}: {:?}",
                r.json()
            );
            over_http += 1;
        }
    }
    assert!(over_http > 100, "only {over_http} sent over HTTP");
}
