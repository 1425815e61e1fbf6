//! The audit at scale's mending: what a comparison outside imgest found (S3 Inventory and a
//! table export, compared by Athena: `docs/operations.md`, "The audit at scale"), checked
//! again against the live store and mended as the audit mends.
//!
//! A finding names an image, and for a link count, what the snapshot held: the offers listing
//! it and the record's `last_update`, both at the export's time. A findings file is a claim,
//! not a proof (a wrong export, a wrong query, a tampered file): a count it calls too high
//! would let GC delete a photo that offers still show. So a count is only ever set to what
//! the live offers say, and lowered only when everything agrees:
//!
//! - the record is the one the snapshot held (the same `last_update`: no link or unlink
//!   since) and was already settled then (its last change [`SETTLE`] before the export): a
//!   crawl's keyed link in flight at the export's time moved the count before the snapshot
//!   and its offer after it, and must not be undone;
//! - the offers, counted again now (every offer read, only the named images counted), list
//!   the image as many times as the finding says, fewer than the record counts, and the
//!   record did not move while they were read;
//! - the offer named by the record's keyed link, if the store marks one, does not list the
//!   image (its crawl may have used the link after the offers were counted), checked again
//!   just before the write;
//! - the run lowers no more than [`FindingsOptions::max_lowered`] counts: one that would
//!   lower more changes nothing and says how many (a comparison that calls that many counts
//!   too high is more likely wrong than the counts).
//!
//! Whatever else disagrees is reported as disputed and left alone. A count the live offers
//! say is too low is raised (raising never loses a photo). Every named image's files are
//! checked too. [`Service::plan_findings`] does every read and no write (a dry run's
//! answer); [`Service::apply_findings`] writes, each correction conditional on the record as
//! the plan read it.

use std::collections::{HashMap, HashSet};

use tracing::{error, info, warn};

use super::{AuditReport, SETTLE, judge_files, report_wrong_count};
use crate::{FlowError, Service};
use imgest_core::domain::{ImageId, ImageRecord, Timestamp};

/// Parts of the offers counted side by side when findings are checked (DynamoDB's parallel
/// scan segments; a store may put every offer in one).
const RECOUNT_SEGMENTS: u32 = 8;

/// One line of the comparison's output: `image_id`, or `image_id,offers,last_update_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub id: ImageId,
    /// For a link count: the offers listing the image and the record's `last_update`, as the
    /// snapshot held them.
    pub count: Option<SnapshotCount>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotCount {
    pub offers: u32,
    pub last_update: Timestamp,
}

impl Finding {
    /// Parses one line; blank lines and `#` comments are `None`.
    pub fn parse(line: &str) -> Result<Option<Self>, String> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(None);
        }
        let mut fields = line.split(',').map(str::trim);
        let id = fields.next().unwrap_or_default();
        let id = ImageId::parse(id).map_err(|e| format!("{line:?}: {e}"))?;
        let rest: Vec<&str> = fields.collect();
        let count = match rest.as_slice() {
            [] => None,
            [offers, last_update] => {
                let offers = offers
                    .parse::<u32>()
                    .map_err(|_| format!("{line:?}: offers must be a count"))?;
                let last_update = last_update
                    .parse::<i64>()
                    .map_err(|_| format!("{line:?}: last_update must be milliseconds"))?;
                Some(SnapshotCount {
                    offers,
                    last_update: Timestamp::from_millis(last_update),
                })
            }
            _ => {
                return Err(format!(
                    "{line:?}: expected image_id or image_id,offers,last_update_ms"
                ));
            }
        };
        Ok(Some(Self { id, count }))
    }
}

/// How [`Service::audit_findings`] may act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingsOptions {
    /// Mend what the store confirms; without it, only report (a dry run).
    pub apply: bool,
    /// The most link counts one run may lower; a run that would lower more changes nothing.
    pub max_lowered: u64,
}

impl FindingsOptions {
    /// One run's cap on lowered counts unless told otherwise: a week of what keyed links
    /// may leave at the seed's scale is far below it, and a wrong comparison far above it.
    pub const DEFAULT_MAX_LOWERED: u64 = 1_000;

    /// A dry run with the default cap.
    pub fn dry_run() -> Self {
        Self {
            apply: false,
            max_lowered: Self::DEFAULT_MAX_LOWERED,
        }
    }

    /// Mending, with the default cap.
    pub fn apply() -> Self {
        Self {
            apply: true,
            ..Self::dry_run()
        }
    }
}

/// What the findings come to once checked against the live store: the report of a dry run,
/// and the writes [`Service::apply_findings`] makes.
#[derive(Debug)]
pub struct FindingsPlan {
    report: AuditReport,
    /// Records whose missing files their original can rebuild.
    repairs: Vec<ImageRecord>,
    /// Counts to set, each on the record as read after the offers were counted.
    corrections: Vec<(ImageRecord, u32)>,
}

impl FindingsPlan {
    /// What the checks found.
    pub fn report(&self) -> &AuditReport {
        &self.report
    }

    /// How many counts the plan lowers.
    pub fn lowerings(&self) -> u64 {
        self.corrections
            .iter()
            .filter(|(record, to)| *to < record.link_count)
            .count() as u64
    }

    /// The report, with the lowerings past `max_lowered` said.
    fn report_within(&self, max_lowered: u64) -> AuditReport {
        let mut report = self.report;
        let lowerings = self.lowerings();
        if lowerings > max_lowered {
            report.link_counts_over_cap = lowerings;
        }
        report
    }
}

impl Service {
    /// Checks and mends what the comparison of a snapshot taken at `as_of` found (see the
    /// module's documentation); without `options.apply`, only reports.
    pub async fn audit_findings(
        &self,
        findings: &[Finding],
        as_of: Timestamp,
        options: FindingsOptions,
    ) -> Result<AuditReport, FlowError> {
        let plan = self.plan_findings(findings, as_of).await?;
        if options.apply {
            self.apply_findings(plan, options.max_lowered).await
        } else {
            let report = plan.report_within(options.max_lowered);
            info!(?report, "audit of findings (dry run) finished");
            Ok(report)
        }
    }

    /// Every check of the findings against the live store, and no write.
    pub async fn plan_findings(
        &self,
        findings: &[Finding],
        as_of: Timestamp,
    ) -> Result<FindingsPlan, FlowError> {
        let mut report = AuditReport::default();
        let mut repairs = Vec::new();
        let mut candidates: Vec<(ImageRecord, SnapshotCount)> = Vec::new();
        for finding in findings {
            let now = self.ports.clock.now();
            let record = self.ports.images.get(&finding.id).await?;
            let Some(record) = record.filter(|r| r.is_live(now)) else {
                if finding.count.is_some_and(|c| c.offers > 0) {
                    report.links_to_missing_images += 1;
                    error!(image_id = %finding.id, "offers list an image that has no record");
                }
                continue;
            };
            report.images_checked += 1;
            if let Some(damage) = self.check_files(&record).await? {
                repairs.extend(judge_files(damage, &mut report));
            }
            let Some(seen) = finding.count else {
                continue;
            };
            if seen.offers == record.link_count {
                continue;
            }
            // Changed since the snapshot, or not settled when it was taken: the snapshot's
            // count of offers may not be this record's.
            if record.last_update != seen.last_update || as_of.since(seen.last_update) < SETTLE {
                report.link_counts_unsettled += 1;
                continue;
            }
            candidates.push((record, seen));
        }
        let mut corrections = Vec::new();
        if !candidates.is_empty() {
            let named: HashSet<&ImageId> = candidates.iter().map(|(r, _)| &r.id).collect();
            let listed = self.count_listings(&named, &mut report).await?;
            for (record, seen) in candidates {
                let offers = listed.get(&record.id).copied().unwrap_or(0);
                if let Some(to) = self
                    .judge_count(record.clone(), seen, offers, &mut report)
                    .await?
                {
                    corrections.push(to);
                }
            }
        }
        Ok(FindingsPlan {
            report,
            repairs,
            corrections,
        })
    }

    /// Makes the plan's writes: none at all if it lowers more than `max_lowered` counts.
    pub async fn apply_findings(
        &self,
        plan: FindingsPlan,
        max_lowered: u64,
    ) -> Result<AuditReport, FlowError> {
        let mut report = plan.report_within(max_lowered);
        if report.link_counts_over_cap > 0 {
            error!(
                lowerings = report.link_counts_over_cap,
                max_lowered,
                "the findings would lower more link counts than a run may: nothing was changed"
            );
            return Ok(report);
        }
        // The counts first: repairing the files rewrites the record, and each correction is
        // conditional on the record as the plan read it.
        for (record, to) in &plan.corrections {
            // The crawl of the offer its keyed link names may have used the link since the
            // offers were counted (a redelivery writes the offer and leaves the record as it
            // is): the last check before the write.
            if *to < record.link_count && self.keyed_link_in_use(record).await? {
                report.link_counts_too_high -= 1;
                report.link_counts_disputed += 1;
                continue;
            }
            self.write_count(record, *to, &mut report).await?;
        }
        for record in &plan.repairs {
            self.repair_files(record, &mut report).await?;
        }
        info!(?report, "audit of findings finished");
        Ok(report)
    }

    /// How many offers list each of `named`, every offer read now.
    async fn count_listings(
        &self,
        named: &HashSet<&ImageId>,
        report: &mut AuditReport,
    ) -> Result<HashMap<ImageId, u32>, FlowError> {
        let parts = (0..RECOUNT_SEGMENTS).map(|segment| async move {
            let mut offers = 0u64;
            let mut counts: HashMap<ImageId, u32> = HashMap::new();
            self.walk_photo_lists(segment, RECOUNT_SEGMENTS, |lists| {
                for list in lists {
                    offers += 1;
                    for id in list {
                        if named.contains(&id) {
                            *counts.entry(id).or_default() += 1;
                        }
                    }
                }
            })
            .await?;
            Ok::<_, FlowError>((offers, counts))
        });
        let mut listed: HashMap<ImageId, u32> = HashMap::new();
        for (offers, counts) in futures_util::future::try_join_all(parts).await? {
            report.offers_counted += offers;
            for (id, n) in counts {
                *listed.entry(id).or_default() += n;
            }
        }
        Ok(listed)
    }

    /// The correction a finding comes to, given the `offers` listing the image now: `None`
    /// when the store does not confirm it (reported).
    async fn judge_count(
        &self,
        record: ImageRecord,
        seen: SnapshotCount,
        offers: u32,
        report: &mut AuditReport,
    ) -> Result<Option<(ImageRecord, u32)>, FlowError> {
        let id = &record.id;
        // The offers were counted after the record was read: one that moved meanwhile is left
        // for another run.
        let still = self.ports.images.get(id).await?;
        if !still.is_some_and(|r| {
            (&r.generation, r.link_count, r.last_update)
                == (&record.generation, record.link_count, record.last_update)
        }) {
            report.link_counts_unsettled += 1;
            return Ok(None);
        }
        let count = record.link_count;
        if offers > count {
            report_wrong_count(&record, offers, report);
            return Ok(Some((record, offers)));
        }
        if offers != seen.offers || offers == count {
            report.link_counts_disputed += 1;
            warn!(image_id = %id, count, offers, finding = seen.offers, "a finding the offers do not confirm: left alone");
            return Ok(None);
        }
        if self.keyed_link_in_use(&record).await? {
            report.link_counts_disputed += 1;
            return Ok(None);
        }
        report_wrong_count(&record, offers, report);
        Ok(Some((record, offers)))
    }

    /// Whether an offer named by the record's keyed links lists the image.
    async fn keyed_link_in_use(&self, record: &ImageRecord) -> Result<bool, FlowError> {
        for offer in self.ports.images.keyed_links(&record.id).await? {
            let listed = self
                .ports
                .offers
                .photos(&offer)
                .await?
                .is_some_and(|photos| photos.contains(&record.id));
            if listed {
                warn!(image_id = %record.id, %offer, "the offer of a keyed link of the count lists the image: its count is left alone");
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_an_id_or_an_id_with_the_snapshots_count() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(Finding::parse("  ").unwrap(), None);
        assert_eq!(Finding::parse("# from athena").unwrap(), None);
        let plain = Finding::parse(id).unwrap().unwrap();
        assert_eq!((plain.id.as_str(), plain.count), (id, None));
        let counted = Finding::parse(&format!("{id}, 3, 1700000000000"))
            .unwrap()
            .unwrap();
        assert_eq!(
            counted.count,
            Some(SnapshotCount {
                offers: 3,
                last_update: Timestamp::from_millis(1_700_000_000_000)
            })
        );
        for bad in [
            "not-an-id".to_owned(),
            format!("{id},3"),
            format!("{id},-1,5"),
            format!("{id},3,soon"),
            format!("{id},3,5,7"),
        ] {
            assert!(Finding::parse(&bad).is_err(), "{bad}");
        }
    }
}
