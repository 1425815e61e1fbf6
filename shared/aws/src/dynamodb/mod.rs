//! [`DynamoStore`]: image records, offer links, presigned uploads, checkpoints, versioned
//! documents and rate limits in ONE DynamoDB table (single-table design; [`create_table`]
//! creates it, the SAM template declares the same).
//!
//! Every item is keyed by `pk` (`"{kind}#{id}"`) and `sk` (the kind), so kinds never collide
//! and new kinds can add sort keys later:
//!
//! | kind       | pk                   | sk           | attributes                                     |
//! |------------|----------------------|--------------|------------------------------------------------|
//! | image      | `image#{id}`         | `image`      | see the `images` module                        |
//! | offer      | `offer#{id}`         | `offer`      | `photos` (L of S), `version` N, `updated_at` N |
//! | upload     | `upload#{id}`        | `upload`     | see the `uploads` module                       |
//! | checkpoint | `checkpoint#{name}`  | `checkpoint` | `value` S                                      |
//! | record     | `rec#{kind}#{key}`   | `rec`        | see the `records` module                       |
//! | rate limit | `ratelimit#{client}` | `b#{width}#{index}` | one per bucket: see the `rate_limits` module |
//!
//! Only image items are ever `image#`: the ttl-cleanup function's stream filter and its handler select
//! TTL deletions by that prefix, so the TTL deletions of other kinds never reach the GC flow.
//!
//! Timestamps are milliseconds since the epoch (N), except `ttl`, which is in SECONDS as
//! DynamoDB's TTL deleter wants. The deleter lags hours to days, so every read treats a
//! record by its own expiry fields (`ImageRecord::is_expired`), never by its presence.
//!
//! Errors are translated here, at the boundary: a lost condition becomes the flow's outcome
//! (or `StoreError::Conflict`), throttling, 5xx, timeouts and dispatch failures become
//! `StoreError::Unavailable` (retryable) and everything else `StoreError::Backend`, keeping
//! the SDK error as the source.

mod checkpoints;
mod counts;
mod documents;
mod hot_links;
mod images;
mod item;
mod members;
mod offers;
mod rate_limits;
mod scan;
mod schema;
mod stream;
mod uploads;

use std::fmt::Debug;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{BuildError, ProvideErrorMetadata, SdkError};

use crate::sdk_error::sdk_error;
use imgest_core::ports::StoreError;

pub use counts::COUNTER_SHARDS;
pub use hot_links::{HOT_LINKS, LINK_SHARDS};
pub use images::SCAN_ATTRIBUTES as IMAGE_SCAN_ATTRIBUTES;
pub use offers::SCAN_ATTRIBUTES as OFFER_SCAN_ATTRIBUTES;
pub use rate_limits::{MAX_RATE_LIMIT_SHARDS, PERMITS_PER_S_PER_SHARD, rate_limit_shards};
pub use schema::{GC_INDEX, GC_LISTED_BUCKETS, create_table};
pub use stream::{removed_images, stream_json};

/// The AWS `ImageIndex`, `OfferLinks`, `UploadRecords`, `Checkpoints`, `Documents` and
/// `RateLimiter` on one DynamoDB table. Cheap to clone (the SDK client is a handle).
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// The closed rate-limit buckets this process has read (see the `rate_limits` module).
    rate_cache: std::sync::Arc<rate_limits::RateCache>,
    /// The link count at which an image turns hot (see the `hot_links` module).
    hot_links: u32,
}

impl DynamoStore {
    /// A store on `table` (created by the SAM template, or by [`create_table`]).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            rate_cache: std::sync::Arc::default(),
            hot_links: HOT_LINKS,
        }
    }

    /// The same store with images turning hot at `links` links instead of [`HOT_LINKS`] (tests
    /// run the link contract over hot images with a few).
    pub fn with_hot_links(mut self, links: u32) -> Self {
        self.hot_links = links.max(1);
        self
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The item at `key`, read consistently (decisions follow every read here).
    pub(crate) async fn get(
        &self,
        key: item::Item,
        context: &str,
    ) -> Result<Option<item::Item>, StoreError> {
        self.read_item(key, context, true).await
    }

    /// The item at `key`; an eventually consistent read (`consistent: false`) costs half and
    /// may miss the last second's writes.
    pub(crate) async fn read_item(
        &self,
        key: item::Item,
        context: &str,
        consistent: bool,
    ) -> Result<Option<item::Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(consistent)
            .send()
            .await
            .map_err(|e| sdk_error(context, e))?;
        Ok(out.item)
    }

    /// An `UpdateItem` of `key` with an expression's parts and an optional condition; callers
    /// add return values and send.
    pub(crate) fn update(
        &self,
        key: item::Item,
        parts: item::ExprParts,
        condition: Option<String>,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .set_update_expression(parts.update)
            .set_condition_expression(condition)
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
    }

    /// A conditional update of `key` inside a transaction (`what` names it in a build error).
    pub(crate) fn transact_update(
        &self,
        key: item::Item,
        e: item::Expr,
        condition: String,
        what: &str,
    ) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
        let parts = e.finish();
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .set_update_expression(parts.update)
            .condition_expression(condition)
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
            .build()
            .map_err(|e| build_error(what, e))?;
        Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .update(update)
            .build())
    }

    /// A conditional `UpdateItem` answered as a decision: `true` if applied, `false` if its
    /// condition was false; any other failure is translated with `context`.
    pub(crate) async fn update_if(
        &self,
        key: item::Item,
        parts: item::ExprParts,
        condition: String,
        context: impl FnOnce() -> String,
    ) -> Result<bool, StoreError> {
        match self.update(key, parts, Some(condition)).send().await {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(sdk_error(context(), e)),
        }
    }
}

impl DynamoStore {
    /// Every item a key-condition `Query` of the table finds, page after page (for ranges
    /// known to be small: a client's buckets of one window, a series' buckets of one horizon).
    pub(crate) async fn query_all(
        &self,
        condition: &str,
        parts: item::ExprParts,
        consistent: bool,
        context: impl Fn() -> String,
    ) -> Result<Vec<item::Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(condition)
                .set_expression_attribute_names(parts.names.clone())
                .set_expression_attribute_values(parts.values.clone())
                .consistent_read(consistent)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error(context(), e))?;
            items.extend(page.items.unwrap_or_default());
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}

/// Whether the call failed only because its condition expression was false.
pub(crate) fn is_condition_failed<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> bool {
    e.as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|c| c == "ConditionalCheckFailedException")
}

/// A request builder refused a missing required field: a bug here, not bad input.
pub(crate) fn build_error(context: &str, e: BuildError) -> StoreError {
    StoreError::backend(format!("dynamodb: building {context}"), e)
}

pub(crate) use imgest_core::retry::backoff;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

    use super::*;

    fn service(code: &str, status: u16) -> SdkError<UpdateItemError, HttpResponse> {
        let raw = HttpResponse::new(status.try_into().unwrap(), "".into());
        SdkError::service_error(
            UpdateItemError::generic(ErrorMetadata::builder().code(code).build()),
            raw,
        )
    }

    #[test]
    fn only_a_false_condition_is_a_failed_condition() {
        assert!(is_condition_failed(&service(
            "ConditionalCheckFailedException",
            400
        )));
        assert!(!is_condition_failed(&service("ThrottlingException", 400)));
    }
}
