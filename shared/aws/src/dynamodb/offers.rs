//! `OfferLinks`: offer items and the link counts of image items, kept in step with
//! optimistic concurrency and `TransactWriteItems`.
//!
//! Offer item `pk = offer#{key}` (the offer's [`OfferKey`]: `{client}/{offer_id}`, or the bare
//! offer id in open mode's shared namespace), `sk = offer`: `photos` (L of S, the ordered image ids),
//! `version` (N, +1 per write) and `updated_at` (N ms).
//!
//! A change reads the offer (consistently) and the images it adds or drops, refuses the whole
//! change if an added image is not live (`LinkError::UnknownImage`, nothing written), then
//! writes in ONE transaction: the offer (conditional on the version read), every added image
//! (conditional on still being live: `link_count + 1`, expiry removed) and every dropped image
//! (`- 1` conditional on more than one link being left, or, for the last link, conditional on
//! exactly one, with the orphan expiry set: concurrent unlinks of a popular image do not
//! conflict). A lost
//! condition means someone changed an item in between: the whole read-compute-write starts
//! again (the re-read finds an image that is no longer live), up to [`CHANGE_ATTEMPTS`]
//! times, then `StoreError::Conflict`.
//!
//! A keyed change ([`OfferLinks::set_photos_keyed`], a crawl's) links its added images before
//! the offer's write instead, each with a plain conditional write (live, and not marked by
//! this change yet) that also marks the image `linked_by = {offer}#{key}`; every other change
//! of a link count removes the mark. A round uses a link marked by its own change instead of
//! linking again while the offer (read before the image) does not list the image, and its offer
//! write, conditional on the version read, makes sure that no other run used it meanwhile. The
//! offer is then written alone (a plain conditional write), or in a transaction with the
//! unlinks of its dropped images. Such links are never undone. A crawled photo new to the store
//! is created with its crawl's link already counted and marked `first_link = {offer}#{key}`
//! (`ImageIndex::create_ready`), which the crawl's change uses the same way; other links leave
//! that mark, unlinks and corrections remove it, and a change that unlinks a hot image removes
//! the marks naming its offer first (the unlink, on a shard, leaves the item as it is). Why
//! this counts each link once, and when a count may end one too high: `docs/consistency.md`,
//! "Keyed links".
//!
//! A transaction holds at most 100 items. A change of more than 99 images is split so that a
//! crash or a failure at any point only ever leaves link counts too HIGH (the image never
//! expires: storage leaks) and never too low (a linked image collected):
//!
//! 1. added images beyond what fits in the offer's transaction are linked first, 100 per
//!    transaction (each conditional on the image being live); if a later step loses a race
//!    these links are undone (one by one) before the whole change is retried, which refreshes
//!    those images' `last_update` and orphan expiry;
//! 2. the offer's transaction: the offer, the remaining added images and as many dropped
//!    images as fit;
//! 3. the remaining dropped images, 100 per transaction, after the offer changed (a crash
//!    between 2 and 3 leaves their counts one too high). Rare: it needs more than 99 changes
//!    in one call.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use super::hot_links::{HOT, hot_since};
use super::images::{CLIENTS, LINK_COUNT, image_key, remove_expiry, set_orphan_expiry};
use super::item::{Attrs, Expr, ExprParts, Item, PK, id_of, key, ms, n, s};
use super::{DynamoStore, backoff, build_error, is_condition_failed};
use crate::sdk_error::{error_code, is_retryable_code, sdk_error};
use imgest_core::domain::{ClientId, ImageId, OfferKey, Timestamp};
use imgest_core::ports::{LinkError, OfferLinks, OfferPage, PhotoListPage, StoreError};

const KIND: &str = "offer";
const PHOTOS: &str = "photos";
const VERSION: &str = "version";
const UPDATED_AT: &str = "updated_at";
const STATE: &str = "state";
const READY: &str = "ready";
const LAST_UPDATE: &str = "last_update";
const EXPIRES_AT: &str = "expires_at";
/// On an image item: the keyed change whose link was its last link count change, if that was
/// a link made before the offer's write (see [`DynamoStore::prelink`]).
pub(super) const LINKED_BY: &str = "linked_by";
/// On an image item: the keyed change whose link was counted when the item was created (a
/// crawled photo's, see [`ImageIndex::create_ready`](imgest_core::ports::ImageIndex::create_ready)),
/// until an unlink, a correction or its turning hot. Links by other changes leave it: each
/// counts its own link.
pub(super) const FIRST_LINK: &str = "first_link";
/// Both marks of keyed links an image item may carry.
pub(super) const MARKS: [&str; 2] = [LINKED_BY, FIRST_LINK];

/// The marks `item` carries, with their attributes.
pub(super) fn marks(item: &Item) -> impl Iterator<Item = (&'static str, &str)> {
    MARKS.into_iter().filter_map(|attr| {
        let mark = item.get(attr)?.as_s().ok()?;
        Some((attr, mark.as_str()))
    })
}

/// Removes both marks: the change it is part of takes a link away or sets the count.
pub(super) fn remove_marks(e: &mut Expr) -> &mut Expr {
    e.remove(LINKED_BY).remove(FIRST_LINK)
}

/// The set of `offer`'s client, for an image's `clients` (open mode's offers have none).
pub(super) fn client_set(offer: &OfferKey) -> Option<AttributeValue> {
    let client = offer.tenant().client()?;
    Some(AttributeValue::Ss(vec![client.as_str().to_owned()]))
}

/// What a scan of offers reads (with the key attributes): their photo lists.
pub const SCAN_ATTRIBUTES: &[&str] = &[PHOTOS];

/// Items per `TransactWriteItems` (the API's limit).
const MAX_TX_ITEMS: usize = 100;
/// Whole read-compute-write attempts of one change before giving up with a conflict. A photo
/// linked by many offers at once (a dealer's logo) has one transaction win per round, so this
/// is as many as the unlinks get: with the backoff, 2.5 to 5 s of trying at the most.
const CHANGE_ATTEMPTS: u32 = 10;
/// Attempts of unlinking one image on its own (undoing links, late unlinks).
const UNLINK_ATTEMPTS: u32 = 10;

/// `offer#{id}` in the shared namespace, `offer#{client}/{id}` in a client's.
fn offer_key(offer: &OfferKey) -> Item {
    key(KIND, &offer.to_string())
}

/// The offer as stored.
struct StoredOffer {
    photos: Vec<ImageId>,
    version: i64,
}

/// One image write of a change, with the image it touches.
struct ImageWrite {
    id: ImageId,
    op: TransactWriteItem,
}

/// The offer's new list (`item`) or its deletion (`None`), conditional on the version read.
struct OfferWrite {
    item: Option<Item>,
    key: Item,
    condition: String,
    parts: ExprParts,
}

fn offer_write(
    offer: &OfferKey,
    photos: Option<&[ImageId]>,
    read: Option<&StoredOffer>,
    now: Timestamp,
) -> OfferWrite {
    let mut e = Expr::new();
    let condition = match read {
        Some(r) => e.eq(VERSION, n(r.version)),
        None => e.not_exists(PK),
    };
    let item = photos.map(|photos| {
        let mut item = offer_key(offer);
        item.insert(
            PHOTOS.to_owned(),
            AttributeValue::L(photos.iter().map(|id| s(id.as_str())).collect()),
        );
        let version = read.map_or(1, |r| r.version.saturating_add(1));
        item.insert(VERSION.to_owned(), n(version));
        item.insert(UPDATED_AT.to_owned(), ms(now));
        item
    });
    OfferWrite {
        item,
        key: offer_key(offer),
        condition,
        parts: e.finish(),
    }
}

/// The mark of a keyed change's links: `{offer}#{key}` (neither an offer key nor `#` can
/// appear in the other part).
pub(super) fn mark(offer: &OfferKey, key: &str) -> String {
    format!("{offer}#{key}")
}

/// The offer a mark names (see [`mark`]), if it is one.
pub(super) fn marked_offer(mark: &str) -> Option<OfferKey> {
    let (offer, _key) = mark.split_once('#')?;
    OfferKey::parse(offer).ok()
}

/// Whether the image item carries `marker`, as its last link or as its first (see the module
/// doc).
fn marked_by(item: &Item, marker: &str) -> bool {
    marks(item).any(|(_, mark)| mark == marker)
}

/// The port promises distinct ids; a repeated one is linked once, at its first position.
fn distinct(images: &[ImageId]) -> Vec<ImageId> {
    let mut seen = HashSet::with_capacity(images.len());
    images
        .iter()
        .filter(|id| seen.insert(*id))
        .cloned()
        .collect()
}

/// The expression of one link more, by an offer of `offer`'s tenant: a client's is added to
/// the image's `clients` (who may see it among near-duplicates), in the same write.
fn link_expr(now: Timestamp, offer: &OfferKey) -> Expr {
    let mut e = Expr::new();
    e.add_to(LINK_COUNT, 1).set(LAST_UPDATE, ms(now));
    if let Some(clients) = client_set(offer) {
        e.add_elements(CLIENTS, clients);
    }
    remove_expiry(&mut e);
    e
}

/// Whether a link by `offer` leaves the image's `clients` as they are (open mode's offers have
/// no client): a hot image's link then needs no write of its item.
fn lists_client(item: &Item, offer: &OfferKey) -> bool {
    offer.tenant().client().is_none_or(|client| {
        matches!(item.get(CLIENTS), Some(AttributeValue::Ss(names))
            if names.iter().any(|c| c == client.as_str()))
    })
}

/// Exactly `ImageRecord::is_live`: ready, and linked or not past its expiry.
fn live_condition(e: &mut Expr, now: Timestamp) -> String {
    format!(
        "{} AND ({} OR {} OR {})",
        e.eq(STATE, s(READY)),
        e.cmp(LINK_COUNT, ">", n(0)),
        e.not_exists(EXPIRES_AT),
        e.cmp(EXPIRES_AT, ">", ms(now)),
    )
}

/// The expression of one link fewer, inside a transaction, on an image whose count was `seen`
/// (> 0).
///
/// Only the last link's removal depends on the exact count (it starts the orphan's expiry, so
/// it must know the count reaches 0): it is conditional on `link_count = 1`. Any other is a
/// decrement conditional on `link_count > 1`, true for every concurrent unlink of a popular
/// image (a dealer's logo in 100,000 offers), so those do not fail each other's conditions, and
/// the count cannot reach 0 without the expiry. A read that saw more than one link when one is
/// left fails the condition and is read again. The decrement is not idempotent, so it is only
/// sent in a transaction, whose client request token makes the SDK's retries of one send
/// commit it at most once.
fn unlink_expr(id: &ImageId, seen: u32, now: Timestamp, orphan_ttl: Duration) -> (Expr, String) {
    if seen <= 1 {
        return exact_unlink_expr(id, 1, now, orphan_ttl);
    }
    let mut e = Expr::new();
    remove_marks(e.add_to(LINK_COUNT, -1).set(LAST_UPDATE, ms(now)));
    let condition = e.cmp(LINK_COUNT, ">", n(1));
    (e, condition)
}

/// One link fewer on an image whose count is still `seen` (> 0): idempotent, so a plain update
/// the SDK may send twice cannot take two links away.
fn exact_unlink_expr(
    id: &ImageId,
    seen: u32,
    now: Timestamp,
    orphan_ttl: Duration,
) -> (Expr, String) {
    let mut e = Expr::new();
    remove_marks(
        e.set(LINK_COUNT, n(i64::from(seen) - 1))
            .set(LAST_UPDATE, ms(now)),
    );
    let mut condition = e.eq(LINK_COUNT, n(i64::from(seen)));
    if seen <= 1 {
        set_orphan_expiry(&mut e, id, now.plus(orphan_ttl));
        // The last link of the item is the image's last only while it is not hot: one read
        // before it turned hot must not orphan it with its shards' links uncounted.
        condition = format!("{condition} AND {}", e.not_exists(HOT));
    }
    (e, condition)
}

impl DynamoStore {
    async fn read_offer(&self, offer: &OfferKey) -> Result<Option<StoredOffer>, StoreError> {
        let item = self
            .get(offer_key(offer), &format!("reading offer {offer}"))
            .await?;
        let Some(item) = item else {
            return Ok(None);
        };
        let what = format!("offer item {offer}");
        let a = Attrs::new(&item, &what);
        let photos = a
            .strings(PHOTOS)?
            .into_iter()
            .map(|id| {
                ImageId::parse(id).map_err(|_| a.corrupt(PHOTOS, "holds an invalid image id"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(StoredOffer {
            photos,
            version: a.i64(VERSION)?,
        }))
    }

    /// Links `id` if it is still live at `now`.
    fn link_op(
        &self,
        id: &ImageId,
        now: Timestamp,
        offer: &OfferKey,
    ) -> Result<ImageWrite, StoreError> {
        let mut e = link_expr(now, offer);
        e.remove(LINKED_BY);
        let condition = live_condition(&mut e, now);
        self.image_write(id, e, condition)
    }

    /// A link (`+1`) or an unlink (`-1`) of hot image `id` on one of its shards.
    fn delta_write(
        &self,
        id: &ImageId,
        change: i64,
        now: Timestamp,
    ) -> Result<ImageWrite, StoreError> {
        Ok(ImageWrite {
            id: id.clone(),
            op: self.delta_op(id, change, now)?,
        })
    }

    /// Links `id` on its own, before the offer's write, marked as `marker`'s link: `Ok(false)`
    /// if it is no longer live or already carries that mark (the caller reads again).
    async fn prelink(
        &self,
        id: &ImageId,
        marker: &str,
        now: Timestamp,
        offer: &OfferKey,
    ) -> Result<bool, StoreError> {
        let mut e = link_expr(now, offer);
        e.set(LINKED_BY, s(marker));
        let condition = format!(
            "{} AND ({} OR NOT {}) AND ({} OR NOT {})",
            live_condition(&mut e, now),
            e.not_exists(LINKED_BY),
            e.eq(LINKED_BY, s(marker)),
            e.not_exists(FIRST_LINK),
            e.eq(FIRST_LINK, s(marker)),
        );
        let parts = e.finish();
        self.update_if(image_key(id), parts, condition, || {
            format!("linking image {id}")
        })
        .await
    }

    /// Unlinks `id` inside a transaction, conditional on what `seen` allows (see
    /// [`unlink_expr`]).
    fn unlink_op(
        &self,
        id: &ImageId,
        seen: u32,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<ImageWrite, StoreError> {
        let (e, condition) = unlink_expr(id, seen, now, orphan_ttl);
        self.image_write(id, e, condition)
    }

    /// A conditional update of image `id` inside a transaction.
    fn image_write(
        &self,
        id: &ImageId,
        e: Expr,
        condition: String,
    ) -> Result<ImageWrite, StoreError> {
        Ok(ImageWrite {
            id: id.clone(),
            op: self.transact_update(image_key(id), e, condition, "a transaction update")?,
        })
    }

    /// The offer's write inside a transaction.
    fn offer_op(&self, write: OfferWrite) -> Result<TransactWriteItem, StoreError> {
        let OfferWrite {
            item,
            key,
            condition,
            parts,
        } = write;
        let op = match item {
            Some(item) => {
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .condition_expression(condition)
                    .set_expression_attribute_names(parts.names)
                    .set_expression_attribute_values(parts.values)
                    .build()
                    .map_err(|e| build_error("an offer put", e))?;
                TransactWriteItem::builder().put(put).build()
            }
            None => {
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key))
                    .condition_expression(condition)
                    .set_expression_attribute_names(parts.names)
                    .set_expression_attribute_values(parts.values)
                    .build()
                    .map_err(|e| build_error("an offer delete", e))?;
                TransactWriteItem::builder().delete(delete).build()
            }
        };
        Ok(op)
    }

    /// Runs one transaction: `Ok(true)` if it committed, `Ok(false)` if a condition failed or
    /// another transaction got in the way (the caller re-reads and retries).
    pub(super) async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<bool, StoreError> {
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let e = match sent {
            Ok(_) => return Ok(true),
            Err(e) => e,
        };
        if error_code(&e) == Some("TransactionConflictException") {
            return Ok(false);
        }
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            e.as_service_error()
        else {
            return Err(sdk_error("writing offer links", e));
        };
        let reasons: Vec<&str> = cancelled
            .cancellation_reasons()
            .iter()
            .filter_map(|r| r.code())
            .filter(|c| *c != "None")
            .collect();
        if reasons
            .iter()
            .all(|c| matches!(*c, "ConditionalCheckFailed" | "TransactionConflict"))
        {
            return Ok(false);
        }
        let message = format!(
            "dynamodb: writing offer links: cancelled ({})",
            reasons.join(", ")
        );
        if reasons.iter().any(|c| is_retryable_code(c)) {
            Err(StoreError::unavailable(message, e))
        } else {
            Err(StoreError::backend(message, e))
        }
    }

    /// One link fewer on `id`, on its own (reads the count, writes conditionally on it: see
    /// [`exact_unlink_expr`]). Rare: undoing links of a change that lost, late unlinks.
    async fn unlink_one(
        &self,
        id: &ImageId,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), StoreError> {
        for attempt in 0..UNLINK_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt - 1).await;
            }
            let Some((record, item)) = self.read_image_item(id).await? else {
                return Ok(());
            };
            if hot_since(&item).is_some() {
                self.unmark(id, &item, None).await?;
                // In a transaction of its own: its token keeps the SDK's retries from taking
                // two links away.
                if self.transact(vec![self.delta_op(id, -1, now)?]).await? {
                    return Ok(());
                }
                continue;
            }
            if record.link_count == 0 {
                return Ok(());
            }
            let (e, condition) = exact_unlink_expr(id, record.link_count, now, orphan_ttl);
            let parts = e.finish();
            let updated = self
                .update(image_key(id), parts, Some(condition))
                .send()
                .await;
            match updated {
                Ok(_) => return Ok(()),
                Err(e) if is_condition_failed(&e) => {}
                Err(e) => return Err(sdk_error(format!("unlinking image {id}"), e)),
            }
        }
        Err(StoreError::Conflict(format!(
            "image {id}: its link count kept changing while unlinking it"
        )))
    }

    /// Undoes links made by a change that then lost; failures leave the counts too high
    /// (the images never expire), which is logged.
    async fn undo_links(&self, ids: &[ImageId], now: Timestamp, orphan_ttl: Duration) {
        for id in ids {
            if let Err(e) = self.unlink_one(id, now, orphan_ttl).await {
                tracing::error!(image = %id, error = %e,
                    "could not undo a link of a failed offer change; the image will not expire");
            }
        }
    }

    /// Writes one change (see the module docs); `Ok(false)` if it lost a race and wrote
    /// nothing that was not undone.
    async fn apply_change(
        &self,
        offer_op: TransactWriteItem,
        links: Vec<ImageWrite>,
        mut unlinks: Vec<ImageWrite>,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        if 1 + links.len() + unlinks.len() <= MAX_TX_ITEMS {
            let items = std::iter::once(offer_op)
                .chain(links.into_iter().map(|w| w.op))
                .chain(unlinks.into_iter().map(|w| w.op))
                .collect();
            return self.transact(items).await;
        }

        // 1. Links that do not fit in the offer's transaction, first.
        let mut links = links;
        let in_main = links.len().min(MAX_TX_ITEMS - 1);
        let main_links = links.split_off(links.len() - in_main);
        let mut linked: Vec<ImageId> = Vec::new();
        while !links.is_empty() {
            let rest = links.split_off(links.len().min(MAX_TX_ITEMS));
            let chunk = std::mem::replace(&mut links, rest);
            let ids: Vec<ImageId> = chunk.iter().map(|w| w.id.clone()).collect();
            match self
                .transact(chunk.into_iter().map(|w| w.op).collect())
                .await
            {
                Ok(true) => linked.extend(ids),
                Ok(false) => {
                    self.undo_links(&linked, now, orphan_ttl).await;
                    return Ok(false);
                }
                Err(e) => {
                    self.undo_links(&linked, now, orphan_ttl).await;
                    return Err(e);
                }
            }
        }

        // 2. The offer with the rest of the links and the first unlinks.
        let room = MAX_TX_ITEMS - 1 - main_links.len();
        let late_unlinks = unlinks.split_off(unlinks.len().min(room));
        let items = std::iter::once(offer_op)
            .chain(main_links.into_iter().map(|w| w.op))
            .chain(unlinks.into_iter().map(|w| w.op))
            .collect();
        match self.transact(items).await {
            Ok(true) => {}
            Ok(false) => {
                self.undo_links(&linked, now, orphan_ttl).await;
                return Ok(false);
            }
            Err(e) => {
                self.undo_links(&linked, now, orphan_ttl).await;
                return Err(e);
            }
        }

        // 3. The change is made; the remaining unlinks follow. A crash here leaves these
        // images' counts one too high (they never expire).
        let mut late_unlinks = late_unlinks;
        while !late_unlinks.is_empty() {
            let rest = late_unlinks.split_off(late_unlinks.len().min(MAX_TX_ITEMS));
            let chunk = std::mem::replace(&mut late_unlinks, rest);
            let ids: Vec<ImageId> = chunk.iter().map(|w| w.id.clone()).collect();
            if !matches!(
                self.transact(chunk.into_iter().map(|w| w.op).collect())
                    .await,
                Ok(true)
            ) {
                // Nothing of this chunk was written: unlink its images one by one.
                for id in &ids {
                    if let Err(e) = self.unlink_one(id, now, orphan_ttl).await {
                        tracing::error!(image = %id, error = %e,
                            "could not unlink an image dropped from an offer; it will not expire");
                    }
                }
            }
        }
        Ok(true)
    }

    /// Sets the offer's photos (`Some`) or deletes it (`None`); returns whether it existed.
    /// With a `key` (the same for every run of one change, see
    /// [`OfferLinks::set_photos_keyed`]), the added images are linked before the offer's write
    /// (see [`prelink`](Self::prelink)) instead of in its transaction.
    async fn change_offer(
        &self,
        offer: &OfferKey,
        photos: Option<&[ImageId]>,
        now: Timestamp,
        orphan_ttl: Duration,
        key: Option<&str>,
    ) -> Result<bool, LinkError> {
        let marker = key.map(|k| mark(offer, k));
        let marker = marker.as_deref();
        // Unkeyed, the added images are read eventually consistently at first (half the
        // price): their link writes are conditional on being live, so a stale read only costs a
        // round, and a refusal is only made on a consistent read. Keyed, they are read
        // consistently, after the offer: a mark read stale could count a link that is gone.
        // Dropped images are always read consistently: a stale count would skip or misstate an
        // unlink without any condition to catch it.
        let mut consistent = marker.is_some();
        let mut attempt = 0;
        while attempt < CHANGE_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt - 1).await;
            }
            let read = self.read_offer(offer).await?;
            if photos.is_none() && read.is_none() {
                return Ok(false);
            }
            let old: &[ImageId] = read.as_ref().map_or(&[], |r| r.photos.as_slice());
            let wanted: &[ImageId] = photos.unwrap_or(&[]);
            let old_set: HashSet<&ImageId> = old.iter().collect();
            let new_set: HashSet<&ImageId> = wanted.iter().collect();
            let added: Vec<&ImageId> = wanted.iter().filter(|id| !old_set.contains(id)).collect();
            let dropped: Vec<&ImageId> = old.iter().filter(|id| !new_set.contains(id)).collect();
            let ids = |list: &[&ImageId]| list.iter().map(|id| (*id).clone()).collect::<Vec<_>>();
            let (added_items, dropped_items) = futures_util::future::try_join(
                self.read_images(&ids(&added), consistent),
                self.read_images(&ids(&dropped), true),
            )
            .await?;
            // An image that many offers link turns hot first: its changes then go to its
            // shards (see the `hot_links` module).
            let heating: Vec<&ImageId> = added_items
                .iter()
                .chain(&dropped_items)
                .filter(|(_, (r, item))| {
                    r.is_ready() && r.link_count >= self.hot_links && hot_since(item).is_none()
                })
                .map(|(id, _)| id)
                .collect();
            if !heating.is_empty() {
                futures_util::future::try_join_all(
                    heating.iter().map(|id| self.heat(id, now, orphan_ttl)),
                )
                .await?;
                attempt += 1;
                continue;
            }
            // Images this offer already links are live (a linked image never expires).
            if let Some(unknown) = added
                .iter()
                .find(|id| !added_items.get(**id).is_some_and(|(r, _)| r.is_live(now)))
            {
                if consistent {
                    return Err(LinkError::UnknownImage((*unknown).clone()));
                }
                consistent = true;
                continue;
            }
            // A hot image is linked on a shard, in the offer's transaction (unless the
            // offer's client is new to it).
            let hot = |id: &ImageId| {
                added_items
                    .get(id)
                    .is_some_and(|(_, item)| hot_since(item).is_some() && lists_client(item, offer))
            };
            let links = match marker {
                None => added
                    .iter()
                    .map(|id| {
                        if hot(id) {
                            self.delta_write(id, 1, now)
                        } else {
                            self.link_op(id, now, offer)
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(marker) => {
                    // An added image marked by this change carries a link of it that no
                    // listing has used yet (the offer, read before it, does not list the
                    // image, and the write below is conditional on that read): it is used
                    // now. Every other added image is linked now.
                    // A hot one's link goes in the offer's transaction: no mark to use.
                    let (hot, unmarked): (Vec<&ImageId>, Vec<&ImageId>) = added
                        .iter()
                        .copied()
                        .filter(|id| {
                            !added_items
                                .get(*id)
                                .is_some_and(|(_, item)| marked_by(item, marker))
                        })
                        .partition(|id| hot(id));
                    let linked = futures_util::future::try_join_all(
                        unmarked
                            .iter()
                            .map(|id| self.prelink(id, marker, now, offer)),
                    )
                    .await?;
                    if linked.contains(&false) {
                        attempt += 1;
                        continue;
                    }
                    hot.iter()
                        .map(|id| self.delta_write(id, 1, now))
                        .collect::<Result<Vec<_>, _>>()?
                }
            };
            // A dropped image without links (or without a record) has nothing to undo; a hot
            // one is unlinked on a shard.
            let mut cooling = Vec::new();
            let mut unlinks = Vec::with_capacity(dropped.len());
            for id in &dropped {
                let Some((r, item)) = dropped_items.get(*id) else {
                    continue;
                };
                if hot_since(item).is_some() {
                    self.unmark(id, item, Some(offer)).await?;
                    unlinks.push(self.delta_write(id, -1, now)?);
                    cooling.push(r);
                } else if r.link_count > 0 {
                    unlinks.push(self.unlink_op(id, r.link_count, now, orphan_ttl)?);
                }
            }
            let write = offer_write(offer, photos, read.as_ref(), now);
            // With no image written beside it, the offer's put is a plain conditional write (a
            // transaction of one item would cost twice as much).
            let written = if write.item.is_some() && links.is_empty() && unlinks.is_empty() {
                self.put_offer_alone(write).await?
            } else {
                let op = self.offer_op(write)?;
                self.apply_change(op, links, unlinks, now, orphan_ttl)
                    .await?
            };
            if written {
                for seen in cooling {
                    // Best effort: the next unlink of it cools it otherwise (a read, with none left).
                    if let Err(e) = self.cool_if_few(seen, now, orphan_ttl).await {
                        tracing::warn!(image = %seen.id, error = %e, "could not cool a hot image");
                    }
                }
                return Ok(read.is_some());
            }
            consistent = true;
            attempt += 1;
        }
        Err(LinkError::Store(StoreError::Conflict(format!(
            "offer {offer}: it or its images kept changing ({CHANGE_ATTEMPTS} attempts)"
        ))))
    }

    /// Puts the offer's new list on its own; `Ok(false)` if the offer changed since it was read.
    async fn put_offer_alone(&self, write: OfferWrite) -> Result<bool, StoreError> {
        let sent = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(write.item)
            .condition_expression(write.condition)
            .set_expression_attribute_names(write.parts.names)
            .set_expression_attribute_values(write.parts.values)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(sdk_error("writing an offer", e)),
        }
    }
}

#[async_trait]
impl OfferLinks for DynamoStore {
    async fn set_photos(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError> {
        self.change_offer(offer, Some(&distinct(images)), now, orphan_ttl, None)
            .await
            .map(drop)
    }

    async fn set_photos_keyed(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        key: &str,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError> {
        self.change_offer(offer, Some(&distinct(images)), now, orphan_ttl, Some(key))
            .await
            .map(drop)
    }

    async fn scan_photo_lists(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PhotoListPage, StoreError> {
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
        let mut lists = Vec::with_capacity(items.len());
        for item in &items {
            let what = format!("offer item {:?}", id_of(item, KIND).unwrap_or_default());
            let a = Attrs::new(item, &what);
            lists.push(
                a.strings(PHOTOS)?
                    .into_iter()
                    .map(|id| {
                        ImageId::parse(id)
                            .map_err(|_| a.corrupt(PHOTOS, "holds an invalid image id"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok(PhotoListPage { lists, next })
    }

    /// A Scan of the offers' photo lists, kept if they hold the image: an operator's purge is
    /// rare, and a reverse index would cost every link a second write.
    async fn offers_linking(
        &self,
        image: &ImageId,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<OfferPage, StoreError> {
        let (items, next) = self
            .scan_items(KIND, None, SCAN_ATTRIBUTES, 0, 1, cursor, limit)
            .await?;
        let mut offers = Vec::new();
        for item in &items {
            let raw = id_of(item, KIND).unwrap_or_default();
            let what = format!("offer item {raw:?}");
            let a = Attrs::new(item, &what);
            if a.strings(PHOTOS)?.contains(&image.as_str()) {
                offers
                    .push(OfferKey::parse(raw).map_err(|_| a.corrupt(PK, "is not an offer key"))?);
            }
        }
        Ok(OfferPage { offers, next })
    }

    async fn linking_clients(&self, image: &ImageId) -> Result<Vec<ClientId>, StoreError> {
        let Some(item) = self
            .read_item(
                image_key(image),
                &format!("reading the clients of image {image}"),
                false,
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        let what = format!("image item {image}");
        let a = Attrs::new(&item, &what);
        let names: &[String] = match item.get(CLIENTS) {
            None => &[],
            Some(AttributeValue::Ss(names)) => names,
            Some(_) => return Err(a.corrupt(CLIENTS, "is not a string set")),
        };
        names
            .iter()
            .map(|c| {
                ClientId::parse(c).map_err(|_| a.corrupt(CLIENTS, "holds an invalid client id"))
            })
            .collect()
    }

    async fn photos(&self, offer: &OfferKey) -> Result<Option<Vec<ImageId>>, StoreError> {
        Ok(self.read_offer(offer).await?.map(|r| r.photos))
    }

    async fn delete_offer(
        &self,
        offer: &OfferKey,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        match self.change_offer(offer, None, now, orphan_ttl, None).await {
            Ok(existed) => Ok(existed),
            Err(LinkError::Store(e)) => Err(e),
            // Deleting links nothing, so no image can be unknown.
            Err(LinkError::UnknownImage(id)) => Err(StoreError::corrupt(format!(
                "offer {offer}: deleting it reported unknown image {id}"
            ))),
        }
    }
}
