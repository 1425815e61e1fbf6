//! `imgest stats`: what is stored and what is waiting, counted from the stores themselves (a
//! walk of the image index and of the files, each queue's counts and dead letters). It reads
//! everything once, as the sweep does: for an operator's look, not for a dashboard's polling.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{FlowError, Service};
use crate::domain::{ORIGINALS_PREFIX, PUBLIC_PREFIX};
use crate::ports::{QueueCounts, StoreError};

/// Records and files read per page.
const PAGE: usize = 1000;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Ready records within their lifetime.
    pub images: u64,
    /// Of those, linked by no offer (kept for their orphan window).
    pub orphans: u64,
    /// Links from offers to images, in all.
    pub links: u64,
    /// Records of photos being processed (claims), and expired records GC has not reached.
    pub processing: u64,
    pub expired: u64,
    /// Variant files (`public/`) and originals: how many and how many bytes.
    pub variant_files: u64,
    pub variant_bytes: u64,
    pub original_files: u64,
    pub original_bytes: u64,
    /// Each queue's messages by state, and its dead letters.
    pub queues: BTreeMap<String, QueueStats>,
    /// Dead letters by the kind of their failure (where the queue keeps a reason: locally).
    pub failures_by_kind: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub ready: u64,
    pub delayed: u64,
    pub in_flight: u64,
    pub dead: u64,
}

impl From<QueueCounts> for QueueStats {
    fn from(c: QueueCounts) -> Self {
        Self {
            ready: c.ready,
            delayed: c.delayed,
            in_flight: c.in_flight,
            dead: c.dead,
        }
    }
}

impl Service {
    pub async fn stats(&self) -> Result<Stats, FlowError> {
        let mut stats = Stats::default();
        let now = self.ports.clock.now();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .ports
                .images
                .scan(0, 1, cursor.as_deref(), PAGE)
                .await?;
            for record in &page.records {
                if record.is_live(now) {
                    stats.images += 1;
                    stats.links += u64::from(record.link_count);
                    if record.link_count == 0 {
                        stats.orphans += 1;
                    }
                } else if record.is_ready() {
                    stats.expired += 1;
                } else {
                    stats.processing += 1;
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        (stats.variant_files, stats.variant_bytes) = self.files_under(PUBLIC_PREFIX).await?;
        (stats.original_files, stats.original_bytes) = self.files_under(ORIGINALS_PREFIX).await?;
        for queue in self
            .dead_letter_queues()
            .into_iter()
            .chain([super::crawl::RESULTS_QUEUE.to_owned()])
        {
            match self.ports.messages.counts(&queue).await {
                Ok(counts) => {
                    stats.queues.insert(queue.clone(), counts.into());
                }
                Err(StoreError::NotFound(_)) => continue,
                Err(e) => return Err(e.into()),
            }
            for (kind, n) in self.failure_kinds(&queue).await?.unwrap_or_default() {
                *stats.failures_by_kind.entry(kind).or_default() += n;
            }
        }
        Ok(stats)
    }

    /// How many files are under `prefix`, and their bytes.
    async fn files_under(&self, prefix: &str) -> Result<(u64, u64), FlowError> {
        let (mut files, mut bytes) = (0, 0);
        let mut after = None;
        loop {
            let page = self.ports.blobs.list(prefix, after.as_ref(), PAGE).await?;
            for blob in &page.blobs {
                files += 1;
                bytes += blob.size;
            }
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok((files, bytes)),
            }
        }
    }
}
