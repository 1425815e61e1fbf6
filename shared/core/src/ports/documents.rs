//! Versioned documents: small JSON values that a flow reads whole and replaces whole under
//! optimistic concurrency (the crawls' URL and crawl documents, the hosts' learned health and
//! tier statistics). A write names the version it read; if someone wrote in between, it fails
//! with `Conflict` and the flow reads again and retries. One generic port keeps each adapter a
//! few lines; the typed documents live in the flows.
//!
//! Beside them, **members**: small bodies filed under a group key (the crawls waiting for one
//! URL's download), each written on its own with no version, so that adding one is one small
//! write however many the group holds, and read back a page at a time; and **counter series**:
//! named counts in time buckets (what hosts taught), only ever added to, so that any number of
//! writers add to one series without reading it or retrying.

use std::collections::BTreeMap;

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

/// One page of a group's members ([`Documents::list_members`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberPage {
    /// Each member's name and body, in name order.
    pub members: Vec<(String, String)>,
    /// Where the next page starts; `None` once the group is read to its end.
    pub next: Option<String>,
}

/// One bucket of a counter series ([`Documents::read_counts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountBucket {
    pub bucket: i64,
    /// Each count's name and value (counts never added to are absent).
    pub counts: BTreeMap<String, u64>,
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

    /// Files `body` as `member` of `group` (of `kind`), replacing a member of that name: one
    /// write of its own, whatever else the group holds. It expires at `expires_at` (read as
    /// absent at or after it). `member` is not empty.
    async fn put_member(
        &self,
        kind: &str,
        group: &str,
        member: &str,
        body: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// One page of the live members of `group`, in name order, read consistently (a member put
    /// before the call began is in the walk unless deleted since). Start with `cursor` `None`,
    /// then pass each page's `next`; a page holds at most `limit` members and may hold fewer
    /// and still have a next one. A cursor that is not one this group's walk gave is an error;
    /// one made with [`walk_cursor`]`(group, name)` starts the walk after `name`, a member or
    /// not (what a walk's cursors are).
    async fn list_members(
        &self,
        kind: &str,
        group: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<MemberPage, StoreError>;

    /// Deletes these members of `group` (names that are not there are ignored).
    async fn delete_members(
        &self,
        kind: &str,
        group: &str,
        members: &[String],
    ) -> Result<(), StoreError>;

    /// Adds each of `counts` (name, amount) to bucket `bucket` (at least 0) of the series of
    /// `kind` under `key`, a count never added to starting at zero, and keeps the bucket at
    /// least until `expires_at`. One write that reads nothing and never conflicts: concurrent
    /// adds all count. Names are lowercase ASCII letters, digits and `_`.
    async fn add_counts(
        &self,
        kind: &str,
        key: &str,
        bucket: i64,
        counts: &[(&str, u64)],
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// The series' buckets from `from` to `to` (both included) that hold counts, in bucket
    /// order; buckets expired at `now` are left out. The answer may miss adds of about the last
    /// second (DynamoDB's eventually consistent read).
    async fn read_counts(
        &self,
        kind: &str,
        key: &str,
        from: i64,
        to: i64,
        now: Timestamp,
    ) -> Result<Vec<CountBucket>, StoreError>;
}

/// Whether `name` may name a count: lowercase ASCII letters, digits and `_`, 1 to 32 of them.
pub fn is_count_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// What every adapter refuses of an [`add_counts`](Documents::add_counts): a negative bucket,
/// or a name that cannot name a count (`store` names the adapter in the error).
pub fn check_counts<'a>(
    store: &str,
    bucket: i64,
    mut names: impl Iterator<Item = &'a str>,
) -> Result<(), StoreError> {
    if bucket < 0 {
        return Err(StoreError::corrupt(format!(
            "{store}: counter bucket {bucket} is negative"
        )));
    }
    match names.find(|name| !is_count_name(name)) {
        Some(name) => Err(StoreError::corrupt(format!(
            "{store}: {name:?} cannot name a count"
        ))),
        None => Ok(()),
    }
}

/// A walk's cursor as the adapters give it: the walk's scope (a record kind, a group) and the
/// last key read, as JSON, so that a cursor of another walk, or none at all, is refused rather
/// than silently starting somewhere else.
pub fn walk_cursor(scope: &str, last: &str) -> String {
    serde_json::json!([scope, last]).to_string()
}

/// The last key read, from a [`walk_cursor`] of `scope` (`store` names the adapter in the
/// error).
pub fn walk_cursor_key(store: &str, scope: &str, cursor: &str) -> Result<String, StoreError> {
    match serde_json::from_str::<[String; 2]>(cursor) {
        Ok([of, key]) if of == scope => Ok(key),
        _ => Err(StoreError::BadCursor(format!(
            "{store}: {cursor:?} is not a cursor of a walk of {scope:?}"
        ))),
    }
}
