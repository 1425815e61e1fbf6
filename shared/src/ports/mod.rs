//! Ports: the small capabilities the flows need, each implemented by an embedded adapter
//! (SQLite, a directory) and an AWS one. Built once at start-up as `Arc<dyn Port>`.

mod blob_store;
mod checkpoints;
mod clock;
mod image_index;
mod messages;
mod offer_links;
mod rate_limiter;
mod records;
mod store_error;
mod task_queue;
mod uploads;

pub use blob_store::{BlobMeta, BlobPage, BlobStore};
pub use checkpoints::Checkpoints;
pub use clock::{Clock, ManualClock, SystemClock};
pub use image_index::{Claim, ImageIndex, ReadyImage, ScanPage};
pub use messages::{DeadMessage, MessageSender, OutgoingMessage};
pub use offer_links::{LinkError, OfferLinks, PhotoListPage};
pub use rate_limiter::{Grant, RateLimiter};
pub use records::{RecordPage, Records, StoredRecord};
pub use store_error::StoreError;
pub use task_queue::{DeadLetter, Delivery, Enqueued, QueueCounts, TaskQueue};
pub use uploads::{UploadRecord, UploadRecords, UploadState, UploadUrls};
