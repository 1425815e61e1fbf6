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
//! **Runs side by side** (`SweepParts`) each sweep a [`JobPart`] of the shards (those whose
//! first hex digit is the part's), from a checkpoint of their own: one run judges some 19,000
//! files a second, and at 10¹⁰ files a pass in a week needs more (docs/capacity.md).
//!
//! **A run of the scheduled sweep has a time budget** ([`Service::sweep_batch`]): it saves its
//! place after every page (the shard, the prefix in it, the listing's cursor, and the shard's
//! count toward its share so far) and the next run resumes there, so a shard larger than a run
//! (at 10⁹ images one takes some 25 minutes) is swept over several, its share still counted
//! over all of it.
//!
//! [`variants`]: crate::variants
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tracing::{error, info, warn};

use super::{FlowError, Service};
use imgest_core::domain::{
    BlobKey, IMAGE_AREAS, ImageId, ImageRecord, ImageState, JobPart, ORIGINALS_PREFIX, SHARD_COUNT,
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
    /// The run's time budget was spent before its shards were (the next run resumes at the
    /// page it saved).
    pub out_of_time: bool,
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
}

/// Where a shard's sweep is, and its count toward the share so far: what the scheduled sweep
/// saves after every page and resumes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct SweepPlace {
    /// The shard, two hex digits (`"3f"`).
    shard: String,
    /// Which of the shard's prefixes ([`shard_sweep_prefixes`]).
    prefix: usize,
    /// Where the listing of that prefix goes on (`None`: at its start).
    cursor: Option<String>,
    scanned: u64,
    garbage: u64,
}

impl SweepPlace {
    fn at_shard(shard: usize) -> Self {
        Self {
            shard: format!("{:02x}", shard % SHARD_COUNT),
            ..Self::default()
        }
    }

    /// A saved place; before places were saved per page, a shard alone (`"3f"`). Anything
    /// unreadable starts at the first shard.
    fn parse(saved: &str) -> Self {
        let place = serde_json::from_str::<Self>(saved).unwrap_or_else(|_| Self {
            shard: saved.to_owned(),
            ..Self::default()
        });
        match usize::from_str_radix(&place.shard, 16) {
            Ok(n) if n < SHARD_COUNT && place.shard.len() == 2 && place.prefix < 3 => place,
            _ => Self::at_shard(0),
        }
    }

    fn index(&self) -> usize {
        usize::from_str_radix(&self.shard, 16).unwrap_or(0)
    }
}

/// How sweeping a shard from a place ended.
enum ShardEnd {
    Done,
    /// Past its share ([`SweepReport::stopped`]).
    Stopped,
    /// The time budget was spent mid-shard.
    OutOfTime,
}

/// Prefixes a shard's sweep lists (the capacity model counts a pass's LISTs by it).
pub const PREFIXES_PER_SHARD: usize = 3;

/// The prefixes a shard's files are under: both image areas (variants and originals), then
/// the layout before areas (`{shard}/{id}/...`: nothing of it is an image file now).
fn shard_sweep_prefixes(shard: &str) -> [String; PREFIXES_PER_SHARD] {
    let [variants, originals] = IMAGE_AREAS;
    [
        format!("{variants}{shard}/"),
        format!("{originals}{shard}/"),
        format!("{shard}/"),
    ]
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

/// Where `sweep_batch` resumes: a [`SweepPlace`], as JSON; a part of the sweep's runs side by
/// side has its own ([`checkpoint_of`]).
const SWEEP_CHECKPOINT: &str = "sweep.next_shard";

/// Shards per first hex digit: a [`JobPart`] of the sweep is its digits' shards.
const SHARDS_PER_DIGIT: usize = SHARD_COUNT / 16;

/// The checkpoint `part`'s runs resume from. The whole sweep's is the one it always had; a
/// part's names the parts it is one of, so a change of `SweepParts` starts each new part at
/// its first shard (sweeping again is safe) rather than at a place another split saved.
fn checkpoint_of(part: JobPart) -> String {
    if part == JobPart::WHOLE {
        SWEEP_CHECKPOINT.to_owned()
    } else {
        format!("{SWEEP_CHECKPOINT}.part-{}-of-{}", part.index(), part.of())
    }
}

/// Whether shard `index` (0 to 255) is `part`'s.
fn holds_shard(part: JobPart, index: usize) -> bool {
    u8::try_from(index / SHARDS_PER_DIGIT).is_ok_and(|digit| part.holds_digit(digit))
}

/// `part`'s first shard after `index`, round to its first.
fn next_shard(part: JobPart, index: usize) -> usize {
    (1..=SHARD_COUNT)
        .map(|step| (index + step) % SHARD_COUNT)
        .find(|&i| holds_shard(part, i))
        .unwrap_or(0)
}

/// Files listed (and records looked up) per page.
pub const SWEEP_PAGE: usize = 1000;

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

    /// Sweeps the next `shards` shards, or until `until` (checked after each page): resumes
    /// at the saved place and saves it after every page, so a run cut short (Lambda's
    /// 15-minute limit) loses at most a page's work, and a shard longer than a run is swept
    /// over several. A shard where the sweep stopped is not passed: the next run starts at the
    /// page it stopped at again.
    ///
    /// Of `part`'s shards only (one of several runs side by side, or the whole sweep), from
    /// `part`'s own checkpoint.
    pub async fn sweep_batch(
        &self,
        part: JobPart,
        shards: usize,
        dry_run: bool,
        until: Option<Instant>,
    ) -> Result<SweepReport, FlowError> {
        let checkpoint = checkpoint_of(part);
        let mut place = self
            .ports
            .checkpoints
            .load_checkpoint(&checkpoint)
            .await?
            .map_or_else(
                || SweepPlace::at_shard(0),
                |saved| SweepPlace::parse(&saved),
            );
        if !holds_shard(part, place.index()) {
            place = SweepPlace::at_shard(next_shard(part, place.index()));
        }
        let start = place.index();
        let mut report = SweepReport::default();
        let options = SweepOptions::dry_run(dry_run);
        let mut done = 0;
        let part_shards = part.digits().count() * SHARDS_PER_DIGIT;
        while done < shards.min(part_shards) {
            // A run sweeps at least a page, however little time it was given.
            if done > 0 && until.is_some_and(|u| Instant::now() >= u) {
                report.out_of_time = true;
                break;
            }
            match self
                .sweep_from(&mut place, options, &mut report, until, Some(&checkpoint))
                .await?
            {
                ShardEnd::Done => {}
                ShardEnd::Stopped => break,
                ShardEnd::OutOfTime => {
                    report.out_of_time = true;
                    break;
                }
            }
            done += 1;
            place = SweepPlace::at_shard(next_shard(part, place.index()));
            self.save_place(&checkpoint, &place).await?;
        }
        self.log_sweep(&report, options, Some(start));
        Ok(report)
    }

    async fn save_place(&self, checkpoint: &str, place: &SweepPlace) -> Result<(), FlowError> {
        let saved = serde_json::to_string(place)
            .map_err(|e| FlowError::Internal(format!("cannot encode the sweep's place: {e}")))?;
        self.ports
            .checkpoints
            .save_checkpoint(checkpoint, &saved)
            .await?;
        Ok(())
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
        let mut place = SweepPlace {
            shard: shard.to_owned(),
            ..SweepPlace::default()
        };
        self.sweep_from(&mut place, options, report, None, None)
            .await
            .map(drop)
    }

    /// Sweeps a shard from `place` to its end, page by page, moving `place` on after each page
    /// (and saving it as checkpoint `save`, if any); stops past the share, or mid-shard once
    /// `until` passed.
    async fn sweep_from(
        &self,
        place: &mut SweepPlace,
        options: SweepOptions,
        report: &mut SweepReport,
        until: Option<Instant>,
        save: Option<&str>,
    ) -> Result<ShardEnd, FlowError> {
        report.shards += 1;
        let confirmed = self.confirmed_variants().await?.map(|c| c.names);
        let mut tally = ShardTally {
            shard: u8::from_str_radix(&place.shard, 16).unwrap_or_default(),
            scanned: place.scanned,
            garbage: place.garbage,
            ..ShardTally::default()
        };
        let prefixes = shard_sweep_prefixes(&place.shard);
        let end = Stage::Sweep
            .time_async(async {
                while let Some(prefix) = prefixes.get(place.prefix) {
                    let cursor = place.cursor.as_deref().and_then(BlobKey::parse);
                    let next = self
                        .sweep_page(
                            prefix,
                            cursor.as_ref(),
                            options,
                            confirmed.as_ref(),
                            &mut tally,
                            report,
                        )
                        .await?;
                    if report.stopped.is_some() {
                        return Ok(ShardEnd::Stopped);
                    }
                    match next {
                        Some(next) => place.cursor = Some(next.as_str().to_owned()),
                        None => (place.prefix, place.cursor) = (place.prefix + 1, None),
                    }
                    (place.scanned, place.garbage) = (tally.scanned, tally.garbage);
                    let more = place.prefix < prefixes.len();
                    if let Some(checkpoint) = save
                        && more
                    {
                        self.save_place(checkpoint, place).await?;
                    }
                    if more && until.is_some_and(|u| Instant::now() >= u) {
                        return Ok(ShardEnd::OutOfTime);
                    }
                }
                Ok::<_, FlowError>(ShardEnd::Done)
            })
            .await?;
        report.variants_kept_unconfirmed += tally.kept_unconfirmed.len() as u64;
        Ok(end)
    }

    /// Sweeps one page of the files under `prefix` from `cursor`; returns where the next page
    /// starts (`None`: the prefix is done). A page that would pass the share is not deleted
    /// ([`SweepReport::stopped`]).
    async fn sweep_page(
        &self,
        prefix: &str,
        cursor: Option<&BlobKey>,
        options: SweepOptions,
        confirmed: Option<&BTreeSet<VariantName>>,
        tally: &mut ShardTally,
        report: &mut SweepReport,
    ) -> Result<Option<BlobKey>, FlowError> {
        let dry_run = options.dry_run;
        let page = self.ports.blobs.list(prefix, cursor, SWEEP_PAGE).await?;
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
            let record = match retiring {
                None => record,
                Some((r, _)) if dry_run => r,
                Some((_, ready)) => self.retire_variants(record, ready, report).await?,
            };
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
            // Files of a size whose drop an operator confirmed are what they asked to
            // delete: they do not count toward the share (whichever run retired them).
            let confirmed_drop =
                kind == Garbage::Unlisted && self.drop_confirmed(&blob.key, confirmed);
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
            return Ok(None);
        }
        tally.garbage += counted;
        if !dry_run && !garbage.is_empty() {
            self.ports.blobs.delete(&garbage).await?;
            report.files_deleted += garbage.len() as u64;
            self.counters
                .sweep_files_deleted
                .increment(garbage.len() as u64);
        }
        Ok(page.next)
    }

    /// Whether the variant file `key` is of a size the configuration no longer makes and
    /// whose drop an operator confirmed.
    fn drop_confirmed(&self, key: &BlobKey, confirmed: Option<&BTreeSet<VariantName>>) -> bool {
        let Some(confirmed) = confirmed else {
            return false;
        };
        let file = key.as_str().rsplit('/').next().unwrap_or_default();
        let Some(name) = file
            .rsplit_once('.')
            .and_then(|(name, _)| VariantName::parse(name).ok())
        else {
            return false;
        };
        self.variants().get(&name).is_none() && !confirmed.contains(&name)
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
            original_metadata,
            thumbhash,
            signature,
        } = &record.state
        else {
            return (None, false);
        };
        let configured = self.variants();
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
            original_metadata: *original_metadata,
            thumbhash: thumbhash.clone(),
            signature: signature.as_deref().cloned(),
        };
        (Some((retired, ready)), kept)
    }

    /// Retires the variants `record` lists whose drop was confirmed (`ready` is what it keeps):
    /// the record first (conditional on its generation), so its files are garbage only once
    /// no record lists them. Returns the record as it now is.
    async fn retire_variants(
        &self,
        record: ImageRecord,
        ready: ReadyImage,
        report: &mut SweepReport,
    ) -> Result<ImageRecord, FlowError> {
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
                Ok(updated)
            }
            // Changed meanwhile (collected, re-processed): read it again to judge its files.
            None => Ok(self.ports.images.get(&record.id).await?.unwrap_or(record)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_of_the_sweep_goes_round_its_own_shards_only() {
        let part = JobPart::new(1, 4).unwrap(); // first digits 1, 5, 9, d
        assert_eq!(next_shard(part, 0x00), 0x10);
        assert_eq!(next_shard(part, 0x10), 0x11);
        assert_eq!(next_shard(part, 0x1f), 0x50);
        assert_eq!(next_shard(part, 0xdf), 0x10, "round to its first");
        assert!(holds_shard(part, 0x9a) && !holds_shard(part, 0xa9));
        let mut seen = 0;
        let mut at = next_shard(part, SHARD_COUNT - 1);
        while seen < SHARD_COUNT && (seen == 0 || at != 0x10) {
            assert!(holds_shard(part, at), "{at:02x}");
            seen += 1;
            at = next_shard(part, at);
        }
        assert_eq!(seen, SHARD_COUNT / 4, "a quarter of the shards, each once");
        assert_eq!(next_shard(JobPart::WHOLE, 0xff), 0);
        assert_eq!(next_shard(JobPart::WHOLE, 0x41), 0x42);
    }

    #[test]
    fn the_whole_sweep_keeps_its_checkpoint_and_each_part_has_its_own() {
        assert_eq!(checkpoint_of(JobPart::WHOLE), "sweep.next_shard");
        assert_eq!(
            checkpoint_of(JobPart::new(2, 4).unwrap()),
            "sweep.next_shard.part-2-of-4"
        );
    }
}
