//! The offer link port: an offer's ordered photo list and each image's link count and expiry.
//! Linking never touches object storage. Offers are addressed by [`OfferKey`]: the same offer
//! id in two clients' namespaces is two offers.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::domain::{ClientId, ImageId, OfferKey, Timestamp};

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The image has no live record (never uploaded, still processing, or expired).
    #[error("unknown image {0}")]
    UnknownImage(ImageId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The link a keyed change ([`OfferLinks::set_photos_keyed`]) is about to make: its offer and
/// its key. A store that links such changes with plain writes may count this link when it
/// creates the image (see [`ImageIndex::create_ready`](super::ImageIndex::create_ready)), so that
/// the change's run uses it instead of writing the image again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedLink {
    pub offer: OfferKey,
    pub key: String,
}

/// One page of [`OfferLinks::offers_linking`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfferPage {
    pub offers: Vec<OfferKey>,
    /// Where the next page starts (opaque); `None` when the walk is done.
    pub next: Option<String>,
}

/// One page of [`OfferLinks::scan_photo_lists`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhotoListPage {
    pub lists: Vec<Vec<ImageId>>,
    /// Where the next page starts (opaque); `None` when the segment is done.
    pub next: Option<String>,
}

#[async_trait]
pub trait OfferLinks: Send + Sync {
    /// Replaces the offer's ordered photo list (the ids are distinct). Every image must be live
    /// at `now`; otherwise `LinkError::UnknownImage` and nothing changes. Images newly linked
    /// lose their orphan expiry; images that no offer links any more expire at
    /// `now + orphan_ttl`. Linking an image refreshes its `last_update`.
    async fn set_photos(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError>;

    /// [`set_photos`](Self::set_photos) for a change that may run more than once, named by
    /// `key`: the same for every run of it (a crawl's id), distinct for other changes of the
    /// offer. Runs of the change, one after another or side by side, count each link once. A
    /// store may link the added images with plain writes before the offer's write instead of
    /// one transaction; then a run that fails after them, or is cut short and never run again,
    /// may leave a count one too high (the image never expires), never too low. The rule and
    /// its trade: `docs/consistency.md`, "Keyed links".
    async fn set_photos_keyed(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        key: &str,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError> {
        let _ = key;
        self.set_photos(offer, images, now, orphan_ttl).await
    }

    /// Walks every offer's photo list (the audit's recount of link counts), in `segments`
    /// disjoint parts: up to about `limit` offers of part `segment` from `cursor` (`None`: the
    /// start). An offer present throughout is seen exactly once; a store may put every offer
    /// in part 0.
    async fn scan_photo_lists(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PhotoListPage, StoreError>;

    /// The offers of every client whose photo list holds `image` (an operator's purge), a page
    /// of up to about `limit` at a time from `cursor` (`None`: the start); a page may hold none
    /// and still have a next one. An offer that holds it throughout is found exactly once.
    /// Locally an index read; on DynamoDB a Scan of every offer (offers keep no reverse
    /// index: linking stays one write per image).
    async fn offers_linking(
        &self,
        image: &ImageId,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<OfferPage, StoreError>;

    /// The clients whose offers link `image` (who may see it among near-duplicates), in no
    /// particular order; open mode's shared offers name none. A store may also name a client
    /// whose offers dropped the image since (DynamoDB keeps every client that linked it while
    /// it is stored: adding one costs nothing on top of the link's write, removing one would
    /// need to know that none of its other offers link it). One read.
    async fn linking_clients(&self, image: &ImageId) -> Result<Vec<ClientId>, StoreError>;

    /// The offer's photo list in order, or `None` if the offer has none set.
    async fn photos(&self, offer: &OfferKey) -> Result<Option<Vec<ImageId>>, StoreError>;

    /// Removes the offer and its links, orphaning images that nothing else links; returns
    /// whether the offer existed. Idempotent.
    async fn delete_offer(
        &self,
        offer: &OfferKey,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError>;
}
