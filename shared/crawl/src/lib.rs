//! Crawls: an offer's photo URLs in, the offer's photos (and a result message) out.
//!
//! - [`intake`](Crawler::intake): records the offer's crawl, settles every URL it can at once
//!   (downloaded within `IMGEST_URL_TTL`, or failed permanently and not due for a recheck),
//!   joins downloads already running (singleflight) and queues the rest in the tier that the
//!   host's statistics predict, paced at the client's rate.
//! - [`run_fetch`](Crawler::run_fetch): one download attempt of a queued URL, within the
//!   client's rate limit, the host's concurrency and its circuit, then a photo (processed here, or handed
//!   to the process function on AWS), a retry, a move to the next tier, or a failure.
//! - settling: a URL's outcome goes to every crawl waiting for it; when a crawl's last URL
//!   settles, the offer's photos are set (the successful ones, in the request's order) and the
//!   result is sent, there or (AWS: from the fetch and process functions) by the intake
//!   function, to which the crawl is handed on the settle queue ([`Finishing`]).
//!
//! Every step is idempotent: queues deliver at least once, and a crash anywhere is repaired
//! by the redelivery of the task that was running.
//!
//! A crate of its own over `imgest-flows` (with the downloader), so that the functions that
//! never crawl link no downloader and a change here rebuilds none of them. [`stats`] is here
//! too: it counts the offers' latest crawls beside the stores.

mod downloads;
pub mod feed;
mod fetch;
mod gather;
mod grants;
mod intake;
mod joiners;
mod learning;
pub mod messages;
mod pacer;
mod recent;
mod records;
mod seal;
mod sends;
mod settle;
pub mod stats;
pub mod webhooks;

use std::sync::{Arc, OnceLock};

use imgest_core::telemetry::counters::Tally;
use imgest_download::{DownloadConfig, Downloader};
use imgest_download::{HostLimits, TierChooser};
use imgest_flows::{CrawlCounters, CrawlCounts, FlowError, Service};
use imgest_settings::CrawlSettings;

pub use self::downloads::ProcessedDownload;
pub use self::gather::Expected;
pub use self::joiners::{JOINER_GROUPS, JOINERS_PER_PAGE, joiner_groups};
pub use self::learning::{FLUSH_EVERY, FRESH_FOR, Shared};
use self::pacer::Pacer;
pub use self::recent::REUSE as RECORD_REUSE;
pub(crate) use self::records::for_each_latest_crawl;
pub use imgest_flows::queues::{
    CLIENT_ATTRIBUTE, PROCESS_QUEUE, RESULTS_QUEUE, SETTLE_QUEUE, WEBHOOK_QUEUE, tier_queue,
};

/// Where a downloaded body that is not a known photo gets decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processing {
    /// In the downloading process (the local runner: one process does everything).
    Inline,
    /// In the downloading process when its memory budget can hold the photo's decode, else
    /// handed off (the fetch functions: a photo processed where it was downloaded costs one S3
    /// PUT, one GET, one message and one invocation less).
    InlineWhenItFits,
    /// Stored under `fetched/` and sent to the process function, whose memory holds what the
    /// fetch functions' does not.
    Handoff,
}

/// Where a crawl whose last URL settled is finished (its offer's photos linked, its result
/// sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finishing {
    /// Where it settled (the local runner, the intake and API functions).
    Here,
    /// Handed to [`SETTLE_QUEUE`] (the fetch and process functions: they parse hostile bytes,
    /// so their roles may not write offers nor send results).
    Handoff,
}

/// Who built the crawl record a finish starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Built {
    /// This very call, from the URL records it read.
    Here,
    /// The crawl's record as stored, which other functions settled.
    Elsewhere,
}

/// The crawl flows, with the state a process shares between its workers.
pub struct Crawler {
    service: Arc<Service>,
    settings: CrawlSettings,
    /// The downloader, built on first use: reading the system's TLS roots is most of a
    /// function's start, and the API, intake and process functions never download.
    downloader: OnceLock<Downloader>,
    fetch_config: DownloadConfig,
    chooser: TierChooser,
    hosts: Arc<HostLimits>,
    learning: learning::Learning,
    pacer: Pacer,
    grants: grants::GrantBatcher,
    sends: sends::SendBatcher,
    processing: Processing,
    finishing: Finishing,
    /// Whether a crawl settled elsewhere is checked against its seal before it is finished
    /// (the intake function: see [`seal`]).
    verifies_settled: bool,
    tally: Arc<Tally>,
    counters: CrawlCounters,
    webhooks: webhooks::Webhooks,
    /// URL records this process read a moment ago, standing in for peeks.
    recent: recent::RecentRecords,
}

impl Crawler {
    pub fn new(service: Arc<Service>, settings: CrawlSettings, processing: Processing) -> Self {
        let fetch_config = DownloadConfig {
            allow_private: settings.allow_private_networks,
            max_body: service.max_body(),
            max_redirects: 5,
            user_agent: settings.user_agent.clone(),
            ports: settings.fetch_ports.clone(),
        };
        let tally = Arc::new(Tally::default());
        Self {
            chooser: TierChooser::new(settings.tiers.clone()),
            hosts: HostLimits::new(settings.domain_concurrency, settings.circuit),
            learning: learning::Learning::default(),
            downloader: OnceLock::new(),
            fetch_config,
            service,
            settings,
            pacer: Pacer::default(),
            grants: grants::GrantBatcher::default(),
            sends: sends::SendBatcher::default(),
            processing,
            finishing: Finishing::Here,
            verifies_settled: false,
            counters: CrawlCounters::register(&tally),
            tally,
            webhooks: webhooks::Webhooks::default(),
            recent: recent::RecentRecords::default(),
        }
    }

    /// The downloader, built now if it was not yet. What downloads calls this at start (the
    /// fetch function, the local runner), so its start pays for reading the TLS roots and a
    /// broken TLS setup stops it there rather than at the first download.
    pub fn downloader(&self) -> Result<&Downloader, FlowError> {
        if let Some(fetcher) = self.downloader.get() {
            return Ok(fetcher);
        }
        let fetcher = Downloader::new(self.fetch_config.clone())
            .map_err(|e| FlowError::Internal(format!("cannot build the HTTP client: {e}")))?;
        // Two first downloads at once may both have built one: the first stored is kept.
        Ok(self.downloader.get_or_init(|| fetcher))
    }

    /// This crawler hands the crawls that settle here to [`SETTLE_QUEUE`] instead of finishing
    /// them.
    pub fn finishing_elsewhere(mut self) -> Self {
        self.finishing = Finishing::Handoff;
        self
    }

    /// This crawler finishes crawls that other functions settled only as far as the store
    /// bears them out: their seal, and their URLs' records ([`seal`]). The intake function's:
    /// the fetch and process functions, which decode partners' bytes, settle them.
    pub fn verifying_settled_crawls(mut self) -> Self {
        self.verifies_settled = true;
        self
    }

    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    pub fn settings(&self) -> &CrawlSettings {
        &self.settings
    }

    /// What this crawler did so far, read from its counters.
    pub fn counts(&self) -> CrawlCounts {
        CrawlCounts::read(&self.tally)
    }

    pub fn hosts(&self) -> &HostLimits {
        &self.hosts
    }
}

/// The host a URL's statistics and politeness limits are kept for: its host and explicit
/// port (two servers on one name but different ports are different hosts).
pub(crate) fn host_of(url: &url::Url) -> &str {
    &url[url::Position::BeforeHost..url::Position::AfterPort]
}

impl Crawler {
    /// [`records::update`] of a crawl or URL record, kept for `IMGEST_URL_TTL` and a margin.
    async fn update_record<T, R>(
        &self,
        kind: &str,
        key: &str,
        now: imgest_core::domain::Timestamp,
        decide: impl FnMut(Option<T>) -> Result<records::Change<T, R>, FlowError>,
    ) -> Result<R, FlowError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        let records = self.service.ports().documents.as_ref();
        records::update(records, kind, key, now, self.retention(now), decide).await
    }
}
