//! Offers: an offer's ordered photo list. Linking, re-ordering and deleting are a few small
//! record writes and never touch object storage.

use std::collections::HashSet;

use super::{FlowError, Service};
use imgest_core::domain::{ImageId, ImageRecord, OfferId, OfferKey};
use imgest_core::telemetry::metrics::Stage;

/// An offer's photos in order, with their records (for variant URLs).
#[derive(Debug, Clone)]
pub struct OfferPhotos {
    pub offer_id: OfferId,
    pub photos: Vec<ImageRecord>,
}

impl Service {
    /// Replaces the offer's photo list and returns it with its records. Unknown, duplicate or
    /// too many ids change nothing.
    pub async fn set_offer_photos(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
    ) -> Result<OfferPhotos, FlowError> {
        self.link_offer_photos(offer, images, None).await?;
        self.offer_photos_of(offer, images).await
    }

    /// [`set_offer_photos`](Self::set_offer_photos) without reading the records back (the
    /// crawler links photos nobody is waiting to see). A change that may run more than once
    /// (a crawl's) names itself with `key`, which lets the store link its images with cheaper
    /// writes ([`set_photos_keyed`](imgest_core::ports::OfferLinks::set_photos_keyed)).
    pub async fn link_offer_photos(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        key: Option<&str>,
    ) -> Result<(), FlowError> {
        let limit = self.policy.max_photos_per_offer;
        if images.len() > limit {
            return Err(FlowError::TooManyPhotos {
                count: images.len(),
                limit,
            });
        }
        let mut seen = HashSet::with_capacity(images.len());
        if let Some(dup) = images.iter().find(|id| !seen.insert(*id)) {
            return Err(FlowError::DuplicateImage(dup.clone()));
        }
        let now = self.ports.clock.now();
        let ttl = self.policy.orphan_ttl;
        let offers = self.ports.offers.as_ref();
        Stage::Link
            .time_async(async {
                match key {
                    Some(key) => offers.set_photos_keyed(offer, images, key, now, ttl).await,
                    None => offers.set_photos(offer, images, now, ttl).await,
                }
            })
            .await?;
        Ok(())
    }

    /// The offer's photos in order, or `OfferNotFound`.
    pub async fn offer_photos(&self, offer: &OfferKey) -> Result<OfferPhotos, FlowError> {
        let ids = self
            .ports
            .offers
            .photos(offer)
            .await?
            .ok_or_else(|| FlowError::OfferNotFound(offer.id().clone()))?;
        self.offer_photos_of(offer, &ids).await
    }

    /// Deletes the offer (idempotent); returns whether it existed. Its photos become orphans
    /// unless another offer links them; no file is touched.
    pub async fn delete_offer(&self, offer: &OfferKey) -> Result<bool, FlowError> {
        let now = self.ports.clock.now();
        Ok(self
            .ports
            .offers
            .delete_offer(offer, now, self.policy.orphan_ttl)
            .await?)
    }

    /// A live image's record, or `ImageNotFound` (expired records count as gone).
    pub async fn image(&self, id: &ImageId) -> Result<ImageRecord, FlowError> {
        let now = self.ports.clock.now();
        match self.ports.images.get(id).await? {
            Some(record) if record.is_live(now) => Ok(record),
            _ => Err(FlowError::ImageNotFound(id.clone())),
        }
    }

    async fn offer_photos_of(
        &self,
        offer: &OfferKey,
        ids: &[ImageId],
    ) -> Result<OfferPhotos, FlowError> {
        // Linked images cannot be collected, so every id has a ready record.
        let photos = self.ports.images.get_many(ids).await?;
        if photos.len() != ids.len() {
            return Err(FlowError::Internal(format!(
                "offer {offer} links {} images but only {} records exist",
                ids.len(),
                photos.len()
            )));
        }
        Ok(OfferPhotos {
            offer_id: offer.id().clone(),
            photos,
        })
    }
}
