//! PROTOCOL.md §Events stream: a stream request whose cursor is already
//! the task's terminal version is answered 204 No Content, the HTML
//! standard's signal for an `EventSource` to stop reconnecting. (Browsers
//! and the `eventsource` package are driven against it in
//! `tests/e2e/eventsource.test.mjs`.)

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

/// A task taken to `succeeded` at version 2.
async fn succeeded(h: &Harness) -> String {
    let id = h.create_default().await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    h.ok_callback(&id, "ok", succeed_ev(2, "sha256:end")).await;
    id
}

fn text(r: &taskwire_server::client::Reply) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn stream_request(last_event_id: Option<&str>) -> Vec<(&str, &str)> {
    let mut headers = vec![("authorization", "Bearer demo")];
    if let Some(id) = last_event_id {
        headers.push(("last-event-id", id));
    }
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_at_the_terminal_version_is_answered_204_after_auth_and_ownership() {
    let h = harness(|_| {}).await;
    let id = succeeded(&h).await;
    let path = format!("/v1/tasks/{id}/events");
    // The reconnect a standard EventSource makes after the terminal
    // message, and the same cursor given as ?cursor=.
    for (path, last) in [
        (path.clone(), Some("2")),
        (format!("{path}?cursor=2"), None),
    ] {
        let r = h.req("GET", &path, &stream_request(last), "").await;
        assert_eq!(r.status, 204, "{path} {last:?}: {}", text(&r));
        assert!(r.body.is_empty(), "a 204 has no body: {}", text(&r));
        assert_eq!(r.header("content-type"), None, "not an event stream");
    }
    // Any other cursor still gets its message: below the end a delta,
    // above it (a view the server never had) a snapshot.
    for (last, mode) in [("1", "delta"), ("9", "snapshot")] {
        let r = h.req("GET", &path, &stream_request(Some(last)), "").await;
        assert_eq!(r.status, 200, "Last-Event-ID {last}");
        let text = text(&r);
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or_else(|| panic!("Last-Event-ID {last}: no message in {text}"));
        let answer: Value = serde_json::from_str(data).unwrap();
        assert_eq!(answer["mode"], mode, "Last-Event-ID {last}");
    }
    // Authentication and ownership are judged first, as on every stream.
    let r = h.req("GET", &path, &[("last-event-id", "2")], "").await;
    assert_error(&r, 401, "unauthorized", "Authorization");
    let other = [("authorization", "Bearer other"), ("last-event-id", "2")];
    assert_error(
        &h.req("GET", &path, &other, "").await,
        404,
        "not-found",
        "taskId",
    );
    // `?cursor=` is judged even when `Last-Event-ID` wins over it.
    let r = h
        .req(
            "GET",
            &format!("{path}?cursor=x"),
            &stream_request(Some("2")),
            "",
        )
        .await;
    assert_error(&r, 400, "invalid-request", "cursor");
    let bad = stream_request(Some("2.0"));
    assert_error(
        &h.req("GET", &path, &bad, "").await,
        400,
        "invalid-request",
        "Last-Event-ID",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_204_is_not_held_so_a_full_watch_cap_does_not_refuse_it() {
    // The server's cap is the one that is full (tenant demo may hold it).
    let h = harness(|c| {
        c.max_watchers = Some(1);
        c.quotas.max_watches = Some(2);
    })
    .await;
    let done = succeeded(&h).await;
    let open_id = h.create_default().await;
    let open = open_id.clone();
    let addr = h.addr.clone();
    let held = tokio::spawn(async move {
        let mut conn = taskwire_server::client::Conn::open(&addr).await.unwrap();
        let path = format!("/v1/tasks/{open}/resume?cursor=0&waitMs=10000");
        conn.send("GET", &path, &[("authorization", "Bearer demo")], "")
            .await
            .unwrap()
            .status
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.state().watchers.held(), 1, "the cap is full");
    let path = format!("/v1/tasks/{done}/events");
    let r = h.req("GET", &path, &stream_request(Some("2")), "").await;
    assert_eq!(r.status, 204, "{}", text(&r));
    h.ok_callback(&open_id, "s", start_ev(1)).await;
    assert_eq!(held.await.unwrap(), 200, "the held long-poll woke");
}
