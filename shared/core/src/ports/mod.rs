//! Ports: the small capabilities the flows need, each implemented by an embedded adapter
//! (SQLite, a directory) and an AWS one. Built once at start-up as `Arc<dyn Port>`.

mod blob_store;
mod cdn;
mod checkpoints;
mod clock;
mod documents;
mod image_index;
mod messages;
mod offer_links;
mod rate_limiter;
mod store_error;
mod task_queue;
mod uploads;

pub use blob_store::{BlobMeta, BlobPage, BlobStore, DeletedBlob, Erased, KeepCurrent};
pub use cdn::Cdn;
pub use checkpoints::Checkpoints;
pub use clock::{Clock, ManualClock, SystemClock};
pub use documents::{
    CountBucket, DocumentPage, Documents, MemberPage, StoredDocument, check_counts, is_count_name,
    walk_cursor, walk_cursor_key,
};
pub use image_index::{Claim, ImageIndex, ReadyImage, ScanPage};
pub use messages::{
    DeadMessage, Letter, MessageSender, OutgoingMessage, Reason, RedriveKinds, Subscriber,
};
pub use offer_links::{KeyedLink, LinkError, OfferLinks, OfferPage, PhotoListPage};
pub use rate_limiter::{Grant, RateLimiter};
pub use store_error::StoreError;
pub use task_queue::{DeadLetter, Delivery, Enqueued, QueueCounts, TaskQueue};
pub use uploads::{UploadRecord, UploadRecords, UploadState, UploadUrls};

use std::sync::Arc;

/// The ports, built once at start-up for one backend.
#[derive(Clone)]
pub struct Ports {
    pub blobs: Arc<dyn BlobStore>,
    pub images: Arc<dyn ImageIndex>,
    pub offers: Arc<dyn OfferLinks>,
    pub uploads: Arc<dyn UploadRecords>,
    pub upload_urls: Arc<dyn UploadUrls>,
    pub checkpoints: Arc<dyn Checkpoints>,
    /// Versioned documents (the crawls' URL and crawl records, what hosts taught).
    pub documents: Arc<dyn Documents>,
    /// Per-client request budgets shared by every worker.
    pub rate_limits: Arc<dyn RateLimiter>,
    /// Messages to named queues (SQS on AWS, the task queue locally).
    pub messages: Arc<dyn MessageSender>,
    /// The queue `messages` sends into, for the local workers that receive from it; `None` on
    /// AWS, where Lambda's SQS triggers receive.
    pub queue: Option<Arc<dyn TaskQueue>>,
    pub clock: Arc<dyn Clock>,
}
