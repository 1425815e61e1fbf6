//! One fetch task: a download attempt of a URL, then its outcome (a photo, a retry later, a
//! move to the next tier, or a failure) recorded and passed to the waiting crawls.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tracing::{Instrument, debug, info};

use super::downloads::ProcessedDownload;
use super::gather::Expected;
use super::learning::Admitted;
use super::records::{self, URL_KIND, UrlOutcome, UrlRecord, Validators, Waiter};
use super::{Crawler, Processing, grants};
use crate::messages::{DownloadedPhoto, FetchTask, PhotoError, PhotoStatus, ProcessMessage};
use imgest_core::budget::BodyHold;
use imgest_core::domain::{BlobKey, ContentHash, ImageId, ImageRecord, Timestamp};
use imgest_core::domain::{NormalizedUrl, UrlHash, loggable};
use imgest_core::imaging::PipelineError;
use imgest_core::ports::{KeyedLink, OutgoingMessage};
use imgest_core::telemetry::metrics::Stage;
use imgest_download::backoff::{recheck_after, retry_delay};
use imgest_download::{BodyDedup, Download, DownloadError, Downloaded, HostEvent, KnownImages};
use imgest_download::{FailureClass, FetchErrorKind, Observation};
use imgest_flows::FlowError;
use imgest_flows::Service;

/// When a photo processed by the downloading process is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// At once (the local pools: one task at a time).
    Now,
    /// With the rest of its batch (the fetch function).
    WithBatch,
}

/// A URL's record with its outcome, ready to write; see [`Crawler::record_outcome`].
pub(super) struct Finished {
    pub record: UrlRecord,
    pub status: PhotoStatus,
    pub waiters: Vec<Waiter>,
}

/// A URL's record as read before a download, and the version a write over it names.
#[derive(Clone)]
pub(super) struct UrlRead {
    pub record: UrlRecord,
    pub version: Option<u64>,
}

/// How a URL ended, before it is written down.
#[derive(Clone)]
pub(super) enum Settlement {
    Ok {
        image_id: ImageId,
        validators: Option<Validators>,
    },
    Failed {
        error: PhotoError,
    },
}

impl Crawler {
    /// Runs one fetch task (a tier queue's message). `Err` only for failures of imgest's own
    /// storage, which the queue's redelivery retries; every partner-side failure is handled
    /// here (retried later, moved to the next tier, or recorded as the URL's outcome).
    pub async fn run_fetch(&self, task: FetchTask) -> Result<(), FlowError> {
        let span = fetch_span(&task);
        let result = self
            .fetch_once(task, None, Settle::Now)
            .instrument(span)
            .await;
        self.flush_due_learning().await;
        result.map(drop)
    }

    /// A place in the rate limiter's shared request for `task`, taken before the batch's
    /// tasks run ([`run_announced_fetch`](Self::run_announced_fetch)): the batch then asks the
    /// limiter once per client, however its tasks straggle on the way.
    pub fn announce_fetch(&self, task: &FetchTask) -> Expected<'_> {
        self.grants.expect(task.client_id.as_str())
    }

    /// [`run_fetch`](Self::run_fetch) of one task of a batch, whose place was announced. A
    /// photo processed here (or answered 304, or named known by a hash header) is not settled
    /// yet: the batch settles its photos together
    /// ([`settle_downloads`](Self::settle_downloads): one crawl write per offer, not per photo).
    pub async fn run_batched_fetch(
        &self,
        task: FetchTask,
        place: Option<&mut Expected<'_>>,
    ) -> Result<Option<ProcessedDownload>, FlowError> {
        let span = fetch_span(&task);
        let result = self
            .fetch_once(task, place, Settle::WithBatch)
            .instrument(span)
            .await;
        self.flush_due_learning().await;
        result
    }

    async fn fetch_once(
        &self,
        task: FetchTask,
        mut place: Option<&mut Expected<'_>>,
        settle: Settle,
    ) -> Result<Option<ProcessedDownload>, FlowError> {
        let now = self.now();
        let records = self.service.ports().documents.as_ref();
        // The task's URL must be the one its hash names: the hash is computed again here from
        // the URL normalised, never taken from the message.
        self.check_url_hash(&task)?;
        // A peek: a task whose URL settled a moment ago may download again (as a task
        // delivered twice may), and the outcome's write names the version peeked, so a stale
        // peek costs a conflict and a consistent read, never a lost write. A peek that finds
        // no download running may have missed the lease written a moment ago: it is asked
        // again, consistently, before the task is dropped.
        let hash = task.url_hash.as_str();
        let (mut record, mut version) =
            records::peek::<UrlRecord>(records, URL_KIND, hash, now).await?;
        if record.as_ref().is_none_or(|r| r.fetch.is_none()) {
            (record, version) = records::read_versioned(records, URL_KIND, hash, now).await?;
        }
        let Some(record) = record else {
            return Ok(None);
        };
        let read = UrlRead {
            record: record.clone(),
            version,
        };
        let Some(lease) = &record.fetch else {
            // Settled already (a redelivered task): the crawls that joined may not all have been
            // told (the finisher stopped after recording the outcome).
            self.tell_joiners(&task.url_hash, None).await?;
            return Ok(None);
        };
        // The store, not the message, says which download runs and for whom: a task of
        // another lease (an earlier download's, delivered late, or one the store never gave)
        // does nothing, and the client whose budget and hosts apply is the lease's.
        if !task.lease.is_empty() && lease.id != task.lease {
            self.counters.tasks_not_leased.increment(1);
            info!(url_hash = %task.url_hash, "a fetch task not of the URL's running download: dropped");
            return Ok(None);
        }
        if lease.client_id != task.client_id {
            return Err(FlowError::Forbidden(format!(
                "a fetch task of URL hash {} names client {}, and its download runs for another",
                task.url_hash, task.client_id
            )));
        }
        let Ok(url) = url::Url::parse(&task.url) else {
            let error = PhotoError::new(FetchErrorKind::InvalidUrl, None, task.attempt);
            return self
                .finish_url(
                    &task.url_hash,
                    &task.lease,
                    Settlement::Failed { error },
                    Some(read),
                )
                .await
                .map(|()| None);
        };
        let host = super::host_of(&url).to_owned();

        let probe = match self.admit(&host).await? {
            Admitted::Go => false,
            Admitted::Probe => true,
            Admitted::Refused => {
                self.counters.circuit_refusals.increment(1);
                let error = PhotoError::new(FetchErrorKind::HostUnavailable, None, task.attempt);
                return self
                    .finish_url(
                        &task.url_hash,
                        &task.lease,
                        Settlement::Failed { error },
                        Some(read),
                    )
                    .await
                    .map(|()| None);
            }
        };
        if !probe && let Some(wait) = self.hosts.backoff(&host, now) {
            self.counters.deferrals.increment(1);
            return self.queue_task(&task, wait).await.map(|()| None);
        }
        let tier = task.tier.min(self.settings.last_tier());
        let deadline = self.settings.tiers[tier];
        // The body's first hold before anything else: a batch larger than the body pool starts
        // the downloads that fit and the rest as bodies finish, instead of reading them all.
        let Some(mut memory) = self.hold_body_memory(deadline, place.as_deref_mut()).await else {
            return self.defer_for_memory(&task).await.map(|()| None);
        };
        let downloader = self.downloader()?;
        // The host slot first: the permit is taken right before the request leaves, so the
        // limiter's clock and the host's agree to within a connect.
        let slot = match self.hosts.try_acquire(&host, now) {
            Some(slot) => slot,
            None => {
                // Waiting for the host may take a while: the batch's request does not wait too.
                if let Some(place) = place.as_deref_mut() {
                    place.give_up();
                }
                self.hosts.acquire(&host, now).await
            }
        };
        // The limiter records a grant when it is made and the request reaches the host a
        // moment later; counting over a window 1 % longer keeps that moment inside it.
        let limit = grants::Limit {
            limiter: self.service.ports().rate_limits.as_ref(),
            limit: self.settings.rpm_for(&task.client_id),
            window: self.settings.rate_window + self.settings.rate_window / 100,
        };
        let grant = self
            .grants
            .acquire(task.client_id.as_str(), limit, || self.now(), place)
            .await?;
        let now = self.now();
        if grant.granted == 0 {
            drop(slot);
            self.counters.deferrals.increment(1);
            let wait = grant
                .retry_at
                .map_or(Duration::from_millis(100), |at| at.since(now));
            // A little jitter so deferred tasks do not all come back at the same instant.
            let jitter = wait.mul_f64(fastrand::f64() * 0.1);
            return self.queue_task(&task, wait + jitter).await.map(|()| None);
        }

        let validator = record.validators.as_ref().map(Validators::validator);
        self.counters.download_attempts.increment(1);
        let hosts = self.settings.hosts_of(&task.client_id);
        let known = LiveImages(&self.service);
        let dedup = (!self.settings.hash_headers.is_empty()).then_some(BodyDedup {
            trusted: &self.settings.hash_headers,
            known: &known,
        });
        let run = Stage::Fetch(u8::try_from(tier).unwrap_or(u8::MAX)).start();
        let result = downloader
            .download_unless_known(
                &url,
                deadline,
                validator.as_ref(),
                hosts,
                dedup,
                Some(&mut memory),
            )
            .await;
        run.finish(result.is_ok());
        drop(slot);
        if result.as_ref().is_err_and(DownloadError::is_no_room) {
            // This process's memory, not the host: neither learns from it, and the task is
            // not an attempt.
            drop(memory);
            return self.defer_for_memory(&task).await.map(|()| None);
        }
        let attempts = task.attempt + 1;
        let event = match &result {
            Ok(_) => Some(HostEvent::Answered),
            Err(e) => host_event(e.kind, task.tier >= self.settings.last_tier()),
        };
        if let Some(event) = event {
            self.learn_host(&host, event);
        }
        if probe {
            self.probe_result(&host, event != Some(HostEvent::Failed))
                .await?;
        }
        match result {
            Ok(Downloaded::Body(download)) => {
                self.learn_tier(
                    &task.client_id,
                    &host,
                    Observation::Finished(download.elapsed),
                );
                self.counters.downloads_ok.increment(1);
                self.photo_downloaded(&task, download, attempts, settle, read)
                    .await
            }
            Ok(Downloaded::Known {
                image_id,
                validator,
                elapsed,
                ..
            }) => {
                self.learn_tier(&task.client_id, &host, Observation::Finished(elapsed));
                self.counters.bodies_skipped.increment(1);
                self.counters.photos_deduplicated.increment(1);
                let settlement = Settlement::Ok {
                    validators: Some(Validators::new(image_id.clone(), validator)),
                    image_id,
                };
                self.settled(&task, settlement, settle, read).await
            }
            Ok(Downloaded::NotModified { elapsed, .. }) => {
                self.learn_tier(&task.client_id, &host, Observation::Finished(elapsed));
                self.counters.not_modified.increment(1);
                match record.validators {
                    // Settled with the batch's other photos, as a new photo is: a revalidated
                    // offer's photos answer 304 together, and their crawl is written once.
                    Some(v) => {
                        let settlement = Settlement::Ok {
                            image_id: v.image_id.clone(),
                            validators: Some(v),
                        };
                        self.settled(&task, settlement, settle, read).await
                    }
                    // A 304 to a request without validators is the server's error.
                    None => {
                        let error = PhotoError::new(FetchErrorKind::HttpError, Some(304), attempts);
                        self.finish_url(
                            &task.url_hash,
                            &task.lease,
                            Settlement::Failed { error },
                            Some(read),
                        )
                        .await
                        .map(|()| None)
                    }
                }
            }
            Err(e) => self
                .download_failed(&task, &host, e, attempts, read)
                .await
                .map(|()| None),
        }
    }

    /// The first hold on body memory for a download (`IMGEST_FETCH_RESERVE`): at once if free;
    /// otherwise the batch's shared limiter request stops waiting for this task, which waits
    /// for room up to the tier's deadline. `None`: no room in that time.
    async fn hold_body_memory(
        &self,
        deadline: Duration,
        place: Option<&mut Expected<'_>>,
    ) -> Option<BodyHold> {
        let budget = self.service.budget();
        let first = self.settings.fetch_reserve;
        if let Ok(hold) = budget.body_hold(first, Duration::ZERO).await {
            return Some(hold);
        }
        if let Some(place) = place {
            place.give_up();
        }
        budget.body_hold(first, deadline).await.ok()
    }

    /// A task this process had no memory for goes back on its queue, a moment later, as it
    /// was (not an attempt; nothing learned of its host).
    async fn defer_for_memory(&self, task: &FetchTask) -> Result<(), FlowError> {
        self.counters.deferrals.increment(1);
        self.counters.memory_deferrals.increment(1);
        debug!(url_hash = %task.url_hash, "no memory for a body: the task goes back on its queue");
        let wait = Duration::from_millis(500).mul_f64(1.0 + fastrand::f64());
        self.queue_task(task, wait).await
    }

    async fn download_failed(
        &self,
        task: &FetchTask,
        host: &str,
        e: DownloadError,
        attempts: u32,
        read: UrlRead,
    ) -> Result<(), FlowError> {
        debug!(url_hash = %task.url_hash, kind = %e.kind, tier = task.tier, attempts, "download failed: {e}");
        if e.http_status.is_some() {
            self.learn_tier(&task.client_id, host, Observation::Finished(e.elapsed));
        }
        let error = PhotoError::new(e.kind, e.http_status, attempts);
        match e.kind.class() {
            FailureClass::Slow => {
                self.counters.timeouts.increment(1);
                self.learn_tier(
                    &task.client_id,
                    host,
                    Observation::TimedOut { tier: task.tier },
                );
                if task.tier < self.settings.last_tier() {
                    self.counters.tier_moves.increment(1);
                    let next = FetchTask {
                        tier: task.tier + 1,
                        attempt: attempts,
                        ..task.clone()
                    };
                    return self.queue_task(&next, Duration::ZERO).await;
                }
            }
            FailureClass::Transient if attempts < self.settings.max_attempts => {
                self.counters.retries.increment(1);
                let delay = retry_delay(
                    attempts,
                    self.settings.retry_base,
                    self.settings.retry_cap,
                    e.retry_after,
                    fastrand::f64(),
                );
                let next = FetchTask {
                    attempt: attempts,
                    ..task.clone()
                };
                return self.queue_task(&next, delay).await;
            }
            FailureClass::Transient | FailureClass::Permanent => {}
        }
        self.finish_url(
            &task.url_hash,
            &task.lease,
            Settlement::Failed { error },
            Some(read),
        )
        .await
    }

    async fn photo_downloaded(
        &self,
        task: &FetchTask,
        download: Download,
        attempts: u32,
        settle: Settle,
        read: UrlRead,
    ) -> Result<Option<ProcessedDownload>, FlowError> {
        let validators = Validators::new(download.image_id.clone(), download.validator.clone());
        let here = match self.processing {
            Processing::Inline => true,
            Processing::InlineWhenItFits => self.service.fits_in_memory(&download.bytes),
            Processing::Handoff => false,
        };
        if !here {
            return self
                .hand_off(task, download, validators, attempts, read)
                .await
                .map(|()| None);
        }
        self.counters.processed_here.increment(1);
        let settlement = self
            .process_inline(
                download.image_id,
                download.bytes,
                validators,
                attempts,
                first_link(&read),
            )
            .await?;
        self.settled(task, settlement, settle, read).await
    }

    /// A download's outcome, settled now or left for the batch to settle together
    /// ([`settle_downloads`](Self::settle_downloads): one crawl write per offer).
    async fn settled(
        &self,
        task: &FetchTask,
        settlement: Settlement,
        settle: Settle,
        read: UrlRead,
    ) -> Result<Option<ProcessedDownload>, FlowError> {
        match settle {
            Settle::Now => self
                .finish_url(&task.url_hash, &task.lease, settlement, Some(read))
                .await
                .map(|()| None),
            Settle::WithBatch => Ok(Some(ProcessedDownload::here(
                task.url_hash.clone(),
                task.lease.clone(),
                settlement,
                read,
            ))),
        }
    }

    pub(super) async fn process_inline(
        &self,
        image_id: ImageId,
        bytes: Bytes,
        validators: Validators,
        attempts: u32,
        first_link: Option<KeyedLink>,
    ) -> Result<Settlement, FlowError> {
        match self
            .service
            .store_fetched(image_id, bytes, first_link)
            .await
        {
            Ok(outcome) => {
                let counter = if outcome.deduplicated {
                    &self.counters.photos_deduplicated
                } else {
                    &self.counters.photos_new
                };
                counter.increment(1);
                Ok(Settlement::Ok {
                    image_id: outcome.record.id,
                    validators: Some(validators),
                })
            }
            Err(FlowError::Image(e)) => Ok(Settlement::Failed {
                error: PhotoError::new(image_error_kind(&e), None, attempts),
            }),
            Err(FlowError::EmptyBody) => Ok(Settlement::Failed {
                error: PhotoError::new(FetchErrorKind::UnsupportedFormat, None, attempts),
            }),
            Err(FlowError::HashCollision(_)) => Ok(Settlement::Failed {
                error: PhotoError::new(FetchErrorKind::HashCollision, None, attempts),
            }),
            Err(FlowError::Erased(_)) => Ok(Settlement::Failed {
                error: PhotoError::new(FetchErrorKind::Erased, None, attempts),
            }),
            Err(e) => Err(e),
        }
    }

    /// AWS: a known photo settles at once; a new one is stored under `fetched/{url_hash}` and
    /// sent to the process function, which calls [`process_download`](Self::process_download)
    /// and [`settle_downloads`](Self::settle_downloads).
    /// A redelivered task downloads again (SQS redelivers only what failed, and duplicates are
    /// rare): the photo is still processed and settled once.
    async fn hand_off(
        &self,
        task: &FetchTask,
        download: Download,
        validators: Validators,
        attempts: u32,
        read: UrlRead,
    ) -> Result<(), FlowError> {
        let ports = self.service.ports();
        // An expired record not yet collected goes through the process function, whose claim
        // revives it (without decoding), as an upload would.
        if let Some(record) = live_record(&self.service, &download.image_id).await? {
            // The body was read: the hit is checked against its SHA-256.
            let sha256 = ContentHash::of_bytes(&download.bytes);
            let settlement = match self.service.verify_hit(record, &sha256).await {
                Ok(_) => {
                    self.counters.photos_deduplicated.increment(1);
                    Settlement::Ok {
                        image_id: download.image_id,
                        validators: Some(validators),
                    }
                }
                Err(FlowError::HashCollision(_)) => Settlement::Failed {
                    error: PhotoError::new(FetchErrorKind::HashCollision, None, attempts),
                },
                Err(e) => return Err(e),
            };
            return self
                .finish_url(&task.url_hash, &task.lease, settlement, Some(read))
                .await;
        }
        ports
            .blobs
            .put(
                &download_key(&task.url_hash)?,
                download.bytes,
                "application/octet-stream",
            )
            .await?;
        let message = ProcessMessage {
            downloaded: DownloadedPhoto {
                url_hash: task.url_hash.clone(),
                attempts,
                lease: task.lease.clone(),
                validator: validators.validator(),
            },
        };
        let body = serde_json::to_string(&message)
            .map_err(|e| FlowError::Internal(format!("cannot encode a process message: {e}")))?;
        self.sends
            .send(
                ports.messages.as_ref(),
                super::PROCESS_QUEUE,
                OutgoingMessage::now(body),
            )
            .await?;
        self.counters.photos_new.increment(1);
        info!(url_hash = %task.url_hash, "download handed to the process function");
        Ok(())
    }

    /// Records the URL's outcome, ends its download, and settles every waiting crawl.
    ///
    /// One write: the crawl that started the download is settled first and removed in the
    /// write that records the outcome (a crash before the write leaves the download running,
    /// so the redelivered task settles it again; settling twice changes nothing). The crawls
    /// that joined are told after the write ([`tell_joiners`](Self::tell_joiners)): one that
    /// joins after it settles from the outcome itself, and a redelivered task tells those a
    /// crash left untold.
    ///
    /// `read` is the record as the caller read it (a peek will do: a write over a stale one
    /// conflicts and the next round reads consistently); `None` reads it here. `lease` is the
    /// download the outcome is of: a record no longer running it is left as it is.
    pub(super) async fn finish_url(
        &self,
        hash: &UrlHash,
        lease: &str,
        settlement: Settlement,
        mut read: Option<UrlRead>,
    ) -> Result<(), FlowError> {
        let records = self.service.ports().documents.as_ref();
        for round in 0..records::MAX_ROUNDS {
            let now = self.now();
            let (record, version) = match read.take() {
                Some(read) => (Some(read.record), read.version),
                None => {
                    records::read_to_write::<UrlRecord>(
                        records,
                        URL_KIND,
                        hash.as_str(),
                        now,
                        round > 0,
                    )
                    .await?
                }
            };
            // Only the download this outcome is of settles the URL: once it ended (another
            // finisher got in first) or another started, this outcome is no longer news.
            if !runs_lease(record.as_ref(), lease) {
                debug!(url_hash = %hash, "the URL's download ended or changed: this outcome settles nothing");
                return Ok(());
            }
            let finished = self.record_outcome(record, &settlement, now);
            self.settle_waiters(hash, &finished.waiters, &finished.status)
                .await?;
            if self.write_finished(hash, &finished, version, now).await? {
                self.tell_joiners(hash, Some(&finished.record)).await?;
                return Ok(());
            }
            imgest_core::retry::backoff(round).await;
        }
        Err(records::too_many_rounds(URL_KIND, hash.as_str()))
    }

    /// The URL's record with `settlement` recorded and its download ended, and the crawls that
    /// waited for it (taken off the record: they are told before it is written).
    pub(super) fn record_outcome(
        &self,
        record: Option<UrlRecord>,
        settlement: &Settlement,
        now: Timestamp,
    ) -> Finished {
        let mut record = record.unwrap_or_default();
        let outcome = match settlement {
            Settlement::Ok {
                image_id,
                validators,
            } => {
                record.permanent_failures = 0;
                record.transient_failures = 0;
                if validators.is_some() {
                    record.validators = validators.clone();
                }
                UrlOutcome::Ok {
                    image_id: image_id.clone(),
                    at: now,
                }
            }
            Settlement::Failed { error } => {
                let recheck_at = match error.kind.class() {
                    FailureClass::Permanent => {
                        record.permanent_failures += 1;
                        Some(recheck_after(
                            record.permanent_failures,
                            self.settings.recheck_base,
                        ))
                    }
                    // The host's circuit decides when its URLs are tried again.
                    _ if error.kind == FetchErrorKind::HostUnavailable => None,
                    // Through every retry, or past the last tier: not again at once either.
                    FailureClass::Transient | FailureClass::Slow => {
                        record.transient_failures += 1;
                        Some(recheck_after(
                            record.transient_failures,
                            self.settings.transient_recheck_base,
                        ))
                    }
                }
                .map(|after| now.plus(after));
                UrlOutcome::Failed {
                    error: error.clone().with_next_check(recheck_at),
                    at: now,
                    recheck_at,
                }
            }
        };
        let status = status_of(&outcome);
        record.last = Some(outcome);
        record.ended = record.fetch.take();
        let waiters = std::mem::take(&mut record.waiters);
        Finished {
            record,
            status,
            waiters,
        }
    }

    /// Writes a finished URL's record if it is still at `version`; `false` if it changed (the
    /// first crawl joined meanwhile, or another finisher got in first).
    pub(super) async fn write_finished(
        &self,
        hash: &UrlHash,
        finished: &Finished,
        version: Option<u64>,
        now: Timestamp,
    ) -> Result<bool, FlowError> {
        let records = self.service.ports().documents.as_ref();
        let expires_at = self.retention(now);
        let written = records::put(
            records,
            URL_KIND,
            hash.as_str(),
            &finished.record,
            version,
            expires_at,
            now,
        )
        .await?;
        if written && let PhotoStatus::Failed { error } = &finished.status {
            self.counters.urls_failed.increment(1);
            info!(url_hash = %hash, kind = %error.kind, attempts = error.attempts, "URL failed");
        }
        Ok(written)
    }

    /// Settles each waiting crawl with the URL's `status`.
    async fn settle_waiters(
        &self,
        hash: &UrlHash,
        waiters: &[Waiter],
        status: &PhotoStatus,
    ) -> Result<(), FlowError> {
        if waiters.is_empty() {
            return Ok(());
        }
        let outcome: HashMap<UrlHash, PhotoStatus> = [(hash.clone(), status.clone())].into();
        for waiter in waiters {
            self.settle(&waiter.offer_id, &waiter.crawl_id, &outcome)
                .await?;
        }
        Ok(())
    }
}

impl Crawler {
    /// Refuses a task whose URL, normalised again, does not hash to the task's `url_hash`.
    fn check_url_hash(&self, task: &FetchTask) -> Result<(), FlowError> {
        let hashes_to = NormalizedUrl::parse(&task.url, &self.settings.normalization)
            .is_ok_and(|url| url.hash() == task.url_hash);
        if hashes_to {
            return Ok(());
        }
        Err(FlowError::Forbidden(format!(
            "a fetch task names URL hash {}, and its URL does not hash to it",
            task.url_hash
        )))
    }
}

/// The change that will link a photo new to the store: the crawl that started its URL's
/// running download (first among its waiters, as the URL's record says, not a message), keyed
/// by its id as its settling links it.
pub(super) fn first_link(read: &UrlRead) -> Option<KeyedLink> {
    read.record.waiters.first().map(|w| KeyedLink {
        offer: w.offer_id.clone(),
        key: w.crawl_id.clone(),
    })
}

/// Whether `record` runs the download `lease`. A task queued before tasks named their lease
/// (the release before) names none: it runs whatever download its URL's record runs, its URL
/// and client still checked.
pub(super) fn runs_lease(record: Option<&UrlRecord>, lease: &str) -> bool {
    record
        .and_then(|r| r.fetch.as_ref())
        .is_some_and(|running| lease.is_empty() || running.id == lease)
}

/// Where a downloaded body waits for the process function.
pub(super) fn download_key(hash: &UrlHash) -> Result<BlobKey, FlowError> {
    BlobKey::fetched(hash.as_str())
        .ok_or_else(|| FlowError::Internal(format!("URL hash {hash} makes no storage key")))
}

pub(super) fn status_of(outcome: &UrlOutcome) -> PhotoStatus {
    match outcome {
        UrlOutcome::Ok { image_id, .. } => PhotoStatus::Ok {
            image_id: image_id.clone(),
        },
        UrlOutcome::Failed { error, .. } => PhotoStatus::Failed {
            error: error.clone(),
        },
    }
}

/// The fetch error kind of a body the pipeline refused.
fn image_error_kind(e: &PipelineError) -> FetchErrorKind {
    match e {
        PipelineError::TooLarge { .. } => FetchErrorKind::TooLarge,
        PipelineError::TooManyPixels { .. } | PipelineError::OverBudget { .. } => {
            FetchErrorKind::TooManyPixels
        }
        PipelineError::UnsupportedFormat(_) => FetchErrorKind::UnsupportedFormat,
        PipelineError::CorruptImage(_) | PipelineError::Watermark(_) => {
            FetchErrorKind::CorruptImage
        }
    }
}

/// What a failed download says of its host's health: `None` for a timeout below the last
/// tier (the host is slow for that tier, and the next takes it; it is not failing).
fn host_event(kind: FetchErrorKind, last_tier: bool) -> Option<HostEvent> {
    match kind {
        FetchErrorKind::RateLimited => Some(HostEvent::RateLimited),
        FetchErrorKind::ServerError | FetchErrorKind::Connection => Some(HostEvent::Failed),
        FetchErrorKind::Timeout if last_tier => Some(HostEvent::Failed),
        FetchErrorKind::Timeout => None,
        _ => Some(HostEvent::Answered),
    }
}

/// A download's logs name its URL (without its query) and the URL's hash, tier and attempt.
fn fetch_span(task: &FetchTask) -> tracing::Span {
    tracing::info_span!(
        "fetch",
        url = %loggable(&task.url),
        url_hash = %task.url_hash,
        tier = task.tier,
        attempt = task.attempt,
    )
}

/// Whether `id` has a live record, so a download of it settles without processing. Unknown
/// bytes, the common case, are seen missing by a peek; a record the peek sees is read again
/// consistently, since settling on it is not checked again.
async fn is_live(service: &Service, id: &ImageId) -> Result<bool, FlowError> {
    Ok(live_record(service, id).await?.is_some())
}

/// The live record of `id`, if any (a peek first: most new photos have none).
async fn live_record(service: &Service, id: &ImageId) -> Result<Option<ImageRecord>, FlowError> {
    let images = &service.ports().images;
    if images.peek(id).await?.is_none() {
        return Ok(None);
    }
    let now = service.ports().clock.now();
    Ok(images.get(id).await?.filter(|image| image.is_live(now)))
}

/// Images a body need not be read for: live records. A store error reads as unknown: the
/// body is downloaded as usual.
struct LiveImages<'a>(&'a Service);

#[async_trait::async_trait]
impl KnownImages for LiveImages<'_> {
    async fn is_known(&self, id: &ImageId) -> bool {
        is_live(self.0, id).await.unwrap_or(false)
    }
}
