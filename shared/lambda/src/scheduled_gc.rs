//! The `scheduled-gc` function, every 15 minutes, two runs side by side, each for the whole of
//! its time: one collects expired records through the GC index (the event `{"job":
//! "collect"}`; DynamoDB's TTL deleter lags hours to days), the other sweeps the next batch of
//! shards from the saved place (`{"job": "sweep"}`; the next run goes on from there: both
//! checkpoint, see `flows::gc` and `flows::sweep`). An event naming neither (a run by hand)
//! does both in one run: GC for up to half of its time, then the sweep. A sweep that stopped at
//! a shard rather than delete more than its share fails the run (the function's error alarm
//! fires) and starts there again next time, until an operator checked it (`imgest sweep
//! --shard SHARD --go-on`). On its third schedule (`{"job": "audit"}`) it audits the next
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
/// for the rest (a run that names no job).
pub async fn handle(
    service: &Service,
    shards_per_run: usize,
    budget: Duration,
) -> Result<ScheduledReport, FlowError> {
    let started = Instant::now();
    let gc = service
        .gc_watched(Some(started + budget / 2), |_| {})
        .await?;
    let sweep = sweep(
        service,
        shards_per_run,
        budget.saturating_sub(started.elapsed()),
    )
    .await?;
    Ok(ScheduledReport { gc, sweep })
}

/// GC alone, for the whole of `budget`: the schedule's collecting run, beside its sweeping one,
/// so that collection has all of its runs' time.
pub async fn collect(service: &Service, budget: Duration) -> Result<GcReport, FlowError> {
    service
        .gc_watched(Some(Instant::now() + budget), |_| {})
        .await
}

/// The sweep alone, for the whole of `budget`: a stop at a shard fails the run.
pub async fn sweep(
    service: &Service,
    shards_per_run: usize,
    budget: Duration,
) -> Result<SweepReport, FlowError> {
    let sweep = service
        .sweep_batch(shards_per_run, false, Some(Instant::now() + budget))
        .await?;
    if let Some(stop) = sweep.stopped {
        return Err(FlowError::SweepStopped(stop.to_string()));
    }
    Ok(sweep)
}

/// What a scheduled event asks for (its `job`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `{"job": "collect"}`: GC for the whole run.
    Collect,
    /// `{"job": "sweep"}`: the sweep for the whole run.
    Sweep,
    /// `{"job": "audit"}`: the next segment's audit.
    Audit,
    /// Anything else: GC for up to half of the run, then the sweep.
    Both,
}

/// The job `event` asks for.
pub fn job(event: &serde_json::Value) -> Job {
    match event["job"].as_str() {
        Some("collect") => Job::Collect,
        Some("sweep") => Job::Sweep,
        Some("audit") => Job::Audit,
        _ => Job::Both,
    }
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
    fn an_event_names_its_job_and_one_that_names_none_does_both() {
        let of = |json: &str| job(&serde_json::from_str(json).unwrap());
        assert_eq!(of(r#"{"job": "collect"}"#), Job::Collect);
        assert_eq!(of(r#"{"job": "sweep"}"#), Job::Sweep);
        assert_eq!(of(r#"{"job": "audit"}"#), Job::Audit);
        assert_eq!(of(r#"{"job": "other"}"#), Job::Both);
        let schedule = include_str!("../../../events/schedule.json");
        assert_eq!(of(schedule), Job::Both);
    }

    #[test]
    fn a_run_keeps_a_margin_before_its_deadline_a_tenth_of_a_short_one() {
        assert_eq!(budget(Duration::from_secs(900)), Duration::from_secs(870));
        assert_eq!(budget(Duration::from_secs(120)), Duration::from_secs(108));
        assert_eq!(budget(Duration::ZERO), Duration::ZERO);
    }
}
