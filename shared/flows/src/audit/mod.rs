//! The audit: checks every image record against its files and its link count against the
//! offers, and mends what it can.
//!
//! - **Files.** A live record whose files are not all there is repaired from its original (the
//!   pipeline runs again, into a new generation, as a backfill would); without its original it
//!   is reported as broken (nothing can rebuild it; the offers that list it show a gap).
//! - **Link counts.** Every offer's list is counted. A count too high (what a keyed crawl link
//!   may leave, see `docs/consistency.md`) is lowered, so that the photo can expire; a count
//!   too low is raised and reported as a bug. A record whose count disagrees is read again
//!   after the offers were counted: one that moved meanwhile (a link or unlink while the
//!   offers were read) is left for the next audit, neither reported nor corrected. A
//!   correction is a conditional write on the record as read before the offers were counted
//!   (same count, same `last_update`), so a link or unlink meanwhile wins, and it is made only
//!   on records untouched for [`SETTLE`], longer than a crawl's change may be in flight.
//! - **At scale** (`findings`): past what one function can list and count, an S3 Inventory
//!   and a table export compared by Athena find the damage, and
//!   [`Service::audit_findings`] checks the images they name against the live store (the
//!   offers counted again) and mends what the store confirms, a bounded number of lowered
//!   counts a run.

mod findings;

pub use self::findings::{Finding, FindingsOptions, FindingsPlan, SnapshotCount};

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use tracing::{error, info, warn};

use super::backfill::Reprocessed;
use super::{FlowError, Service};
use imgest_core::domain::{BlobKey, ImageId, ImageRecord};
use imgest_core::ports::StoreError;

/// How long a record must be untouched before its link count is corrected: longer than a
/// function may run (15 minutes), so no change that linked it is still on its way to its
/// offer's write.
pub const SETTLE: Duration = Duration::from_secs(20 * 60);

/// Records and offers read per page.
const PAGE: usize = 500;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub images_checked: u64,
    /// Live records some of whose files are missing.
    pub images_missing_files: u64,
    pub images_repaired: u64,
    /// Missing files and no original to rebuild them from.
    pub images_broken: u64,
    pub offers_counted: u64,
    /// Offers listing an image with no live record (never allowed: reported).
    pub links_to_missing_images: u64,
    pub link_counts_too_high: u64,
    pub link_counts_too_low: u64,
    pub link_counts_corrected: u64,
    /// Wrong counts left alone: changed less than [`SETTLE`] ago, or changed while audited.
    pub link_counts_unsettled: u64,
    /// Counts a finding called wrong that the live store does not confirm (the offers
    /// counted again disagree with the finding, or the offer named by the record's keyed
    /// link still lists it): left alone (`findings` only).
    pub link_counts_disputed: u64,
    /// The counts a run of findings would have lowered when that is more than it may lower
    /// (`FindingsOptions::max_lowered`): then it changed nothing. 0 otherwise.
    pub link_counts_over_cap: u64,
}

/// Which records an audit covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditScope {
    /// Every record (`imgest audit`).
    All,
    /// One of `of` disjoint segments of the index (the scheduled audit on AWS, a segment a
    /// run): its records' files and link counts. Offers are read whole every time, but only
    /// this segment's images are counted, so memory stays within the segment's records.
    Segment { segment: u32, of: u32 },
}

impl AuditScope {
    fn scan(self) -> (u32, u32) {
        match self {
            Self::All => (0, 1),
            Self::Segment { segment, of } => (segment, of),
        }
    }

    /// Whether this part of the audit answers for an id no record has: each id belongs to
    /// one segment by its first byte, so that across a cycle each is checked once.
    fn answers_for(self, id: &ImageId) -> bool {
        match self {
            Self::All => true,
            Self::Segment { segment, of } => {
                let first =
                    u32::from_str_radix(id.as_str().get(..2).unwrap_or("00"), 16).unwrap_or(0);
                first % of.max(1) == segment
            }
        }
    }
}

/// Where the scheduled audit resumes: the next segment.
const NEXT_SEGMENT_CHECKPOINT: &str = "audit.next_segment";

/// Records whose files are checked at once (each check lists two prefixes).
const FILE_CHECKS_AT_ONCE: usize = 16;

impl Service {
    /// Audits every record. With `dry_run`, only reports.
    pub async fn audit(&self, dry_run: bool) -> Result<AuditReport, FlowError> {
        self.audit_scope(AuditScope::All, dry_run).await
    }

    /// The scheduled audit: the segment after the one the last run audited, of `segments`
    /// (a full cycle takes `segments` runs). Returns the segment and what it found.
    pub async fn audit_next_segment(&self, segments: u32) -> Result<(u32, AuditReport), FlowError> {
        let segments = segments.max(1);
        let segment = self
            .ports
            .checkpoints
            .load_checkpoint(NEXT_SEGMENT_CHECKPOINT)
            .await?
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0)
            % segments;
        let report = self
            .audit_scope(
                AuditScope::Segment {
                    segment,
                    of: segments,
                },
                false,
            )
            .await?;
        self.ports
            .checkpoints
            .save_checkpoint(
                NEXT_SEGMENT_CHECKPOINT,
                &((segment + 1) % segments).to_string(),
            )
            .await?;
        Ok((segment, report))
    }

    /// Audits the records of `scope`. With `dry_run`, only reports.
    pub async fn audit_scope(
        &self,
        scope: AuditScope,
        dry_run: bool,
    ) -> Result<AuditReport, FlowError> {
        self.audit_scope_watched(scope, dry_run, |_| {}).await
    }

    /// [`audit_scope`](Self::audit_scope), calling `progress` with the report so far after
    /// each group of records whose files were checked and after each page of offers counted
    /// (the CLI's progress).
    pub async fn audit_scope_watched(
        &self,
        scope: AuditScope,
        dry_run: bool,
        mut progress: impl FnMut(&AuditReport),
    ) -> Result<AuditReport, FlowError> {
        let mut report = AuditReport::default();
        // Records first, offers second: a link or unlink after a record was read moves its
        // `last_update`, and the correction's condition then refuses.
        let mut records: HashMap<ImageId, ImageRecord> = HashMap::new();
        let (segment, segments) = scope.scan();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .ports
                .images
                .scan(segment, segments, cursor.as_deref(), PAGE)
                .await?;
            let now = self.ports.clock.now();
            let live: Vec<ImageRecord> = page
                .records
                .into_iter()
                .filter(|r| r.is_live(now))
                .collect();
            for chunk in live.chunks(FILE_CHECKS_AT_ONCE) {
                let checks = chunk.iter().map(|r| self.check_files(r));
                for damage in futures_util::future::join_all(checks).await {
                    if let Some(record) = damage?.and_then(|d| judge_files(d, &mut report))
                        && !dry_run
                    {
                        self.repair_files(&record, &mut report).await?;
                    }
                }
                report.images_checked += chunk.len() as u64;
                progress(&report);
            }
            records.extend(live.into_iter().map(|r| (r.id.clone(), r)));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }

        let mut counts: HashMap<ImageId, u32> = HashMap::new();
        self.walk_photo_lists(0, 1, |lists| {
            for list in lists {
                report.offers_counted += 1;
                for id in list {
                    if records.contains_key(&id) || scope.answers_for(&id) {
                        *counts.entry(id).or_default() += 1;
                    }
                }
            }
            progress(&report);
        })
        .await?;
        let now = self.ports.clock.now();
        for (id, n) in &counts {
            if !records.contains_key(id) && self.ports.images.get(id).await?.is_none() {
                report.links_to_missing_images += 1;
                error!(image_id = %id, offers = n, "offers list an image that has no record");
            }
        }
        for record in records.values() {
            let actual = counts.get(&record.id).copied().unwrap_or(0);
            if actual == record.link_count {
                continue;
            }
            // The offers were counted after the record was read: a link or unlink in between
            // makes the two disagree without anything being wrong. Read back (consistently),
            // a record that moved is left for the next audit.
            let now_stored = self.ports.images.get(&record.id).await?;
            if !now_stored.is_some_and(|r| {
                (&r.generation, r.link_count, r.last_update)
                    == (&record.generation, record.link_count, record.last_update)
            }) {
                report.link_counts_unsettled += 1;
                continue;
            }
            let settled = now.since(record.last_update) >= SETTLE;
            self.correct_count(record, actual, settled, dry_run, &mut report)
                .await?;
        }
        info!(?report, dry_run, "audit finished");
        Ok(report)
    }

    /// A count that disagrees with the `offers` listing the image: reported (too low is a
    /// bug), and corrected (a write conditional on `record` as read) if it was `settled` and
    /// this is no dry run; one that was not, or moved before the write, is left unsettled.
    async fn correct_count(
        &self,
        record: &ImageRecord,
        offers: u32,
        settled: bool,
        dry_run: bool,
        report: &mut AuditReport,
    ) -> Result<(), FlowError> {
        report_wrong_count(record, offers, report);
        if !settled {
            report.link_counts_unsettled += 1;
            return Ok(());
        }
        if dry_run {
            return Ok(());
        }
        self.write_count(record, offers, report).await
    }

    /// Sets the count of `record` as read to `offers`; one that moved since is left unsettled.
    async fn write_count(
        &self,
        record: &ImageRecord,
        offers: u32,
        report: &mut AuditReport,
    ) -> Result<(), FlowError> {
        let now = self.ports.clock.now();
        let corrected = self
            .ports
            .images
            .correct_link_count(record, offers, now, self.policy.orphan_ttl)
            .await?;
        if corrected {
            report.link_counts_corrected += 1;
        } else {
            report.link_counts_unsettled += 1;
        }
        Ok(())
    }

    /// Walks part `segment` of `segments` of every offer's photo list, a page at a time.
    async fn walk_photo_lists(
        &self,
        segment: u32,
        segments: u32,
        mut page: impl FnMut(Vec<Vec<ImageId>>),
    ) -> Result<(), FlowError> {
        let mut cursor: Option<String> = None;
        loop {
            let read = self
                .ports
                .offers
                .scan_photo_lists(segment, segments, cursor.as_deref(), PAGE)
                .await?;
            page(read.lists);
            match read.next {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Lists a live record's files: the damage, if any are missing.
    async fn check_files(&self, record: &ImageRecord) -> Result<Option<FileDamage>, FlowError> {
        let mut present = Vec::new();
        for prefix in BlobKey::generation_prefixes(&record.id, &record.generation) {
            let mut cursor = None;
            loop {
                let page = self
                    .ports
                    .blobs
                    .list(&prefix, cursor.as_ref(), 1000)
                    .await?;
                present.extend(page.blobs.into_iter().map(|b| b.key));
                match page.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
        }
        let needed = record.file_keys();
        let missing: Vec<BlobKey> = needed
            .into_iter()
            .filter(|k| !present.contains(k))
            .collect();
        Ok((!missing.is_empty()).then(|| FileDamage {
            record: record.clone(),
            missing,
        }))
    }

    /// Rebuilds a record's files from its original (a record [`judge_files`] found
    /// repairable); one whose original went missing meanwhile is reported broken.
    async fn repair_files(
        &self,
        record: &ImageRecord,
        report: &mut AuditReport,
    ) -> Result<(), FlowError> {
        match self.reprocess_record(record).await {
            Ok(Reprocessed::Done) => report.images_repaired += 1,
            Ok(_) => {}
            Err(FlowError::Store(StoreError::NotFound(_))) => report.images_broken += 1,
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// Reports a count that disagrees with the `offers` listing the image (too low is a bug: the
/// photo could be collected while linked).
fn report_wrong_count(record: &ImageRecord, offers: u32, report: &mut AuditReport) {
    let (id, count) = (&record.id, record.link_count);
    if offers > count {
        report.link_counts_too_low += 1;
        error!(image_id = %id, count, offers, "a link count is too low (a bug: the photo could be collected while linked)");
    } else {
        report.link_counts_too_high += 1;
        info!(image_id = %id, count, offers, "a link count is too high");
    }
}

/// Reports a record's missing files; returns the record if its original is there to rebuild
/// them from, else reports it broken (nothing can rebuild it; the offers that list it show a
/// gap).
fn judge_files(damage: FileDamage, report: &mut AuditReport) -> Option<ImageRecord> {
    let FileDamage { record, missing } = damage;
    report.images_missing_files += 1;
    warn!(image_id = %record.id, missing = missing.len(), "a record's files are missing");
    let original = BlobKey::original(&record.id, &record.generation);
    if missing.contains(&original) {
        report.images_broken += 1;
        error!(image_id = %record.id, "a record's original is missing: it cannot be rebuilt");
        return None;
    }
    Some(record)
}

/// A live record some of whose files are missing.
struct FileDamage {
    record: ImageRecord,
    missing: Vec<BlobKey>,
}
