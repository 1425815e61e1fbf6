//! The image record port: claim-by-conditional-write dedup, completion, expiry and GC deletes.

use std::time::Duration;

use async_trait::async_trait;

use super::{KeyedLink, StoreError};
use crate::domain::{
    ContentHash, Generation, ImageId, ImageRecord, JobPart, OfferKey, OriginalMetadata, Signature,
    SourceFormat, StoredVariant, ThumbHash, Timestamp, VariantSetVersion,
};

/// The outcome of claiming an image id. Dedup is a value, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one claim per upload, returned and matched at once, never held in a collection: boxing the record would only add an allocation"
)]
pub enum Claim {
    /// Nobody has these bytes (or a crashed worker's claim expired and was taken over): the
    /// caller processes them under `generation`, then calls `complete` or `abandon`.
    New { generation: Generation },
    /// A ready record exists (possibly expired but not yet collected: it is revived). Its
    /// `last_update` was refreshed, and its orphan expiry too if no offer links it, unless a
    /// refresh less than the refresh granularity ago already did.
    Existing(ImageRecord),
    /// Another worker holds a claim that has not expired; wait for its record.
    InProgress { claim_expires_at: Timestamp },
}

/// What processing produced: the fields a claim needs to become a ready record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyImage {
    pub format: SourceFormat,
    pub width: u32,
    pub height: u32,
    pub original_bytes: u64,
    pub variants: Vec<StoredVariant>,
    /// The variant set the files were made with.
    pub variant_set: VariantSetVersion,
    /// SHA-256 of the bytes the client sent (the stored original may lack their metadata).
    pub sha256: Option<ContentHash>,
    /// What the stored original kept of the photo's metadata (`None`: as sent).
    pub original_metadata: Option<OriginalMetadata>,
    /// The photo's placeholder (`None`: the pipeline made none).
    pub thumbhash: Option<ThumbHash>,
    /// The photo's perceptual signature (`None`: the pipeline made none).
    pub signature: Option<Signature>,
}

/// One page of a walk over every record ([`ImageIndex::scan`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScanPage {
    pub records: Vec<ImageRecord>,
    /// Where the next page starts; `None` when the segment is done. Opaque: saved as a
    /// checkpoint and given back as it was.
    pub next: Option<String>,
}

#[async_trait]
pub trait ImageIndex: Send + Sync {
    /// Atomically: no record → create a `Processing` claim under `proposed` (a fresh
    /// generation the caller drew), expiring at `now + claim_ttl` (`Claim::New`); a `Ready`
    /// record → refresh it (`Claim::Existing`), or return it unwritten if it
    /// [`is_freshly_refreshed`](ImageRecord::is_freshly_refreshed); a claim under `proposed`
    /// → `Claim::New` again (the caller's own: an earlier attempt of this request was applied
    /// and its answer lost, so the SDK's retry finds it); another unexpired claim →
    /// `Claim::InProgress`; an expired claim → take it over under `proposed` (`Claim::New`).
    async fn claim(
        &self,
        id: &ImageId,
        proposed: &Generation,
        now: Timestamp,
        claim_ttl: Duration,
        orphan_ttl: Duration,
    ) -> Result<Claim, StoreError>;

    /// Turns the caller's claim into a ready, unlinked record expiring at `now + orphan_ttl`.
    /// `StoreError::Conflict` if the claim is no longer the caller's (taken over or removed).
    async fn complete(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<ImageRecord, StoreError>;

    /// Creates a ready, unlinked record of `id` under `generation`, expiring at
    /// `now + orphan_ttl`, if there is no record of `id` at all; `None`, nothing written, if
    /// there is one. For bytes whose files are already written and that an offer links a moment
    /// later (a crawled photo): one write instead of a claim and its completion. Such a record
    /// is left out of [`expired`](Self::expired) where listing it would cost writes
    /// (DynamoDB's GC index, written and deleted again when the offer links it): if it is never
    /// linked, the store's own expiry collects it (DynamoDB's TTL deleter, whose stream the
    /// ttl-cleanup function follows), up to about two days after it expires.
    ///
    /// With `first_link` (the keyed change that will link it: the crawl that downloaded it), a
    /// store that links keyed changes with plain writes may create the record with that link
    /// already counted and marked as the change's (DynamoDB: one write fewer per new crawled
    /// photo), which the change's run then uses instead of linking again. If that change never
    /// links it (the crawl was replaced before it settled), the count is one too high until the
    /// audit mends it: never too low. A store that makes each change in one transaction creates
    /// the unlinked record whatever `first_link` says.
    async fn create_ready(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
        first_link: Option<&KeyedLink>,
    ) -> Result<Option<ImageRecord>, StoreError>;

    /// Removes the caller's claim after failed processing; does nothing if the claim is no
    /// longer the caller's.
    async fn abandon(&self, id: &ImageId, generation: &Generation) -> Result<(), StoreError>;

    /// The record as stored, whatever its state (callers check `is_live`).
    async fn get(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError>;

    /// [`get`](Self::get), except that the answer may miss writes of about the last second
    /// (DynamoDB's eventually consistent read, half the price): for a decision that a
    /// conditional write or a consistent read checks again.
    async fn peek(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        self.get(id).await
    }

    /// The stored records among `ids` (missing ones are left out), in the order of `ids`.
    async fn get_many(&self, ids: &[ImageId]) -> Result<Vec<ImageRecord>, StoreError>;

    /// Up to `limit` records expired at `now` (unlinked orphans past their expiry and claims past
    /// theirs), the longest-expired first: garbage-collection candidates. When more than `limit`
    /// are expired, which ones are listed may follow when they became candidates rather than
    /// their latest expiry (DynamoDB's GC index; see its adapter).
    async fn expired(&self, now: Timestamp, limit: usize) -> Result<Vec<ImageRecord>, StoreError> {
        self.expired_in(JobPart::WHOLE, now, limit).await
    }

    /// [`expired`](Self::expired), of `part`'s records only (one of GC's runs side by side).
    async fn expired_in(
        &self,
        part: JobPart,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<ImageRecord>, StoreError>;

    /// Points a ready record at other files, if it is still ready under `expected`: `ready`
    /// under `generation`. Re-processing writes a new generation, and the one it replaces is
    /// kept as the record's `previous` until `keep_previous_until`; retiring a variant keeps
    /// the generation and lists fewer files (`previous` is then left as it was). Links, expiry
    /// and `last_update` are kept. `None`, nothing written, if the record is gone, not ready or
    /// of another generation.
    async fn replace_files(
        &self,
        id: &ImageId,
        expected: &Generation,
        generation: &Generation,
        ready: ReadyImage,
        keep_previous_until: Timestamp,
    ) -> Result<Option<ImageRecord>, StoreError>;

    /// Sets a ready record's link count to `count` (the audit's correction: the number of
    /// offers that list it), only if the record is still as `seen` (generation, count and
    /// `last_update`: no link, unlink or use since it was read). A count of 0 makes it an
    /// orphan expiring at `now + orphan_ttl`; any mark of a keyed link is removed, so a
    /// change that is retried links again instead of re-using a link the correction undid.
    /// Returns whether it was written.
    async fn correct_link_count(
        &self,
        seen: &ImageRecord,
        count: u32,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError>;

    /// The offers whose keyed changes ([`OfferLinks::set_photos_keyed`]) hold a link of the
    /// record that their runs may use without writing it, read consistently, if the store
    /// marks such links (DynamoDB's `linked_by`, the last link count change when it was such a
    /// link, and `first_link`, the link counted at its creation; the embedded store makes each
    /// change in one transaction and marks none). While such an offer lists the image, the link
    /// may be in use whatever a count of the offers said a moment before: the audit never
    /// lowers such a count.
    ///
    /// [`OfferLinks::set_photos_keyed`]: super::OfferLinks::set_photos_keyed
    async fn keyed_links(&self, id: &ImageId) -> Result<Vec<OfferKey>, StoreError>;

    /// Walks every image record, in `segments` disjoint parts that may be walked at once: up to
    /// about `limit` records of part `segment` from `cursor` (`None`: the start). A record
    /// written or deleted during the walk may or may not be seen; every record present
    /// throughout is seen exactly once.
    async fn scan(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StoreError>;

    /// Records the SHA-256 of a ready record's original, only if it is still ready under
    /// `generation` and has none (a record written before strong hashes were recorded, whose
    /// original was just hashed); returns whether it was written.
    async fn set_strong_hash(
        &self,
        id: &ImageId,
        generation: &Generation,
        sha256: &ContentHash,
    ) -> Result<bool, StoreError>;

    /// Records the placeholder of a ready record, only if it is still ready under `generation`
    /// and has none (a record written before placeholders were made, whose smallest variant
    /// was just read); returns whether it was written.
    async fn set_thumbhash(
        &self,
        id: &ImageId,
        generation: &Generation,
        thumbhash: &ThumbHash,
    ) -> Result<bool, StoreError>;

    /// Records the perceptual signature of a ready record, only if it is still ready under
    /// `generation` and has none (a record written before signatures were made), or one made
    /// before inner hashes were while `signature` has one; returns whether it was written.
    async fn set_signature(
        &self,
        id: &ImageId,
        generation: &Generation,
        signature: &Signature,
    ) -> Result<bool, StoreError>;

    /// Deletes the record only if it is still `generation` and still expired at `now` (unlinked,
    /// not refreshed); returns whether it was deleted. The caller then deletes that
    /// generation's files.
    async fn delete_if_expired(
        &self,
        id: &ImageId,
        generation: &Generation,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
}
