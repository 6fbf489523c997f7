use super::*;
use std::collections::BTreeMap;
use taskwire_core::{create_task, CreateTask, State};

fn record(ttl_ms: f64) -> TaskRecord {
    TaskRecord {
        tenant: "acme".into(),
        view: create_task(&CreateTask::new("t1", 0.0, ttl_ms, 2))
            .unwrap()
            .view()
            .clone(),
        kind: Some("summary".into()),
        input: None,
        lease: None,
        batch: None,
    }
}

fn claim(now_ms: f64) -> Claim {
    Claim {
        tenants: vec!["acme".into()],
        kinds: vec!["summary".into()],
        max: 1,
        worker: NonBlank::new("w", "worker").unwrap(),
        lease_ms: Millis::new(30_000.0, "leaseMs").unwrap(),
        now_ms,
        signed: None,
        limits: KindLimits::default(),
        workflow_versions: Vec::new(),
    }
}

#[test]
fn a_claim_opens_the_next_attempt_and_its_lease_on_the_servers_clock() {
    let mut r = record(100_000.0);
    let judged = judge_claim(&mut r, &claim(500.0))
        .unwrap()
        .expect("claimed");
    assert_eq!(judged.appended.len(), 1, "one version, one entry");
    assert_eq!(r.view.state, State::Running);
    assert_eq!(r.view.attempts, 1);
    let lease = r.lease.expect("a lease");
    assert_eq!((lease.attempt, lease.expires_at_ms.get()), (1, 30_500.0));
    // Running now: not claimable again.
    assert!(judge_claim(&mut r, &claim(600.0)).unwrap().is_none());
}

#[test]
fn a_task_past_its_ttl_is_skipped_for_the_sweeper() {
    let mut r = record(100.0);
    assert!(judge_claim(&mut r, &claim(100.0)).unwrap().is_none());
    assert_eq!(r.view.version, 0, "nothing written");
}

#[test]
fn a_kinds_budget_is_its_concurrency_left_and_its_rate() {
    let limit = KindLimit {
        max_running: Some(4),
        per_second: None,
    };
    assert_eq!(limit.budget(3, None, 0.0).left, 1);
    assert_eq!(limit.budget(9, None, 0.0).left, 0);
    let rate = KindLimit {
        max_running: None,
        per_second: Some(2.0),
    };
    // An idle bucket lets one second's worth through at once.
    let fresh = rate.budget(0, None, 1_000.0);
    assert_eq!((fresh.left, fresh.retry_at_ms), (2, None));
    let tat = rate.tat_after(None, 1_000.0, 2);
    assert_eq!(tat, Some(2_000.0));
    // Spent: the next start is allowed half a second later.
    let spent = rate.budget(0, tat, 1_000.0);
    assert_eq!((spent.left, spent.retry_at_ms), (0, Some(1_500.0)));
    assert_eq!(rate.budget(0, tat, 1_500.0).left, 1);
}

#[test]
fn a_claim_spends_each_kinds_budget_and_looks_again_without_a_spent_kind() {
    let budget = |left| Budget {
        left,
        retry_at_ms: None,
    };
    let mut claim = claim(0.0);
    claim.kinds = vec!["vendor".into(), "free".into()];
    let mut spending = Spending::new(BTreeMap::from([("vendor".to_string(), budget(1))]));
    assert_eq!(spending.open_kinds(&claim), ["vendor", "free"]);
    assert!(spending.may_start("vendor"));
    spending.started("vendor");
    assert!(!spending.may_start("vendor"), "its one start is spent");
    assert!(
        spending.may_start("free"),
        "an unlimited kind never runs out"
    );
    spending.started("free");
    // A full look passed a task over: look again, without the spent kind.
    assert!(spending.look_again(5, 5));
    assert!(!spending.look_again(4, 5), "the queue held no more");
    assert_eq!(spending.open_kinds(&claim), ["free"]);
    assert!(!spending.look_again(5, 5), "nothing passed over since");
    assert_eq!(spending.starts()["vendor"], 1);
}
