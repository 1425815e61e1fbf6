//! The sweep: garbage collection that starts from the files. It walks storage shard by shard,
//! lists files first and checks records second, and deletes the files that no record needs once
//! they are older than the grace period. Listing first is what makes it safe: a file written
//! after the listing is not seen, and a file listed before its record was written is younger
//! than the grace period.
//!
//! A record needs its generation's original and the variants it lists, and its previous
//! generation's files until `kept_until` (a re-processed image). Variants it lists that the
//! configuration no longer makes *and* whose drop an operator confirmed (see [`variants`]) are
//! retired first: the record stops listing them (a conditional write), then their files are
//! garbage like any other. A size the configuration lacks but the confirmed set has (a typo)
//! is kept, and counted. Files are judged by kind:
//!
//! | kind | what |
//! |---|---|
//! | unowned | no record of their generation (a collected image, a crashed upload's leftovers) |
//! | unlisted | their record's generation, but a variant it does not list (a retired size, a crashed re-processing) |
//! | previous | a re-processed record's previous generation, past `kept_until` |
//! | unrecognised | under a shard, but not an image file key (another layout, a stray upload) |
//!
//! **A mass deletion stops.** Lost records, a wrong bucket or table, a bug: whatever makes
//! many files look unowned at once makes the sweep delete them. So per shard it counts the
//! files it listed and the garbage a configuration or a lost record can cause (unowned,
//! unlisted, unrecognised; not `previous`, which a record names, nor the files of sizes whose
//! drop was confirmed); a page that would take that garbage past `IMGEST_SWEEP_MAX_SHARE` of
//! the files listed (and past [`STOP_FLOOR`] files) is not deleted: the sweep stops there and
//! reports the shard ([`SweepStop`]). `imgest sweep --shard SHARD --go-on` deletes it once an
//! operator checked; the scheduled sweep stays at that shard (and fails its run, so its error
//! alarm fires) until then.
//!
//! [`variants`]: crate::variants
use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Serialize;
use tracing::{error, info, warn};

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
    /// Records that stopped listing variants the configuration no longer makes (and whose drop
    /// was confirmed).
    pub records_retired: u64,
    /// Records listing variants the configuration does not make, kept because dropping them
    /// is not confirmed (`imgest variants status`).
    pub variants_kept_unconfirmed: u64,
    pub files_deleted: u64,
    /// Where the sweep stopped rather than delete more than its share of a shard.
    pub stopped: Option<SweepStop>,
}

/// A sweep that stopped at a shard: what it found there when it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SweepStop {
    /// The shard, `0` to `255` (its prefix is two hex digits).
    pub shard: u8,
    /// The shard's files listed so far.
    pub scanned: u64,
    /// Garbage among them that counts toward the share (with the page refused).
    pub garbage: u64,
    /// The share allowed (`IMGEST_SWEEP_MAX_SHARE`, percent).
    pub max_share: u8,
}

impl SweepStop {
    /// The shard's prefix (`"3f"`).
    pub fn prefix(&self) -> String {
        format!("{:02x}", self.shard)
    }
}

impl std::fmt::Display for SweepStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the sweep stopped at shard {}: {} of its {} files listed would be deleted, more than \
             {}%; check them (`imgest sweep --dry-run`), then `imgest sweep --shard {} --go-on`",
            self.prefix(),
            self.garbage,
            self.scanned,
            self.max_share,
            self.prefix()
        )
    }
}

/// How a sweep runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepOptions {
    /// Only count and log what would be deleted.
    pub dry_run: bool,
    /// Delete past `IMGEST_SWEEP_MAX_SHARE` (an operator checked the shard).
    pub go_on: bool,
}

impl SweepOptions {
    pub fn dry_run(dry_run: bool) -> Self {
        Self {
            dry_run,
            go_on: false,
        }
    }
}

/// Garbage files a shard may have deleted whatever its share: a small shard's few leftovers.
pub const STOP_FLOOR: u64 = 20;

/// One shard's count toward the share.
#[derive(Debug, Default)]
struct ShardTally {
    shard: u8,
    scanned: u64,
    garbage: u64,
    /// Records that list sizes kept for want of a confirmed drop (each listed in two areas).
    kept_unconfirmed: HashSet<ImageId>,
    /// Records that retired a confirmed drop: their files of that size do not count toward
    /// the share (an operator asked for their deletion).
    retired: HashSet<ImageId>,
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
                    // No allocation: the sweep judges every stored file this way.
                    .any(|v| {
                        file.rsplit_once('.') == Some((v.name.as_str(), v.format.extension()))
                    }),
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
        self.sweep_watched(SweepOptions::dry_run(dry_run), |_| {})
            .await
    }

    /// [`sweep`](Self::sweep), calling `after_shard` with the report so far after each of the
    /// [`SHARD_COUNT`](imgest_core::domain::SHARD_COUNT) shards (the CLI's progress bar).
    /// Stops at a shard whose garbage is past its share ([`SweepReport::stopped`]).
    pub async fn sweep_watched(
        &self,
        options: SweepOptions,
        mut after_shard: impl FnMut(&SweepReport),
    ) -> Result<SweepReport, FlowError> {
        let mut report = SweepReport::default();
        for shard in shard_prefixes() {
            self.sweep_shard(&shard, options, &mut report).await?;
            after_shard(&report);
            if report.stopped.is_some() {
                break;
            }
        }
        self.log_sweep(&report, options, None);
        Ok(report)
    }

    /// Sweeps the next `shards` shards, resuming from the saved checkpoint and saving it after
    /// each shard, so a run cut short (Lambda's 15-minute limit) loses at most one shard's work.
    /// A shard where the sweep stopped is not passed: the next run starts there again.
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
        let options = SweepOptions::dry_run(dry_run);
        for i in 0..shards.min(SHARD_COUNT) {
            let shard = (start + i) % SHARD_COUNT;
            self.sweep_shard(&format!("{shard:02x}"), options, &mut report)
                .await?;
            if report.stopped.is_some() {
                break;
            }
            let next = format!("{:02x}", (shard + 1) % SHARD_COUNT);
            self.ports
                .checkpoints
                .save_checkpoint(SWEEP_CHECKPOINT, &next)
                .await?;
        }
        self.log_sweep(&report, options, Some(start));
        Ok(report)
    }

    fn log_sweep(&self, report: &SweepReport, options: SweepOptions, start: Option<usize>) {
        let start = start.map(|s| format!("{s:02x}"));
        info!(?report, ?options, ?start, "sweep finished");
        if report.variants_kept_unconfirmed > 0 {
            warn!(
                records = report.variants_kept_unconfirmed,
                "records list sizes the configuration does not make; they are kept until the \
                 drop is confirmed (`imgest variants status`, `imgest variants confirm --drop`)"
            );
        }
        if let Some(stop) = &report.stopped {
            error!(shard = %stop.prefix(), scanned = stop.scanned, garbage = stop.garbage, max_share = stop.max_share, "{stop}");
        }
    }

    /// Sweeps one shard (`"00"` … `"ff"`) of both image areas (variants and originals) and of
    /// the layout before areas, unless it stops there ([`SweepReport::stopped`]).
    pub async fn sweep_shard(
        &self,
        shard: &str,
        options: SweepOptions,
        report: &mut SweepReport,
    ) -> Result<(), FlowError> {
        report.shards += 1;
        let confirmed = self.confirmed_variants().await?.map(|c| c.names);
        let mut tally = ShardTally {
            shard: u8::from_str_radix(shard, 16).unwrap_or_default(),
            ..ShardTally::default()
        };
        Stage::Sweep
            .time_async(async {
                for area in IMAGE_AREAS {
                    let prefix = format!("{area}{shard}/");
                    self.sweep_prefix(&prefix, options, confirmed.as_ref(), &mut tally, report)
                        .await?;
                    if report.stopped.is_some() {
                        report.variants_kept_unconfirmed += tally.kept_unconfirmed.len() as u64;
                        return Ok(());
                    }
                }
                // The layout before areas (`{shard}/{id}/...`): nothing of it is an image file
                // now.
                self.sweep_prefix(
                    &format!("{shard}/"),
                    options,
                    confirmed.as_ref(),
                    &mut tally,
                    report,
                )
                .await
            })
            .await?;
        report.variants_kept_unconfirmed += tally.kept_unconfirmed.len() as u64;
        Ok(())
    }

    /// Sweeps the files under one prefix, page by page.
    async fn sweep_prefix(
        &self,
        prefix: &str,
        options: SweepOptions,
        confirmed: Option<&BTreeSet<VariantName>>,
        tally: &mut ShardTally,
        report: &mut SweepReport,
    ) -> Result<(), FlowError> {
        let dry_run = options.dry_run;
        let mut cursor: Option<BlobKey> = None;
        loop {
            let page = self
                .ports
                .blobs
                .list(prefix, cursor.as_ref(), SWEEP_PAGE)
                .await?;
            report.files_scanned += page.blobs.len() as u64;
            tally.scanned += page.blobs.len() as u64;

            let mut ids: Vec<ImageId> = page
                .blobs
                .iter()
                .filter_map(|b| b.key.image_part())
                .map(|k| k.id)
                .collect();
            ids.dedup();
            let mut owners: HashMap<ImageId, ImageRecord> = HashMap::with_capacity(ids.len());
            for record in self.ports.images.get_many(&ids).await? {
                let (retiring, kept) = self.without_retired(&record, confirmed);
                if kept {
                    tally.kept_unconfirmed.insert(record.id.clone());
                }
                let (record, did_retire) = match retiring {
                    None => (record, false),
                    Some((r, _)) if dry_run => (r, true),
                    Some((_, ready)) => self.retire_variants(record, ready, report).await?,
                };
                if did_retire {
                    tally.retired.insert(record.id.clone());
                }
                owners.insert(record.id.clone(), record);
            }

            let now = self.ports.clock.now();
            let mut garbage = Vec::new();
            let mut counted = 0u64;
            for blob in &page.blobs {
                let owner = blob.key.image_part().and_then(|p| owners.get(&p.id));
                let Some(kind) = judge(&blob.key, owner, now) else {
                    continue;
                };
                if now.since(blob.last_modified) < self.policy.sweep_grace {
                    report.young_unowned_files += 1;
                    continue;
                }
                let confirmed_drop = kind == Garbage::Unlisted
                    && owner.is_some_and(|o| tally.retired.contains(&o.id));
                if kind != Garbage::Previous && !confirmed_drop {
                    counted += 1;
                }
                report.count(kind, blob);
                if dry_run {
                    info!(key = %blob.key, kind = ?kind, bytes = blob.size, "sweep would delete");
                } else if kind == Garbage::Unrecognised {
                    warn!(key = %blob.key, "sweeper deletes a file that is not an image file");
                }
                garbage.push(blob.key.clone());
            }
            let allowed =
                (tally.scanned * u64::from(self.policy.sweep_max_share) / 100).max(STOP_FLOOR);
            if !options.go_on && tally.garbage + counted > allowed {
                report.stopped = Some(SweepStop {
                    shard: tally.shard,
                    scanned: tally.scanned,
                    garbage: tally.garbage + counted,
                    max_share: self.policy.sweep_max_share,
                });
                return Ok(());
            }
            tally.garbage += counted;
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

    /// `record` without the variants the configuration no longer makes and whose drop was
    /// confirmed, and what that leaves to write (`None` if it lists none of those); and
    /// whether it lists a variant the configuration lacks but that is kept, for want of a
    /// confirmed drop (the confirmed set has it, or nothing is confirmed yet).
    fn without_retired(
        &self,
        record: &ImageRecord,
        confirmed: Option<&BTreeSet<VariantName>>,
    ) -> (Option<(ImageRecord, ReadyImage)>, bool) {
        let ImageState::Ready {
            format,
            width,
            height,
            original_bytes,
            variants,
            variant_set,
            sha256,
        } = &record.state
        else {
            return (None, false);
        };
        let configured = &self.pipeline.config().variants;
        let made = |name: &VariantName| configured.get(name).is_some();
        let retire =
            |name: &VariantName| !made(name) && confirmed.is_some_and(|c| !c.contains(name));
        let kept = variants.iter().any(|v| !made(&v.name) && !retire(&v.name));
        if !variants.iter().any(|v| retire(&v.name)) {
            return (None, kept);
        }
        let kept_variants: Vec<_> = variants
            .iter()
            .filter(|v| !retire(&v.name))
            .cloned()
            .collect();
        let mut retired = record.clone();
        if let ImageState::Ready { variants, .. } = &mut retired.state {
            variants.clone_from(&kept_variants);
        }
        let ready = ReadyImage {
            format: *format,
            width: *width,
            height: *height,
            original_bytes: *original_bytes,
            variants: kept_variants,
            variant_set: variant_set
                .clone()
                .unwrap_or_else(VariantSetVersion::unknown),
            sha256: *sha256,
        };
        (Some((retired, ready)), kept)
    }

    /// Retires the variants `record` lists whose drop was confirmed (`ready` is what it keeps):
    /// the record first (conditional on its generation), so its files are garbage only once
    /// no record lists them. Returns the record as it now is, and whether it retired any.
    async fn retire_variants(
        &self,
        record: ImageRecord,
        ready: ReadyImage,
        report: &mut SweepReport,
    ) -> Result<(ImageRecord, bool), FlowError> {
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
                info!(image_id = %record.id, "retired variants whose drop was confirmed");
                Ok((updated, true))
            }
            // Changed meanwhile (collected, re-processed): read it again to judge its files.
            None => Ok((
                self.ports.images.get(&record.id).await?.unwrap_or(record),
                false,
            )),
        }
    }
}
