//! Counters of the crawl flows: what the crawl benchmark and `imgest crawl` report.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

#[derive(Debug, Default)]
pub struct CrawlMetrics {
    pub offers_received: AtomicU64,
    pub offers_unchanged: AtomicU64,
    pub offers_settled: AtomicU64,
    pub urls_received: AtomicU64,
    /// Settled at intake from the URL's record (recent success or permanent failure).
    pub urls_from_cache: AtomicU64,
    /// Joined a download already running.
    pub urls_joined: AtomicU64,
    pub downloads_queued: AtomicU64,
    /// Requests sent to partner hosts.
    pub download_attempts: AtomicU64,
    pub downloads_ok: AtomicU64,
    pub not_modified: AtomicU64,
    pub timeouts: AtomicU64,
    pub retries: AtomicU64,
    pub tier_moves: AtomicU64,
    /// Tasks put back because the client's budget or the host's backoff said "later".
    pub deferrals: AtomicU64,
    pub urls_failed: AtomicU64,
    pub photos_new: AtomicU64,
    pub photos_deduplicated: AtomicU64,
    /// New photos processed by the process that downloaded them (not handed off).
    pub processed_here: AtomicU64,
    /// Bodies not read: a trusted hash header named a known image.
    pub bodies_skipped: AtomicU64,
    /// URLs settled as `host_unavailable` by an open circuit (at intake or before a download).
    pub circuit_refusals: AtomicU64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CrawlMetricsSnapshot {
    pub offers_received: u64,
    pub offers_unchanged: u64,
    pub offers_settled: u64,
    pub urls_received: u64,
    pub urls_from_cache: u64,
    pub urls_joined: u64,
    pub downloads_queued: u64,
    pub download_attempts: u64,
    pub downloads_ok: u64,
    pub not_modified: u64,
    pub timeouts: u64,
    pub retries: u64,
    pub tier_moves: u64,
    pub deferrals: u64,
    pub urls_failed: u64,
    pub photos_new: u64,
    pub photos_deduplicated: u64,
    pub processed_here: u64,
    pub bodies_skipped: u64,
    pub circuit_refusals: u64,
}

pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl CrawlMetrics {
    pub fn snapshot(&self) -> CrawlMetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CrawlMetricsSnapshot {
            offers_received: get(&self.offers_received),
            offers_unchanged: get(&self.offers_unchanged),
            offers_settled: get(&self.offers_settled),
            urls_received: get(&self.urls_received),
            urls_from_cache: get(&self.urls_from_cache),
            urls_joined: get(&self.urls_joined),
            downloads_queued: get(&self.downloads_queued),
            download_attempts: get(&self.download_attempts),
            downloads_ok: get(&self.downloads_ok),
            not_modified: get(&self.not_modified),
            timeouts: get(&self.timeouts),
            retries: get(&self.retries),
            tier_moves: get(&self.tier_moves),
            deferrals: get(&self.deferrals),
            urls_failed: get(&self.urls_failed),
            photos_new: get(&self.photos_new),
            photos_deduplicated: get(&self.photos_deduplicated),
            processed_here: get(&self.processed_here),
            bodies_skipped: get(&self.bodies_skipped),
            circuit_refusals: get(&self.circuit_refusals),
        }
    }
}
