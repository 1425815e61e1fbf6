//! The sweep: garbage collection that starts from the files. It walks storage shard by shard,
//! lists files first and checks records second, and deletes files that no record of their
//! generation owns once they are older than
//! the grace period. Listing first is what makes it safe: a file written after the listing is
//! not seen, and a file listed before its record was written is younger than the grace period.

use std::collections::HashMap;

use serde::Serialize;
use tracing::{info, warn};

use super::{FlowError, Metrics, Service};
use crate::domain::{BlobKey, Generation, IMAGE_AREAS, ImageId, SHARD_COUNT, shard_prefixes};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub shards: u64,
    pub files_scanned: u64,
    /// Files no record owns and older than the grace period.
    pub garbage_files: u64,
    pub garbage_bytes: u64,
    /// Files no record owns but younger than the grace period: left for a later sweep.
    pub young_unowned_files: u64,
    /// Files under a shard whose key is not an image file key: never deleted, reported.
    pub unrecognised_files: u64,
    pub files_deleted: u64,
}

/// Where `sweep_batch` resumes: the next shard, two hex digits.
const SWEEP_CHECKPOINT: &str = "sweep.next_shard";

/// Files listed (and records looked up) per page.
const SWEEP_PAGE: usize = 1000;

impl Service {
    /// Sweeps every shard. With `dry_run`, only counts.
    pub async fn sweep(&self, dry_run: bool) -> Result<SweepReport, FlowError> {
        let mut report = SweepReport::default();
        for shard in shard_prefixes() {
            self.sweep_shard(&shard, dry_run, &mut report).await?;
        }
        info!(?report, dry_run, "sweep finished");
        Ok(report)
    }

    /// Sweeps the next `shards` shards, resuming from the saved checkpoint and saving it after
    /// each shard, so a run cut short (Lambda's 15-minute limit) loses at most one shard's work.
    pub async fn sweep_batch(
        &self,
        shards: usize,
        dry_run: bool,
    ) -> Result<SweepReport, FlowError> {
        let start = self
            .ports
            .checkpoints
            .load_checkpoint(SWEEP_CHECKPOINT)
            .await?
            .and_then(|s| usize::from_str_radix(&s, 16).ok())
            .filter(|&n| n < SHARD_COUNT)
            .unwrap_or(0);
        let mut report = SweepReport::default();
        for i in 0..shards.min(SHARD_COUNT) {
            let shard = (start + i) % SHARD_COUNT;
            self.sweep_shard(&format!("{shard:02x}"), dry_run, &mut report)
                .await?;
            let next = format!("{:02x}", (shard + 1) % SHARD_COUNT);
            self.ports
                .checkpoints
                .save_checkpoint(SWEEP_CHECKPOINT, &next)
                .await?;
        }
        info!(
            ?report,
            dry_run,
            start = format!("{start:02x}"),
            "sweep batch finished"
        );
        Ok(report)
    }

    /// Sweeps one shard (`"00"` … `"ff"`) of both image areas (variants and originals).
    pub async fn sweep_shard(
        &self,
        shard: &str,
        dry_run: bool,
        report: &mut SweepReport,
    ) -> Result<(), FlowError> {
        report.shards += 1;
        for area in IMAGE_AREAS {
            self.sweep_prefix(&format!("{area}{shard}/"), dry_run, report)
                .await?;
        }
        Ok(())
    }

    /// Sweeps the files under one prefix, page by page.
    async fn sweep_prefix(
        &self,
        prefix: &str,
        dry_run: bool,
        report: &mut SweepReport,
    ) -> Result<(), FlowError> {
        let mut cursor: Option<BlobKey> = None;
        loop {
            let page = self
                .ports
                .blobs
                .list(prefix, cursor.as_ref(), SWEEP_PAGE)
                .await?;
            report.files_scanned += page.blobs.len() as u64;

            let mut ids: Vec<ImageId> = page
                .blobs
                .iter()
                .filter_map(|b| b.key.image_part())
                .map(|k| k.id)
                .collect();
            ids.dedup();
            let owners: HashMap<ImageId, Generation> = self
                .ports
                .images
                .get_many(&ids)
                .await?
                .into_iter()
                .map(|r| (r.id, r.generation))
                .collect();

            let now = self.ports.clock.now();
            let mut garbage = Vec::new();
            for blob in &page.blobs {
                let Some(part) = blob.key.image_part() else {
                    report.unrecognised_files += 1;
                    warn!(key = %blob.key, "sweeper found a file that is not an image file; left alone");
                    continue;
                };
                if owners.get(&part.id) == Some(&part.generation) {
                    continue;
                }
                if now.since(blob.last_modified) < self.policy.sweep_grace {
                    report.young_unowned_files += 1;
                    continue;
                }
                report.garbage_files += 1;
                report.garbage_bytes += blob.size;
                garbage.push(blob.key.clone());
            }
            if !dry_run && !garbage.is_empty() {
                self.ports.blobs.delete(&garbage).await?;
                report.files_deleted += garbage.len() as u64;
                Metrics::add(&self.metrics.sweep_files_deleted, garbage.len() as u64);
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }
}
