//! The bindings, run inside WebAssembly: `wasm-pack test --node wasm` and
//! `wasm-pack test --headless --chrome wasm`. They check what the JS layer
//! relies on: JSON text in and out, and errors thrown as `TaskwireError`
//! objects (an `Error` with `code`).
#![cfg(target_arch = "wasm32")]

use taskwire_wasm::{apply_event, create_task, BookHandle, MirrorHandle};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

/// A thrown `TaskwireError`'s code and message (it must be an `Error`).
fn thrown(e: JsValue) -> (String, String) {
    assert!(
        e.is_instance_of::<js_sys::Error>(),
        "errors are Error objects: {e:?}"
    );
    let get = |key: &str| {
        js_sys::Reflect::get(&e, &key.into())
            .unwrap()
            .as_string()
            .unwrap()
    };
    assert_eq!(get("name"), "TaskwireError");
    (get("code"), get("message"))
}

#[wasm_bindgen_test]
fn book_round_trip_through_json_text() {
    let mut book = BookHandle::new(8.0).unwrap();
    let task = book
        .create(r#"{"id":"t","nowMs":0,"ttlMs":3600000,"maxAttempts":3}"#)
        .unwrap();
    assert!(task.contains(r#""version":0"#), "{task}");
    let applied = book
        .apply(
            "t",
            r#"{"type":"start","atMs":1200,"worker":"w"}"#,
            Some("cb".into()),
        )
        .unwrap();
    assert!(applied.contains(r#""reason":"started""#), "{applied}");
    let again = book
        .apply(
            "t",
            r#"{"type":"start","atMs":1200,"worker":"w"}"#,
            Some("cb".into()),
        )
        .unwrap();
    assert!(again.contains(r#""duplicateCallback":true"#), "{again}");
    let answer = book.resume("t", 0.0).unwrap();
    assert!(
        answer.starts_with(r#"{"mode":"delta","events":[{"version":1"#),
        "{answer}"
    );
    assert_eq!(book.get("missing"), "null");
    assert_eq!(book.size(), 1);
}

#[wasm_bindgen_test]
fn errors_carry_code_and_field() {
    let mut book = BookHandle::new(8.0).unwrap();
    let (code, message) = thrown(
        book.apply("nope", r#"{"type":"expire","atMs":1}"#, None)
            .unwrap_err(),
    );
    assert_eq!(
        (code.as_str(), message.starts_with("taskId")),
        ("not-found", true)
    );
    let (code, message) = thrown(book.resume("t", 1.5).unwrap_err());
    assert_eq!(
        (code.as_str(), message.starts_with("cursor")),
        ("invalid-request", true)
    );
    let (code, message) = thrown(BookHandle::new(f64::NAN).err().unwrap());
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "invalid-request",
            "retentionVersions: must be an integer from 0 to 9007199254740991, got NaN"
        )
    );
    let (_, message) =
        thrown(create_task(r#"{"id":"t","nowMs":0,"ttlMs":0,"maxAttempts":1}"#).unwrap_err());
    assert!(message.starts_with("ttlMs:"), "{message}");
    let (_, message) = thrown(apply_event("{}", r#"{"type":"start"}"#).unwrap_err());
    assert_eq!(message, "event.atMs: required for a start event");
}

#[wasm_bindgen_test]
fn mirror_merges_text_and_reports_the_task_when_changed() {
    let mut book = BookHandle::new(8.0).unwrap();
    book.create(r#"{"id":"t","nowMs":0,"ttlMs":1000,"maxAttempts":1}"#)
        .unwrap();
    book.apply("t", r#"{"type":"start","atMs":1,"worker":"w"}"#, None)
        .unwrap();
    let mut mirror = MirrorHandle::new(0, "t").unwrap();
    // The mirror's text comes back as JS strings.
    let text = |v: JsValue| v.as_string().unwrap();
    let merged = text(mirror.merge(&book.resume("t", 0.0).unwrap()).unwrap());
    assert!(
        merged.contains(r#""applied":[1]"#) && merged.contains(r#""task":{"#),
        "{merged}"
    );
    let merged = text(mirror.merge(&book.resume("t", 1.0).unwrap()).unwrap());
    assert!(
        !merged.contains(r#""task":"#),
        "unchanged merges carry no task: {merged}"
    );
    let restored = MirrorHandle::new(2, &text(mirror.to_json())).unwrap();
    assert_eq!(text(restored.to_json()), text(mirror.to_json()));
    assert!(text(restored.to_json()).starts_with(r#"{"taskId":"t","task":{"#));
    let (code, _) = thrown(mirror.merge("{\"mode\":\"later\"}").unwrap_err());
    assert_eq!(code, "invalid-request");
}
