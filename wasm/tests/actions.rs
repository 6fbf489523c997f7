//! `ClientCore::cancel` and `decide` against a scripted `fetch`: the route,
//! method, headers and body of each request, the answer passed through,
//! retries on 503 (a repeat is a duplicate on the server, so they are
//! safe), and error answers as `TaskwireError`s with the server's code.
//! Run by `wasm-pack test --node wasm` (and `--headless --chrome`).
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
  const fetch = async (url, init) => {
    calls.push({ url, method: init.method, headers: init.headers, body: init.body });
    const step = steps[Math.min(i++, steps.length - 1)];
    return new Response(JSON.stringify(step.body), { status: step.status ?? 200, headers: step.headers ?? {} });
  };
  return { fetch, calls };
}
export function options(fetch) {
  return { baseUrl: "http://backend.test/", headers: ["authorization", "Bearer t"], fetch, initialMs: 1, maxMs: 2 };
}
"#)]
extern "C" {
    fn scripted(steps: JsValue) -> JsValue;
    fn options(fetch: JsValue) -> JsValue;
}

fn get(target: &JsValue, key: &str) -> JsValue {
    Reflect::get(target, &JsValue::from_str(key)).unwrap()
}

fn json(text: &str) -> JsValue {
    js_sys::JSON::parse(text).unwrap()
}

fn calls(script: &JsValue) -> Vec<JsValue> {
    get(script, "calls")
        .dyn_into::<Array>()
        .unwrap()
        .iter()
        .collect()
}

const ANSWER: &str = r#"{"changed":true,"duplicate":false,"reason":"cancel-requested","task":{"id":"t/1","state":"cancelling","version":2}}"#;

#[wasm_bindgen_test]
async fn cancel_posts_to_its_route_with_the_clients_headers_and_resolves_to_the_answer() {
    let script = scripted(json(&format!(r#"[{{"body":{ANSWER}}}]"#)));
    let core = ClientCore::new(options(get(&script, "fetch"))).unwrap();
    let answer = JsFuture::from(core.cancel("t/1", r#"{"reason":"why"}"#.into()))
        .await
        .unwrap();
    assert_eq!(
        js_sys::JSON::stringify(&json(&answer.as_string().unwrap())).unwrap(),
        js_sys::JSON::stringify(&json(ANSWER)).unwrap()
    );
    let sent = calls(&script);
    assert_eq!(sent.len(), 1);
    let call = &sent[0];
    assert_eq!(
        get(call, "url").as_string().unwrap(),
        "http://backend.test/v1/tasks/t%2F1/cancel"
    );
    assert_eq!(get(call, "method").as_string().unwrap(), "POST");
    assert_eq!(
        get(call, "body").as_string().unwrap(),
        r#"{"reason":"why"}"#
    );
    let headers = get(call, "headers");
    assert_eq!(
        get(&headers, "authorization").as_string().unwrap(),
        "Bearer t"
    );
    assert_eq!(
        get(&headers, "content-type").as_string().unwrap(),
        "application/json"
    );
}

#[wasm_bindgen_test]
async fn decide_is_retried_after_a_503_and_answers_once() {
    let script = scripted(json(&format!(
        r#"[{{"status":503,"headers":{{"retry-after":"0"}},"body":{{"error":{{"code":"storage-unavailable","message":"disk full"}}}}}},{{"body":{ANSWER}}}]"#
    )));
    let core = ClientCore::new(options(get(&script, "fetch"))).unwrap();
    let body = r#"{"decision":"approve","artifactHash":"sha256:a","version":3}"#;
    JsFuture::from(core.decide("t", body.into())).await.unwrap();
    let sent = calls(&script);
    assert_eq!(sent.len(), 2, "one retry after the 503");
    for call in &sent {
        assert_eq!(
            get(call, "url").as_string().unwrap(),
            "http://backend.test/v1/tasks/t/decisions"
        );
        assert_eq!(
            get(call, "body").as_string().unwrap(),
            body,
            "the same request again"
        );
    }
}

#[wasm_bindgen_test]
async fn an_error_answer_rejects_with_the_servers_code_and_status() {
    let script = scripted(json(
        r#"[{"status":404,"body":{"error":{"code":"not-found","message":"taskId: no task"}}}]"#,
    ));
    let core = ClientCore::new(options(get(&script, "fetch"))).unwrap();
    let err = JsFuture::from(core.cancel("t", "{}".into()))
        .await
        .unwrap_err();
    assert!(err.is_instance_of::<js_sys::Error>());
    assert_eq!(get(&err, "code").as_string().unwrap(), "not-found");
    assert_eq!(get(&err, "status").as_f64().unwrap(), 404.0);
    assert_eq!(calls(&script).len(), 1, "a 404 is not retried");
}
