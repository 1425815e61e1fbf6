//! Contract suites: what every adapter of a port must do, checked through the port's trait
//! only, so the embedded adapters and the AWS ones (on an emulator) run the very same tests.
//!
//! One module per port, each a list of `pub async fn` checks taking the port, plus
//! `contract(port)` that runs them all in a row. Checks pass time explicitly (from [`BASE`]),
//! never sleep, and use fresh random ids, keys and queue names, so they can share one backend
//! and run in parallel.
//!
//! To get one `#[tokio::test]` per check for an adapter, give a macro a module name and a
//! factory (anything callable as `factory().await` returning a [`Fixture`] of the port); the
//! calling crate needs `tokio` (with `macros` and `rt-multi-thread`) as a dependency:
//!
//! ```text
//! async fn fs_store() -> Fixture<Arc<dyn BlobStore>> {
//!     let dir = tempfile::tempdir().unwrap();
//!     Fixture::with_guard(Arc::new(FsBlobStore::new(dir.path())), dir)
//! }
//! imgest_shared::blob_store_contract_tests!(fs_blob_store, fs_store);
//! imgest_shared::image_index_contract_tests!(sqlite_images, sqlite_images);
//! imgest_shared::offer_links_contract_tests!(sqlite_offers, sqlite_links); // Fixture<LinkPorts>
//! imgest_shared::task_queue_contract_tests!(sqlite_queue, sqlite_queue);
//! imgest_shared::records_contract_tests!(sqlite_records, sqlite_records);
//! imgest_shared::rate_limiter_contract_tests!(sqlite_rate_limits, sqlite_rate_limits);
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod aws;
pub mod blob_store;
pub mod image_index;
pub mod offer_links;
pub mod rate_limiter;
pub mod records;
pub mod task_queue;
pub mod uploads;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use crate::domain::{
    ImageId, ImageRecord, OfferId, SourceFormat, StoredVariant, Timestamp, VariantName,
};
use crate::ports::{Claim, ImageIndex, OfferLinks, ReadyImage};

/// 2023-11-14T22:13:20Z: the instant checks count from.
pub const BASE: Timestamp = Timestamp::from_millis(1_700_000_000_000);

/// A port under test and whatever must outlive it (a temporary directory, a container
/// handle), dropped when the test ends.
pub struct Fixture<T> {
    pub port: T,
    _guard: Option<Box<dyn Any + Send + Sync>>,
}

impl<T> Fixture<T> {
    pub fn new(port: T) -> Self {
        Self { port, _guard: None }
    }

    pub fn with_guard(port: T, guard: impl Any + Send + Sync) -> Self {
        Self {
            port,
            _guard: Some(Box::new(guard)),
        }
    }
}

/// What the offer-link checks need: links are only made to records the index holds.
#[derive(Clone)]
pub struct LinkPorts {
    pub images: Arc<dyn ImageIndex>,
    pub offers: Arc<dyn OfferLinks>,
}

impl LinkPorts {
    /// Both ports from one adapter implementing both (as `SqliteStore` does).
    pub fn of<S: ImageIndex + OfferLinks + 'static>(store: Arc<S>) -> Self {
        Self {
            images: store.clone(),
            offers: store,
        }
    }
}

/// A fresh random image id (the MD5 of random bytes).
pub fn random_image_id() -> ImageId {
    let bytes: Vec<u8> = std::iter::repeat_with(|| fastrand::u8(..))
        .take(16)
        .collect();
    ImageId::of_bytes(&bytes)
}

/// A fresh random offer id.
pub fn random_offer_id() -> OfferId {
    OfferId::parse(&format!("contract-{:016x}", fastrand::u64(..))).unwrap()
}

/// A fresh name with a readable label (queue names, key prefixes).
pub fn unique_name(label: &str) -> String {
    format!("contract-{label}-{:016x}", fastrand::u64(..))
}

pub(crate) const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(crate) const fn mins(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

/// The claim time-to-live the checks use.
pub(crate) const CLAIM_TTL: Duration = mins(10);
/// The orphan time-to-live the checks use.
pub(crate) const ORPHAN_TTL: Duration = mins(60);

pub(crate) fn sample_ready() -> ReadyImage {
    ReadyImage {
        format: SourceFormat::Jpeg,
        width: 1600,
        height: 1200,
        original_bytes: 123_456,
        variants: vec![
            StoredVariant {
                name: VariantName::parse("large").unwrap(),
                width: 1280,
                height: 960,
                bytes: 98_765,
            },
            StoredVariant {
                name: VariantName::parse("thumb").unwrap(),
                width: 200,
                height: 200,
                bytes: 4_321,
            },
        ],
    }
}

/// Claims a fresh id and completes it at `now`: a ready, unlinked record expiring at
/// `now + ORPHAN_TTL`.
pub(crate) async fn ready_image(images: &dyn ImageIndex, now: Timestamp) -> ImageRecord {
    let id = random_image_id();
    let Claim::New { generation } = images.claim(&id, now, CLAIM_TTL, ORPHAN_TTL).await.unwrap()
    else {
        panic!("a fresh id must be claimed as new");
    };
    images
        .complete(&id, &generation, sample_ready(), now, ORPHAN_TTL)
        .await
        .unwrap()
}

/// The stored record, which must exist.
pub(crate) async fn must_get(images: &dyn ImageIndex, id: &ImageId) -> ImageRecord {
    images
        .get(id)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("image {id} should exist"))
}

#[doc(hidden)]
#[macro_export]
macro_rules! __imgest_contract_tests {
    ($module:ident, $suite:ident, $factory:expr; $($check:ident),+ $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let fixture = ($factory)().await;
                    $crate::testing::$suite::$check(::std::clone::Clone::clone(&fixture.port))
                        .await;
                    drop(fixture);
                }
            )+
        }
    };
}
