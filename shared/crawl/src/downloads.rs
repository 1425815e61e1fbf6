//! The process function's part of a crawl's download (AWS): the bodies the fetch functions left
//! under `fetched/` are processed one by one, then their URLs are settled together, so that a
//! batch holding several photos of one offer updates that offer's crawl once, not once per
//! photo.

use std::collections::HashMap;

use futures_util::future::try_join_all;

use super::Crawler;
use super::fetch::{Settlement, UrlRead, download_key, first_link, runs_lease};
use super::records::{self, URL_KIND, UrlRecord, Validators};
use crate::messages::{DownloadedPhoto, PhotoError, PhotoStatus};
use imgest_core::domain::UrlHash;
use imgest_core::domain::{BlobKey, ImageId, OfferKey};
use imgest_core::ports::StoreError;
use imgest_download::FetchErrorKind;
use imgest_flows::FlowError;
use tracing::{error, info};

/// A processed download whose URL is still to be settled.
pub struct ProcessedDownload {
    hash: UrlHash,
    /// The download (its lease) the photo is the outcome of.
    lease: String,
    settlement: Settlement,
    /// The body waiting under `fetched/`, deleted once settled (none for a photo processed
    /// where it was downloaded).
    body: Option<BlobKey>,
    /// The URL's record as read before the download (where it was downloaded): settling
    /// writes over it without reading it again.
    read: Option<UrlRead>,
}

impl ProcessedDownload {
    /// A photo processed where it was downloaded (nothing under `fetched/`).
    pub(super) fn here(
        hash: UrlHash,
        lease: String,
        settlement: Settlement,
        read: UrlRead,
    ) -> Self {
        Self {
            hash,
            lease,
            settlement,
            body: None,
            read: Some(read),
        }
    }
}

impl Crawler {
    /// Processes the body waiting under `fetched/{url_hash}` (a photo, or a failure for a body
    /// that is none); `None` if the body is gone because it was processed and settled before
    /// (a redelivered message). A body gone while its URL is still unsettled (a message
    /// redriven from the dead-letter queue after the body expired) settles the URL as failed,
    /// `body_gone` (transient: downloaded again on the next crawl), so its crawls finish.
    /// Settle the result with [`settle_downloads`](Self::settle_downloads).
    pub async fn process_download(
        &self,
        photo: DownloadedPhoto,
    ) -> Result<Option<ProcessedDownload>, FlowError> {
        let body = download_key(&photo.url_hash)?;
        // Only a body of the URL's running download is processed (read before the decode, and
        // the outcome's write names this read's version).
        let Some(read) = self.running_download(&photo).await? else {
            return Ok(None);
        };
        // Its size is not known before it is read: room for the largest body is held.
        let limit = self.service.max_body();
        let _memory = self.service.reserve_body(limit).await?;
        let bytes = match self.service.ports().blobs.get(&body).await {
            Ok(bytes) => bytes,
            Err(StoreError::NotFound(_)) => return Ok(Some(self.body_gone(photo, read))),
            Err(e) => return Err(e.into()),
        };
        let image_id = ImageId::of_bytes(&bytes);
        let validators = Validators::new(image_id.clone(), photo.validator);
        let settlement = self
            .process_inline(
                image_id,
                bytes,
                validators,
                photo.attempts,
                first_link(&read),
            )
            .await?;
        Ok(Some(ProcessedDownload {
            hash: photo.url_hash,
            lease: photo.lease,
            settlement,
            body: Some(body),
            read: Some(read),
        }))
    }

    /// The URL's record, if it still runs the download `photo` was downloaded under; `None`
    /// if it ended (settled before: a redelivered message) or another runs (the message is
    /// not of it), after a consistent read: a peek may miss the last second's writes.
    async fn running_download(
        &self,
        photo: &DownloadedPhoto,
    ) -> Result<Option<UrlRead>, FlowError> {
        let records = self.service.ports().documents.as_ref();
        let hash = photo.url_hash.as_str();
        let now = self.now();
        let (mut record, mut version) =
            records::peek::<UrlRecord>(records, URL_KIND, hash, now).await?;
        if !runs_lease(record.as_ref(), &photo.lease) {
            (record, version) = records::read_versioned(records, URL_KIND, hash, now).await?;
        }
        match record {
            Some(record) if runs_lease(Some(&record), &photo.lease) => {
                Ok(Some(UrlRead { record, version }))
            }
            Some(record) if record.fetch.is_some() => {
                self.counters.tasks_not_leased.increment(1);
                info!(url_hash = %photo.url_hash, "a downloaded photo not of the URL's running download: dropped");
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// A download whose body is gone while its URL still waits for it (expired under
    /// `fetched/`): a `body_gone` failure to settle.
    fn body_gone(&self, photo: DownloadedPhoto, read: UrlRead) -> ProcessedDownload {
        error!(url_hash = %photo.url_hash, "a downloaded body is gone before it was processed (expired under fetched/): its URL settles as body_gone");
        ProcessedDownload {
            hash: photo.url_hash,
            lease: photo.lease,
            settlement: Settlement::Failed {
                error: PhotoError::new(FetchErrorKind::BodyGone, None, photo.attempts),
            },
            body: None,
            read: Some(read),
        }
    }

    /// Records each URL's outcome, settles every waiting crawl with all of its URLs' outcomes
    /// at once, and deletes the bodies. As for one URL, the crawls that started the downloads
    /// are told before the URL records are written (conditionally on the versions read), those
    /// that joined after; a URL whose record changed meanwhile is settled again on its own.
    /// Idempotent.
    pub async fn settle_downloads(&self, done: Vec<ProcessedDownload>) -> Result<(), FlowError> {
        let records = self.service.ports().documents.as_ref();
        let now = self.now();
        let finished = try_join_all(done.iter().map(|d| async move {
            // As read before the download, or a peek: the write below names its version, and
            // a URL whose write conflicts is settled again on its own, reading consistently.
            let (record, version) = match &d.read {
                Some(read) => (Some(read.record.clone()), read.version),
                None => records::peek::<UrlRecord>(records, URL_KIND, d.hash.as_str(), now).await?,
            };
            Ok::<_, FlowError>((self.record_outcome(record, &d.settlement, now), version))
        }))
        .await?;

        let mut crawls: HashMap<(&OfferKey, &str), HashMap<UrlHash, PhotoStatus>> = HashMap::new();
        for (d, (f, _)) in done.iter().zip(&finished) {
            for waiter in &f.waiters {
                crawls
                    .entry((&waiter.offer_id, waiter.crawl_id.as_str()))
                    .or_default()
                    .insert(d.hash.clone(), f.status.clone());
            }
        }
        try_join_all(
            crawls
                .iter()
                .map(|((offer, crawl_id), outcomes)| self.settle(offer, crawl_id, outcomes)),
        )
        .await?;

        for (d, (f, version)) in done.iter().zip(&finished) {
            if self.write_finished(&d.hash, f, *version, now).await? {
                self.tell_joiners(&d.hash, Some(&f.record)).await?;
            } else {
                self.finish_url(&d.hash, &d.lease, d.settlement.clone(), None)
                    .await?;
            }
        }
        // Settled: the bodies are no longer needed (each original is kept under its image).
        let bodies: Vec<BlobKey> = done.into_iter().filter_map(|d| d.body).collect();
        if !bodies.is_empty() {
            self.service.ports().blobs.delete(&bodies).await?;
        }
        Ok(())
    }
}
