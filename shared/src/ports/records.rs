//! Versioned records: small JSON documents that a flow reads whole and replaces whole under
//! optimistic concurrency (the crawls' URL and crawl records). A write names the version it read;
//! if someone wrote in between, it fails with `Conflict` and the flow reads again and retries.
//! One generic port keeps each adapter a few lines; the typed records live in the flows.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Timestamp;

/// A record as stored: its JSON body and the version a conditional write must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub body: String,
    pub version: u64,
}

#[async_trait]
pub trait Records: Send + Sync {
    /// The record of `kind` under `key`; `None` if there is none or it expired at or before
    /// `now`.
    async fn get_record(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredRecord>, StoreError>;

    /// [`get_record`](Self::get_record), except that the answer may miss writes of about the
    /// last second (DynamoDB's eventually consistent read, half the price). For reads that only
    /// settle from an outcome already recorded; a decision to write always reads with
    /// `get_record`, and every write is conditional on the version it read.
    async fn peek_record(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredRecord>, StoreError> {
        self.get_record(kind, key, now).await
    }

    /// Replaces the record if its version is still `expected` (`None`: only if there is no
    /// record, or it expired at or before `now`), and returns the new version, always greater
    /// than any version the key had before. `StoreError::Conflict` if the version moved on.
    /// The record expires at `expires_at` (deleted some time after; never returned after).
    async fn put_record(
        &self,
        kind: &str,
        key: &str,
        body: &str,
        expected: Option<u64>,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<u64, StoreError>;
}
