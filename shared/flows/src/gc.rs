//! Garbage collection of expired images: delete the record first (conditionally: still expired,
//! still unlinked, still the same generation), then that generation's files. A re-upload that
//! races with GC either refreshes the record first (the conditional delete then fails) or finds
//! no record and writes a new generation, which GC never touches.
//!
//! Records are collected [`GC_CONCURRENCY`] at once (each is a conditional delete and a
//! delete of its files: waits on the store, not work), and a run given a time budget stops
//! between batches when it is spent: the next run lists what is left. Runs side by side each
//! take a [`JobPart`] of the ids (`GcParts`): a run is one thread of CPU, and at ten times
//! seed 001's peak one collects fewer records than expire (docs/capacity.md).

use std::time::Instant;

use futures_util::StreamExt;
use serde::Serialize;
use tracing::info;

use super::files::delete_record_files;
use super::{FlowError, Service};
use imgest_core::domain::{ImageRecord, JobPart};
use imgest_core::telemetry::metrics::Stage;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Expired records looked at.
    pub examined: u64,
    /// Records deleted (their files too).
    pub images_deleted: u64,
    pub files_deleted: u64,
    /// Records that were refreshed or re-linked between listing and deleting: kept.
    pub kept: u64,
    /// The run's time budget was spent with expired records left (the next run goes on).
    pub out_of_time: bool,
}

/// Records fetched per round.
pub const GC_BATCH: usize = 200;

/// Records collected at once. At the seed's scale (10⁹ images, some 2 million expiring an
/// hour) one at a time collects about 70 a second (docs/capacity.md).
pub const GC_CONCURRENCY: usize = 64;

/// What collecting one record did.
enum Collected {
    Deleted { files: u64 },
    Kept,
}

impl Service {
    /// Collects every image expired now.
    pub async fn gc(&self) -> Result<GcReport, FlowError> {
        self.gc_watched(JobPart::WHOLE, None, |_| {}).await
    }

    /// [`gc`](Self::gc) of `part`'s records (one of several runs side by side, or the whole
    /// job) until `until` (if any; checked between batches), calling `after_record` with the
    /// report so far after each expired record it examined (the CLI's progress).
    pub async fn gc_watched(
        &self,
        part: JobPart,
        until: Option<Instant>,
        mut after_record: impl FnMut(&GcReport),
    ) -> Result<GcReport, FlowError> {
        let mut report = GcReport::default();
        loop {
            if until.is_some_and(|u| Instant::now() >= u) {
                report.out_of_time = true;
                break;
            }
            let now = self.ports.clock.now();
            let batch = self.ports.images.expired_in(part, now, GC_BATCH).await?;
            let full = batch.len() == GC_BATCH;
            let before = report.images_deleted;
            let mut collecting = futures_util::stream::iter(batch)
                .map(|record| async move {
                    let run = Stage::Gc.start();
                    let collected = self.collect(&record).await;
                    run.finish(collected.is_ok());
                    collected
                })
                .buffer_unordered(GC_CONCURRENCY);
            let mut failed = None;
            while let Some(collected) = collecting.next().await {
                match collected {
                    Ok(collected) => report.add(collected),
                    // The others in flight finish; the first failure is the run's.
                    Err(e) => {
                        failed.get_or_insert(e);
                        continue;
                    }
                }
                after_record(&report);
            }
            if let Some(e) = failed {
                return Err(e);
            }
            // A full batch in which nothing could be deleted would come back the same: stop.
            if !full || report.images_deleted == before {
                break;
            }
        }
        if report.examined > 0 {
            info!(?report, "gc finished");
        }
        Ok(report)
    }

    /// Deletes the files of a record the store already removed (DynamoDB's TTL deleter, seen on
    /// its stream), unless a record of the same generation exists again. Returns the number of
    /// files deleted. Safe to run twice.
    pub async fn collect_removed(&self, old: &ImageRecord) -> Result<u64, FlowError> {
        if let Some(current) = self.ports.images.get(&old.id).await?
            && current.generation == old.generation
        {
            return Ok(0);
        }
        let deleted = delete_record_files(&self.ports, old).await?;
        self.counters.gc_images_deleted.increment(1);
        self.counters.gc_files_deleted.increment(deleted);
        info!(image_id = %old.id, generation = %old.generation, files = deleted, "collected a removed image");
        Ok(deleted)
    }

    /// Collects one record if it is still expired: the record, then its generation's files.
    async fn collect(&self, record: &ImageRecord) -> Result<Collected, FlowError> {
        let now = self.ports.clock.now();
        if !self
            .ports
            .images
            .delete_if_expired(&record.id, &record.generation, now)
            .await?
        {
            return Ok(Collected::Kept);
        }
        let files = delete_record_files(&self.ports, record).await?;
        if self.policy.similar.indexes()
            && let Some(signature) = record.signature()
            && let Err(e) = crate::similar::forget(&self.ports, &record.id, signature).await
        {
            // Lookups drop an entry whose record is gone when they read it.
            tracing::warn!(image_id = %record.id, error = %e,
                "could not remove a collected image from the near-duplicate index");
        }
        self.counters.gc_images_deleted.increment(1);
        self.counters.gc_files_deleted.increment(files);
        Ok(Collected::Deleted { files })
    }
}

impl GcReport {
    fn add(&mut self, collected: Collected) {
        self.examined += 1;
        match collected {
            Collected::Deleted { files } => {
                self.images_deleted += 1;
                self.files_deleted += files;
            }
            Collected::Kept => self.kept += 1,
        }
    }
}
