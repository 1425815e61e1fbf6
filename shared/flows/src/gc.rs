//! Garbage collection of expired images: delete the record first (conditionally: still expired,
//! still unlinked, still the same generation), then that generation's files. A re-upload that
//! races with GC either refreshes the record first (the conditional delete then fails) or finds
//! no record and writes a new generation, which GC never touches.

use serde::Serialize;
use tracing::info;

use super::files::delete_record_files;
use super::{FlowError, Service};
use imgest_core::domain::ImageRecord;
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
}

/// Records fetched per round.
const GC_BATCH: usize = 200;

impl Service {
    /// Collects every image expired now.
    pub async fn gc(&self) -> Result<GcReport, FlowError> {
        self.gc_watched(|_| {}).await
    }

    /// [`gc`](Self::gc), calling `after_record` with the report so far after each expired
    /// record it examined (the CLI's progress).
    pub async fn gc_watched(
        &self,
        mut after_record: impl FnMut(&GcReport),
    ) -> Result<GcReport, FlowError> {
        let mut report = GcReport::default();
        loop {
            let now = self.ports.clock.now();
            let batch = self.ports.images.expired(now, GC_BATCH).await?;
            let full = batch.len() == GC_BATCH;
            let before = report.images_deleted;
            for record in batch {
                let run = Stage::Gc.start();
                let collected = self.collect(&record, &mut report).await;
                run.finish(collected.is_ok());
                collected?;
                after_record(&report);
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
    pub async fn collect(
        &self,
        record: &ImageRecord,
        report: &mut GcReport,
    ) -> Result<(), FlowError> {
        report.examined += 1;
        let now = self.ports.clock.now();
        if !self
            .ports
            .images
            .delete_if_expired(&record.id, &record.generation, now)
            .await?
        {
            report.kept += 1;
            return Ok(());
        }
        let deleted = delete_record_files(&self.ports, record).await?;
        report.images_deleted += 1;
        report.files_deleted += deleted;
        self.counters.gc_images_deleted.increment(1);
        self.counters.gc_files_deleted.increment(deleted);
        Ok(())
    }
}
