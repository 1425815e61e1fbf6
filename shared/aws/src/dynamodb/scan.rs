//! Walks of every item of one kind (the backfill's and the audit's enumerations, the stats'
//! walk of records): DynamoDB's parallel `Scan` filtered on the sort key (and, for records,
//! whose kind is in the partition key, on the partition key's prefix), with its
//! `LastEvaluatedKey` as an opaque cursor.
//!
//! A Scan cannot be limited to some keys, so each reads only the attributes its kind needs
//! (`Select: SPECIFIC_ATTRIBUTES` with a projection): the functions that scan are allowed
//! exactly that (their policies' `dynamodb:Attributes`, `template.yaml`), so they can read no
//! other kind's attributes (an upload's owner, a crawl's URLs, a rate limit).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Select};

use super::DynamoStore;
use super::item::{Expr, Item, PK, SK, s};
use crate::sdk_error::sdk_error;
use imgest_core::ports::StoreError;

/// Items read per page at most (DynamoDB also stops a page at 1 MB).
const PAGE_MAX: usize = 1000;

/// A scan's position as a cursor: its `pk` and `sk`.
fn cursor_of(key: &Item) -> Option<String> {
    let string = |attr| match key.get(attr) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    };
    serde_json::to_string(&[string(PK)?, string(SK)?]).ok()
}

fn key_of_cursor(cursor: &str) -> Result<Item, StoreError> {
    let [pk, sk]: [String; 2] = serde_json::from_str(cursor)
        .map_err(|_| StoreError::BadCursor(format!("dynamodb: scan cursor {cursor:?}")))?;
    Ok(HashMap::from([
        (PK.to_owned(), s(pk)),
        (SK.to_owned(), s(sk)),
    ]))
}

impl DynamoStore {
    /// One page of part `segment` of `segments` of a scan of the items of `kind` (and, with
    /// `pk_prefix`, only those whose `pk` begins with it), read consistently, and where the
    /// next page starts. `limit` counts the items read, of any kind (the filter applies after
    /// the read, and the read is billed whole), so a page may hold fewer, or none, and still
    /// have a next one.
    /// Only the attributes in `projection` are read (the key attributes are added).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn scan_items(
        &self,
        kind: &str,
        pk_prefix: Option<&str>,
        projection: &[&str],
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let segments = segments.clamp(1, 1_000_000);
        let segment = segment.min(segments - 1);
        let start = cursor.map(key_of_cursor).transpose()?;
        let mut e = Expr::new();
        let mut filter = e.eq(SK, s(kind));
        if let Some(prefix) = pk_prefix {
            filter = format!("{filter} AND {}", e.begins_with(PK, prefix));
        }
        let projected: Vec<String> = [PK, SK]
            .iter()
            .chain(projection.iter().filter(|a| **a != PK && **a != SK))
            .map(|attr| e.name(attr))
            .collect();
        let parts = e.finish();
        let out = self
            .client
            .scan()
            .table_name(&self.table)
            .segment(i32::try_from(segment).unwrap_or(0))
            .total_segments(i32::try_from(segments).unwrap_or(1))
            .filter_expression(filter)
            .select(Select::SpecificAttributes)
            .projection_expression(projected.join(", "))
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
            .consistent_read(true)
            .limit(i32::try_from(limit.clamp(1, PAGE_MAX)).unwrap_or(1))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| sdk_error(format!("scanning {kind} items"), e))?;
        let next = out.last_evaluated_key.as_ref().and_then(cursor_of);
        Ok((out.items.unwrap_or_default(), next))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_cursor_round_trips_and_a_foreign_one_is_an_error() {
        let key = HashMap::from([(PK.to_owned(), s("image#ab")), (SK.to_owned(), s("image"))]);
        let cursor = cursor_of(&key).unwrap();
        assert_eq!(key_of_cursor(&cursor).unwrap(), key);
        assert!(key_of_cursor("not json").is_err());
        assert!(key_of_cursor("[\"one\"]").is_err());
    }
}
