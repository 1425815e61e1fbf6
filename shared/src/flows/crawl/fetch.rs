//! One fetch task: a download attempt of a URL, then its outcome (a photo, a retry later, a
//! move to the next tier, or a failure) recorded and passed to the waiting crawls.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tracing::{debug, info};

use super::metrics::add;
use super::records::{
    self, Change, HANDOFF_KIND, HandoffRecord, URL_KIND, UrlOutcome, UrlRecord, Validators, Waiter,
};
use super::{Crawler, Processing, grants};
use crate::domain::{BlobKey, ImageId, ImageState, UploadId};
use crate::feed::backoff::{recheck_after, retry_delay};
use crate::feed::messages::{FetchTask, PhotoError, PhotoStatus};
use crate::feed::{Download, FetchError, Fetched, Validator};
use crate::feed::{FailureClass, FeedErrorKind, Observation, UrlHash};
use crate::flows::FlowError;
use crate::pipeline::PipelineError;
use crate::ports::{UploadRecord, UploadState};

/// How long a handed-off body's record is kept for the process function.
const HANDOFF_TTL: Duration = Duration::from_secs(86_400);

/// How a URL ended, before it is written down.
enum Settlement {
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
        let now = self.now();
        let records = self.service.ports().records.as_ref();
        let Some(record) =
            records::read::<UrlRecord>(records, URL_KIND, task.url_hash.as_str(), now).await?
        else {
            return Ok(());
        };
        if record.fetch.as_ref().is_some_and(|lease| lease.handed_off) {
            // Downloaded already; the process function settles it.
            return Ok(());
        }
        if record.fetch.is_none() {
            // Settled already (a redelivered task): make sure every waiter heard.
            if let Some(last) = record.last.clone() {
                self.notify_waiters(&task.url_hash, &record.waiters, &status_of(&last))
                    .await?;
            }
            return Ok(());
        }
        let Ok(url) = url::Url::parse(&task.url) else {
            let error = PhotoError::new(FeedErrorKind::InvalidUrl, None, task.attempt);
            return self
                .finish_url(&task.url_hash, Settlement::Failed { error })
                .await;
        };
        let domain = super::host_of(&url).to_owned();

        if let Some(wait) = self.hosts.backoff(&domain, now) {
            add(&self.metrics.deferrals, 1);
            return self.queue_task(&task, wait).await;
        }
        // The host slot first: the permit is taken right before the request leaves, so the
        // limiter's clock and the host's agree to within a connect.
        let slot = self.hosts.acquire(&domain, now).await;
        // The limiter records a grant when it is made and the request reaches the host a
        // moment later; counting over a window 1 % longer keeps that moment inside it.
        let limit = grants::Limit {
            limiter: self.service.ports().rate_limits.as_ref(),
            limit: self.settings.rpm_for(&task.client_id),
            window: self.settings.rate_window + self.settings.rate_window / 100,
        };
        let grant = self
            .grants
            .acquire(task.client_id.as_str(), limit, || self.now())
            .await?;
        let now = self.now();
        if grant.granted == 0 {
            drop(slot);
            add(&self.metrics.deferrals, 1);
            let wait = grant
                .retry_at
                .map_or(Duration::from_millis(100), |at| at.since(now));
            // A little jitter so deferred tasks do not all come back at the same instant.
            let jitter = wait.mul_f64(fastrand::f64() * 0.1);
            return self.queue_task(&task, wait + jitter).await;
        }

        let tier = task.tier.min(self.settings.last_tier());
        let deadline = self.settings.tiers[tier];
        let validator = record.validators.as_ref().map(|v| Validator {
            etag: v.etag.clone(),
            last_modified: v.last_modified.clone(),
        });
        add(&self.metrics.download_attempts, 1);
        let result = self.fetcher.fetch(&url, deadline, validator.as_ref()).await;
        drop(slot);
        let now = self.now();
        let attempts = task.attempt + 1;
        match result {
            Ok(Fetched::Body(download)) => {
                self.hosts.on_success(&domain, now);
                self.router.observe(
                    &task.client_id,
                    &domain,
                    Observation::Finished(download.elapsed),
                );
                add(&self.metrics.downloads_ok, 1);
                self.photo_downloaded(&task, download, attempts).await
            }
            Ok(Fetched::NotModified { elapsed, .. }) => {
                self.hosts.on_success(&domain, now);
                self.router
                    .observe(&task.client_id, &domain, Observation::Finished(elapsed));
                add(&self.metrics.not_modified, 1);
                match record.validators {
                    Some(v) => {
                        let settlement = Settlement::Ok {
                            image_id: v.image_id.clone(),
                            validators: Some(v),
                        };
                        self.finish_url(&task.url_hash, settlement).await
                    }
                    // A 304 to a request without validators is the server's error.
                    None => {
                        let error = PhotoError::new(FeedErrorKind::HttpError, Some(304), attempts);
                        self.finish_url(&task.url_hash, Settlement::Failed { error })
                            .await
                    }
                }
            }
            Err(e) => self.download_failed(&task, &domain, e, attempts).await,
        }
    }

    async fn download_failed(
        &self,
        task: &FetchTask,
        domain: &str,
        e: FetchError,
        attempts: u32,
    ) -> Result<(), FlowError> {
        let now = self.now();
        debug!(url_hash = %task.url_hash, kind = %e.kind, tier = task.tier, attempts, "download failed: {e}");
        if e.http_status.is_some() {
            self.router
                .observe(&task.client_id, domain, Observation::Finished(e.elapsed));
        }
        let last_tier = task.tier >= self.settings.last_tier();
        match e.kind {
            FeedErrorKind::RateLimited => self.hosts.on_rate_limited(domain, now),
            FeedErrorKind::ServerError | FeedErrorKind::Connection => {
                self.hosts.on_failure(domain, now)
            }
            // A timeout below the last tier says the host is slow for that tier (the next
            // one takes it), not that it is failing.
            FeedErrorKind::Timeout if last_tier => self.hosts.on_failure(domain, now),
            FeedErrorKind::Timeout => {}
            _ => self.hosts.on_success(domain, now),
        }
        let error = PhotoError::new(e.kind, e.http_status, attempts);
        match e.kind.class() {
            FailureClass::Slow => {
                add(&self.metrics.timeouts, 1);
                self.router.observe(
                    &task.client_id,
                    domain,
                    Observation::TimedOut { tier: task.tier },
                );
                if task.tier < self.settings.last_tier() {
                    add(&self.metrics.tier_moves, 1);
                    let next = FetchTask {
                        tier: task.tier + 1,
                        attempt: attempts,
                        ..task.clone()
                    };
                    return self.queue_task(&next, Duration::ZERO).await;
                }
            }
            FailureClass::Transient if attempts < self.settings.max_attempts => {
                add(&self.metrics.retries, 1);
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
        self.finish_url(&task.url_hash, Settlement::Failed { error })
            .await
    }

    async fn photo_downloaded(
        &self,
        task: &FetchTask,
        download: Download,
        attempts: u32,
    ) -> Result<(), FlowError> {
        let validators = Validators {
            image_id: download.image_id.clone(),
            etag: download.validator.etag.clone(),
            last_modified: download.validator.last_modified.clone(),
        };
        match self.processing {
            Processing::Inline => {
                let settlement = self
                    .process_inline(download.image_id, download.bytes, validators, attempts)
                    .await?;
                self.finish_url(&task.url_hash, settlement).await
            }
            Processing::Handoff => self.hand_off(task, download, validators, attempts).await,
        }
    }

    async fn process_inline(
        &self,
        image_id: ImageId,
        bytes: Bytes,
        validators: Validators,
        attempts: u32,
    ) -> Result<Settlement, FlowError> {
        match self.service.upload(image_id, bytes).await {
            Ok(outcome) => {
                let counter = if outcome.deduplicated {
                    &self.metrics.photos_deduplicated
                } else {
                    &self.metrics.photos_new
                };
                add(counter, 1);
                Ok(Settlement::Ok {
                    image_id: outcome.record.id,
                    validators: Some(validators),
                })
            }
            Err(FlowError::Image(e)) => Ok(Settlement::Failed {
                error: PhotoError::new(image_error_kind(&e), None, attempts),
            }),
            Err(FlowError::EmptyBody) => Ok(Settlement::Failed {
                error: PhotoError::new(FeedErrorKind::UnsupportedFormat, None, attempts),
            }),
            Err(e) => Err(e),
        }
    }

    /// AWS: a known photo settles at once; a new one is stored under `incoming/` for the
    /// process function, which calls [`after_incoming`](Self::after_incoming) when done.
    async fn hand_off(
        &self,
        task: &FetchTask,
        download: Download,
        validators: Validators,
        attempts: u32,
    ) -> Result<(), FlowError> {
        let ports = self.service.ports();
        if let Some(image) = ports.images.get(&download.image_id).await?
            && matches!(image.state, ImageState::Ready { .. })
        {
            add(&self.metrics.photos_deduplicated, 1);
            let settlement = Settlement::Ok {
                image_id: download.image_id,
                validators: Some(validators),
            };
            return self.finish_url(&task.url_hash, settlement).await;
        }
        let now = self.now();
        let upload = UploadRecord {
            id: UploadId::random(),
            size: download.bytes.len() as u64,
            state: UploadState::Pending,
            created_at: now,
            expires_at: now.plus(HANDOFF_TTL),
        };
        let handoff = HandoffRecord {
            url_hash: task.url_hash.clone(),
            attempts,
            etag: validators.etag,
            last_modified: validators.last_modified,
        };
        // Records first: the storage notification may reach the process function before
        // this call returns.
        self.update_record(
            URL_KIND,
            task.url_hash.as_str(),
            now,
            |record: Option<UrlRecord>| {
                Ok(match record {
                    Some(mut r) => match r.fetch.as_mut() {
                        Some(lease) => {
                            lease.handed_off = true;
                            Change::Write(r, ())
                        }
                        None => Change::Keep(()),
                    },
                    None => Change::Keep(()),
                })
            },
        )
        .await?;
        records::update(
            ports.records.as_ref(),
            HANDOFF_KIND,
            upload.id.as_str(),
            now,
            now.plus(HANDOFF_TTL),
            |_: Option<HandoffRecord>| Ok(Change::Write(handoff.clone(), ())),
        )
        .await?;
        ports.uploads.create_upload(&upload).await?;
        ports
            .blobs
            .put(
                &BlobKey::incoming(&upload.id),
                download.bytes,
                "application/octet-stream",
            )
            .await?;
        add(&self.metrics.photos_new, 1);
        info!(url_hash = %task.url_hash, upload_id = %upload.id, "download handed to the process function");
        Ok(())
    }

    /// Called by the process function after an `incoming/` body was processed: if the body
    /// came from a download, its outcome settles the URL. Idempotent.
    pub async fn after_incoming(&self, upload: &UploadRecord) -> Result<(), FlowError> {
        let now = self.now();
        let records = self.service.ports().records.as_ref();
        let Some(handoff) =
            records::read::<HandoffRecord>(records, HANDOFF_KIND, upload.id.as_str(), now).await?
        else {
            return Ok(());
        };
        let settlement = match &upload.state {
            UploadState::Pending => return Ok(()),
            UploadState::Done { image_id, .. } => Settlement::Ok {
                image_id: image_id.clone(),
                validators: Some(Validators {
                    image_id: image_id.clone(),
                    etag: handoff.etag,
                    last_modified: handoff.last_modified,
                }),
            },
            UploadState::Failed { kind, .. } => Settlement::Failed {
                error: PhotoError::new(kind_named(kind), None, handoff.attempts),
            },
        };
        self.finish_url(&handoff.url_hash, settlement).await
    }

    /// Records the URL's outcome, ends its download, and settles every waiting crawl.
    async fn finish_url(&self, hash: &UrlHash, settlement: Settlement) -> Result<(), FlowError> {
        let now = self.now();
        let recheck_base = self.settings.recheck_base;
        let (waiters, status) = self
            .update_record(URL_KIND, hash.as_str(), now, |record: Option<UrlRecord>| {
                let mut record = record.unwrap_or_default();
                let outcome = match &settlement {
                    Settlement::Ok {
                        image_id,
                        validators,
                    } => {
                        record.permanent_failures = 0;
                        if validators.is_some() {
                            record.validators = validators.clone();
                        }
                        UrlOutcome::Ok {
                            image_id: image_id.clone(),
                            at: now,
                        }
                    }
                    Settlement::Failed { error } => {
                        let recheck_at =
                            (error.kind.class() == FailureClass::Permanent).then(|| {
                                record.permanent_failures += 1;
                                now.plus(recheck_after(record.permanent_failures, recheck_base))
                            });
                        UrlOutcome::Failed {
                            error: error.clone().with_next_check(recheck_at),
                            at: now,
                            recheck_at,
                        }
                    }
                };
                let status = status_of(&outcome);
                record.last = Some(outcome);
                record.fetch = None;
                let waiters = record.waiters.clone();
                Ok(Change::Write(record, (waiters, status)))
            })
            .await?;
        if let PhotoStatus::Failed { error } = &status {
            add(&self.metrics.urls_failed, 1);
            info!(url_hash = %hash, kind = %error.kind, attempts = error.attempts, "URL failed");
        }
        self.notify_waiters(hash, &waiters, &status).await
    }

    /// Settles each waiting crawl with `status`, then removes those waiters from the record.
    async fn notify_waiters(
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
        let now = self.now();
        self.update_record(URL_KIND, hash.as_str(), now, |record: Option<UrlRecord>| {
            let Some(mut record) = record else {
                return Ok(Change::Keep(()));
            };
            let before = record.waiters.len();
            record.waiters.retain(|w| !waiters.contains(w));
            Ok(if record.waiters.len() == before {
                Change::Keep(())
            } else {
                Change::Write(record, ())
            })
        })
        .await
    }
}

fn status_of(outcome: &UrlOutcome) -> PhotoStatus {
    match outcome {
        UrlOutcome::Ok { image_id, .. } => PhotoStatus::Ok {
            image_id: image_id.clone(),
        },
        UrlOutcome::Failed { error, .. } => PhotoStatus::Failed {
            error: error.clone(),
        },
    }
}

fn image_error_kind(e: &PipelineError) -> FeedErrorKind {
    kind_named(e.kind())
}

/// The feed kind of a pipeline or upload failure kind.
fn kind_named(kind: &str) -> FeedErrorKind {
    match kind {
        "too_large" => FeedErrorKind::TooLarge,
        "too_many_pixels" => FeedErrorKind::TooManyPixels,
        "unsupported_format" | "empty_body" => FeedErrorKind::UnsupportedFormat,
        _ => FeedErrorKind::CorruptImage,
    }
}
