use super::*;
use std::time::Duration;
use taskwire_core::{create_task, CreateTask, Event, Millis};

fn view() -> TaskView {
    create_task(&CreateTask::new("t", 0.0, 1e9, 1))
        .unwrap()
        .view()
        .clone()
}

fn change(view: &mut TaskView, event: Event) -> Change {
    let entry = view.step(&event).entry.unwrap();
    Change {
        view: view.clone(),
        entry,
        batch: None,
    }
}

#[tokio::test]
async fn wakes_a_subscriber_and_answers_from_memory() {
    let hub = Hub::new(8);
    let mut sub = hub.subscribe("t", "a");
    let mut v = view();
    let c = change(
        &mut v,
        Event::Start {
            at_ms: Millis::new(1.0, "x").unwrap(),
            worker: "w".into(),
            attempt: None,
            lease_ms: None,
            plan: None,
        },
    );
    let waiter = tokio::spawn(async move { sub.wait_past(0).await });
    tokio::task::yield_now().await;
    hub.publish(&[c]);
    let Wake::Changed(latest) = waiter.await.unwrap() else {
        panic!("dropped")
    };
    assert_eq!(latest.view.version, 1);
    let answer = answer_from(&latest, 0, 8).unwrap();
    assert_eq!(answer.events().len(), 1);
    // The slot goes with its last subscriber.
    assert_eq!(hub.watched(), 0);
    // A cursor before what memory holds needs the store.
    assert_eq!(
        answer_from(&latest, 0, 8).map(|a| a.mode()),
        Some(taskwire_core::ResumeMode::Delta)
    );
    let mut older = (*latest).clone();
    older.recent.clear();
    assert!(answer_from(&older, 0, 8).is_none());
}

#[tokio::test]
async fn publishes_never_go_back_and_reads_join_memory() {
    let hub = Hub::new(8);
    let sub = hub.subscribe("t", "a");
    let mut v = view();
    let at = |ms: f64| Millis::new(ms, "x").unwrap();
    let c1 = change(
        &mut v,
        Event::Start {
            at_ms: at(1.0),
            worker: "w".into(),
            attempt: None,
            lease_ms: None,
            plan: None,
        },
    );
    let progress = |p: u8| Event::Progress {
        at_ms: at(1.0 + f64::from(p)),
        progress: taskwire_core::value::Percent::new(f64::from(p), "p").unwrap(),
        cursor: format!("c{p}"),
        attempt: None,
    };
    let c2 = change(&mut v, progress(10));
    let c3 = change(&mut v, progress(20));
    hub.publish(std::slice::from_ref(&c1));
    // Another instance's commits, read back: v2 and v3 join v1.
    hub.publish_read(c3.view.clone(), vec![c2.entry.clone(), c3.entry.clone()]);
    let latest = sub.rx.borrow().clone().unwrap();
    assert_eq!(latest.view.version, 3);
    assert_eq!(
        latest.recent.iter().map(|e| e.version).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // A late local publish of v2 does not move it back.
    hub.publish(std::slice::from_ref(&c2));
    hub.publish_read(c2.view.clone(), vec![c2.entry.clone()]);
    assert_eq!(sub.rx.borrow().as_ref().unwrap().view.version, 3);
    // A read that does not join memory (v4 missing) keeps only its own
    // entries; a client at 3 then needs the store.
    let c4 = change(&mut v, progress(30));
    let c5 = change(&mut v, progress(40));
    hub.publish_read(c5.view.clone(), vec![c5.entry.clone()]);
    let latest = sub.rx.borrow().clone().unwrap();
    assert_eq!(latest.view.version, 5);
    assert!(answer_from(&latest, 3, 8).is_none(), "needs the store");
    assert_eq!(latest.recent.len(), 1);
    let _ = c4;
    assert_eq!(
        hub.known_versions(["t", "u"]),
        vec![("t", Some(Some(5))), ("u", None)]
    );
    assert_eq!(hub.watched_tasks(), vec![("t".to_string(), Some(5))]);
}

#[tokio::test]
async fn drop_connections_releases_waiters() {
    let hub = Hub::new(8);
    let mut sub = hub.subscribe("t", "a");
    let waiter = tokio::spawn(async move { sub.wait_past(0).await });
    tokio::task::yield_now().await;
    hub.drop_connections();
    assert_eq!(waiter.await.unwrap(), Wake::Dropped);
}

#[tokio::test]
async fn a_tenants_drop_releases_only_its_own_waiters() {
    let hub = Hub::new(8);
    let mut mine = hub.subscribe("t", "a");
    let mut theirs = hub.subscribe("t", "b");
    assert_eq!((hub.held_by("a"), hub.held_by("b")), (1, 1));
    let mine = tokio::spawn(async move { mine.wait_past(0).await });
    let theirs = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_millis(200), theirs.wait_past(0))
            .await
            .is_err()
    });
    tokio::task::yield_now().await;
    assert_eq!(hub.drop_connections_of("a"), 1);
    assert_eq!(hub.drop_connections_of("nobody"), 0);
    assert_eq!(mine.await.unwrap(), Wake::Dropped);
    assert!(theirs.await.unwrap(), "b's waiter is still waiting");
    assert_eq!(hub.held_by("b"), 0, "b's waiter timed out and left");
}

/// Waiters of one batch woken by one publish share one store read per
/// cursor (hub/batches.rs); another cursor, a newer publish and a failed
/// read each read again.
#[tokio::test]
async fn batch_waiters_at_one_cursor_share_one_read() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hub = Hub::new(8);
    let subs: Vec<_> = (0..20).map(|_| hub.subscribe_batch("b", "t")).collect();
    hub.publish_batch("b", 2);
    let reads = Arc::new(AtomicUsize::new(0));
    let read = |fail: bool| {
        let reads = Arc::clone(&reads);
        move || {
            let reads = Arc::clone(&reads);
            async move {
                reads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                if fail {
                    Err("down")
                } else {
                    Ok(42u32)
                }
            }
        }
    };
    let answers =
        futures_util::future::join_all(subs.iter().map(|s| s.read_shared(1, 2, read(false)))).await;
    assert!(answers.iter().all(|a| a.as_deref() == Ok(&42)));
    assert_eq!(reads.load(Ordering::SeqCst), 1, "one read for 20 waiters");
    subs[0].read_shared(3, 2, read(false)).await.unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 2, "another cursor reads");
    hub.publish_batch("b", 5);
    subs[0].read_shared(1, 5, read(false)).await.unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 3, "a newer publish reads");
    assert_eq!(subs[0].read_shared(9, 5, read(true)).await, Err("down"));
    assert_eq!(
        subs[1].read_shared(9, 5, read(false)).await.as_deref(),
        Ok(&42)
    );
    assert_eq!(
        reads.load(Ordering::SeqCst),
        5,
        "a failed read is not shared"
    );
}
