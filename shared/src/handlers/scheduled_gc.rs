//! The `scheduled-gc` function, hourly: first collect expired records through the GC index
//! (DynamoDB's TTL deleter lags hours to days), then sweep the next batch of shards from the
//! saved checkpoint.

use serde::Serialize;

use crate::flows::gc::GcReport;
use crate::flows::sweep::SweepReport;
use crate::flows::{FlowError, Service};

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
    Ok(ScheduledReport { gc, sweep })
}
