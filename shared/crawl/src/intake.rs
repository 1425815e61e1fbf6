//! Intake: a crawl request becomes the offer's crawl record, immediate settlements from the
//! URL records (and from hosts whose circuit is open), joins of running downloads and new
//! fetch tasks in the tier the shared statistics predict. An offer re-sent unchanged settles
//! from its crawl record; past the URL window it is crawled again behind that answer, in the
//! background ([`Told`]).

use std::collections::HashMap;
use std::time::Duration;

use md5::{Digest, Md5};

use super::joiners::AfterJoin;
use super::records::{
    self, CRAWL_KIND, Change, CrawlPhoto, CrawlRecord, FetchLease, Told, URL_KIND, UrlOutcome,
    UrlRecord, Waiter,
};
use super::settle::WebhookDelivery;
use super::{Built, Crawler};
use crate::messages::{CrawlRequest, CrawlState, FetchTask, PhotoError, PhotoStatus};
use imgest_core::domain::random::secure_hex;
use imgest_core::domain::{ClientId, OfferKey, Tenant, Timestamp};
use imgest_core::domain::{NormalizedUrl, UrlHash, redacted};
use imgest_core::ports::OutgoingMessage;
use imgest_core::telemetry::metrics::Stage;
use imgest_download::{Admission, FetchErrorKind, HostAllowlist};
use imgest_flows::FlowError;
#[cfg(doc)]
use imgest_settings::QueueSenders;
use tracing::Instrument;

/// A download's lease: others join it meanwhile; after it, the URL's next mention starts a new
/// download (only if the task that held it was lost: running tasks settle long before).
const FETCH_LEASE: Duration = Duration::from_secs(6 * 3600);
/// How long a settled crawl (and a URL's record) outlives `IMGEST_URL_TTL`.
pub(super) const RETENTION_MARGIN: Duration = Duration::from_secs(86_400);

/// A revalidation still pending this long after it started is taken as lost (its tasks
/// dead-lettered): the offer's next unchanged request starts another. Longer than any crawl
/// runs (a day-long `Retry-After` and its retries).
const REVALIDATION_LOST_AFTER: Duration = Duration::from_secs(2 * 86_400);

/// What an offer re-sent with its last crawl's URLs settles from.
enum Unchanged {
    /// Nothing: it is crawled as new (the last crawl failed a photo, or is still running).
    No,
    /// The last crawl's result, told again.
    Settled,
    /// The last crawl's result (this), told again, and the offer crawled again in the
    /// background: past the URL window a photo may have been replaced at its URL.
    Revalidate(Told),
}

/// What joining a URL gave.
enum Joined {
    /// The URL's record settles it now.
    Settled(PhotoStatus),
    /// A download is running (or was just queued); the crawl waits for it.
    Waiting,
}

impl Crawler {
    /// Accepts an offer's URLs (the `POST /v1/crawl` body) as a new crawl of the offer in
    /// `tenant`'s namespace. Returns the crawl's state right after intake: `Done` when nothing
    /// had to be downloaded.
    pub async fn intake(
        &self,
        tenant: &Tenant,
        request: CrawlRequest,
    ) -> Result<CrawlState, FlowError> {
        self.intake_as(tenant, request, secure_hex::<8>()).await
    }

    /// [`intake`](Self::intake) of a request from a trusted source (the operator's
    /// `imgest crawl`): its `client_id` is believed.
    pub async fn intake_trusted(&self, request: CrawlRequest) -> Result<CrawlState, FlowError> {
        let tenant = self.trusted_tenant(&request.client_id);
        self.intake(&tenant, request).await
    }

    /// A crawl request from the intake queue's message `message_id`, sent by `sender` (the
    /// principal SQS names, see [`QueueSenders::sender_of`]). Its `client_id` is believed
    /// only when `IMGEST_INTAKE_SENDERS` lets that sender act for that client; otherwise the
    /// request is refused as [`FlowError::Forbidden`] and counted, with nothing read or
    /// written.
    ///
    /// The crawl id comes from the message id, so the message delivered again (its intake
    /// failed or was cut short) is the same crawl, and it sends again the downloads it
    /// started: their leases are written before their tasks are sent, and a task that was
    /// never sent would otherwise leave the URL waiting out its lease.
    pub async fn intake_message(
        &self,
        request: CrawlRequest,
        message_id: &str,
        sender: Option<&str>,
    ) -> Result<CrawlState, FlowError> {
        let senders = &self.settings.senders;
        let Some(sender) = sender.filter(|s| senders.may_act_for(s, &request.client_id)) else {
            self.counters.crawls_forbidden.increment(1);
            return Err(FlowError::Forbidden(format!(
                "sender {} may not send crawl requests for client {} (IMGEST_INTAKE_SENDERS)",
                sender.unwrap_or("(none named)"),
                request.client_id
            )));
        };
        let digest = Md5::digest(message_id.as_bytes());
        let crawl_id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let tenant = self.trusted_tenant(&request.client_id);
        tracing::debug!(sender, "crawl request from a listed sender");
        self.intake_as(&tenant, request, crawl_id).await
    }

    /// The namespace of a trusted request's offer: its client's when identity is on, the
    /// shared one in open mode (the same namespace the API uses).
    pub fn trusted_tenant(&self, client: &ClientId) -> Tenant {
        if self.service.policy().per_client_offers {
            Tenant::Client(client.clone())
        } else {
            Tenant::Shared
        }
    }

    /// One crawl request taken in: timed as the intake stage, and logged with its client,
    /// offer and crawl.
    async fn intake_as(
        &self,
        tenant: &Tenant,
        request: CrawlRequest,
        crawl_id: String,
    ) -> Result<CrawlState, FlowError> {
        let span = tracing::info_span!(
            "crawl",
            client_id = %request.client_id,
            offer_id = %request.offer_id,
            crawl_id = %crawl_id,
        );
        Stage::Intake
            .time_async(self.intake_unrecorded(tenant, request, crawl_id))
            .instrument(span)
            .await
    }

    async fn intake_unrecorded(
        &self,
        tenant: &Tenant,
        request: CrawlRequest,
        crawl_id: String,
    ) -> Result<CrawlState, FlowError> {
        let limit = self.service.policy().max_photos_per_offer;
        if request.urls.len() > limit {
            return Err(FlowError::TooManyPhotos {
                count: request.urls.len(),
                limit,
            });
        }
        self.counters.offers_received.increment(1);
        self.counters
            .urls_received
            .increment(request.urls.len() as u64);
        let now = self.now();
        let hosts = self.settings.hosts_of(&request.client_id);
        let parsed: Vec<(String, Result<NormalizedUrl, FetchErrorKind>)> = request
            .urls
            .iter()
            .map(|raw| {
                let url = NormalizedUrl::parse(raw, &self.settings.normalization)
                    .map_err(|_| FetchErrorKind::InvalidUrl)
                    .and_then(|url| self.egress_check(&url, hosts).map(|()| url));
                // Stored and echoed without credentials, within the length cap.
                (redacted(raw), url)
            })
            .collect();
        let fingerprint = fingerprint(&parsed);
        let records = self.service.ports().documents.as_ref();
        let offer = OfferKey::new(tenant.clone(), request.offer_id.clone());
        let offer_key = offer.to_string();
        let offer_key = offer_key.as_str();

        // Peeks (eventually consistent reads) are enough here: an outcome a second old is as
        // good as one read a second earlier, and the crawl's write below names the version
        // peeked, so a stale peek only costs a conflict and a consistent read.
        let (previous, previous_version) =
            records::peek::<CrawlRecord>(records, CRAWL_KIND, offer_key, now).await?;
        let mut told = None;
        if let Some(previous) = previous.filter(|p| p.fingerprint == fingerprint) {
            let unchanged = self.unchanged(&previous, &crawl_id, now);
            if let Unchanged::Settled | Unchanged::Revalidate(_) = unchanged {
                // The common case for offers that are re-sent whole: the previous crawl's
                // result again (the same crawl id, and when it settled), nothing downloaded.
                self.counters.offers_unchanged.increment(1);
                let previous = previous.as_told();
                let settled_at = previous.settled_at.unwrap_or(now);
                self.send_result(
                    &offer,
                    &previous,
                    settled_at,
                    WebhookDelivery::AlreadyQueued,
                )
                .await?;
            }
            match unchanged {
                Unchanged::No => {}
                Unchanged::Settled => return Ok(CrawlState::Done),
                Unchanged::Revalidate(was_told) => {
                    self.counters.offers_revalidated.increment(1);
                    told = Some(was_told);
                }
            }
        }
        let background = told.is_some();

        // Offers whose URLs are all known settle here, in the crawl's first write.
        let known = self.settled_by_records(&parsed, now).await?;
        let crawl = CrawlRecord {
            crawl_id,
            client_id: request.client_id.clone(),
            fingerprint,
            state: CrawlState::Pending,
            started_at: now,
            settled_at: None,
            told,
            photos: parsed
                .iter()
                .map(|(shown, url)| CrawlPhoto {
                    url: shown.clone(),
                    url_hash: url.as_ref().ok().map(NormalizedUrl::hash),
                    status: match url {
                        Ok(url) => known
                            .as_ref()
                            .and_then(|k| k.get(&url.hash()).cloned())
                            .unwrap_or(PhotoStatus::Pending),
                        Err(kind) => PhotoStatus::Failed {
                            error: PhotoError::new(*kind, None, 0),
                        },
                    },
                })
                .collect(),
        };
        let crawl_id = crawl.crawl_id.clone();
        // A crawl that waits for downloads is sealed before it is written: whoever settles it,
        // what it asked for is intake's (see `seal`).
        if known.is_none() {
            self.write_seal(&offer, &crawl, now).await?;
        }
        // A newer crawl of the offer replaces a running one: its URLs' outcomes still arrive,
        // but only for the crawl id they were asked for.
        let expires_at = self.retention(now);
        let written = records::put(
            records,
            CRAWL_KIND,
            offer_key,
            &crawl,
            previous_version,
            expires_at,
            now,
        )
        .await?;
        if !written {
            self.update_record(CRAWL_KIND, offer_key, now, |_: Option<CrawlRecord>| {
                Ok(Change::Write(crawl.clone(), ()))
            })
            .await?;
        }
        if let Some(known) = &known {
            self.counters.urls_from_cache.increment(known.len() as u64);
            self.finish_crawl(&offer, crawl, Built::Here).await?;
            return Ok(CrawlState::Done);
        }
        // A revalidation's partner has its result already; the crawl goes on behind it.
        let state_told = |state| if background { CrawlState::Done } else { state };

        let waiter = Waiter {
            offer_id: offer.clone(),
            crawl_id: crawl_id.clone(),
        };
        let mut seen = std::collections::HashSet::new();
        let urls: Vec<&NormalizedUrl> = parsed
            .iter()
            .filter_map(|(_, url)| url.as_ref().ok())
            .filter(|url| seen.insert(url.hash()))
            .collect();
        // Together: the fetch tasks of the URLs that start a download go out in one send. Every
        // join runs to its end even if another fails: one may be gathering the send that other
        // intakes' tasks wait for.
        let joined = futures_util::future::join_all(
            urls.iter()
                .map(|url| self.join(url, &request.client_id, &waiter, background, now)),
        )
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        let mut settled = HashMap::new();
        for (url, joined) in urls.iter().zip(joined) {
            if let Joined::Settled(status) = joined {
                self.counters.urls_from_cache.increment(1);
                settled.insert(url.hash(), status);
            }
        }
        self.settle(&offer, &crawl_id, &settled)
            .await
            .map(state_told)
    }

    /// Whether the downloader may go to `url` at all for this client: its port, and the
    /// client's host allowlist. A URL that may not is settled at intake, never queued (the
    /// fetcher checks every redirect hop the same way).
    fn egress_check(
        &self,
        url: &NormalizedUrl,
        hosts: Option<&HostAllowlist>,
    ) -> Result<(), FetchErrorKind> {
        let fetch = url.fetch_url();
        let port = fetch.port_or_known_default().unwrap_or(0);
        if !self.settings.fetch_ports.allows(port) {
            return Err(FetchErrorKind::ForbiddenAddress);
        }
        match (hosts, fetch.host_str()) {
            (Some(hosts), Some(host)) if !hosts.allows(host) => Err(FetchErrorKind::ForbiddenHost),
            _ => Ok(()),
        }
    }

    /// What a request that lists the offer's URLs as its last crawl did (`previous`) may
    /// settle from. The offer's photos are still linked: changing or deleting them through the
    /// API forgets the crawl's fingerprint
    /// ([`forget_settled_crawl`](Crawler::forget_settled_crawl)), and linked images are never
    /// collected.
    fn unchanged(&self, previous: &CrawlRecord, crawl_id: &str, now: Timestamp) -> Unchanged {
        if let Some(told) = &previous.told {
            // A revalidation runs: its own request delivered again goes on with it (it sends
            // again the downloads it started); another is told the same, unless the
            // revalidation looks lost.
            return if previous.crawl_id == crawl_id
                || now >= previous.started_at.plus(REVALIDATION_LOST_AFTER)
            {
                Unchanged::Revalidate(told.clone())
            } else {
                Unchanged::Settled
            };
        }
        let (CrawlState::Done, Some(images), Some(settled_at)) =
            (previous.state, previous.images(), previous.settled_at)
        else {
            return Unchanged::No;
        };
        if now < settled_at.plus(self.reuse_window()) {
            return Unchanged::Settled;
        }
        Unchanged::Revalidate(Told {
            crawl_id: previous.crawl_id.clone(),
            settled_at,
            images,
        })
    }

    /// Every valid URL's status, when their records settle them all now (read only: nothing
    /// to join or start); `None` at the first that does not.
    async fn settled_by_records(
        &self,
        parsed: &[(String, Result<NormalizedUrl, FetchErrorKind>)],
        now: Timestamp,
    ) -> Result<Option<HashMap<UrlHash, PhotoStatus>>, FlowError> {
        let mut known = HashMap::new();
        for url in parsed.iter().filter_map(|(_, url)| url.as_ref().ok()) {
            let hash = url.hash();
            if known.contains_key(&hash) {
                continue;
            }
            let (record, _) = self.read_url(&hash, now, false).await?;
            match record.and_then(|r| settled_status(&r, now, self.reuse_window())) {
                Some(status) => known.insert(hash, status),
                None => return Ok(None),
            };
        }
        Ok(Some(known))
    }

    /// Settles `url` from its record, joins its running download, or starts one.
    ///
    /// Joining a running download writes nothing to the URL's record: the crawl is filed apart
    /// ([`file_joiner`](Self::file_joiner)), so that a popular URL's joins are one small write
    /// each rather than rewrites of one record that grows with them.
    async fn join(
        &self,
        url: &NormalizedUrl,
        client: &ClientId,
        waiter: &Waiter,
        background: bool,
        now: Timestamp,
    ) -> Result<Joined, FlowError> {
        let url_ttl = self.reuse_window();
        let hash = url.hash();
        // A host whose circuit is open gets no new downloads: its URLs settle at once.
        let host = super::host_of(url.fetch_url());
        self.refresh_host(host).await;
        let host_down = self.hosts.admission(host, now) == Admission::Refused;
        // The first read is a peek, as in `records::update`: a write over a stale one conflicts
        // and the next round reads consistently (a join over a stale one finds the download
        // ended when it reads the record again).
        let mut consistent = false;
        for round in 0..records::MAX_ROUNDS {
            let (record, version) = self.read_url(&hash, now, consistent).await?;
            consistent = true;
            let mut record = record.unwrap_or_default();
            if let Some(status) = settled_status(&record, now, url_ttl) {
                return Ok(Joined::Settled(status));
            }
            let running = record.fetch.clone().filter(|lease| now < lease.until);
            match running {
                None if host_down => {
                    self.counters.circuit_refusals.increment(1);
                    let error = PhotoError::new(FetchErrorKind::HostUnavailable, None, 0);
                    return Ok(Joined::Settled(PhotoStatus::Failed { error }));
                }
                None => {
                    let lease = FetchLease {
                        client_id: client.clone(),
                        until: now.plus(FETCH_LEASE),
                        id: secure_hex::<8>(),
                        joined: Some(false),
                    };
                    let lease_id = lease.id.clone();
                    record.fetch = Some(lease);
                    // Crawls left by a download whose task was lost (its lease ran out) wait for
                    // this one with the crawl that starts it.
                    if !record.waiters.contains(waiter) {
                        record.waiters.push(waiter.clone());
                    }
                    if self.put_url(&hash, &record, version, now).await? {
                        self.queue_first_download(url, client, &lease_id, background, now)
                            .await?;
                        return Ok(Joined::Waiting);
                    }
                }
                // This crawl started it, and its intake runs again (it did not finish): the
                // task it meant to send may never have left. Sending it again costs at most a
                // second download; not sending it may leave the URL waiting out the lease.
                Some(lease) if record.waiters.contains(waiter) => {
                    self.queue_first_download(url, &lease.client_id, &lease.id, background, now)
                        .await?;
                    return Ok(Joined::Waiting);
                }
                Some(_) => match self
                    .file_joiner(&hash, &record, version, waiter, now)
                    .await?
                {
                    AfterJoin::Waiting => {
                        self.counters.urls_joined.increment(1);
                        return Ok(Joined::Waiting);
                    }
                    AfterJoin::Settled(status) => return Ok(Joined::Settled(status)),
                    AfterJoin::Ended => {}
                },
            }
            imgest_core::retry::backoff(round).await;
        }
        Err(records::too_many_rounds(URL_KIND, hash.as_str()))
    }

    /// A URL's record and the version a write over it must name: consistently read if
    /// `consistent`, else as this process read it less than a second ago
    /// ([`recent`](super::recent)) or a peek. Kept for the next peek either way.
    pub(super) async fn read_url(
        &self,
        hash: &UrlHash,
        now: Timestamp,
        consistent: bool,
    ) -> Result<(Option<UrlRecord>, Option<u64>), FlowError> {
        let records = self.service.ports().documents.as_ref();
        if !consistent && let Some(stored) = self.recent.get(hash) {
            return records::versioned(URL_KIND, hash.as_str(), stored);
        }
        let stored = if consistent {
            records.get_document(URL_KIND, hash.as_str(), now).await?
        } else {
            records.peek_document(URL_KIND, hash.as_str(), now).await?
        };
        self.recent.keep(hash, stored.clone());
        records::versioned(URL_KIND, hash.as_str(), stored)
    }

    /// Writes a URL's record if it is still at `version`; `false` if another writer got in first.
    pub(super) async fn put_url(
        &self,
        hash: &UrlHash,
        record: &UrlRecord,
        version: Option<u64>,
        now: Timestamp,
    ) -> Result<bool, FlowError> {
        let records = self.service.ports().documents.as_ref();
        // Whatever came of it, the record kept is no longer the latest.
        self.recent.forget(hash);
        records::put(
            records,
            URL_KIND,
            hash.as_str(),
            record,
            version,
            self.retention(now),
            now,
        )
        .await
    }

    /// Queues a URL's first download in the tier its host's statistics predict, at the
    /// client's next paced slot; a `background` one (a revalidation's) no sooner than
    /// `IMGEST_REVALIDATION_DELAY`, behind the downloads of new photos.
    async fn queue_first_download(
        &self,
        url: &NormalizedUrl,
        client: &ClientId,
        lease: &str,
        background: bool,
        now: Timestamp,
    ) -> Result<(), FlowError> {
        let run = Stage::ChooseTier.start();
        let host = super::host_of(url.fetch_url());
        let tier = if self.settings.tier_routing {
            self.start_tier(client, host).await
        } else {
            0
        };
        run.finish(true);
        let delay = if background {
            // Off the pacer: a revalidation takes no slot from the client's new downloads (the
            // rate limiter still counts it when it runs); revalidations re-sent together spread
            // over the delay's second half (within SQS's delay at the default: no hop).
            let after = self.settings.revalidation_delay;
            after.mul_f64(0.5 + fastrand::f64() / 2.0)
        } else {
            let rpm = self.settings.rpm_for(client);
            let at = self.pacer.slot(client, rpm, self.settings.rate_window, now);
            at.since(now)
        };
        let task = FetchTask {
            url_hash: url.hash(),
            url: url.fetch_url().to_string(),
            client_id: client.clone(),
            tier,
            attempt: 0,
            lease: lease.to_owned(),
        };
        self.counters.downloads_queued.increment(1);
        self.queue_task(&task, delay).await
    }

    pub(super) async fn queue_task(
        &self,
        task: &FetchTask,
        delay: Duration,
    ) -> Result<(), FlowError> {
        let body = serde_json::to_string(task)
            .map_err(|e| FlowError::Internal(format!("cannot encode a fetch task: {e}")))?;
        self.sends
            .send(
                self.service.ports().messages.as_ref(),
                &super::tier_queue(task.tier),
                OutgoingMessage::delayed(body, delay),
            )
            .await?;
        Ok(())
    }

    /// How long a URL's photo is reused without a download: `IMGEST_URL_TTL`, but never
    /// longer than `IMGEST_ORPHAN_TTL`. A download (or dedup hit) keeps the image at least that
    /// long, so the reused image always still exists.
    fn reuse_window(&self) -> Duration {
        self.settings.url_ttl.min(self.service.policy().orphan_ttl)
    }

    pub(super) fn now(&self) -> Timestamp {
        self.service.ports().clock.now()
    }

    pub(super) fn retention(&self, now: Timestamp) -> Timestamp {
        now.plus(self.settings.url_ttl).plus(RETENTION_MARGIN)
    }
}

/// What a URL's record settles now: ok within the reuse window, or failed (permanently, or
/// transiently through every retry) and not yet due for a recheck.
fn settled_status(record: &UrlRecord, now: Timestamp, url_ttl: Duration) -> Option<PhotoStatus> {
    match &record.last {
        Some(UrlOutcome::Ok { image_id, at }) if now < at.plus(url_ttl) => Some(PhotoStatus::Ok {
            image_id: image_id.clone(),
        }),
        Some(UrlOutcome::Failed {
            error,
            recheck_at: Some(recheck_at),
            ..
        }) if now < *recheck_at => Some(PhotoStatus::Failed {
            error: error.clone(),
        }),
        _ => None,
    }
}

fn fingerprint(parsed: &[(String, Result<NormalizedUrl, FetchErrorKind>)]) -> String {
    let mut md5 = Md5::new();
    for (shown, url) in parsed {
        match url {
            Ok(url) => md5.update(url.key().as_bytes()),
            Err(_) => md5.update(shown.as_bytes()),
        }
        md5.update(b"\n");
    }
    hex::encode(md5.finalize())
}
