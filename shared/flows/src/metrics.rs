//! Counters of what the flows did, for the CLI's summaries, tests and metrics output.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

#[derive(Debug, Default)]
pub struct Metrics {
    pub uploads_new: AtomicU64,
    pub uploads_deduplicated: AtomicU64,
    /// Photos decoded and resized: the expensive step that dedup avoids.
    pub pipeline_runs: AtomicU64,
    pub pipeline_rejections: AtomicU64,
    pub files_written: AtomicU64,
    pub gc_images_deleted: AtomicU64,
    pub gc_files_deleted: AtomicU64,
    pub sweep_files_deleted: AtomicU64,
    /// Of `pipeline_runs`: photos re-processed by a backfill.
    pub backfill_runs: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MetricsSnapshot {
    pub uploads_new: u64,
    pub uploads_deduplicated: u64,
    pub pipeline_runs: u64,
    pub pipeline_rejections: u64,
    pub files_written: u64,
    pub gc_images_deleted: u64,
    pub gc_files_deleted: u64,
    pub sweep_files_deleted: u64,
    pub backfill_runs: u64,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            uploads_new: get(&self.uploads_new),
            uploads_deduplicated: get(&self.uploads_deduplicated),
            pipeline_runs: get(&self.pipeline_runs),
            pipeline_rejections: get(&self.pipeline_rejections),
            files_written: get(&self.files_written),
            gc_images_deleted: get(&self.gc_images_deleted),
            gc_files_deleted: get(&self.gc_files_deleted),
            sweep_files_deleted: get(&self.sweep_files_deleted),
            backfill_runs: get(&self.backfill_runs),
        }
    }
}
