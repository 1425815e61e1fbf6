//! The `scheduled-gc` function, every 15 minutes: first collect expired records through the GC index
//! (DynamoDB's TTL deleter lags hours to days), for up to half of the run's time, then sweep
//! the next batch of shards from the saved place until the run's time is spent (the next run
//! goes on from there: both checkpoint, see `flows::gc` and `flows::sweep`). A sweep that stopped at a shard rather than delete more than its share
//! fails the run (the function's error alarm fires) and starts there again next time, until
//! an operator checked it (`imgest sweep --shard SHARD --go-on`). On its second schedule (the event `{"job": "audit"}`) it audits the next
//! segment of the index instead (see `flows::audit`).

use std::time::{Duration, Instant};

use serde::Serialize;

use imgest_flows::audit::AuditReport;
use imgest_flows::gc::GcReport;
use imgest_flows::sweep::SweepReport;
use imgest_flows::{FlowError, Service};

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ScheduledReport {
    pub gc: GcReport,
    pub sweep: SweepReport,
}

/// Time kept back from the function's deadline (at most; a tenth of a short one): a page of
/// the sweep or a batch of GC in flight when the budget ends finishes within it.
pub const MARGIN: Duration = Duration::from_secs(30);

/// A run's budget: the invocation's time left, less its margin.
pub fn budget(time_left: Duration) -> Duration {
    time_left.saturating_sub(MARGIN.min(time_left / 10))
}

/// GC, then the sweep, within `budget` (see [`budget`]): GC for up to half of it, the sweep
/// for the rest.
pub async fn handle(
    service: &Service,
    shards_per_run: usize,
    budget: Duration,
) -> Result<ScheduledReport, FlowError> {
    let started = Instant::now();
    let gc = service
        .gc_watched(Some(started + budget / 2), |_| {})
        .await?;
    let sweep = service
        .sweep_batch(shards_per_run, false, Some(started + budget))
        .await?;
    if let Some(stop) = sweep.stopped {
        return Err(FlowError::SweepStopped(stop.to_string()));
    }
    Ok(ScheduledReport { gc, sweep })
}

/// Which job an event asks for: the audit's schedule sends `{"job": "audit"}`; anything else
/// (the GC schedule's own event) is GC and sweep.
pub fn is_audit(event: &serde_json::Value) -> bool {
    event["job"] == "audit"
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct AuditRun {
    pub segment: u32,
    pub segments: u32,
    pub audit: AuditReport,
}

/// Audits the segment after the last one audited, of `segments`.
pub async fn audit(service: &Service, segments: u32) -> Result<AuditRun, FlowError> {
    let (segment, audit) = service.audit_next_segment(segments).await?;
    Ok(AuditRun {
        segment,
        segments,
        audit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_a_margin_before_its_deadline_a_tenth_of_a_short_one() {
        assert_eq!(budget(Duration::from_secs(900)), Duration::from_secs(870));
        assert_eq!(budget(Duration::from_secs(120)), Duration::from_secs(108));
        assert_eq!(budget(Duration::ZERO), Duration::ZERO);
    }
}
