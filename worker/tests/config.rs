//! What cannot work is said at once, naming the field: a bad setting
//! when the worker is built, a credential the server refuses when it runs.

mod common;

use common::{Server, SECRET, TENANT};
use taskwire_worker::{Done, RunError, Worker};

#[test]
fn a_bad_setting_names_its_field() {
    let build = |url: &str, tenant: &str, secret: &str| {
        Worker::builder(url, tenant, secret)
            .build()
            .map(|_| ())
            .unwrap_err()
            .field()
            .to_string()
    };
    assert_eq!(build("localhost:8080", TENANT, SECRET), "url");
    assert_eq!(build("http://localhost", " ", SECRET), "tenant");
    assert_eq!(build("http://localhost", TENANT, "sk_live_1"), "secret");
    let field = |b: taskwire_worker::WorkerBuilder| b.build().map(|_| ()).unwrap_err().to_string();
    let base = || Worker::builder("http://localhost", TENANT, SECRET);
    assert_eq!(
        field(base().concurrency(0)),
        "concurrency: must be from 1 to 100, got 0"
    );
    assert_eq!(
        field(base().lease_ms(10)),
        "leaseMs: must be from 1000 to 3600000, got 10"
    );
    assert_eq!(
        field(base().wait_ms(60_000)),
        "waitMs: must be from 0 to 30000, got 60000"
    );
    assert!(field(base().name("")).starts_with("name: "));
    let worker = base().build().unwrap();
    let e = worker
        .handle(
            "k".repeat(65),
            |_job| async move { Ok(Done::result("r", "h")) },
        )
        .unwrap_err();
    assert_eq!(e.field(), "kind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_handlers_or_with_a_wrong_secret_ends_with_an_error() {
    let server = Server::start(&[]);
    let worker = server.worker("w-none").build().unwrap();
    match worker.run().await {
        Err(RunError::Config(e)) => assert_eq!(e.field(), "handlers"),
        other => panic!("{other:?}"),
    }

    let wrong = "whsec_c29tZWJvZHkgZWxzZSdzIHNlY3JldCwgbm90IHRoaXMgdGVuYW50J3M=";
    let worker = Worker::builder(server.url(), TENANT, wrong)
        .wait_ms(1_000)
        .build()
        .unwrap();
    worker
        .handle("summary", |_job| async move { Ok(Done::result("r", "h")) })
        .unwrap();
    match worker.run().await {
        Err(RunError::Refused { status, .. }) => assert_eq!(status, 401),
        other => panic!("a wrong secret must end the run: {other:?}"),
    }
}
