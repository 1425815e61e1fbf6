//! `imgest stats`: what is stored, what is waiting and what fails, counted from the stores
//! themselves (a walk of the image index, of the files and of the offers' latest crawls, each
//! queue's counts and dead letters). It reads everything once, as the sweep does: for an
//! operator's look, not for a dashboard's polling.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use imgest_core::domain::{ORIGINALS_PREFIX, PUBLIC_PREFIX};
use imgest_core::ports::{QueueCounts, StoreError, Subscriber};
use imgest_flows::{FlowError, Service};

/// Records and files read per page.
const PAGE: usize = 1000;

/// How many of the hosts with the most failed photos [`Stats::top_failing_hosts`] lists.
pub const TOP_FAILING_HOSTS: usize = 10;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Ready records within their lifetime.
    pub images: u64,
    /// Of those, linked by no offer (kept for their orphan window).
    pub orphans: u64,
    /// Links from offers to images, in all.
    pub links: u64,
    /// Records of photos being processed (claims), and expired records GC has not reached.
    pub processing: u64,
    pub expired: u64,
    /// Variant files (`public/`) and originals: how many and how many bytes.
    pub variant_files: u64,
    pub variant_bytes: u64,
    pub original_files: u64,
    pub original_bytes: u64,
    /// Each queue's messages by state, and its dead letters.
    pub queues: BTreeMap<String, QueueStats>,
    /// Dead letters by the kind of their failure (where the queue keeps a reason: locally).
    pub dead_letters_by_kind: BTreeMap<String, u64>,
    /// Offers with a crawl on record (their latest), and the photos those crawls list.
    pub crawled_offers: u64,
    pub crawled_photos: u64,
    /// Photos that failed in their offer's latest crawl, by the kind of failure (`not_found`,
    /// `timeout`, … as in crawl results).
    pub crawl_failures_by_kind: BTreeMap<String, u64>,
    /// The hosts with the most photos failed in the offers' latest crawls: at most
    /// [`TOP_FAILING_HOSTS`], most failures first (ties by host), only hosts with a failure. A
    /// photo whose URL does not parse or names no host counts under no host.
    pub top_failing_hosts: Vec<HostFailures>,
    /// Crawl records whose body does not parse, left out of the crawl counts (each is logged).
    pub unreadable_crawl_records: u64,
    /// The results' subscribers (AWS: the results topic's subscriptions), each with the one
    /// client its filter takes; empty where results are not fanned out.
    pub results_subscribers: Vec<Subscriber>,
    /// Of those, the ones whose filter does not name exactly one client: they may read other
    /// clients' results (`imgest stats` warns of each).
    pub unfiltered_subscribers: u64,
}

/// A host's photos in the offers' latest crawls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostFailures {
    /// The host and, if the URL names one, its port (`photos.example.com`,
    /// `127.0.0.1:8080`): the host the crawler keeps its statistics and limits for.
    pub host: String,
    /// Its photos that failed, and all its photos (failed, downloaded or still pending).
    pub failed: u64,
    pub photos: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub ready: u64,
    pub delayed: u64,
    pub in_flight: u64,
    pub dead: u64,
}

impl From<QueueCounts> for QueueStats {
    fn from(c: QueueCounts) -> Self {
        Self {
            ready: c.ready,
            delayed: c.delayed,
            in_flight: c.in_flight,
            dead: c.dead,
        }
    }
}

/// The stats of `service`'s stores.
pub async fn stats(service: &Service) -> Result<Stats, FlowError> {
    let mut stats = Stats::default();
    let now = service.ports().clock.now();
    let mut cursor: Option<String> = None;
    loop {
        let page = service
            .ports()
            .images
            .scan(0, 1, cursor.as_deref(), PAGE)
            .await?;
        for record in &page.records {
            if record.is_live(now) {
                stats.images += 1;
                stats.links += u64::from(record.link_count);
                if record.link_count == 0 {
                    stats.orphans += 1;
                }
            } else if record.is_ready() {
                stats.expired += 1;
            } else {
                stats.processing += 1;
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    (stats.variant_files, stats.variant_bytes) = files_under(service, PUBLIC_PREFIX).await?;
    (stats.original_files, stats.original_bytes) = files_under(service, ORIGINALS_PREFIX).await?;
    for queue in service
        .dead_letter_queues()
        .into_iter()
        .chain([crate::RESULTS_QUEUE.to_owned()])
    {
        match service.ports().messages.counts(&queue).await {
            Ok(counts) => {
                stats.queues.insert(queue.clone(), counts.into());
            }
            Err(StoreError::NotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        }
        for (kind, n) in service.failure_kinds(&queue).await?.unwrap_or_default() {
            *stats.dead_letters_by_kind.entry(kind).or_default() += n;
        }
    }
    count_crawls(service, &mut stats).await?;
    let results = crate::RESULTS_QUEUE;
    stats.results_subscribers = match service.ports().messages.subscribers(results).await {
        Ok(subscribers) => subscribers.unwrap_or_default(),
        Err(StoreError::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    stats.unfiltered_subscribers = stats
        .results_subscribers
        .iter()
        .filter(|s| s.client.is_none())
        .count() as u64;
    Ok(stats)
}

/// The crawl counts of `stats`, from a walk of the offers' latest crawls. Memory grows
/// with the distinct hosts, not with the records.
async fn count_crawls(service: &Service, stats: &mut Stats) -> Result<(), FlowError> {
    let now = service.ports().clock.now();
    let (mut offers, mut photos) = (0u64, 0u64);
    let mut by_kind: BTreeMap<&'static str, u64> = BTreeMap::new();
    // Per host: (failed, photos).
    let mut hosts: HashMap<String, (u64, u64)> = HashMap::new();
    stats.unreadable_crawl_records =
        crate::for_each_latest_crawl(service.ports().documents.as_ref(), now, PAGE, |crawl| {
            offers += 1;
            for photo in crawl {
                photos += 1;
                if let Some(kind) = photo.failed {
                    *by_kind.entry(kind.as_str()).or_default() += 1;
                }
                let Some(host) = photo.host else { continue };
                let failed = u64::from(photo.failed.is_some());
                // Looked up before inserting: a host already counted costs no allocation.
                match hosts.get_mut(host) {
                    Some((f, p)) => (*f, *p) = (*f + failed, *p + 1),
                    None => {
                        hosts.insert(host.to_owned(), (failed, 1));
                    }
                }
            }
        })
        .await?;
    stats.crawled_offers = offers;
    stats.crawled_photos = photos;
    stats.crawl_failures_by_kind = by_kind
        .into_iter()
        .map(|(kind, n)| (kind.to_owned(), n))
        .collect();
    stats.top_failing_hosts = top_failing(hosts);
    Ok(())
}

/// How many files are under `prefix`, and their bytes.
async fn files_under(service: &Service, prefix: &str) -> Result<(u64, u64), FlowError> {
    let (mut files, mut bytes) = (0, 0);
    let mut after = None;
    loop {
        let page = service
            .ports()
            .blobs
            .list(prefix, after.as_ref(), PAGE)
            .await?;
        for blob in &page.blobs {
            files += 1;
            bytes += blob.size;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok((files, bytes)),
        }
    }
}

/// The hosts with failures, most first (ties by host), at most [`TOP_FAILING_HOSTS`].
fn top_failing(hosts: HashMap<String, (u64, u64)>) -> Vec<HostFailures> {
    let mut failing: Vec<HostFailures> = hosts
        .into_iter()
        .filter(|(_, (failed, _))| *failed > 0)
        .map(|(host, (failed, photos))| HostFailures {
            host,
            failed,
            photos,
        })
        .collect();
    failing.sort_by(|a, b| b.failed.cmp(&a.failed).then_with(|| a.host.cmp(&b.host)));
    failing.truncate(TOP_FAILING_HOSTS);
    failing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_failing_hosts_are_those_with_most_failures_ties_by_name_at_most_ten() {
        let mut hosts: HashMap<String, (u64, u64)> = (0..12)
            .map(|i| (format!("h{i:02}.example"), (1, 5)))
            .collect();
        hosts.insert("many.example".into(), (3, 3));
        hosts.insert("fine.example".into(), (0, 40));
        let top = top_failing(hosts);
        assert_eq!(top.len(), TOP_FAILING_HOSTS);
        assert_eq!(
            top[0],
            HostFailures {
                host: "many.example".into(),
                failed: 3,
                photos: 3
            }
        );
        let rest: Vec<&str> = top[1..].iter().map(|h| h.host.as_str()).collect();
        let expected: Vec<String> = (0..9).map(|i| format!("h{i:02}.example")).collect();
        assert_eq!(rest, expected);
        assert!(top_failing(HashMap::from([("fine".into(), (0, 1))])).is_empty());
    }
}
