//! `UploadRecords` on upload items.
//!
//! Item `pk = upload#{id}`, `sk = upload`: `size` N, `state` S (`pending` | `done` |
//! `failed`), `image_id` S and `deduplicated` BOOL (done only), `error_kind` S and
//! `error_request_id` S (failed only: where the processing logged what happened), `created_at` N ms, `expires_at` N ms and `ttl` N (epoch
//! seconds, `ceil(expires_at / 1000)`: DynamoDB deletes the record some time after it expires),
//! `owner` S (who started it; absent in open mode).
//! Reads return the record as stored, expired or not (callers compare `expires_at`).

use async_trait::async_trait;

use super::item::{Attrs, Expr, Item, PK, TTL, key, ms, n, s, ttl_secs};
use super::{DynamoStore, is_condition_failed};
use crate::sdk_error::sdk_error;
use imgest_core::domain::{ImageId, Owner, UploadId};
use imgest_core::ports::{StoreError, UploadRecord, UploadRecords, UploadState};

const KIND: &str = "upload";
const SIZE: &str = "size";
const STATE: &str = "state";
const IMAGE_ID: &str = "image_id";
const DEDUPLICATED: &str = "deduplicated";
const ERROR_KIND: &str = "error_kind";
const ERROR_REQUEST_ID: &str = "error_request_id";
const CREATED_AT: &str = "created_at";
const EXPIRES_AT: &str = "expires_at";
const OWNER: &str = "owner";

const PENDING: &str = "pending";
const DONE: &str = "done";
const FAILED: &str = "failed";

fn upload_key(id: &UploadId) -> Item {
    key(KIND, id.as_str())
}

/// SETs the attributes of `state` and REMOVEs those of the other states.
fn write_state(e: &mut Expr, state: &UploadState) {
    match state {
        UploadState::Pending => {
            e.set(STATE, s(PENDING))
                .remove(IMAGE_ID)
                .remove(DEDUPLICATED)
                .remove(ERROR_KIND)
                .remove(ERROR_REQUEST_ID);
        }
        UploadState::Done {
            image_id,
            deduplicated,
        } => {
            e.set(STATE, s(DONE))
                .set(IMAGE_ID, s(image_id.as_str()))
                .set(
                    DEDUPLICATED,
                    aws_sdk_dynamodb::types::AttributeValue::Bool(*deduplicated),
                )
                .remove(ERROR_KIND)
                .remove(ERROR_REQUEST_ID);
        }
        UploadState::Failed { kind, request_id } => {
            e.set(STATE, s(FAILED))
                .set(ERROR_KIND, s(kind.as_str()))
                .set(ERROR_REQUEST_ID, s(request_id.as_str()))
                .remove(IMAGE_ID)
                .remove(DEDUPLICATED);
        }
    }
}

fn record_from_item(item: &Item, id: &UploadId) -> Result<UploadRecord, StoreError> {
    let what = format!("upload item {id}");
    let a = Attrs::new(item, &what);
    let state = match a.s(STATE)? {
        PENDING => UploadState::Pending,
        DONE => UploadState::Done {
            image_id: ImageId::parse(a.s(IMAGE_ID)?)
                .map_err(|_| a.corrupt(IMAGE_ID, "is not an image id"))?,
            deduplicated: a.opt_bool(DEDUPLICATED)?.unwrap_or(false),
        },
        FAILED => UploadState::Failed {
            kind: a.s(ERROR_KIND)?.to_owned(),
            request_id: a.opt_s(ERROR_REQUEST_ID)?.unwrap_or_default().to_owned(),
        },
        _ => return Err(a.corrupt(STATE, "is not pending, done or failed")),
    };
    Ok(UploadRecord {
        id: id.clone(),
        size: a.u64(SIZE)?,
        state,
        created_at: a.time(CREATED_AT)?,
        expires_at: a.time(EXPIRES_AT)?,
        owner: match a.opt_s(OWNER)? {
            None => None,
            Some(raw) => {
                Some(Owner::parse(raw).ok_or_else(|| a.corrupt(OWNER, "is not an owner"))?)
            }
        },
    })
}

#[async_trait]
impl UploadRecords for DynamoStore {
    async fn create_upload(&self, record: &UploadRecord) -> Result<(), StoreError> {
        let id = &record.id;
        let size = i64::try_from(record.size).map_err(|_| {
            StoreError::corrupt(format!("upload {id}: size {} is out of range", record.size))
        })?;
        // An update of a missing key creates the item; the condition makes it create-only,
        // and the state's attributes come from the helper `finish_upload` uses.
        let mut e = Expr::new();
        e.set(SIZE, n(size))
            .set(CREATED_AT, ms(record.created_at))
            .set(EXPIRES_AT, ms(record.expires_at))
            .set(TTL, n(ttl_secs(record.expires_at)));
        if let Some(owner) = &record.owner {
            e.set(OWNER, s(owner.as_str()));
        }
        write_state(&mut e, &record.state);
        let condition = e.not_exists(PK);
        let parts = e.finish();
        let created = self
            .update(upload_key(id), parts, Some(condition))
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failed(&e) => {
                Err(StoreError::Conflict(format!("upload {id} already exists")))
            }
            Err(e) => Err(sdk_error(format!("creating upload {id}"), e)),
        }
    }

    async fn get_upload(&self, id: &UploadId) -> Result<Option<UploadRecord>, StoreError> {
        let item = self
            .get(upload_key(id), &format!("reading upload {id}"))
            .await?;
        item.as_ref()
            .map(|item| record_from_item(item, id))
            .transpose()
    }

    async fn finish_upload(&self, id: &UploadId, state: &UploadState) -> Result<(), StoreError> {
        let mut e = Expr::new();
        write_state(&mut e, state);
        let condition = e.exists(PK);
        let parts = e.finish();
        let updated = self
            .update(upload_key(id), parts, Some(condition))
            .send()
            .await;
        match updated {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failed(&e) => Err(StoreError::NotFound(format!("upload {id}"))),
            Err(e) => Err(sdk_error(format!("finishing upload {id}"), e)),
        }
    }
}
