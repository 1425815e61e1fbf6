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

/// One page of a walk of the records of one kind ([`Records::scan_records`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordPage {
    /// Each record with its key.
    pub records: Vec<(String, StoredRecord)>,
    /// Where the next page starts; `None` once the walk is over.
    pub next: Option<String>,
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

    /// One page of a walk of every live record of `kind`: start with `cursor` `None`, then
    /// pass each page's `next` until it is `None`. A record present (and live) throughout the
    /// walk is returned exactly once; one written, deleted or expiring during it may or may
    /// not be. Records that expired at or before `now` are not returned. A page holds at most
    /// `limit` records and may hold fewer, even none, and still have a next one (DynamoDB
    /// filters after reading). A cursor that is not one this walk gave is an error.
    ///
    /// For occasional whole walks (`imgest stats`): on DynamoDB it is a table Scan.
    async fn scan_records(
        &self,
        kind: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<RecordPage, StoreError>;
}
