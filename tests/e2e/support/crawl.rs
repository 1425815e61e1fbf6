//! `CrawlApp`: the local runner with its crawler and download pools (the system clock: downloads,
//! deadlines and retry delays are real time, scaled down by settings), plus verbs to send
//! crawl requests and await their settlement.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use imgest_core::ports::TaskQueue;
use imgest_crawl::{Crawler, RESULTS_QUEUE};
use imgest_flows::CrawlCounts;
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::Settings;
use serde_json::{Value, json};

use super::{Reply, reply};

/// Tiers scaled for tests: a photo from 127.0.0.1 takes milliseconds, so these leave wide
/// margins either side of the slow hosts' delays (see `SLOW_IN_TIER`).
pub const TIERS: &str = "400ms,1200ms,2500ms";
/// A host delay that lands a download in each tier.
pub const SLOW_IN_TIER: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(800),
    Duration::from_millis(1800),
];
/// How long a test waits for a crawl to settle before failing: a bound on a hang, not a
/// timing (thousands of joined crawls took over 30 s on a machine also building the arm64
/// functions, which the test command now runs beside the tests).
const SETTLE_DEADLINE: Duration = Duration::from_secs(120);

pub struct CrawlApp {
    pub base: String,
    pub client: reqwest::Client,
    pub crawler: Arc<Crawler>,
    pub queue: Arc<dyn TaskQueue>,
    runner: LocalRunner,
    pub data_dir: tempfile::TempDir,
}

impl CrawlApp {
    /// Private networks allowed (the hosts are on 127.0.0.1), quick retries, test tiers;
    /// `vars` override any of it.
    pub async fn start(vars: &[(&str, &str)]) -> Self {
        imgest_download::install_default_provider();
        let data_dir = tempfile::tempdir().unwrap();
        let mut map: HashMap<String, String> = [
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true"),
            ("IMGEST_FETCH_PORTS", "any"),
            ("IMGEST_FETCH_TIERS", TIERS),
            ("IMGEST_FETCH_WORKERS", "8,4,4"),
            ("IMGEST_RETRY_BASE", "20ms"),
            ("IMGEST_RETRY_CAP", "100ms"),
        ]
        .into_iter()
        .chain(vars.iter().copied())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        map.insert(
            "IMGEST_DATA_DIR".into(),
            data_dir.path().display().to_string(),
        );
        let settings = Settings::from_map(&map).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let runner = LocalRunner::start(&settings, Some(listener), RunnerOptions::default())
            .await
            .unwrap();
        Self {
            base: runner.base_url().to_owned(),
            client: reqwest::Client::new(),
            crawler: Arc::clone(runner.crawler()),
            queue: Arc::clone(runner.queue().unwrap()),
            runner,
            data_dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `POST /v1/crawl`.
    pub async fn crawl(&self, client: &str, offer: &str, urls: &[String]) -> Reply {
        let body = json!({"client_id": client, "offer_id": offer, "urls": urls});
        let r = self
            .client
            .post(self.url("/v1/crawl"))
            .json(&body)
            .send()
            .await
            .unwrap();
        reply(r).await
    }

    /// `GET /v1/offers/{offer}/crawl`.
    pub async fn crawl_status(&self, offer: &str) -> Reply {
        let r = self
            .client
            .get(self.url(&format!("/v1/offers/{offer}/crawl")))
            .send()
            .await
            .unwrap();
        reply(r).await
    }

    /// Waits until the offer's crawl is done; returns its status body.
    pub async fn settled(&self, offer: &str) -> Value {
        let started = Instant::now();
        loop {
            let status = self.crawl_status(offer).await;
            if status.status == 200 && status.json["state"] == "done" {
                return status.json;
            }
            assert!(
                started.elapsed() < SETTLE_DEADLINE,
                "crawl of {offer} not settled: {}",
                status.json
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Crawls and waits: the per-URL results, in the request's order.
    pub async fn crawl_settled(&self, client: &str, offer: &str, urls: &[String]) -> Vec<Value> {
        let accepted = self.crawl(client, offer, urls).await;
        assert_eq!(accepted.status, 202, "{}", accepted.json);
        let done = self.settled(offer).await;
        done["photos"].as_array().unwrap().clone()
    }

    /// `DELETE /v1/offers/{offer}`: its status.
    pub async fn delete_offer(&self, offer: &str) -> u16 {
        let r = self
            .client
            .delete(self.url(&format!("/v1/offers/{offer}")))
            .send()
            .await
            .unwrap();
        r.status().as_u16()
    }

    /// `GET /v1/offers/{offer}/photos`: the image ids in order.
    pub async fn photo_ids(&self, offer: &str) -> Vec<String> {
        let r = self
            .client
            .get(self.url(&format!("/v1/offers/{offer}/photos")))
            .send()
            .await
            .unwrap();
        let reply = reply(r).await;
        assert_eq!(reply.status, 200, "{}", reply.json);
        reply.photo_ids()
    }

    /// Takes every result message queued so far.
    pub async fn results(&self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let now = self.crawler.service().ports().clock.now();
            let batch = self
                .queue
                .receive(RESULTS_QUEUE, now, 100, Duration::from_secs(30))
                .await
                .unwrap();
            if batch.is_empty() {
                return out;
            }
            for d in batch {
                out.push(serde_json::from_str(&d.payload).unwrap());
                self.queue.ack(&d).await.unwrap();
            }
        }
    }

    pub fn counts(&self) -> CrawlCounts {
        self.crawler.counts()
    }

    /// Waits until `done` holds (checked every 20 ms), failing the test after the settle
    /// deadline with `what`.
    pub async fn until(&self, what: &str, done: impl Fn() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(
                started.elapsed() < SETTLE_DEADLINE,
                "{what}: not within {SETTLE_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How many crawls are filed as joiners of URL `hash` in each of its groups (the one of before
/// the groups first), counting up to `limit` a group.
pub async fn joiners_filed(
    documents: &dyn imgest_core::ports::Documents,
    hash: &imgest_core::domain::UrlHash,
    limit: usize,
    now: imgest_core::domain::Timestamp,
) -> Vec<usize> {
    let mut filed = Vec::new();
    for group in imgest_crawl::joiner_groups(hash) {
        let page = documents
            .list_members("waiter", &group, None, limit, now)
            .await
            .unwrap();
        filed.push(page.members.len());
    }
    filed
}
