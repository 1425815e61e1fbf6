//! Decoding under the memory budget: a photo's decode waits for room for its footprint (read
//! from the header) and for a decoding slot, then runs off the async threads. Uploads, crawls
//! and backfill decode through here.

use std::sync::Arc;

use bytes::Bytes;

use super::FlowError;
use imgest_core::budget::{MemoryBudget, Reservation};
use imgest_core::imaging::{Imaging, PipelineError, Processed};

/// Decodes and resizes `body` once room for its footprint is reserved and a decoding slot is
/// free (off the async threads). The outer error is the task's; the inner one the photo's.
pub(crate) async fn decode(
    pipeline: &Arc<dyn Imaging>,
    budget: &MemoryBudget,
    slots: &Arc<tokio::sync::Semaphore>,
    body: &Bytes,
) -> Result<Result<Processed, PipelineError>, FlowError> {
    let _memory = match reserve_memory(pipeline, budget, body).await {
        Ok(reservation) => reservation,
        Err(e) => return Ok(Err(e)),
    };
    let _slot = slots
        .acquire()
        .await
        .map_err(|e| FlowError::Internal(e.to_string()))?;
    let (pipeline, body) = (Arc::clone(pipeline), body.clone());
    tokio::task::spawn_blocking(move || pipeline.process(&body))
        .await
        .map_err(|e| FlowError::Internal(format!("pipeline task failed: {e}")))
}

/// Reserves what decoding `body` will hold at its peak (its footprint, read from the header
/// off the async threads), waiting for room; a photo larger than the whole decoding pool is
/// refused (`too_many_pixels`, with the budget in the message).
async fn reserve_memory(
    pipeline: &Arc<dyn Imaging>,
    budget: &MemoryBudget,
    body: &Bytes,
) -> Result<Reservation, PipelineError> {
    let (pipeline, bytes) = (Arc::clone(pipeline), body.clone());
    let footprint = tokio::task::spawn_blocking(move || pipeline.footprint(&bytes))
        .await
        .map_err(|e| PipelineError::CorruptImage(format!("the header check failed: {e}")))??;
    // A wait without a time limit is refused only when the photo can never fit.
    budget
        .work(footprint.bytes)
        .await
        .map_err(|_| PipelineError::OverBudget {
            width: footprint.info.width,
            height: footprint.info.height,
            needed: footprint.bytes,
            budget: budget.work_pool(),
        })
}
