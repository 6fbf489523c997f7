//! Reading `GET /metrics` (the Prometheus text format) in tests.

use std::collections::HashMap;
use std::time::Duration;

use taskwire_server::client;

/// One scrape: `name{labels}` (as written) → value.
pub struct Scrape(HashMap<String, f64>);

impl Scrape {
    /// Parses the text format: comment lines, then `series value` lines.
    pub fn parse(text: &str) -> Scrape {
        let mut series = HashMap::new();
        for line in text.lines() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line.rsplit_once(' ').expect("series and value");
            let value: f64 = value.parse().expect("a number");
            assert!(
                series.insert(name.to_string(), value).is_none(),
                "{name} twice"
            );
        }
        Scrape(series)
    }

    /// The value of `series`; a missing one fails the test.
    pub fn get(&self, series: &str) -> f64 {
        match self.0.get(series) {
            Some(v) => *v,
            None => panic!("no series {series} in the scrape"),
        }
    }

    /// Whether the scrape has `series`.
    pub fn has(&self, series: &str) -> bool {
        self.0.contains_key(series)
    }
}

/// Scrapes `addr` (the metrics listener).
pub async fn scrape(addr: &str) -> Scrape {
    let r = client::request(addr, "GET", "/metrics", &[], "")
        .await
        .expect("scrape");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    Scrape::parse(std::str::from_utf8(&r.body).unwrap())
}

/// Scrapes until `ready` holds (at most 10 s).
pub async fn scrape_until(addr: &str, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let mut last = Vec::new();
    for _ in 0..200 {
        let s = scrape(addr).await;
        if ready(&s) {
            return s;
        }
        last =
            s.0.into_iter()
                .filter(|(k, _)| !k.contains("_bucket"))
                .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last.sort_by(|a, b| a.0.cmp(&b.0));
    panic!("the metrics never got there: {last:#?}");
}
