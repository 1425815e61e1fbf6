//! The audit at scale's mending: what a comparison outside imgest found (S3 Inventory and a
//! table export, compared by Athena: `docs/operations.md`, "The audit at scale"), checked
//! again against the live store and mended as the audit mends.
//!
//! A finding names an image, and for a link count, what the snapshot held: the offers listing
//! it and the record's `last_update`, both at the export's time. A count is corrected only if
//! the record is the one the snapshot held (the same `last_update`: no link or unlink since)
//! and was already settled then (its last change [`SETTLE`] before the export): a crawl's
//! keyed link in flight at the export's time moved the count before the snapshot and its
//! offer after it, and must not be undone. Every named image's files are checked too.

use tracing::{error, info};

use super::{AuditReport, SETTLE};
use crate::{FlowError, Service};
use imgest_core::domain::{ImageId, ImageRecord, Timestamp};

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

impl Service {
    /// Mends what the comparison of a snapshot taken at `as_of` found (see the module's
    /// documentation). With `dry_run`, only reports.
    pub async fn audit_findings(
        &self,
        findings: &[Finding],
        as_of: Timestamp,
        dry_run: bool,
    ) -> Result<AuditReport, FlowError> {
        let mut report = AuditReport::default();
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
            // The count first: repairing the files rewrites the record.
            if let Some(seen) = finding.count {
                self.mend_count(&record, seen, as_of, now, dry_run, &mut report)
                    .await?;
            }
            if let Some(damage) = self.check_files(&record).await? {
                self.mend_files(damage, dry_run, &mut report).await?;
            }
        }
        info!(?report, dry_run, "audit of findings finished");
        Ok(report)
    }

    async fn mend_count(
        &self,
        record: &ImageRecord,
        seen: SnapshotCount,
        as_of: Timestamp,
        now: Timestamp,
        dry_run: bool,
        report: &mut AuditReport,
    ) -> Result<(), FlowError> {
        if seen.offers == record.link_count {
            return Ok(());
        }
        // Changed since the snapshot, or not settled when it was taken: the snapshot's
        // count of offers may not be this record's.
        if record.last_update != seen.last_update || as_of.since(seen.last_update) < SETTLE {
            report.link_counts_unsettled += 1;
            return Ok(());
        }
        self.correct_count(record, seen.offers, true, now, dry_run, report)
            .await
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
