//! The sweep: garbage collection that starts from the files. It walks storage shard by shard,
//! lists files first and checks records second, and deletes the files that no record needs once
//! they are older than the grace period. Listing first is what makes it safe: a file written
//! after the listing is not seen, and a file listed before its record was written is younger
//! than the grace period.
//!
//! A record needs its generation's original and the variants it lists, and its previous
//! generation's files until `kept_until` (a re-processed image). Variants it lists that the
//! configuration no longer makes are retired first: the record stops listing them (a
//! conditional write), then their files are garbage like any other. Files are judged by kind:
//!
//! | kind | what |
//! |---|---|
//! | unowned | no record of their generation (a collected image, a crashed upload's leftovers) |
//! | unlisted | their record's generation, but a variant it does not list (a retired size, a crashed re-processing) |
//! | previous | a re-processed record's previous generation, past `kept_until` |
//! | unrecognised | under a shard, but not an image file key (another layout, a stray upload) |

use std::collections::HashMap;

use serde::Serialize;
use tracing::{info, warn};

use super::{FlowError, Service};
use imgest_core::domain::{
    BlobKey, IMAGE_AREAS, ImageId, ImageRecord, ImageState, ORIGINALS_PREFIX, SHARD_COUNT,
    Timestamp, VariantName, VariantSetVersion, shard_prefixes,
};
use imgest_core::ports::{BlobMeta, ReadyImage};
use imgest_core::telemetry::metrics::Stage;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub shards: u64,
    pub files_scanned: u64,
    /// Files no record needs and older than the grace period (every kind below).
    pub garbage_files: u64,
    pub garbage_bytes: u64,
    /// Of those: files of no record's generation.
    pub unowned_files: u64,
    /// Of those: files of a record's generation that it does not list.
    pub unlisted_files: u64,
    /// Of those: a re-processed record's previous files, past the time they were kept for.
    pub previous_files: u64,
    /// Of those: files under a shard whose key is not an image file key.
    pub unrecognised_files: u64,
    /// Files no record needs but younger than the grace period: left for a later sweep.
    pub young_unowned_files: u64,
    /// Records that stopped listing variants the configuration no longer makes.
    pub records_retired: u64,
    pub files_deleted: u64,
}

/// Why a file is garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Garbage {
    Unowned,
    Unlisted,
    Previous,
    Unrecognised,
}

impl SweepReport {
    fn count(&mut self, kind: Garbage, blob: &BlobMeta) {
        self.garbage_files += 1;
        self.garbage_bytes += blob.size;
        *match kind {
            Garbage::Unowned => &mut self.unowned_files,
            Garbage::Unlisted => &mut self.unlisted_files,
            Garbage::Previous => &mut self.previous_files,
            Garbage::Unrecognised => &mut self.unrecognised_files,
        } += 1;
    }
}

/// Whether `record` needs the file `key` (of image `id`, generation `generation`) at `now`.
fn judge(key: &BlobKey, record: Option<&ImageRecord>, now: Timestamp) -> Option<Garbage> {
    let Some(part) = key.image_part() else {
        return Some(Garbage::Unrecognised);
    };
    let Some(record) = record else {
        return Some(Garbage::Unowned);
    };
    if record.generation == part.generation {
        let file = key.as_str().rsplit('/').next().unwrap_or_default();
        let listed = if key.as_str().starts_with(ORIGINALS_PREFIX) {
            file == "original"
        } else {
            match &record.state {
                ImageState::Ready { variants, .. } => variants
                    .iter()
                    .any(|v| file.strip_suffix(".jpg") == Some(v.name.as_str())),
                // A claim's files are being written: all of them are its own.
                ImageState::Processing { .. } => true,
            }
        };
        return (!listed).then_some(Garbage::Unlisted);
    }
    match &record.previous {
        Some(p) if p.generation == part.generation => {
            (p.kept_until <= now).then_some(Garbage::Previous)
        }
        _ => Some(Garbage::Unowned),
    }
}

/// Where `sweep_batch` resumes: the next shard, two hex digits.
const SWEEP_CHECKPOINT: &str = "sweep.next_shard";

/// Files listed (and records looked up) per page.
const SWEEP_PAGE: usize = 1000;

impl Service {
    /// Sweeps every shard. With `dry_run`, only counts.
    pub async fn sweep(&self, dry_run: bool) -> Result<SweepReport, FlowError> {
        self.sweep_watched(dry_run, |_| {}).await
    }

    /// [`sweep`](Self::sweep), calling `after_shard` with the report so far after each of the
    /// [`SHARD_COUNT`](imgest_core::domain::SHARD_COUNT) shards (the CLI's progress bar).
    pub async fn sweep_watched(
        &self,
        dry_run: bool,
        mut after_shard: impl FnMut(&SweepReport),
    ) -> Result<SweepReport, FlowError> {
        let mut report = SweepReport::default();
        for shard in shard_prefixes() {
            self.sweep_shard(&shard, dry_run, &mut report).await?;
            after_shard(&report);
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

    /// Sweeps one shard (`"00"` … `"ff"`) of both image areas (variants and originals) and of
    /// the layout before areas.
    pub async fn sweep_shard(
        &self,
        shard: &str,
        dry_run: bool,
        report: &mut SweepReport,
    ) -> Result<(), FlowError> {
        report.shards += 1;
        Stage::Sweep
            .time_async(async {
                for area in IMAGE_AREAS {
                    self.sweep_prefix(&format!("{area}{shard}/"), dry_run, report)
                        .await?;
                }
                // The layout before areas (`{shard}/{id}/...`): nothing of it is an image file
                // now.
                self.sweep_prefix(&format!("{shard}/"), dry_run, report)
                    .await
            })
            .await
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
            let mut owners: HashMap<ImageId, ImageRecord> = HashMap::with_capacity(ids.len());
            for record in self.ports.images.get_many(&ids).await? {
                let record = if dry_run {
                    self.without_retired(&record).map_or(record, |(r, _)| r)
                } else {
                    self.retire_variants(record, report).await?
                };
                owners.insert(record.id.clone(), record);
            }

            let now = self.ports.clock.now();
            let mut garbage = Vec::new();
            for blob in &page.blobs {
                let owner = blob.key.image_part().and_then(|p| owners.get(&p.id));
                let Some(kind) = judge(&blob.key, owner, now) else {
                    continue;
                };
                if now.since(blob.last_modified) < self.policy.sweep_grace {
                    report.young_unowned_files += 1;
                    continue;
                }
                report.count(kind, blob);
                if dry_run {
                    info!(key = %blob.key, kind = ?kind, bytes = blob.size, "sweep would delete");
                } else if kind == Garbage::Unrecognised {
                    warn!(key = %blob.key, "sweeper deletes a file that is not an image file");
                }
                garbage.push(blob.key.clone());
            }
            if !dry_run && !garbage.is_empty() {
                self.ports.blobs.delete(&garbage).await?;
                report.files_deleted += garbage.len() as u64;
                self.counters
                    .sweep_files_deleted
                    .increment(garbage.len() as u64);
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// `record` without the variants the configuration no longer makes, and what that leaves
    /// to write; `None` if it lists none of those.
    fn without_retired(&self, record: &ImageRecord) -> Option<(ImageRecord, ReadyImage)> {
        let ImageState::Ready {
            format,
            width,
            height,
            original_bytes,
            variants,
            variant_set,
        } = &record.state
        else {
            return None;
        };
        let configured = &self.pipeline.config().variants;
        let made = |name: &VariantName| configured.get(name).is_some();
        if variants.iter().all(|v| made(&v.name)) {
            return None;
        }
        let kept: Vec<_> = variants.iter().filter(|v| made(&v.name)).cloned().collect();
        let mut retired = record.clone();
        if let ImageState::Ready { variants, .. } = &mut retired.state {
            variants.clone_from(&kept);
        }
        let ready = ReadyImage {
            format: *format,
            width: *width,
            height: *height,
            original_bytes: *original_bytes,
            variants: kept,
            variant_set: variant_set
                .clone()
                .unwrap_or_else(VariantSetVersion::unknown),
        };
        Some((retired, ready))
    }

    /// Retires the variants `record` lists that the configuration no longer makes: the record
    /// first (conditional on its generation), so its files are garbage only once no record
    /// lists them. Returns the record as it now is.
    async fn retire_variants(
        &self,
        record: ImageRecord,
        report: &mut SweepReport,
    ) -> Result<ImageRecord, FlowError> {
        let Some((_, ready)) = self.without_retired(&record) else {
            return Ok(record);
        };
        let g = &record.generation;
        let keep = record
            .previous
            .as_ref()
            .map_or(Timestamp::from_millis(0), |p| p.kept_until);
        match self
            .ports
            .images
            .replace_files(&record.id, g, g, ready, keep)
            .await?
        {
            Some(updated) => {
                report.records_retired += 1;
                info!(image_id = %record.id, "retired variants the configuration no longer makes");
                Ok(updated)
            }
            // Changed meanwhile (collected, re-processed): read it again to judge its files.
            None => Ok(self.ports.images.get(&record.id).await?.unwrap_or(record)),
        }
    }
}
