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
//!
//! With `GcParts` (`SweepParts`) above 1 the collecting (sweeping) run is that many runs side
//! by side, one schedule each (`{"job": "collect", "part": 2, "parts": 4}`), each over its
//! [`JobPart`] of the ids (of the shards, from a checkpoint of its own): a run works on one
//! thread, and past some 750 records (19,000 files) a second (docs/capacity.md) one run is not
//! enough. An event whose part is not one of its parts fails the run rather than work on
//! another part's share or on all of it.

use std::time::{Duration, Instant};

use serde::Serialize;

use imgest_core::domain::{JobPart, JobPartError};
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
        .gc_watched(JobPart::WHOLE, Some(started + budget / 2), |_| {})
        .await?;
    let sweep = sweep(
        service,
        JobPart::WHOLE,
        shards_per_run,
        budget.saturating_sub(started.elapsed()),
    )
    .await?;
    Ok(ScheduledReport { gc, sweep })
}

/// GC of `part` alone, for the whole of `budget`: the schedule's collecting run (or one of
/// them), beside its sweeping one, so that collection has all of its runs' time.
pub async fn collect(
    service: &Service,
    part: JobPart,
    budget: Duration,
) -> Result<GcReport, FlowError> {
    service
        .gc_watched(part, Some(Instant::now() + budget), |_| {})
        .await
}

/// The sweep of `part`'s shards alone, for the whole of `budget`: a stop at a shard fails
/// the run.
pub async fn sweep(
    service: &Service,
    part: JobPart,
    shards_per_run: usize,
    budget: Duration,
) -> Result<SweepReport, FlowError> {
    let sweep = service
        .sweep_batch(part, shards_per_run, false, Some(Instant::now() + budget))
        .await?;
    if let Some(stop) = sweep.stopped {
        return Err(FlowError::SweepStopped(stop.to_string()));
    }
    Ok(sweep)
}

/// What a scheduled event asks for (its `job`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `{"job": "collect"}`: GC for the whole run; `"part"` and `"parts"`: of that part.
    Collect(JobPart),
    /// `{"job": "sweep"}`: the sweep for the whole run; `"part"` and `"parts"`: of that part.
    Sweep(JobPart),
    /// `{"job": "audit"}`: the next segment's audit.
    Audit,
    /// Anything else: GC for up to half of the run, then the sweep.
    Both,
}

/// The job `event` asks for; a collecting or sweeping run's part must be one of its parts
/// (both numbers, or neither: the whole job).
pub fn job(event: &serde_json::Value) -> Result<Job, JobPartError> {
    Ok(match event["job"].as_str() {
        Some("collect") => Job::Collect(part(event)?),
        Some("sweep") => Job::Sweep(part(event)?),
        Some("audit") => Job::Audit,
        _ => Job::Both,
    })
}

fn part(event: &serde_json::Value) -> Result<JobPart, JobPartError> {
    let (index, parts) = (&event["part"], &event["parts"]);
    if index.is_null() && parts.is_null() {
        return Ok(JobPart::WHOLE);
    }
    // A number that is not a whole one (or missing) is refused as part u64::MAX.
    let whole = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
    JobPart::new(whole(index), whole(parts))
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
        assert_eq!(
            of(r#"{"job": "collect"}"#),
            Ok(Job::Collect(JobPart::WHOLE))
        );
        assert_eq!(of(r#"{"job": "sweep"}"#), Ok(Job::Sweep(JobPart::WHOLE)));
        assert_eq!(of(r#"{"job": "audit"}"#), Ok(Job::Audit));
        assert_eq!(of(r#"{"job": "other"}"#), Ok(Job::Both));
        let schedule = include_str!("../../../events/schedule.json");
        assert_eq!(of(schedule), Ok(Job::Both));
    }

    #[test]
    fn a_run_takes_the_part_its_event_names_and_refuses_one_outside_its_parts() {
        let of = |json: &str| job(&serde_json::from_str(json).unwrap());
        assert_eq!(
            of(r#"{"job": "collect", "part": 3, "parts": 4}"#),
            Ok(Job::Collect(JobPart::new(3, 4).unwrap()))
        );
        assert_eq!(
            of(r#"{"job": "sweep", "part": 1, "parts": 2}"#),
            Ok(Job::Sweep(JobPart::new(1, 2).unwrap()))
        );
        assert!(of(r#"{"job": "sweep", "part": 2, "parts": 2}"#).is_err());
        assert_eq!(
            of(r#"{"job": "collect", "part": 0, "parts": 1}"#),
            Ok(Job::Collect(JobPart::WHOLE))
        );
        for bad in [
            r#"{"job": "collect", "part": 4, "parts": 4}"#,
            r#"{"job": "collect", "part": 1}"#,
            r#"{"job": "collect", "parts": 4}"#,
            r#"{"job": "collect", "part": -1, "parts": 4}"#,
            r#"{"job": "collect", "part": "1", "parts": 4}"#,
            r#"{"job": "collect", "part": 1.5, "parts": 4}"#,
            r#"{"job": "collect", "part": 0, "parts": 17}"#,
            r#"{"job": "collect", "part": 0, "parts": 0}"#,
        ] {
            assert!(of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_run_keeps_a_margin_before_its_deadline_a_tenth_of_a_short_one() {
        assert_eq!(budget(Duration::from_secs(900)), Duration::from_secs(870));
        assert_eq!(budget(Duration::from_secs(120)), Duration::from_secs(108));
        assert_eq!(budget(Duration::ZERO), Duration::ZERO);
    }
}
