//! The table's schema, exactly as the SAM template declares it (tests and local setup create
//! it with [`create_table`]):
//!
//! - key `pk` (S, HASH) + `sk` (S, RANGE); on-demand billing;
//! - TTL on `ttl` (N, epoch seconds);
//! - stream with view type `OLD_IMAGE` (TTL deletions of image records carry the generation
//!   whose files are to be deleted);
//! - GSI `gc-index`: `gc_bucket` (S, HASH) + `gc_at` (N, RANGE, ms), projection KEYS_ONLY
//!   (GC reads each candidate's record again anyway, and an entry that projects nothing else
//!   is not rewritten when the record changes: DynamoDB bills those index writes). Sparse:
//!   only garbage-collection candidates carry both attributes (processing claims and unlinked
//!   ready images; `gc_at` is never later than their expiry, see the images adapter).
//!   `gc_bucket` = `"gc#"` + the image id's first hex digit + the quarter of its second
//!   (`gc#a2`): 64 partitions to spread writes (the layout before wrote 16, `gc#a`; GC lists
//!   those too).

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection, ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TableStatus, TimeToLiveSpecification,
};

use super::build_error;
use super::item::{PK, SK, TTL};
use crate::sdk_error::{error_code, sdk_error};
use imgest_core::domain::ImageId;
use imgest_core::ports::StoreError;

/// The garbage-collection index.
pub const GC_INDEX: &str = "gc-index";
pub(crate) const GC_BUCKET: &str = "gc_bucket";
pub(crate) const GC_AT: &str = "gc_at";
/// GC-index partitions per first hex digit of the image id: its second digit's quarter.
const GC_BUCKETS_PER_DIGIT: u32 = 4;

/// The GC-index partitions every record may be under: 64 written now, and the 16 of the
/// layout before (one per first digit), which drain as their records are collected or written
/// again. A whole GC run lists them all, a part of GC those of its digits.
pub const GC_LISTED_BUCKETS: usize = 16 * (GC_BUCKETS_PER_DIGIT as usize + 1);

/// The `gc_bucket` of an image: its id's first hex digit and the quarter of its second
/// (`gc#a2`), so that a GC index written 20,000 times a second (ten times seed 001's peak's
/// orphans) spreads over 64 partitions.
pub(crate) fn gc_bucket(id: &ImageId) -> String {
    let mut digits = id.as_str().chars();
    let first = digits.next().unwrap_or('0');
    let quarter =
        digits.next().and_then(|c| c.to_digit(16)).unwrap_or(0) / (16 / GC_BUCKETS_PER_DIGIT);
    format!("gc#{first}{quarter}")
}

/// The buckets of the ids that start with `digit`: the one of the layout before (`gc#a`),
/// then the current ones (`gc#a0` … `gc#a3`).
pub(crate) fn gc_buckets_of(digit: char) -> impl Iterator<Item = String> {
    std::iter::once(format!("gc#{digit}"))
        .chain((0..GC_BUCKETS_PER_DIGIT).map(move |q| format!("gc#{digit}{q}")))
}

/// How long [`create_table`] waits for the table and its index to become active.
const ACTIVE_WAIT: Duration = Duration::from_secs(300);

fn attribute(name: &str, kind: ScalarAttributeType) -> Result<AttributeDefinition, StoreError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(kind)
        .build()
        .map_err(|e| build_error("an attribute definition", e))
}

fn key_element(name: &str, kind: KeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .map_err(|e| build_error("a key schema element", e))
}

/// Creates the table `table` with the schema above, waits until it and its index are active
/// and enables TTL on `ttl`. `StoreError::Conflict` if a table of that name exists.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let gc_index = GlobalSecondaryIndex::builder()
        .index_name(GC_INDEX)
        .key_schema(key_element(GC_BUCKET, KeyType::Hash)?)
        .key_schema(key_element(GC_AT, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .map_err(|e| build_error("the gc index", e))?;
    let stream = StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::OldImage)
        .build()
        .map_err(|e| build_error("the stream specification", e))?;
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(PK, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(SK, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(GC_BUCKET, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(GC_AT, ScalarAttributeType::N)?)
        .key_schema(key_element(PK, KeyType::Hash)?)
        .key_schema(key_element(SK, KeyType::Range)?)
        .global_secondary_indexes(gc_index)
        .stream_specification(stream)
        .send()
        .await;
    if let Err(e) = created {
        if error_code(&e) == Some("ResourceInUseException") {
            return Err(StoreError::Conflict(format!(
                "table {table} already exists"
            )));
        }
        return Err(sdk_error(format!("creating table {table}"), e));
    }
    wait_until_active(client, table).await?;
    let ttl = TimeToLiveSpecification::builder()
        .attribute_name(TTL)
        .enabled(true)
        .build()
        .map_err(|e| build_error("the TTL specification", e))?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await
        .map_err(|e| sdk_error(format!("enabling TTL on {table}"), e))?;
    Ok(())
}

async fn wait_until_active(client: &Client, table: &str) -> Result<(), StoreError> {
    let deadline = tokio::time::Instant::now() + ACTIVE_WAIT;
    loop {
        let described = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| sdk_error(format!("describing table {table}"), e))?;
        let active = described.table().is_some_and(|t| {
            t.table_status() == Some(&TableStatus::Active)
                && t.global_secondary_indexes()
                    .iter()
                    .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active))
        });
        if active {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StoreError::Unavailable {
                message: format!("table {table} is not active after {ACTIVE_WAIT:?}"),
                source: None,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
