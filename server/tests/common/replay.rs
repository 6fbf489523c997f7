//! The replay of a signed callback that changed nothing (PROTOCOL.md
//! §Executor callback, "Secrets and binding": a signed request is used
//! once), as one scenario any test runs on its store: the request is
//! captured on `first` and replayed, byte for byte, on `second` (the same
//! server, or another instance on the same database).

use serde_json::Value;
use taskwire_server::signature::callback_body;

use super::{fail_ev, now_secs, start_ev, Harness, ReplyJson};

/// A `fail` sent while the task is queued changes nothing; after a
/// `start`, the captured request replayed unchanged is a duplicate
/// callback and the task stays running; the same event re-signed with a
/// later timestamp (a legitimate resend, same id) applies: core fix 1.
pub async fn replay_after_start_is_a_duplicate(first: &Harness, second: &Harness) {
    let task = first.create_default().await;
    let body = callback_body(&task, &fail_ev(20, false));
    let ts = now_secs();
    let sent = first
        .callback_raw(&task, &format!("{task}:fail"), ts, body.as_bytes())
        .await;
    assert_eq!(sent.status, 200);
    let sent: Value = sent.json();
    assert_eq!(
        (&sent["reason"], &sent["changed"]),
        (&"not-running".into(), &false.into())
    );
    let started = first
        .callback_raw(
            &task,
            &format!("{task}:start"),
            ts,
            callback_body(&task, &start_ev(10)).as_bytes(),
        )
        .await
        .json();
    assert_eq!(started["reason"], "started");

    // The captured bytes again, on either server: nothing changes.
    for h in [first, second] {
        let replayed = h
            .callback_raw(&task, &format!("{task}:fail"), ts, body.as_bytes())
            .await;
        assert_eq!(replayed.status, 200);
        let replayed: Value = replayed.json();
        assert_eq!(replayed["reason"], "duplicate-callback", "{replayed}");
        assert_eq!(replayed["duplicateCallback"], true);
        assert_eq!(replayed["changed"], false);
        assert_eq!(
            (&replayed["state"], &replayed["version"]),
            (&"running".into(), &1.into())
        );
    }
    let now = second
        .get("demo", &format!("/v1/tasks/{task}"))
        .await
        .json();
    assert_eq!(
        (&now["state"], &now["version"]),
        (&"running".into(), &1.into())
    );

    // Signed again, one second later: another request, judged as before.
    let resent = second
        .callback_raw(&task, &format!("{task}:fail"), ts + 1, body.as_bytes())
        .await
        .json();
    assert_eq!(resent["changed"], true, "{resent}");
    assert_eq!(resent["duplicateCallback"], false);
    assert_eq!(resent["state"], "failed");
}
