//! Hot images: the link count of an image that many offers link, spread over delta items.
//!
//! A link or an unlink writes the image's item in a transaction with the offer (two write
//! units), and one item takes at most a partition's 1,000 write units a second: a dealer's
//! logo in every offer of the biggest client changes 750 times a second at ten times seed
//! 001's peak, and a popular URL's drain links its image once per waiting offer. So an image
//! whose count reaches [`HOT_LINKS`] turns **hot**: its item gets `hot` (N ms, when), and
//! [`LINK_SHARDS`] delta items are created beside it, `pk = linkdelta#{id}#{k}`,
//! `sk = linkdelta`: `delta` (N, may be negative) and `last_update` (N ms). From then on a link
//! or an unlink is an `ADD delta ±1` on a shard chosen at random, in the offer's transaction,
//! conditional on the shard existing (the image still hot), and the image's item is not
//! written: the count is the item's `link_count` plus the shards' deltas, exactly (each change
//! is in its offer's transaction, and additions commute), and each shard takes a sixteenth of
//! the changes. The `linkdelta#` prefix keeps the shards out of the image stream's filter and
//! the GC index.
//!
//! - **Turning hot** is one transaction: the item's `hot`, conditional on its count being at
//!   least [`HOT_LINKS`] and on not being hot, and the shards, each conditional on being
//!   absent.
//! - **A hot image is never orphaned by an unlink.** It has no expiry (it had links when it
//!   turned hot, and only cooling gives it one), and the item's last-link unlink is
//!   conditional on `hot` being absent, so a change that read the image before it turned hot
//!   cannot orphan it with the shards' links uncounted.
//! - **Cooling** folds the shards back into the item: after a change unlinks a hot image, its
//!   shards are read (eventually consistently, half a read unit each); under
//!   [`HOT_LINKS`]` / 2` links they are read again consistently and one transaction sets the
//!   item's count to the total, removes `hot` (with the orphan expiry if the total is 0) and
//!   deletes every shard, each conditional on its delta as read: a change that wrote a shard
//!   in between fails it (the next unlink cools it). A change that read the image hot
//!   and writes after finds no shard, reads again and links the item.
//! - A link by a client not yet among the image's `clients` writes the item as a cold link
//!   does (its count one more: the total stays exact), so the client is added.
//! - A read that finds a hot image with no link left (its last unlink could not cool it) cools
//!   it into the orphan that unlink would have made, under the orphan window it turned hot
//!   with (`hot_grace`, N ms), where the function may write: it is not left hot.
//! - Records read through the ports carry the total, and the latest `last_update` of the item
//!   and its shards (a change's own time, so two changes a moment apart may leave the earlier
//!   one's).

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use super::images::{
    LAST_UPDATE, LINK_COUNT, READY, STATE, image_key, remove_expiry, set_orphan_expiry,
};
use super::item::{Attrs, Expr, Item, PK, key, ms, n, s};
use super::offers::{marked_offer, marks, remove_marks};
use super::{DynamoStore, build_error};
use imgest_core::domain::{ImageId, ImageRecord, OfferKey, Timestamp};
use imgest_core::ports::StoreError;

/// On an image's item: when it turned hot (N ms), while it is.
pub(super) const HOT: &str = "hot";
/// On a hot image's item: the orphan window of the change that turned it hot (N ms), so a read
/// that finds its links all gone can cool it into the orphan an unlink would have made.
const HOT_GRACE: &str = "hot_grace";
const SHARD_KIND: &str = "linkdelta";
const DELTA: &str = "delta";

/// The link count at which an image turns hot: a count that only an image listed by many
/// offers reaches, so turning hot (one transaction of [`LINK_SHARDS`]` + 1` items) is rare.
pub const HOT_LINKS: u32 = 1_000;
/// Delta items a hot image's link changes are spread over (the capacity model divides the
/// popular image's changes by it).
pub const LINK_SHARDS: u32 = 16;

fn shard_key(id: &ImageId, shard: u32) -> Item {
    key(SHARD_KIND, &format!("{id}#{shard}"))
}

/// When the image's item turned hot, if it is hot.
pub(super) fn hot_since(item: &Item) -> Option<i64> {
    item.get(HOT)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

/// One shard of a hot image as read.
struct Shard {
    index: u32,
    delta: i64,
    last_update: Option<Timestamp>,
}

impl DynamoStore {
    /// A link (`+1`) or an unlink (`-1`) of hot image `id`, for an offer's transaction.
    pub(super) fn delta_op(
        &self,
        id: &ImageId,
        change: i64,
        now: Timestamp,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut e = Expr::new();
        e.add(DELTA, change).set(LAST_UPDATE, ms(now));
        let condition = e.exists(DELTA);
        let shard = shard_key(id, fastrand::u32(..LINK_SHARDS));
        self.transact_update(shard, e, condition, "a link delta")
    }

    /// Removes the marks of keyed links from hot image `id`'s item (as read: `item`) before
    /// one of its links is taken away on a shard, which leaves the item as it is: those naming
    /// `offer` (the offer whose listing goes), or every one when the offer is not known. A
    /// mark that outlived its offer's unlink would let a later run of its change use a link
    /// that is gone (a count one too low); without it, that run links again. Only an item that
    /// carries such a mark is written.
    pub(super) async fn unmark(
        &self,
        id: &ImageId,
        item: &Item,
        offer: Option<&OfferKey>,
    ) -> Result<(), StoreError> {
        let mut e = Expr::new();
        let mut conditions = Vec::new();
        for (attr, mark) in marks(item) {
            if offer.is_some_and(|o| marked_offer(mark).as_ref() != Some(o)) {
                continue;
            }
            e.remove(attr);
            conditions.push(e.eq(attr, s(mark)));
        }
        if conditions.is_empty() {
            return Ok(());
        }
        // Changed meanwhile: a mark set since is the mark of a link made since.
        let condition = conditions.join(" AND ");
        self.update_if(image_key(id), e.finish(), condition, || {
            format!("removing the link marks of hot image {id}")
        })
        .await
        .map(drop)
    }

    /// Turns ready image `id` hot if its count has reached the threshold and it is not hot
    /// yet; `Ok(false)` if it changed meanwhile (the caller reads it again either way).
    pub(super) async fn heat(
        &self,
        id: &ImageId,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        let grace = i64::try_from(orphan_ttl.as_millis()).unwrap_or(i64::MAX);
        let mut e = Expr::new();
        e.set(HOT, ms(now)).set(HOT_GRACE, n(grace));
        let condition = format!(
            "{} AND {} AND {}",
            e.eq(STATE, s(READY)),
            e.cmp(LINK_COUNT, ">=", n(i64::from(self.hot_links))),
            e.not_exists(HOT),
        );
        let mut items =
            vec![self.transact_update(image_key(id), e, condition, "turning an image hot")?];
        for shard in 0..LINK_SHARDS {
            let mut item = shard_key(id, shard);
            item.insert(DELTA.to_owned(), n(0));
            item.insert(LAST_UPDATE.to_owned(), ms(now));
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", PK)
                .build()
                .map_err(|e| build_error("a link shard", e))?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        self.transact(items).await
    }

    /// The shards of hot image `id`; every one must be there.
    async fn shards(&self, id: &ImageId, consistent: bool) -> Result<Vec<Shard>, StoreError> {
        let keys = (0..LINK_SHARDS).map(|k| shard_key(id, k)).collect();
        let items = self.batch_get(keys, consistent).await?;
        let mut shards = Vec::with_capacity(items.len());
        for item in &items {
            let what = format!("link shard of image {id}");
            let a = Attrs::new(item, &what);
            let index = super::item::id_of(item, SHARD_KIND)
                .and_then(|rest| rest.rsplit_once('#'))
                .and_then(|(_, k)| k.parse::<u32>().ok())
                .filter(|k| *k < LINK_SHARDS)
                .ok_or_else(|| a.corrupt(PK, "is not a link shard's key"))?;
            shards.push(Shard {
                index,
                delta: a.i64(DELTA)?,
                last_update: a.opt_time(LAST_UPDATE)?,
            });
        }
        Ok(shards)
    }

    /// `record` (made of `item`) with its shards' links and latest update, if it is hot. One
    /// found with no link left (its last unlink could not cool it) is cooled into the orphan
    /// that unlink would have made, where this process may write (best effort: a read-only
    /// function's reads only report it).
    pub(super) async fn with_total(
        &self,
        mut record: ImageRecord,
        item: &Item,
    ) -> Result<ImageRecord, StoreError> {
        if hot_since(item).is_none() {
            return Ok(record);
        }
        let shards = self.shards(&record.id, true).await?;
        let total = total(&record, &shards)?;
        let grace = Attrs::new(item, "a hot image's item")
            .opt_i64(HOT_GRACE)?
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        let latest = latest(&record, &shards);
        if let (0, Some(grace)) = (total, grace) {
            match self.cool(&record, &shards, None, latest, grace).await {
                // As the fold wrote it: no link, an orphan from its last change.
                Ok(true) => record.expires_at = Some(latest.plus(grace)),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(image = %record.id, error = %e,
                        "a hot image with no link left could not be cooled here");
                }
            }
        }
        record.link_count = total;
        record.last_update = latest;
        Ok(record)
    }

    /// A hot image with fewer links than this is cooled: half the threshold (a hot image's
    /// count moving about it does not turn it hot and cold by turns), at least 1.
    fn cool_below(&self) -> u32 {
        (self.hot_links / 2).max(1)
    }

    /// After a change unlinked hot image `seen` (its item as the change read it): cools it if
    /// few links are left. The look is at its shards alone, eventually consistent (half a read
    /// unit each, on sixteen partitions); the fold reads the item and the shards again,
    /// consistently.
    pub(super) async fn cool_if_few(
        &self,
        seen: &ImageRecord,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), StoreError> {
        let glance = self.shards(&seen.id, false).await?;
        // The change's own unlink may not show yet: counted as if it did.
        if total(seen, &glance)?.saturating_sub(1) >= self.cool_below() {
            return Ok(());
        }
        let (read, shards) = futures_util::future::try_join(
            self.read_image_item(&seen.id),
            self.shards(&seen.id, true),
        )
        .await?;
        if let Some((record, item)) = read
            && hot_since(&item).is_some()
            && total(&record, &shards)? < self.cool_below()
        {
            self.cool(&record, &shards, None, now, orphan_ttl).await?;
        }
        Ok(())
    }

    /// Folds hot image `seen`'s `shards` (as read) into its item: the count becomes their
    /// total (or `count`, the audit's correction), an orphan expiring at `now + orphan_ttl` if
    /// that is 0, and `hot` and the shards go, all conditional on being as read. Whether it
    /// was written.
    async fn cool(
        &self,
        seen: &ImageRecord,
        shards: &[Shard],
        count: Option<u32>,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        let id = &seen.id;
        let count = match count {
            Some(count) => count,
            None => total(seen, shards)?,
        };
        let mut e = Expr::new();
        e.set(LINK_COUNT, n(i64::from(count)))
            .set(LAST_UPDATE, ms(latest(seen, shards)))
            .remove(HOT)
            .remove(HOT_GRACE);
        remove_marks(&mut e);
        if count == 0 {
            set_orphan_expiry(&mut e, id, now.plus(orphan_ttl));
        } else {
            remove_expiry(&mut e);
        }
        let condition = format!(
            "{} AND {}",
            e.exists(HOT),
            e.eq(LINK_COUNT, n(i64::from(seen.link_count))),
        );
        let mut items =
            vec![self.transact_update(image_key(id), e, condition, "cooling an image")?];
        for shard in shards {
            let delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(shard_key(id, shard.index)))
                .condition_expression("#d = :d")
                .expression_attribute_names("#d", DELTA)
                .expression_attribute_values(":d", AttributeValue::N(shard.delta.to_string()))
                .build()
                .map_err(|e| build_error("a link shard's delete", e))?;
            items.push(TransactWriteItem::builder().delete(delete).build());
        }
        self.transact(items).await
    }

    /// The audit's correction of a hot image (see
    /// [`ImageIndex::correct_link_count`](imgest_core::ports::ImageIndex), whose write on a
    /// cold item is refused on a hot one): folded to `count` if it is still as `seen` (its
    /// total and latest update); `None` if it is not hot.
    pub(super) async fn correct_hot(
        &self,
        seen: &ImageRecord,
        count: u32,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<Option<bool>, StoreError> {
        let Some((record, item)) = self.read_image_item(&seen.id).await? else {
            return Ok(None);
        };
        if hot_since(&item).is_none() {
            return Ok(None);
        }
        let shards = self.shards(&seen.id, true).await?;
        let unchanged = record.generation == seen.generation
            && total(&record, &shards)? == seen.link_count
            && latest(&record, &shards) == seen.last_update;
        if !unchanged {
            return Ok(Some(false));
        }
        self.cool(&record, &shards, Some(count), now, orphan_ttl)
            .await
            .map(Some)
    }
}

/// The item's count plus its shards' deltas: never negative (every unlink undoes a link).
fn total(record: &ImageRecord, shards: &[Shard]) -> Result<u32, StoreError> {
    let sum = shards.iter().fold(i64::from(record.link_count), |sum, s| {
        sum.saturating_add(s.delta)
    });
    u32::try_from(sum).map_err(|_| {
        StoreError::corrupt(format!(
            "dynamodb: image {}: its link count and shards add up to {sum}",
            record.id
        ))
    })
}

/// The latest update of the item and its shards.
fn latest(record: &ImageRecord, shards: &[Shard]) -> Timestamp {
    shards
        .iter()
        .filter_map(|s| s.last_update)
        .fold(record.last_update, Timestamp::max)
}
