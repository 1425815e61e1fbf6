//! The `ttl-cleanup` function: image records that DynamoDB's TTL deleter removed, read from the
//! table's stream by the store's adapter. Each removal deletes the files of the removed
//! generation, unless a record of that generation exists again.

use super::batch::{BatchResponse, ItemError, run_batch};
use imgest_core::domain::ImageRecord;
use imgest_core::ports::StoreError;
use imgest_flows::Service;

/// Handles one stream batch (each record by its sequence number: the image record it removed,
/// `None` for any other record); failures are reported per sequence number.
pub async fn handle(
    service: &Service,
    removals: Vec<(String, Result<Option<ImageRecord>, StoreError>)>,
) -> BatchResponse {
    run_batch(removals, |removal| async move {
        match removal {
            Ok(Some(image)) => {
                service.collect_removed(&image).await?;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(ItemError::unusable(e.to_string())),
        }
    })
    .await
    .retry_failures()
}
