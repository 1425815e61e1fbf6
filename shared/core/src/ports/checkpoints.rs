//! Small named values that long jobs save to resume where they stopped (the sweeper's next
//! shard survives Lambda's 15-minute limit).

use async_trait::async_trait;

use super::StoreError;

#[async_trait]
pub trait Checkpoints: Send + Sync {
    async fn load_checkpoint(&self, name: &str) -> Result<Option<String>, StoreError>;
    async fn save_checkpoint(&self, name: &str, value: &str) -> Result<(), StoreError>;
}
