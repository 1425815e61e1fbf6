//! Versioned documents: small JSON values that a flow reads whole and replaces whole under
//! optimistic concurrency (the crawls' URL and crawl documents, the hosts' learned health and
//! tier statistics). A write names the version it read; if someone wrote in between, it fails
//! with `Conflict` and the flow reads again and retries. One generic port keeps each adapter a
//! few lines; the typed documents live in the flows.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Timestamp;

/// A document as stored: its JSON body and the version a conditional write must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDocument {
    pub body: String,
    pub version: u64,
}

/// One page of a walk of the documents of one kind ([`Documents::scan_documents`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentPage {
    /// Each document with its key.
    pub documents: Vec<(String, StoredDocument)>,
    /// Where the next page starts; `None` once the walk is over.
    pub next: Option<String>,
}

#[async_trait]
pub trait Documents: Send + Sync {
    /// The document of `kind` under `key`; `None` if there is none or it expired at or before
    /// `now`.
    async fn get_document(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredDocument>, StoreError>;

    /// [`get_document`](Self::get_document), except that the answer may miss writes of about the
    /// last second (DynamoDB's eventually consistent read, half the price). For reads that only
    /// settle from an outcome already recorded; a decision to write always reads with
    /// `get_document`, and every write is conditional on the version it read.
    async fn peek_document(
        &self,
        kind: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredDocument>, StoreError> {
        self.get_document(kind, key, now).await
    }

    /// Replaces the document if its version is still `expected` (`None`: only if there is no
    /// document, or it expired at or before `now`), and returns the new version, always greater
    /// than any version the key had before. `StoreError::Conflict` if the version moved on.
    /// The document expires at `expires_at` (deleted some time after; never returned after).
    async fn put_document(
        &self,
        kind: &str,
        key: &str,
        body: &str,
        expected: Option<u64>,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// One page of a walk of every live document of `kind`: start with `cursor` `None`, then
    /// pass each page's `next` until it is `None`. A document present (and live) throughout the
    /// walk is returned exactly once; one written, deleted or expiring during it may or may
    /// not be. Records that expired at or before `now` are not returned. A page holds at most
    /// `limit` documents and may hold fewer, even none, and still have a next one (DynamoDB
    /// filters after reading). A cursor that is not one this walk gave is an error.
    ///
    /// For occasional whole walks (`imgest stats`): on DynamoDB it is a table Scan.
    async fn scan_documents(
        &self,
        kind: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<DocumentPage, StoreError>;
}
