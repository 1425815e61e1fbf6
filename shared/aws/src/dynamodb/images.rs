//! `ImageIndex` on image items.
//!
//! Item `pk = image#{id}`, `sk = image`:
//!
//! | attribute          | type | when                                                        |
//! |--------------------|------|-------------------------------------------------------------|
//! | `generation`       | S    | always                                                      |
//! | `state`            | S    | `processing` or `ready`                                     |
//! | `claim_expires_at` | N ms | processing only                                             |
//! | `format`, `width`, `height`, `original_bytes` | S, N, N, N | ready only               |
//! | `variants`         | S    | ready only: JSON array of `StoredVariant`                   |
//! | `variant_set`      | S    | ready only: the variant set version of the files (absent on items written before versions) |
//! | `sha256`           | S    | ready only: hex SHA-256 of the bytes sent, checked on every dedup hit (absent on items written before strong hashes) |
//! | `original_metadata` | S   | ready only: what the stored original kept of the photo's metadata (`keep`, `strip-private`, `strip-all`; absent on items written before originals were stripped) |
//! | `thumbhash`        | S    | ready only: the photo's placeholder, a base64 ThumbHash (absent on items written before placeholders were made) |
//! | `signature`        | B    | ready only: the photo's perceptual signature in its compact form, 131 or 227 bytes and 11 a point, up to 16 (130 or 226 if made before points were, 98 or 194 before inner hashes were; absent on items written before signatures were made) |
//! | `previous_generation`, `previous_until` | S, N ms | a re-processed image whose replaced generation's files are still kept |
//! | `created_at`, `last_update` | N ms | always                                             |
//! | `link_count`       | N    | always                                                      |
//! | `expires_at`       | N ms | ready and unlinked only                                     |
//! | `ttl`              | N s  | unlinked: ceil(expires_at / 1000); processing: ceil(claim expiry / 1000) + 1 day; ABSENT while linked, so the TTL deleter never removes a linked image |
//! | `gc_bucket`, `gc_at` | S, N ms | GC candidates only (the sparse `gc-index`): claims, unlinked ready images that were claimed or that an offer dropped; not records made by `create_ready` until an offer drops them (the TTL collects them); `gc_at` is never later than the expiry (see below) |
//! | `clients`          | SS   | the clients whose offers linked the image since it was stored (added by each link of a client's offer, never removed: near-duplicate lookups show a client only images it links or linked) |
//! | `linked_by`        | S    | the keyed offer change whose link was the last change of `link_count`, if it was one (see the offers module) |
//! | `hot`              | N ms | while the image's link changes go to delta items beside it (see the `hot_links` module): its links are `link_count` plus their deltas |
//!
//! Every decision is a conditional write on what was read with a consistent read, retried a
//! bounded number of times when another writer got in between.
//!
//! The index entry is written when an image may start to expire (claimed, or unlinked from its
//! last offer) and deleted when it is linked; in between it stays where it is, because
//! DynamoDB bills a changed index key as a delete and a put. A claim's `gc_at` is the earlier
//! of its claim expiry and the orphan expiry it would get if it completed at once, so it is
//! never later than the expiry of the record it becomes; a refresh moves the expiry later and
//! leaves `gc_at`. An entry is therefore early, never late: [`expired`](ImageIndex::expired)
//! reads each candidate again and skips those that have not expired yet.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnValue};

use super::item::{Attrs, Expr, Item, PK, TTL, id_of, key, ms, n, s, ttl_secs};
use super::offers::{FIRST_LINK, MARKS, client_set, mark, marked_offer, remove_marks};
use super::schema::{GC_AT, GC_BUCKET, GC_INDEX, gc_bucket, gc_buckets_of};
use super::{DynamoStore, backoff, build_error, is_condition_failed};
use crate::sdk_error::sdk_error;
use imgest_core::domain::{
    BYTES_WITHOUT_POINTS, ContentHash, Generation, ImageId, ImageRecord, ImageState, JobPart,
    OfferKey, PreviousFiles, Signature, SourceFormat, StoredVariant, ThumbHash, Timestamp,
    VariantSetVersion,
};
use imgest_core::ports::{Claim, ImageIndex, KeyedLink, ReadyImage, ScanPage, StoreError};

pub(super) const KIND: &str = "image";
const GENERATION: &str = "generation";
pub(super) const STATE: &str = "state";
const PROCESSING: &str = "processing";
pub(super) const READY: &str = "ready";
const CLAIM_EXPIRES_AT: &str = "claim_expires_at";
const FORMAT: &str = "format";
const WIDTH: &str = "width";
const HEIGHT: &str = "height";
const ORIGINAL_BYTES: &str = "original_bytes";
const VARIANTS: &str = "variants";
const VARIANT_SET: &str = "variant_set";
const SHA256: &str = "sha256";
const ORIGINAL_METADATA: &str = "original_metadata";
const THUMBHASH: &str = "thumbhash";
const SIGNATURE: &str = "signature";
const PREVIOUS_GENERATION: &str = "previous_generation";
const PREVIOUS_UNTIL: &str = "previous_until";
const CREATED_AT: &str = "created_at";
pub(super) const LAST_UPDATE: &str = "last_update";
pub(super) const LINK_COUNT: &str = "link_count";
pub(super) const CLIENTS: &str = "clients";
pub(super) const EXPIRES_AT: &str = "expires_at";

/// What a scan of image records reads (with the key attributes): what a record is made of.
pub const SCAN_ATTRIBUTES: &[&str] = &[
    GENERATION,
    STATE,
    CLAIM_EXPIRES_AT,
    FORMAT,
    WIDTH,
    HEIGHT,
    ORIGINAL_BYTES,
    VARIANTS,
    VARIANT_SET,
    ORIGINAL_METADATA,
    THUMBHASH,
    SIGNATURE,
    PREVIOUS_GENERATION,
    PREVIOUS_UNTIL,
    CREATED_AT,
    LAST_UPDATE,
    LINK_COUNT,
    EXPIRES_AT,
    super::hot_links::HOT,
];

/// A processing claim's item outlives the claim by this much before DynamoDB's TTL deleter
/// may remove it (GC normally collects it first, deleting its files too).
const CLAIM_TTL_GRACE: i64 = 86_400;
/// How many times a claim re-reads and retries after losing a race.
const CLAIM_ATTEMPTS: u32 = 10;
/// Keys per BatchGetItem (the API's limit).
const BATCH_GET_MAX: usize = 100;
/// Rounds of retrying unprocessed keys (throttling) before giving up as unavailable.
const UNPROCESSED_ROUNDS: u32 = 8;
/// Items per page when walking one bucket of the GC index.
const GC_PAGE_MAX: usize = 500;

pub(super) fn image_key(id: &ImageId) -> Item {
    key(KIND, id.as_str())
}

/// SETs the orphan expiry of an unlinked ready image: `expires_at` and its `ttl`, and the GC
/// index attributes unless it has them (an entry stays where it is: see the module doc).
pub(super) fn set_orphan_expiry(e: &mut Expr, id: &ImageId, expires_at: Timestamp) {
    e.set(EXPIRES_AT, ms(expires_at))
        .set(TTL, n(ttl_secs(expires_at)))
        .set_if_absent(GC_BUCKET, s(gc_bucket(id)))
        .set_if_absent(GC_AT, ms(expires_at));
}

/// The attributes a ready image has and a claim has not (a SHA-256 only when known: one
/// written before stays where it is).
fn ready_attributes(
    id: &ImageId,
    ready: &ReadyImage,
) -> Result<Vec<(&'static str, AttributeValue)>, StoreError> {
    let original_bytes = i64::try_from(ready.original_bytes).map_err(|_| {
        StoreError::corrupt(format!(
            "image {id}: original size {} is out of range",
            ready.original_bytes
        ))
    })?;
    let variants = serde_json::to_string(&ready.variants)
        .map_err(|e| StoreError::backend(format!("image {id}: encoding variants"), e))?;
    let mut attributes = vec![
        (STATE, s(READY)),
        (FORMAT, s(ready.format.as_str())),
        (WIDTH, n(i64::from(ready.width))),
        (HEIGHT, n(i64::from(ready.height))),
        (ORIGINAL_BYTES, n(original_bytes)),
        (VARIANTS, s(variants)),
        (VARIANT_SET, s(ready.variant_set.as_str())),
    ];
    if let Some(sha256) = &ready.sha256 {
        attributes.push((SHA256, s(sha256.to_hex())));
    }
    if let Some(kept) = ready.original_metadata {
        attributes.push((ORIGINAL_METADATA, s(kept.as_str())));
    }
    if let Some(thumbhash) = &ready.thumbhash {
        attributes.push((THUMBHASH, s(thumbhash.to_base64())));
    }
    if let Some(signature) = &ready.signature {
        attributes.push((SIGNATURE, signature_value(signature)));
    }
    Ok(attributes)
}

/// A signature as the item holds it: its compact form, as bytes (a third smaller than base64:
/// every byte of an image item counts towards each link's write units).
fn signature_value(signature: &Signature) -> AttributeValue {
    AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
        signature.to_bytes(),
    ))
}

/// A claim's place in the GC index: its expiry, or the orphan expiry it would get if it
/// completed now, whichever is earlier (so that the entry is never late; see the module doc).
fn claim_gc_at(now: Timestamp, claim_ttl: Duration, orphan_ttl: Duration) -> Timestamp {
    now.plus(claim_ttl.min(orphan_ttl))
}

/// REMOVEs every expiry attribute: a linked image never expires and is no GC candidate.
pub(super) fn remove_expiry(e: &mut Expr) {
    e.remove(EXPIRES_AT)
        .remove(TTL)
        .remove(GC_BUCKET)
        .remove(GC_AT);
}

fn claim_ttl_secs(claim_expires_at: Timestamp) -> i64 {
    ttl_secs(claim_expires_at).saturating_add(CLAIM_TTL_GRACE)
}

/// An image item as an [`ImageRecord`]; a malformed item is a backend error.
pub fn record_from_item(item: &Item) -> Result<ImageRecord, StoreError> {
    let raw_id = id_of(item, KIND).unwrap_or_default();
    let what = format!("image item {raw_id:?}");
    let a = Attrs::new(item, &what);
    let id = ImageId::parse(raw_id).map_err(|_| a.corrupt(PK, "is not an image key"))?;
    let generation =
        Generation::parse(a.s(GENERATION)?).map_err(|_| a.corrupt(GENERATION, "is invalid"))?;
    let state = match a.s(STATE)? {
        PROCESSING => ImageState::Processing {
            claim_expires_at: a.time(CLAIM_EXPIRES_AT)?,
        },
        READY => {
            let variants: Vec<StoredVariant> = serde_json::from_str(a.s(VARIANTS)?)
                .map_err(|_| a.corrupt(VARIANTS, "is not a JSON list of variants"))?;
            ImageState::Ready {
                format: SourceFormat::parse(a.s(FORMAT)?)
                    .ok_or_else(|| a.corrupt(FORMAT, "is not a known format"))?,
                width: a.u32(WIDTH)?,
                height: a.u32(HEIGHT)?,
                original_bytes: a.u64(ORIGINAL_BYTES)?,
                variants,
                variant_set: a
                    .opt_s(VARIANT_SET)?
                    .map(VariantSetVersion::parse)
                    .transpose()
                    .map_err(|_| a.corrupt(VARIANT_SET, "is not a variant set version"))?,
                sha256: a
                    .opt_s(SHA256)?
                    .map(ContentHash::parse)
                    .transpose()
                    .map_err(|_| a.corrupt(SHA256, "is not a SHA-256"))?,
                original_metadata: a
                    .opt_s(ORIGINAL_METADATA)?
                    .map(str::parse)
                    .transpose()
                    .map_err(|_| a.corrupt(ORIGINAL_METADATA, "is not a metadata policy"))?,
                thumbhash: a
                    .opt_s(THUMBHASH)?
                    .map(ThumbHash::parse)
                    .transpose()
                    .map_err(|_| a.corrupt(THUMBHASH, "is not a ThumbHash"))?,
                signature: a
                    .opt_b(SIGNATURE)?
                    .map(Signature::from_bytes)
                    .transpose()
                    .map_err(|_| a.corrupt(SIGNATURE, "is not a perceptual signature"))?
                    .map(Box::new),
            }
        }
        _ => return Err(a.corrupt(STATE, "is not processing or ready")),
    };
    Ok(ImageRecord {
        id,
        generation,
        state,
        created_at: a.time(CREATED_AT)?,
        last_update: a.time(LAST_UPDATE)?,
        link_count: a.u32(LINK_COUNT)?,
        expires_at: a.opt_time(EXPIRES_AT)?,
        previous: match a.opt_s(PREVIOUS_GENERATION)? {
            Some(g) => Some(PreviousFiles {
                generation: Generation::parse(g)
                    .map_err(|_| a.corrupt(PREVIOUS_GENERATION, "is invalid"))?,
                kept_until: a.time(PREVIOUS_UNTIL)?,
            }),
            None => None,
        },
    })
}

/// When a record became (or becomes) a GC candidate: its claim's or its orphan expiry.
fn expiry_of(r: &ImageRecord) -> Option<Timestamp> {
    match &r.state {
        ImageState::Processing { claim_expires_at } => Some(*claim_expires_at),
        ImageState::Ready { .. } => r.expires_at,
    }
}

/// A walk of the GC index: one cursor per bucket.
struct GcScan {
    cursors: Vec<BucketCursor>,
    page: usize,
}

/// One bucket of the GC index, read a page at a time in `gc_at` order.
struct BucketCursor {
    bucket: String,
    buffered: VecDeque<(i64, ImageId)>,
    /// Where the next page starts; `None` once the bucket is exhausted.
    next: Option<Item>,
    started: bool,
}

impl DynamoStore {
    /// The image item, read consistently.
    pub(super) async fn get_image(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        self.read_image(id, true).await
    }

    /// The image item as a record of its own count (a hot image's shards not added) with the
    /// item, read consistently.
    pub(super) async fn read_image_item(
        &self,
        id: &ImageId,
    ) -> Result<Option<(ImageRecord, Item)>, StoreError> {
        let item = self
            .read_item(image_key(id), &format!("reading image {id}"), true)
            .await?;
        item.map(|item| Ok((record_from_item(&item)?, item)))
            .transpose()
    }

    /// The image item; eventually consistent unless `consistent`.
    async fn read_image(
        &self,
        id: &ImageId,
        consistent: bool,
    ) -> Result<Option<ImageRecord>, StoreError> {
        let item = self
            .read_item(image_key(id), &format!("reading image {id}"), consistent)
            .await?;
        match item {
            Some(item) => self.record_of(&item).await.map(Some),
            None => Ok(None),
        }
    }

    /// An image item as a record with all its links (a hot image's shards added).
    pub(super) async fn record_of(&self, item: &Item) -> Result<ImageRecord, StoreError> {
        self.with_total(record_from_item(item)?, item).await
    }

    /// The record an update returned (`ReturnValues::AllNew`), with all its links.
    async fn returned(
        &self,
        attributes: Option<Item>,
        id: &ImageId,
        what: &str,
    ) -> Result<ImageRecord, StoreError> {
        let item = attributes.ok_or_else(|| {
            StoreError::corrupt(format!("dynamodb: {what} image {id}: no attributes"))
        })?;
        self.record_of(&item).await
    }

    /// The stored records among `ids`, read consistently, by id (duplicates read once).
    pub(super) async fn get_images(
        &self,
        ids: &[ImageId],
    ) -> Result<HashMap<ImageId, ImageRecord>, StoreError> {
        Ok(self
            .read_images(ids, true)
            .await?
            .into_iter()
            .map(|(id, (record, _))| (id, record))
            .collect())
    }

    /// The stored records among `ids` with their items, by id (duplicates read once);
    /// eventually consistent unless `consistent` (half the price, and it may miss the last
    /// second's writes).
    pub(super) async fn read_images(
        &self,
        ids: &[ImageId],
        consistent: bool,
    ) -> Result<HashMap<ImageId, (ImageRecord, Item)>, StoreError> {
        let mut seen = HashSet::with_capacity(ids.len());
        let unique: Vec<&ImageId> = ids.iter().filter(|id| seen.insert(*id)).collect();
        let mut found = HashMap::with_capacity(unique.len());
        for chunk in unique.chunks(BATCH_GET_MAX) {
            let keys: Vec<Item> = chunk.iter().map(|id| image_key(id)).collect();
            for item in self.batch_get(keys, consistent).await? {
                let record = record_from_item(&item)?;
                found.insert(record.id.clone(), (record, item));
            }
        }
        Ok(found)
    }

    /// BatchGetItem of at most 100 keys, retrying unprocessed keys.
    pub(super) async fn batch_get(
        &self,
        keys: Vec<Item>,
        consistent: bool,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::with_capacity(keys.len());
        let mut request = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(consistent)
            .build()
            .map_err(|e| build_error("a batch read", e))?;
        let mut round = 0;
        loop {
            let mut out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|e| sdk_error("reading images", e))?;
            if let Some(found) = out.responses.as_mut().and_then(|r| r.remove(&self.table)) {
                items.extend(found);
            }
            match out
                .unprocessed_keys
                .as_mut()
                .and_then(|u| u.remove(&self.table))
                .filter(|k| !k.keys().is_empty())
            {
                None => return Ok(items),
                Some(rest) if round < UNPROCESSED_ROUNDS => {
                    backoff(round).await;
                    round += 1;
                    request = rest;
                }
                Some(rest) => {
                    return Err(StoreError::Unavailable {
                        message: format!(
                            "dynamodb: reading images: {} keys still unprocessed after {} rounds",
                            rest.keys().len(),
                            UNPROCESSED_ROUNDS
                        ),
                        source: None,
                    });
                }
            }
        }
    }

    /// Creates a processing claim if no item exists; `None` if one appeared meanwhile.
    async fn put_claim(
        &self,
        id: &ImageId,
        generation: &Generation,
        now: Timestamp,
        claim_ttl: Duration,
        orphan_ttl: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        let claim_expires_at = now.plus(claim_ttl);
        let mut item = image_key(id);
        for (attr, value) in [
            (GENERATION, s(generation.as_str())),
            (STATE, s(PROCESSING)),
            (CLAIM_EXPIRES_AT, ms(claim_expires_at)),
            (CREATED_AT, ms(now)),
            (LAST_UPDATE, ms(now)),
            (LINK_COUNT, n(0)),
            (TTL, n(claim_ttl_secs(claim_expires_at))),
            (GC_BUCKET, s(gc_bucket(id))),
            (GC_AT, ms(claim_gc_at(now, claim_ttl, orphan_ttl))),
        ] {
            item.insert(attr.to_owned(), value);
        }
        let created = self
            .put_new_image(item, &format!("claiming image {id}"))
            .await?;
        Ok(created.then(|| Claim::New {
            generation: generation.clone(),
        }))
    }

    /// Puts an image item if the id has none; `false` if it has one.
    async fn put_new_image(&self, item: Item, context: &str) -> Result<bool, StoreError> {
        let mut e = Expr::new();
        let condition = e.not_exists(PK);
        let parts = e.finish();
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_names(parts.names)
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(sdk_error(context, e)),
        }
    }

    /// Refreshes a ready record as seen (`last_update`, and the orphan expiry if unlinked);
    /// `None` if it changed meanwhile (linked or unlinked, deleted, replaced by a claim).
    async fn refresh(
        &self,
        seen: &ImageRecord,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        let id = &seen.id;
        let mut e = Expr::new();
        e.set(LAST_UPDATE, ms(now));
        let condition = if seen.link_count == 0 {
            set_orphan_expiry(&mut e, id, now.plus(orphan_ttl));
            format!("{} AND {}", e.eq(STATE, s(READY)), e.eq(LINK_COUNT, n(0)))
        } else {
            remove_expiry(&mut e);
            format!(
                "{} AND {}",
                e.eq(STATE, s(READY)),
                e.cmp(LINK_COUNT, ">", n(0))
            )
        };
        let parts = e.finish();
        let updated = self
            .update(image_key(id), parts, Some(condition))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match updated {
            Ok(out) => Ok(Some(Claim::Existing(
                self.returned(out.attributes, id, "refreshing").await?,
            ))),
            Err(e) if is_condition_failed(&e) => Ok(None),
            Err(e) => Err(sdk_error(format!("refreshing image {id}"), e)),
        }
    }

    /// Takes over an expired claim as seen under `generation`; `None` if it changed.
    async fn take_over(
        &self,
        seen: &ImageRecord,
        generation: &Generation,
        now: Timestamp,
        claim_ttl: Duration,
        orphan_ttl: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        let id = &seen.id;
        let claim_expires_at = now.plus(claim_ttl);
        let mut e = Expr::new();
        e.set(GENERATION, s(generation.as_str()))
            .set(CLAIM_EXPIRES_AT, ms(claim_expires_at))
            .set(CREATED_AT, ms(now))
            .set(LAST_UPDATE, ms(now))
            .set(LINK_COUNT, n(0))
            .set(TTL, n(claim_ttl_secs(claim_expires_at)))
            .set(GC_BUCKET, s(gc_bucket(id)))
            .set(GC_AT, ms(claim_gc_at(now, claim_ttl, orphan_ttl)))
            .remove(EXPIRES_AT);
        let condition = format!(
            "{} AND {}",
            e.eq(GENERATION, s(seen.generation.as_str())),
            e.eq(STATE, s(PROCESSING))
        );
        let parts = e.finish();
        let updated = self
            .update(image_key(id), parts, Some(condition))
            .send()
            .await;
        match updated {
            Ok(_) => Ok(Some(Claim::New {
                generation: generation.clone(),
            })),
            Err(e) if is_condition_failed(&e) => Ok(None),
            Err(e) => Err(sdk_error(format!("taking over the claim of image {id}"), e)),
        }
    }

    /// A walk of the GC index's entries with `gc_at <= now`, the earliest first: a merge of
    /// `part`'s buckets (all [`GC_LISTED_BUCKETS`](super::schema::GC_LISTED_BUCKETS) for the
    /// whole job), reading each `page` entries at a time.
    async fn gc_scan(
        &self,
        part: JobPart,
        now: Timestamp,
        page: usize,
    ) -> Result<GcScan, StoreError> {
        let mut scan = GcScan {
            cursors: part
                .digits()
                .flat_map(gc_buckets_of)
                .map(|bucket| BucketCursor {
                    bucket,
                    buffered: VecDeque::new(),
                    next: None,
                    started: false,
                })
                .collect(),
            page,
        };
        futures_util::future::try_join_all(
            scan.cursors.iter_mut().map(|c| self.fill(c, now, page)),
        )
        .await?;
        Ok(scan)
    }

    /// The scan's next `n` candidates `(gc_at, id)` (fewer once the index is exhausted).
    async fn next_candidates(
        &self,
        scan: &mut GcScan,
        now: Timestamp,
        n: usize,
    ) -> Result<Vec<(i64, ImageId)>, StoreError> {
        let mut out = Vec::with_capacity(n.min(1024));
        while out.len() < n {
            for c in scan.cursors.iter_mut() {
                if c.buffered.is_empty() && c.next.is_some() {
                    self.fill(c, now, scan.page).await?;
                }
            }
            let earliest = scan
                .cursors
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.buffered.front().map(|head| (head, i)))
                .min()
                .map(|(_, i)| i);
            match earliest
                .and_then(|i| scan.cursors.get_mut(i))
                .and_then(|c| c.buffered.pop_front())
            {
                Some(candidate) => out.push(candidate),
                None => break,
            }
        }
        Ok(out)
    }

    /// Reads the next page of a bucket (the first one if it has not started).
    async fn fill(
        &self,
        c: &mut BucketCursor,
        now: Timestamp,
        page: usize,
    ) -> Result<(), StoreError> {
        if c.started && c.next.is_none() {
            return Ok(());
        }
        let mut e = Expr::new();
        let condition = format!(
            "{} AND {}",
            e.eq(GC_BUCKET, s(c.bucket.as_str())),
            e.cmp(GC_AT, "<=", ms(now))
        );
        let projection = format!("{}, {}", e.name(PK), e.name(GC_AT));
        let parts = e.finish();
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GC_INDEX)
            .key_condition_expression(condition)
            .projection_expression(projection)
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
            .scan_index_forward(true)
            .limit(i32::try_from(page).unwrap_or(i32::MAX))
            .set_exclusive_start_key(c.next.take())
            .send()
            .await
            .map_err(|e| sdk_error("listing expired images", e))?;
        c.started = true;
        c.next = out.last_evaluated_key;
        for item in out.items.unwrap_or_default() {
            let raw = id_of(&item, KIND).unwrap_or_default();
            let what = format!("gc index entry {raw:?}");
            let a = Attrs::new(&item, &what);
            let id = ImageId::parse(raw).map_err(|_| a.corrupt(PK, "is not an image key"))?;
            c.buffered.push_back((a.i64(GC_AT)?, id));
        }
        Ok(())
    }
}

impl DynamoStore {
    /// Writes `attr` of a record written without it, only if it is still ready under
    /// `generation` and still has none, or one of `replaces_sizes` (an older form the value
    /// supersedes); returns whether it was written.
    async fn set_once(
        &self,
        id: &ImageId,
        generation: &Generation,
        (attr, value): (&'static str, AttributeValue),
        replaces_sizes: &[usize],
        what: &str,
    ) -> Result<bool, StoreError> {
        let mut e = Expr::new();
        e.set(attr, value);
        let mut absent = e.not_exists(attr);
        for size in replaces_sizes {
            let (name, size) = (e.name(attr), e.value(n(*size as i64)));
            absent = format!("{absent} OR size({name}) = {size}");
        }
        let condition = format!(
            "{} AND {} AND ({absent})",
            e.eq(STATE, s(READY)),
            e.eq(GENERATION, s(generation.as_str())),
        );
        let parts = e.finish();
        self.update_if(image_key(id), parts, condition, || {
            format!("recording {what} of image {id}")
        })
        .await
    }
}

#[async_trait]
impl ImageIndex for DynamoStore {
    async fn claim(
        &self,
        id: &ImageId,
        proposed: &Generation,
        now: Timestamp,
        claim_ttl: Duration,
        orphan_ttl: Duration,
    ) -> Result<Claim, StoreError> {
        for attempt in 0..CLAIM_ATTEMPTS {
            if attempt >= 2 {
                backoff(attempt - 2).await;
            }
            let outcome = match self.get_image(id).await? {
                None => {
                    self.put_claim(id, proposed, now, claim_ttl, orphan_ttl)
                        .await?
                }
                Some(seen) if seen.is_freshly_refreshed(now, orphan_ttl) => {
                    Some(Claim::Existing(seen))
                }
                Some(seen) => match seen.state {
                    ImageState::Ready { .. } => self.refresh(&seen, now, orphan_ttl).await?,
                    // Our own claim: a put whose answer was lost, refused when made again.
                    ImageState::Processing { .. } if &seen.generation == proposed => {
                        Some(Claim::New {
                            generation: proposed.clone(),
                        })
                    }
                    ImageState::Processing { claim_expires_at } if claim_expires_at > now => {
                        Some(Claim::InProgress { claim_expires_at })
                    }
                    ImageState::Processing { .. } => {
                        self.take_over(&seen, proposed, now, claim_ttl, orphan_ttl)
                            .await?
                    }
                },
            };
            if let Some(claim) = outcome {
                return Ok(claim);
            }
        }
        Err(StoreError::Conflict(format!(
            "image {id}: the record kept changing while claiming it ({CLAIM_ATTEMPTS} attempts)"
        )))
    }

    async fn complete(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<ImageRecord, StoreError> {
        let mut e = Expr::new();
        for (attr, value) in ready_attributes(id, &ready)? {
            e.set(attr, value);
        }
        e.set(LAST_UPDATE, ms(now))
            .set(LINK_COUNT, n(0))
            .remove(CLAIM_EXPIRES_AT);
        set_orphan_expiry(&mut e, id, now.plus(orphan_ttl));
        let condition = format!(
            "{} AND {}",
            e.eq(STATE, s(PROCESSING)),
            e.eq(GENERATION, s(generation.as_str()))
        );
        let parts = e.finish();
        let updated = self
            .update(image_key(id), parts, Some(condition))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match updated {
            Ok(out) => self.returned(out.attributes, id, "completing").await,
            Err(e) if is_condition_failed(&e) => Err(StoreError::Conflict(format!(
                "image {id}: the claim of generation {generation} is no longer held"
            ))),
            Err(e) => Err(sdk_error(format!("completing image {id}"), e)),
        }
    }

    async fn create_ready(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
        first_link: Option<&KeyedLink>,
    ) -> Result<Option<ImageRecord>, StoreError> {
        let mut item = image_key(id);
        // No GC index attributes: the offer that links this image a moment later would delete
        // the entry again (two index writes for nothing); unlinked, the TTL collects it.
        for (attr, value) in ready_attributes(id, &ready)?.into_iter().chain([
            (GENERATION, s(generation.as_str())),
            (CREATED_AT, ms(now)),
            (LAST_UPDATE, ms(now)),
        ]) {
            item.insert(attr.to_owned(), value);
        }
        match first_link {
            // Counted now and marked as the crawl's, whose keyed change uses the link instead
            // of writing the item again (see the `offers` module); no expiry: it is linked.
            Some(link) => {
                item.insert(LINK_COUNT.to_owned(), n(1));
                item.insert(FIRST_LINK.to_owned(), s(mark(&link.offer, &link.key)));
                if let Some(clients) = client_set(&link.offer) {
                    item.insert(CLIENTS.to_owned(), clients);
                }
            }
            None => {
                let expires_at = now.plus(orphan_ttl);
                item.insert(LINK_COUNT.to_owned(), n(0));
                item.insert(EXPIRES_AT.to_owned(), ms(expires_at));
                item.insert(TTL.to_owned(), n(ttl_secs(expires_at)));
            }
        }
        let record = record_from_item(&item)?;
        let created = self
            .put_new_image(item, &format!("creating image {id}"))
            .await?;
        Ok(created.then_some(record))
    }

    async fn abandon(&self, id: &ImageId, generation: &Generation) -> Result<(), StoreError> {
        let mut e = Expr::new();
        let condition = format!(
            "{} AND {}",
            e.eq(GENERATION, s(generation.as_str())),
            e.eq(STATE, s(PROCESSING))
        );
        let parts = e.finish();
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(image_key(id)))
            .condition_expression(condition)
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failed(&e) => Ok(()),
            Err(e) => Err(sdk_error(format!("abandoning the claim of image {id}"), e)),
        }
    }

    async fn get(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        self.get_image(id).await
    }

    async fn peek(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        self.read_image(id, false).await
    }

    async fn get_many(&self, ids: &[ImageId]) -> Result<Vec<ImageRecord>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = self.read_images(ids, true).await?;
        let mut records = Vec::with_capacity(found.len());
        for id in ids {
            if let Some((record, item)) = found.remove(id) {
                records.push(self.with_total(record, &item).await?);
            }
        }
        Ok(records)
    }

    async fn expired_in(
        &self,
        part: JobPart,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<ImageRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut scan = self.gc_scan(part, now, limit.clamp(1, GC_PAGE_MAX)).await?;
        let mut records: Vec<ImageRecord> = Vec::new();
        while records.len() < limit {
            let candidates = self
                .next_candidates(&mut scan, now, limit - records.len())
                .await?;
            if candidates.is_empty() {
                break;
            }
            let ids: Vec<ImageId> = candidates.into_iter().map(|(_, id)| id).collect();
            // Entries are early (see the module doc) and the index is eventually consistent:
            // only what a consistent read finds expired is listed; the walk goes on for more.
            records.extend(
                self.get_images(&ids)
                    .await?
                    .into_values()
                    .filter(|r| r.is_expired(now)),
            );
        }
        records.sort_by(|a, b| (expiry_of(a), &a.id).cmp(&(expiry_of(b), &b.id)));
        Ok(records)
    }

    async fn replace_files(
        &self,
        id: &ImageId,
        expected: &Generation,
        generation: &Generation,
        ready: ReadyImage,
        keep_previous_until: Timestamp,
    ) -> Result<Option<ImageRecord>, StoreError> {
        let mut e = Expr::new();
        for (attr, value) in ready_attributes(id, &ready)? {
            e.set(attr, value);
        }
        if generation != expected {
            e.set(GENERATION, s(generation.as_str()))
                .set(PREVIOUS_GENERATION, s(expected.as_str()))
                .set(PREVIOUS_UNTIL, ms(keep_previous_until));
        }
        let condition = format!(
            "{} AND {}",
            e.eq(STATE, s(READY)),
            e.eq(GENERATION, s(expected.as_str()))
        );
        let parts = e.finish();
        let updated = self
            .update(image_key(id), parts, Some(condition))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match updated {
            Ok(out) => self
                .returned(out.attributes, id, "replacing the files of")
                .await
                .map(Some),
            Err(e) if is_condition_failed(&e) => Ok(None),
            Err(e) => Err(sdk_error(format!("replacing the files of image {id}"), e)),
        }
    }

    async fn scan(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StoreError> {
        let (items, next) = self
            .scan_items(
                KIND,
                None,
                SCAN_ATTRIBUTES,
                segment,
                segments,
                cursor,
                limit,
            )
            .await?;
        let mut records = Vec::with_capacity(items.len());
        for item in &items {
            records.push(self.record_of(item).await?);
        }
        Ok(ScanPage { records, next })
    }

    async fn correct_link_count(
        &self,
        seen: &ImageRecord,
        count: u32,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        let id = &seen.id;
        let mut e = Expr::new();
        remove_marks(e.set(LINK_COUNT, n(i64::from(count))));
        if count == 0 {
            set_orphan_expiry(&mut e, id, now.plus(orphan_ttl));
        } else {
            remove_expiry(&mut e);
        }
        // Not hot: a hot image's count is folded from its delta items (below).
        let condition = format!(
            "{} AND {} AND {} AND {} AND {}",
            e.eq(STATE, s(READY)),
            e.eq(GENERATION, s(seen.generation.as_str())),
            e.eq(LINK_COUNT, n(i64::from(seen.link_count))),
            e.eq(LAST_UPDATE, ms(seen.last_update)),
            e.not_exists(super::hot_links::HOT),
        );
        let parts = e.finish();
        let written = self
            .update_if(image_key(id), parts, condition, || {
                format!("correcting the link count of image {id}")
            })
            .await?;
        if written {
            return Ok(true);
        }
        Ok(self
            .correct_hot(seen, count, now, orphan_ttl)
            .await?
            .unwrap_or(false))
    }

    async fn keyed_links(&self, id: &ImageId) -> Result<Vec<OfferKey>, StoreError> {
        let Some(item) = self
            .get(image_key(id), &format!("reading image {id}'s link marks"))
            .await?
        else {
            return Ok(Vec::new());
        };
        let what = format!("image item {id}");
        let a = Attrs::new(&item, &what);
        let mut offers = Vec::new();
        for attr in MARKS {
            if let Some(mark) = a.opt_s(attr)? {
                let offer =
                    marked_offer(mark).ok_or_else(|| a.corrupt(attr, "does not name an offer"))?;
                if !offers.contains(&offer) {
                    offers.push(offer);
                }
            }
        }
        Ok(offers)
    }

    async fn set_strong_hash(
        &self,
        id: &ImageId,
        generation: &Generation,
        sha256: &ContentHash,
    ) -> Result<bool, StoreError> {
        self.set_once(
            id,
            generation,
            (SHA256, s(sha256.to_hex())),
            &[],
            "the SHA-256",
        )
        .await
    }

    async fn set_thumbhash(
        &self,
        id: &ImageId,
        generation: &Generation,
        thumbhash: &ThumbHash,
    ) -> Result<bool, StoreError> {
        self.set_once(
            id,
            generation,
            (THUMBHASH, s(thumbhash.to_base64())),
            &[],
            "the placeholder",
        )
        .await
    }

    async fn set_signature(
        &self,
        id: &ImageId,
        generation: &Generation,
        signature: &Signature,
    ) -> Result<bool, StoreError> {
        // A complete signature also replaces one made before points (or inner hashes) were,
        // told apart by its length.
        let older: &[usize] = if signature.is_complete() {
            &BYTES_WITHOUT_POINTS
        } else {
            &[]
        };
        self.set_once(
            id,
            generation,
            (SIGNATURE, signature_value(signature)),
            older,
            "the perceptual signature",
        )
        .await
    }

    async fn delete_if_expired(
        &self,
        id: &ImageId,
        generation: &Generation,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut e = Expr::new();
        let condition = format!(
            "{} AND (({} AND {} AND {}) OR ({} AND {}))",
            e.eq(GENERATION, s(generation.as_str())),
            e.eq(STATE, s(READY)),
            e.eq(LINK_COUNT, n(0)),
            e.cmp(EXPIRES_AT, "<=", ms(now)),
            e.eq(STATE, s(PROCESSING)),
            e.cmp(CLAIM_EXPIRES_AT, "<=", ms(now)),
        );
        let parts = e.finish();
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(image_key(id)))
            .condition_expression(condition)
            .set_expression_attribute_names(parts.names)
            .set_expression_attribute_values(parts.values)
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(sdk_error(format!("deleting expired image {id}"), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use aws_sdk_dynamodb::types::AttributeValue;

    use super::*;

    #[test]
    fn an_image_item_round_trips_and_bad_ones_are_errors() {
        let id = ImageId::of_bytes(b"x");
        let mut item = image_key(&id);
        for (k, v) in [
            (GENERATION, s("0123abcd")),
            (STATE, s(READY)),
            (FORMAT, s("png")),
            (WIDTH, n(3)),
            (HEIGHT, n(4)),
            (ORIGINAL_BYTES, n(5)),
            (VARIANTS, s("[]")),
            (CREATED_AT, n(1)),
            (LAST_UPDATE, n(2)),
            (LINK_COUNT, n(0)),
            (EXPIRES_AT, n(9)),
        ] {
            item.insert(k.to_owned(), v);
        }
        let r = record_from_item(&item).unwrap();
        assert_eq!(r.id, id);
        assert_eq!(r.expires_at, Some(Timestamp::from_millis(9)));
        assert!(r.is_ready());

        let mut bad = item.clone();
        bad.insert(LINK_COUNT.to_owned(), n(-1));
        assert!(record_from_item(&bad).is_err());
        let mut bad = item.clone();
        bad.insert(STATE.to_owned(), s("gone"));
        assert!(record_from_item(&bad).is_err());
        let mut bad = item.clone();
        bad.insert(VARIANTS.to_owned(), AttributeValue::N("1".into()));
        assert!(record_from_item(&bad).is_err());
        let mut bad = item;
        bad.insert(PK.to_owned(), s("image#nothex"));
        assert!(record_from_item(&bad).is_err());
    }

    #[test]
    fn gc_buckets_are_the_first_hex_digit_and_the_quarter_of_the_second() {
        let bucket = |id: &str| gc_bucket(&ImageId::parse(id).unwrap());
        assert_eq!(bucket("0cc175b9c0f1b6a831c399e269772661"), "gc#03");
        assert_eq!(bucket("a0c175b9c0f1b6a831c399e269772661"), "gc#a0");
        assert_eq!(bucket("f7c175b9c0f1b6a831c399e269772661"), "gc#f1");
        assert_eq!(bucket("58c175b9c0f1b6a831c399e269772661"), "gc#52");
        // Every id's bucket is listed by the part of its first digit, beside the layout
        // before's.
        let listed: Vec<String> = JobPart::WHOLE.digits().flat_map(gc_buckets_of).collect();
        assert_eq!(listed.len(), super::super::schema::GC_LISTED_BUCKETS);
        assert!(listed.contains(&"gc#0".to_owned()) && listed.contains(&"gc#03".to_owned()));
        for _ in 0..100 {
            let id = ImageId::of_bytes(&fastrand::u64(..).to_le_bytes());
            assert!(listed.contains(&gc_bucket(&id)), "{id}");
        }
    }
}
