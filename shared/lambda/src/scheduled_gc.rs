//! The `scheduled-gc` function, hourly: first collect expired records through the GC index
//! (DynamoDB's TTL deleter lags hours to days), then sweep the next batch of shards from the
//! saved checkpoint. A sweep that stopped at a shard rather than delete more than its share
//! fails the run (the function's error alarm fires) and starts there again next time, until
//! an operator checked it (`imgest sweep --shard SHARD --go-on`). On its second schedule (the event `{"job": "audit"}`) it audits the next
//! segment of the index instead (see `flows::audit`).

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

pub async fn handle(
    service: &Service,
    shards_per_run: usize,
) -> Result<ScheduledReport, FlowError> {
    let gc = service.gc().await?;
    let sweep = service.sweep_batch(shards_per_run, false).await?;
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
