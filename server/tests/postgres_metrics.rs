//! `GET /metrics` on PostgreSQL (server/README.md "Metrics"): the pool's
//! gauges and the LISTEN connection's health, read from a real server on
//! a real throwaway PostgreSQL. The sessions are ended from the database
//! side (`pg_terminate_backend`), as a failover or an administrator ends
//! them: the server reconnects its LISTEN connection, the gauge is 1
//! again and the reconnect is counted. Without PostgreSQL
//! binaries the test skips (tests/common/pg.rs).

mod common;

use common::scrape::{scrape_until, Scrape};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_and_the_listen_connection_are_measured() {
    let Some(url) = pg::database().await else {
        return;
    };
    let h = harness(|c| {
        c.data = url.clone().into();
        c.metrics_listen = Some("127.0.0.1:0".into());
        c.pool = 4;
    })
    .await;
    let metrics = h.server.as_ref().unwrap().metrics_addr.unwrap().to_string();
    let first = scrape_until(&metrics, |s: &Scrape| {
        s.get("taskwire_pg_listen_connected") == 1.0
    })
    .await;
    assert_eq!(first.get("taskwire_pg_pool_max_connections"), 4.0);
    assert_eq!(first.get("taskwire_pg_listen_reconnects_total"), 0.0);
    assert_eq!(first.get("taskwire_pg_pool_waiting_requests"), 0.0);

    // Work opens pool connections; none waits once it is done.
    for _ in 0..5 {
        h.create_default().await;
    }
    let worked = scrape_until(&metrics, |s: &Scrape| {
        s.get("taskwire_pg_pool_connections") >= 1.0
    })
    .await;
    assert!(worked.get("taskwire_pg_pool_connections") <= 4.0);
    assert!(
        worked.get("taskwire_pg_pool_idle_connections")
            <= worked.get("taskwire_pg_pool_connections")
    );

    // End every other session on the database, as an administrator or a
    // failover would: the pooled connections and the LISTEN connection.
    let admin = pg::admin(&url).await;
    let cut = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert!(
        cut.len() >= 2,
        "the LISTEN connection and the pool's: {}",
        cut.len()
    );
    let back = scrape_until(&metrics, |s: &Scrape| {
        s.get("taskwire_pg_listen_reconnects_total") >= 1.0
            && s.get("taskwire_pg_listen_connected") == 1.0
    })
    .await;
    assert_eq!(back.get("taskwire_pg_listen_reconnects_total"), 1.0);
}
