//! The watch loop against a scripted `fetch`: deterministic answers, no
//! server. Run by `wasm-pack test --headless --chrome wasm` (and `--node`).
//! Each test asserts what the page would see (updates never regress) and
//! which requests were made.
#![cfg(target_arch = "wasm32")]

use js_sys::{Array, Reflect};
use taskwire_wasm::ClientCore;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;

#[wasm_bindgen(inline_js = r#"
export function scripted(steps) {
  const calls = [];
  let i = 0;
  const fetch = (url, init) => {
    const call = { url, headers: init.headers, aborted: false };
    calls.push(call);
    const step = steps[Math.min(i++, steps.length - 1)];
    return new Promise((resolve, reject) => {
      const onAbort = () => { call.aborted = true; reject(new DOMException("aborted", "AbortError")); };
      init.signal.addEventListener("abort", onAbort);
      if (step.hang) return;
      setTimeout(() => {
        if (step.error) reject(new TypeError(step.error));
        else resolve(new Response(typeof step.body === "string" ? step.body : JSON.stringify(step.body), { status: step.status ?? 200, headers: step.headers ?? {} }));
      }, step.delayMs ?? 0);
    });
  };
  return { fetch, calls };
}
export function recorder() {
  const events = [];
  // `fail` comes as a TaskwireError, the rest as JSON text.
  return { events, sink: (kind, payload) => events.push([kind, typeof payload === "string" ? JSON.parse(payload) : payload]) };
}
export function flag(value) {
  const state = { value };
  return { state, read: () => state.value };
}
export function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
export function clientOptions(fetch, initialMs, maxMs, transport) {
  return { baseUrl: "http://backend.test", headers: ["authorization", "Bearer t"], fetch, initialMs, maxMs, transport };
}
export function watchOptions(sink, online) {
  return { taskId: "t", sink, online };
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = clientOptions)]
    fn client_options(fetch: JsValue, initial_ms: f64, max_ms: f64, transport: &str) -> JsValue;
    #[wasm_bindgen(js_name = watchOptions)]
    fn watch_options(sink: JsValue, online: JsValue) -> JsValue;
    fn scripted(steps: JsValue) -> JsValue;
    fn recorder() -> JsValue;
    fn flag(value: bool) -> JsValue;
    fn sleep(ms: u32) -> js_sys::Promise;
}

fn get(target: &JsValue, key: &str) -> JsValue {
    Reflect::get(target, &JsValue::from_str(key)).unwrap()
}

fn json(text: &str) -> JsValue {
    js_sys::JSON::parse(text).unwrap()
}

async fn wait(ms: u32) {
    JsFuture::from(sleep(ms)).await.unwrap();
}

/// Waits until `done()` holds (at most 5 s: a loaded machine delays every
/// timer; fixed sleeps made these tests flaky); the ms waited.
async fn until(done: impl Fn() -> bool) -> f64 {
    let start = js_sys::Date::now();
    while !done() && js_sys::Date::now() - start < 5_000.0 {
        wait(5).await;
    }
    js_sys::Date::now() - start
}

fn view(version: u32, state: &str, progress: u32) -> String {
    let extra = if state == "succeeded" {
        r#","resultRef":"r","resultHash":"h""#
    } else {
        ""
    };
    format!(
        r#"{{"id":"t","state":"{state}","expiresAtMs":1e12,"attempts":1,"maxAttempts":3,"progress":{progress},"version":{version}{extra}}}"#
    )
}

fn progress(version: u32, p: u32) -> String {
    if version == 1 {
        return r#"{"version":1,"event":{"type":"start","atMs":1,"worker":"w"}}"#.into();
    }
    format!(
        r#"{{"version":{version},"event":{{"type":"progress","atMs":{version},"progress":{p},"cursor":""}}}}"#
    )
}

struct Harness {
    calls: JsValue,
    events: JsValue,
    handle: taskwire_wasm::WatchHandle,
}

impl Harness {
    fn start(steps: &str) -> Harness {
        Harness::with_transport(steps, "long-poll")
    }

    fn with_transport(steps: &str, transport: &str) -> Harness {
        Harness::with(steps, transport, 1.0, 5.0)
    }

    fn with(steps: &str, transport: &str, initial_ms: f64, max_ms: f64) -> Harness {
        let script = scripted(json(steps));
        let rec = recorder();
        let online = flag(true);
        let client = ClientCore::new(client_options(
            get(&script, "fetch"),
            initial_ms,
            max_ms,
            transport,
        ))
        .unwrap();
        let handle = client
            .watch(watch_options(get(&rec, "sink"), get(&online, "read")))
            .unwrap();
        Harness {
            calls: get(&script, "calls"),
            events: get(&rec, "events"),
            handle,
        }
    }

    fn urls(&self) -> Vec<String> {
        Array::from(&self.calls)
            .iter()
            .map(|c| get(&c, "url").as_string().unwrap())
            .collect()
    }

    fn events(&self, kind: &str) -> Vec<JsValue> {
        Array::from(&self.events)
            .iter()
            .map(|e| Array::from(&e))
            .filter(|e| e.get(0).as_string().as_deref() == Some(kind))
            .map(|e| e.get(1))
            .collect()
    }

    /// The versions `update` events carried, in order.
    fn versions(&self) -> Vec<f64> {
        self.events("update")
            .iter()
            .map(|u| get(&get(u, "task"), "version").as_f64().unwrap())
            .collect()
    }

    /// Waits until the watch reported `closed`.
    async fn closed(&self) {
        until(|| self.states().last().map(String::as_str) == Some("closed")).await;
    }

    fn states(&self) -> Vec<String> {
        self.events("status")
            .iter()
            .map(|s| get(s, "state").as_string().unwrap())
            .collect()
    }

    fn assert_monotonic(&self) {
        let updates = self.events("update");
        let mut last = (-1.0, -1.0, -1.0);
        for u in updates {
            let task = get(&u, "task");
            let v = get(&task, "version").as_f64().unwrap();
            let attempts = get(&task, "attempts").as_f64().unwrap();
            let p = get(&task, "progress").as_f64().unwrap();
            assert!(v > last.0, "version went from {} to {v}", last.0);
            if attempts == last.1 {
                assert!(p >= last.2, "progress went from {} to {p}", last.2);
            }
            last = (v, attempts, p);
        }
    }
}

fn header_of(call: &JsValue, name: &str) -> Option<String> {
    get(&get(call, "headers"), name).as_string()
}

fn cursor_of(url: &str) -> String {
    url.split("cursor=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_string()
}

#[wasm_bindgen_test]
async fn duplicates_and_stale_replays_never_reach_the_page() {
    let steps = format!(
        r#"[
          {{"body": {{"mode":"delta","events":[{e1}],"task":{v1}}}}},
          {{"body": {{"mode":"delta","events":[{e1}],"task":{v1}}}}},
          {{"body": {{"mode":"snapshot","events":[],"task":{v0}}}}},
          {{"body": {{"mode":"delta","events":[{e2},{e3}],"task":{v3}}}}}
        ]"#,
        e1 = progress(1, 0),
        e2 = progress(2, 40),
        e3 =
            r#"{"version":3,"event":{"type":"succeed","atMs":3,"resultRef":"r","resultHash":"h"}}"#,
        v0 = view(0, "queued", 0).replace(r#""attempts":1"#, r#""attempts":0"#),
        v1 = view(1, "running", 0),
        v3 = view(3, "succeeded", 100),
    );
    let h = Harness::start(&steps);
    h.closed().await;
    assert_eq!(h.versions(), vec![1.0, 3.0]);
    h.assert_monotonic();
    let cursors: Vec<String> = h.urls().iter().map(|u| cursor_of(u)).collect();
    assert_eq!(cursors, vec!["0", "1", "1", "1"]);
    assert!(h.urls()[0].starts_with("http://backend.test/v1/tasks/t/resume?cursor=0&waitMs="));
    let rejects = h.events("reject");
    assert_eq!(
        rejects.len(),
        2,
        "the duplicate delta and the stale snapshot"
    );
    let reason = |r: &JsValue| {
        get(&Array::from(&get(r, "rejected")).get(0), "reason")
            .as_string()
            .unwrap()
    };
    assert_eq!(reason(&rejects[0]), "duplicate");
    assert_eq!(reason(&rejects[1]), "stale-snapshot");
    assert_eq!(h.events("done").len(), 1);
    assert_eq!(h.states().last().map(String::as_str), Some("closed"));
    // Updates carry the entries they applied.
    let first = &h.events("update")[0];
    let events = Array::from(&get(first, "events"));
    assert_eq!(events.length(), 1);
    assert_eq!(get(&events.get(0), "version").as_f64(), Some(1.0));
    // The update that finished carries the rejections since the last one.
    let last = h.events("update").pop().unwrap();
    assert_eq!(Array::from(&get(&last, "rejected")).length(), 2);
}

#[wasm_bindgen_test]
async fn a_gap_asks_for_a_snapshot() {
    let steps = format!(
        r#"[
          {{"body": {{"mode":"delta","events":[{e1}],"task":{v1}}}}},
          {{"body": {{"mode":"delta","events":[{e3}],"task":{v3}}}}},
          {{"body": {{"mode":"snapshot","events":[],"task":{v3}}}}},
          {{"body": {{"mode":"snapshot","events":[],"task":{v4}}}}}
        ]"#,
        e1 = progress(1, 0),
        e3 = progress(3, 50),
        v1 = view(1, "running", 0),
        v3 = view(3, "running", 50),
        v4 = view(4, "succeeded", 100),
    );
    let h = Harness::start(&steps);
    h.closed().await;
    let urls = h.urls();
    assert!(urls[2].contains("snapshot=1"), "{urls:?}");
    assert!(
        !urls[2].contains("waitMs"),
        "a snapshot request is not held"
    );
    assert!(
        !urls[3].contains("snapshot=1"),
        "back to normal resumes: {urls:?}"
    );
    assert_eq!(h.versions(), vec![1.0, 3.0, 4.0]);
    h.assert_monotonic();
    let gap = h.events("reject");
    assert_eq!(
        get(&Array::from(&get(&gap[0], "rejected")).get(0), "reason")
            .as_string()
            .as_deref(),
        Some("gap")
    );
}

#[wasm_bindgen_test]
async fn network_errors_and_bad_bodies_retry_with_backoff() {
    let steps = format!(
        r#"[
          {{"error": "connection reset"}},
          {{"body": "this is not json"}},
          {{"status": 502, "body": ""}},
          {{"body": {{"mode":"snapshot","events":[],"task":{v}}}}}
        ]"#,
        v = view(2, "succeeded", 100),
    );
    let h = Harness::start(&steps);
    h.closed().await;
    let reconnecting: Vec<JsValue> = h
        .events("status")
        .into_iter()
        .filter(|s| get(s, "state").as_string().as_deref() == Some("reconnecting"))
        .collect();
    let attempts: Vec<f64> = reconnecting
        .iter()
        .map(|s| get(s, "attempt").as_f64().unwrap())
        .collect();
    assert_eq!(attempts, vec![1.0, 2.0, 3.0]);
    let errors: Vec<String> = reconnecting
        .iter()
        .map(|s| get(s, "error").as_string().unwrap())
        .collect();
    assert!(errors[0].contains("connection reset"), "{errors:?}");
    assert!(
        errors[1].starts_with("bad answer from the server"),
        "{errors:?}"
    );
    assert!(errors[2].contains("502"), "{errors:?}");
    for s in &reconnecting {
        let delay = get(s, "retryInMs").as_f64().unwrap();
        assert!(
            (0.0..=5.0).contains(&delay),
            "full jitter under maxMs 5: {delay}"
        );
    }
    assert_eq!(h.events("done").len(), 1);
    assert_eq!(h.urls().len(), 4);
}

#[wasm_bindgen_test]
async fn retry_after_is_a_floor() {
    let h = Harness::start(
        r#"[{"status": 429, "body": "", "headers": {"retry-after": "2"}}, {"hang": true}]"#,
    );
    until(|| h.states().last().map(String::as_str) == Some("reconnecting")).await;
    wait(100).await;
    let status = h.events("status").pop().unwrap();
    assert_eq!(
        get(&status, "state").as_string().as_deref(),
        Some("reconnecting")
    );
    assert!(get(&status, "retryInMs").as_f64().unwrap() >= 2000.0);
    assert_eq!(h.urls().len(), 1, "no request before Retry-After");
    h.handle.stop();
}

#[wasm_bindgen_test]
async fn not_found_stops_for_good() {
    let h = Harness::start(
        r#"[{"status": 404, "body": "{\"error\":{\"code\":\"not-found\",\"message\":\"x\"}}"}]"#,
    );
    h.closed().await;
    let fail = h.events("fail");
    assert_eq!(fail.len(), 1);
    assert_eq!(
        get(&fail[0], "code").as_string().as_deref(),
        Some("not-found")
    );
    assert_eq!(get(&fail[0], "status").as_f64(), Some(404.0));
    assert_eq!(h.states().last().map(String::as_str), Some("closed"));
    assert_eq!(h.urls().len(), 1, "a 404 is never retried");
}

#[wasm_bindgen_test]
async fn stop_aborts_the_request_in_flight() {
    let h = Harness::start(r#"[{"hang": true}]"#);
    until(|| h.urls().len() == 1).await;
    assert_eq!(h.urls().len(), 1);
    h.handle.stop();
    wait(50).await;
    let call = Array::from(&h.calls).get(0);
    assert_eq!(get(&call, "aborted").as_bool(), Some(true));
    assert_eq!(
        get(&h.events("fail")[0], "code").as_string().as_deref(),
        Some("stopped")
    );
    assert_eq!(h.states().last().map(String::as_str), Some("closed"));
    wait(50).await;
    assert_eq!(h.urls().len(), 1, "nothing after stop()");
}

#[wasm_bindgen_test]
async fn offline_makes_no_requests_and_online_reconnects_at_once() {
    let script = scripted(json(&format!(
        r#"[{{"body": {{"mode":"snapshot","events":[],"task":{v}}}}}]"#,
        v = view(1, "succeeded", 100)
    )));
    let rec = recorder();
    let online = flag(false);
    let client =
        ClientCore::new(client_options(get(&script, "fetch"), 1.0, 5.0, "long-poll")).unwrap();
    let handle = client
        .watch(watch_options(get(&rec, "sink"), get(&online, "read")))
        .unwrap();
    wait(100).await;
    assert_eq!(
        Array::from(&get(&script, "calls")).length(),
        0,
        "no request while offline"
    );
    let events = Array::from(&get(&rec, "events"));
    let last = Array::from(&events.get(events.length() - 1));
    assert_eq!(
        get(&last.get(1), "state").as_string().as_deref(),
        Some("offline")
    );
    // The `online` event: navigator.onLine flips, and the JS layer tells the watch.
    Reflect::set(&get(&online, "state"), &"value".into(), &true.into()).unwrap();
    handle.network();
    let ms = until(|| Array::from(&get(&script, "calls")).length() == 1).await;
    assert!(
        ms < 1_000.0,
        "reconnected after {ms} ms: it waited for the 5 s recheck timer"
    );
}

/// `s` as a JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[wasm_bindgen_test]
async fn sse_streams_deltas_with_last_event_id() {
    let e2 =
        r#"{"version":2,"event":{"type":"succeed","atMs":2,"resultRef":"r","resultHash":"h"}}"#;
    let stream = format!(
        "event: resume\nid: 1\ndata: {{\"mode\":\"delta\",\"events\":[{e1}],\"task\":{v1}}}\n\n: hb\n\nevent: resume\nid: 2\ndata: {{\"mode\":\"delta\",\"events\":[{e2}],\"task\":{v2}}}\n\n",
        e1 = progress(1, 0),
        v1 = view(1, "running", 0),
        v2 = view(2, "succeeded", 100),
    );
    let steps = format!(
        r#"[{{"body": {}, "headers": {{"content-type": "text/event-stream"}}}}]"#,
        quote(&stream)
    );
    let h = Harness::with_transport(&steps, "sse");
    h.closed().await;
    let calls = Array::from(&h.calls);
    assert_eq!(calls.length(), 1, "one stream carried the whole task");
    assert_eq!(h.urls()[0], "http://backend.test/v1/tasks/t/events");
    assert_eq!(
        header_of(&calls.get(0), "last-event-id").as_deref(),
        Some("0")
    );
    assert_eq!(
        header_of(&calls.get(0), "authorization").as_deref(),
        Some("Bearer t")
    );
    assert_eq!(h.versions(), vec![1.0, 2.0]);
    assert_eq!(h.events("done").len(), 1);
}

#[wasm_bindgen_test]
async fn sse_falls_back_to_long_poll_after_short_streams() {
    let steps = format!(
        r#"[
          {{"body": "", "headers": {{"content-type": "text/event-stream"}}}},
          {{"body": "", "headers": {{"content-type": "text/event-stream"}}}},
          {{"body": "", "headers": {{"content-type": "text/event-stream"}}}},
          {{"body": {{"mode":"snapshot","events":[],"task":{v}}}}}
        ]"#,
        v = view(3, "succeeded", 100),
    );
    let h = Harness::with_transport(&steps, "sse");
    h.closed().await;
    let urls = h.urls();
    assert_eq!(urls.len(), 4, "{urls:?}");
    assert!(urls[..3].iter().all(|u| u.ends_with("/events")), "{urls:?}");
    assert!(
        urls[3].contains("/resume?cursor=0&waitMs="),
        "fell back to long-poll: {urls:?}"
    );
    let fallback = h
        .events("status")
        .into_iter()
        .filter_map(|s| get(&s, "error").as_string())
        .any(|e| e.contains("falling back to long-poll"));
    assert!(fallback, "the fallback is reported");
    assert_eq!(h.events("done").len(), 1);
}

#[wasm_bindgen_test]
async fn interrupt_restarts_a_request_stranded_on_a_dead_connection() {
    // The first request hangs forever (a connection that died silently);
    // the network events make the JS layer call interrupt().
    let steps = format!(
        r#"[{{"hang": true}}, {{"body": {{"mode":"snapshot","events":[],"task":{v}}}}}]"#,
        v = view(2, "succeeded", 100)
    );
    let h = Harness::start(&steps);
    until(|| h.urls().len() == 1).await;
    assert_eq!(h.urls().len(), 1);
    h.handle.network();
    h.closed().await;
    let calls = Array::from(&h.calls);
    assert_eq!(get(&calls.get(0), "aborted").as_bool(), Some(true));
    assert_eq!(
        calls.length(),
        2,
        "reconnected at once, not after waitMs + grace"
    );
    assert!(
        !h.states().iter().any(|s| s == "reconnecting"),
        "an interrupt is not a failure: no backoff, states {:?}",
        h.states()
    );
    assert_eq!(h.events("done").len(), 1);
    let update = h.events("update").pop().unwrap();
    assert_eq!(
        Array::from(&get(&update, "events")).length(),
        0,
        "a snapshot applies no events"
    );
}

#[wasm_bindgen_test]
async fn stale_answers_are_retried_with_backoff_not_in_a_loop() {
    // A broken server (or cache) that answers an old snapshot at once,
    // every time.
    let steps = format!(
        r#"[{{"body": {{"mode":"delta","events":[{e1},{e2}],"task":{v2}}}}}, {{"body": {{"mode":"snapshot","events":[],"task":{v1}}}}}]"#,
        e1 = progress(1, 0),
        e2 = progress(2, 20),
        v1 = view(1, "running", 0),
        v2 = view(2, "running", 20),
    );
    let h = Harness::with(&steps, "long-poll", 40.0, 40.0);
    let attempts = || {
        h.events("status")
            .iter()
            .filter(|s| get(s, "attempt").as_f64().is_some())
            .count()
    };
    let mut elapsed = until(|| attempts() >= 2).await;
    if elapsed < 200.0 {
        wait(200 - elapsed as u32).await;
        elapsed = 200.0;
    }
    h.handle.stop();
    let n = h.urls().len();
    // Backoff waits random(0, 40) ms between them: about 10 in 200 ms;
    // without it, a request every few milliseconds.
    assert!(
        (n as f64) < 25.0 * elapsed / 200.0,
        "{n} requests in {elapsed} ms: a tight loop"
    );
    let attempts: Vec<f64> = h
        .events("status")
        .iter()
        .filter_map(|s| get(s, "attempt").as_f64())
        .collect();
    assert!(
        attempts.len() >= 2 && attempts.windows(2).all(|w| w[1] == w[0] + 1.0),
        "{attempts:?}"
    );
    assert_eq!(
        h.versions(),
        vec![2.0],
        "the stale snapshot never reached the page"
    );
}
