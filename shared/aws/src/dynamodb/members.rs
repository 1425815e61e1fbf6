//! Members of a record group ([`Documents::put_member`](imgest_core::ports::Documents)).
//!
//! Item `pk = rec#{kind}#{group}`, `sk = m#{member}`: `body` S, `expires_at` N ms and `ttl` N
//! (epoch seconds, an hour after `expires_at`). A group is one partition key, so listing it is
//! a Query (read consistently, in member order) and adding a member is one `PutItem` of a few
//! hundred bytes (one write unit) whatever the group holds. The `sk` prefix keeps members out
//! of a walk of the record kind (`sk = rec`), and the `rec#` prefix out of the image stream's
//! filter and the GC index, as for records.

use std::time::Duration;

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};

use super::DynamoStore;
use super::item::{Attrs, Expr, Item, PK, SK, TTL, ms, n, s, ttl_secs};
use crate::sdk_error::sdk_error;
use imgest_core::domain::Timestamp;
use imgest_core::ports::{MemberPage, StoreError, walk_cursor, walk_cursor_key};

const BODY: &str = "body";
const EXPIRES_AT: &str = "expires_at";
const MEMBER_PREFIX: &str = "m#";
/// How long after expiry the TTL deleter may remove an item (as for records).
const TTL_GRACE: Duration = Duration::from_secs(3600);
/// DynamoDB's most requests in one `BatchWriteItem`.
const BATCH: usize = 25;
/// Rounds of a batch's unprocessed deletions before giving up (retryably).
const BATCH_ROUNDS: u32 = 8;

fn group_pk(kind: &str, group: &str) -> Result<String, StoreError> {
    if kind.contains('#') {
        return Err(StoreError::corrupt(format!(
            "dynamodb: document kind {kind:?} contains '#'"
        )));
    }
    Ok(format!("rec#{kind}#{group}"))
}

fn member_key(pk: &str, member: &str) -> Item {
    Item::from([
        (PK.to_owned(), s(pk)),
        (SK.to_owned(), s(format!("{MEMBER_PREFIX}{member}"))),
    ])
}

impl DynamoStore {
    pub(super) async fn put_member_item(
        &self,
        kind: &str,
        group: &str,
        member: &str,
        body: &str,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        let pk = group_pk(kind, group)?;
        let mut item = member_key(&pk, member);
        item.insert(BODY.to_owned(), super::documents::body_value(body));
        item.insert(EXPIRES_AT.to_owned(), ms(expires_at));
        item.insert(TTL.to_owned(), n(ttl_secs(expires_at.plus(TTL_GRACE))));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| sdk_error(format!("writing member {member:?} of {pk}"), e))?;
        Ok(())
    }

    pub(super) async fn list_member_items(
        &self,
        kind: &str,
        group: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<MemberPage, StoreError> {
        let pk = group_pk(kind, group)?;
        let start = cursor
            .map(|c| walk_cursor_key("dynamodb", group, c))
            .transpose()?
            .map(|m| member_key(&pk, &m));
        let mut e = Expr::new();
        let condition = format!(
            "{} AND begins_with({}, {})",
            e.eq(PK, s(pk.as_str())),
            e.name(SK),
            e.value(s(MEMBER_PREFIX)),
        );
        let parts = e.finish();
        let page = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression(condition)
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
            .consistent_read(true)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| sdk_error(format!("listing the members of {pk}"), e))?;
        let items = page.items.unwrap_or_default();
        let mut members = Vec::with_capacity(items.len());
        let mut last = None;
        for item in &items {
            let what = format!("a member of {pk}");
            let a = Attrs::new(item, &what);
            let member = a
                .s(SK)?
                .strip_prefix(MEMBER_PREFIX)
                .ok_or_else(|| a.corrupt(SK, "is not a member's"))?
                .to_owned();
            last = Some(member.clone());
            if a.time(EXPIRES_AT)? > now {
                members.push((member, super::documents::body_of(item, &a, &what)?));
            }
        }
        // DynamoDB says where it stopped; the cursor carries the member's name only.
        let next = match (page.last_evaluated_key, last) {
            (Some(_), Some(last)) => Some(walk_cursor(group, &last)),
            _ => None,
        };
        Ok(MemberPage { members, next })
    }

    pub(super) async fn delete_member_items(
        &self,
        kind: &str,
        group: &str,
        members: &[String],
    ) -> Result<(), StoreError> {
        let pk = group_pk(kind, group)?;
        for chunk in members.chunks(BATCH) {
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|m| {
                    DeleteRequest::builder()
                        .set_key(Some(member_key(&pk, m)))
                        .build()
                        .map(|d| WriteRequest::builder().delete_request(d).build())
                        .map_err(|e| super::build_error("a member's deletion", e))
                })
                .collect::<Result<_, _>>()?;
            let mut round = 0;
            while !requests.is_empty() {
                if round == BATCH_ROUNDS {
                    return Err(StoreError::Unavailable {
                        message: format!(
                            "dynamodb: {} deletions of members of {pk} left unprocessed",
                            requests.len()
                        ),
                        source: None,
                    });
                }
                if round > 0 {
                    super::backoff(round - 1).await;
                }
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(self.table.clone(), requests)
                    .send()
                    .await
                    .map_err(|e| sdk_error(format!("deleting members of {pk}"), e))?;
                requests = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(&self.table))
                    .unwrap_or_default();
                round += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn members_share_their_group_s_partition_and_stay_out_of_record_walks() {
        let pk = group_pk("waiter", "abc").unwrap();
        let key = member_key(&pk, "acme/o1/c1");
        assert_eq!(key[PK], s("rec#waiter#abc"));
        assert_eq!(key[SK], s("m#acme/o1/c1"));
        assert!(group_pk("wait#er", "abc").is_err());
    }
}
