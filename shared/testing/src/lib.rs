//! Contract suites: what every adapter of a port must do, checked through the port's trait
//! only, so the embedded adapters and the AWS ones (on an emulator) run the very same tests.
//!
//! One module per port, each a list of `pub async fn` checks taking the port (or a fixture of
//! ports: [`LinkPorts`], [`UploadPorts`], [`SenderPorts`]). The list is written once per suite;
//! from it come `CHECKS` (the checks' names), `contract(port)` (every check in a row on one
//! port) and an exported macro stamping out one test per check. Checks pass time explicitly
//! (from [`BASE`]), never sleep, and use fresh random ids, keys, queue names and message tags,
//! so they can share one backend and run in parallel.
//!
//! To get one `#[tokio::test]` per check for an adapter, give a macro a module name and a
//! factory: anything callable as `factory(test_name).await` returning an
//! `Option<`[`Fixture`]`>` of the port, `None` when the adapter's backend is not available
//! (the test then returns early: it skipped). Embedded factories always return `Some`; AWS
//! ones get their SDK configuration from [`aws::sdk_config`], which returns `None` when no
//! emulator is configured (and fails the test when AWS tests are required). The calling crate
//! needs `tokio` (with `macros` and `rt-multi-thread`) as a dependency:
//!
//! ```text
//! async fn fs_blob_store(_test: &str) -> Option<Fixture<Arc<dyn BlobStore>>> {
//!     let dir = tempfile::tempdir().unwrap();
//!     Some(Fixture::with_guard(Arc::new(FsBlobStore::new(dir.path())), dir))
//! }
//! async fn s3_blob_store(test: &str) -> Option<Fixture<Arc<dyn BlobStore>>> {
//!     let config = testing::aws::sdk_config(test).await?; // None: skipped
//!     let client = aws_sdk_s3::Client::new(&config);
//!     let bucket = testing::aws::unique_name("imgest-test");
//!     client.create_bucket().bucket(&bucket).send().await.unwrap();
//!     Some(Fixture::new(Arc::new(S3BlobStore::new(client, bucket))))
//! }
//! imgest_testing::blob_store_contract_tests!(fs_blob_store, super::fs_blob_store);
//! imgest_testing::blob_store_contract_tests!(s3_blob_store, super::s3_blob_store);
//! imgest_testing::image_index_contract_tests!(sqlite_images, super::sqlite_images);
//! imgest_testing::offer_links_contract_tests!(sqlite_offers, super::sqlite_links); // LinkPorts
//! imgest_testing::task_queue_contract_tests!(sqlite_queue, super::sqlite_queue);
//! imgest_testing::documents_contract_tests!(sqlite_documents, super::sqlite_documents);
//! imgest_testing::rate_limiter_contract_tests!(sqlite_rate_limits, super::sqlite_rate_limits);
//! imgest_testing::uploads_contract_tests!(sqlite_uploads, super::sqlite_uploads); // UploadPorts
//! imgest_testing::message_sender_contract_tests!(queue_sender, super::queue_sender); // SenderPorts
//! ```
//!
//! The tests are named `<module>::<check>`; the factory is given that name (for its messages).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// Writes a suite's check list once and derives from it, in the suite's module: `CHECKS` (the
/// checks' names), `contract(port)` (every check in a row on one port, cloned for each) and the
/// exported macro `$tests` that stamps out one `#[tokio::test]` per check.
///
/// Called as `contract_suite!($ exported_macro_name, suite_module, PortType; check, ...)`: the
/// leading `$` is passed through as `$d` so that the exported macro can have metavariables of
/// its own (`$d module` is its `$module`), which a macro cannot otherwise write.
macro_rules! contract_suite {
    ($d:tt $tests:ident, $suite:ident, $port:ty; $($check:ident),+ $(,)?) => {
        /// The checks' names, in the order `contract` runs them.
        pub const CHECKS: &[&str] = &[$(stringify!($check)),+];

        /// Every check, in a row, on one port.
        pub async fn contract(port: $port) {
            $($check(::std::clone::Clone::clone(&port)).await;)+
        }

        #[doc = concat!(
            "Stamps out one `#[tokio::test]` per check of `testing::", stringify!($suite),
            "` in a module `$module`, for the adapter that `$factory(test_name).await` (an `Option<Fixture<",
            stringify!($port), ">>`) gives; `None` skips the test."
        )]
        #[macro_export]
        macro_rules! $tests {
            ($d module:ident, $d factory:expr $d(,)?) => {
                $d crate::__imgest_contract_tests!($d module, $suite, $d factory; $($check),+);
            };
        }
    };
}

pub mod aws;
pub mod blob_store;
pub mod crashing;
pub mod documents;
pub mod generated;
pub mod image_index;
pub mod message_sender;
pub mod offer_links;
pub mod rate_limiter;
pub mod task_queue;
pub mod uploads;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use imgest_core::domain::{
    ClientId, ContentHash, Generation, ImageId, ImageRecord, OfferId, OfferKey, OutputFormat,
    SourceFormat, StoredVariant, Tenant, Timestamp, VariantName,
};
use imgest_core::ports::{
    Checkpoints, Claim, ImageIndex, MessageSender, OfferLinks, ReadyImage, UploadRecords,
};

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

/// What the upload checks need: upload records, and the checkpoints that share their store.
#[derive(Clone)]
pub struct UploadPorts {
    pub uploads: Arc<dyn UploadRecords>,
    pub checkpoints: Arc<dyn Checkpoints>,
}

impl UploadPorts {
    /// Both ports from one adapter implementing both (as `SqliteStore` and `DynamoStore` do).
    pub fn of<S: UploadRecords + Checkpoints + 'static>(store: Arc<S>) -> Self {
        Self {
            uploads: store.clone(),
            checkpoints: store,
        }
    }
}

/// What the message-sender checks need: the sender, a queue it sends to and a way to read
/// that queue back.
#[derive(Clone)]
pub struct SenderPorts {
    pub sender: Arc<dyn MessageSender>,
    /// A logical queue name the sender knows.
    pub queue: String,
    /// Reads `queue` back (test-only: the application receives on its own).
    pub reader: Arc<dyn message_sender::QueueReader>,
    /// A logical name the sender does not know, or `None` for a sender that knows every name
    /// (the local `QueueSender`: its queues exist by being used, so no name is unknown).
    pub unknown_queue: Option<String>,
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

/// A fresh random client.
pub fn random_client() -> ClientId {
    ClientId::parse(&format!("client-{:016x}", fastrand::u64(..))).unwrap()
}

/// A fresh offer in a fresh client's namespace.
pub fn random_offer() -> OfferKey {
    OfferKey::new(Tenant::Client(random_client()), random_offer_id())
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
                format: OutputFormat::Jpeg,
            },
            // Of another format: stores keep each variant's.
            StoredVariant {
                name: VariantName::parse("thumb").unwrap(),
                width: 200,
                height: 200,
                bytes: 4_321,
                format: OutputFormat::Webp,
            },
        ],
        variant_set: sample_version(),
        sha256: Some(ContentHash::of_bytes(b"a sample original")),
        original_metadata: Some(imgest_core::domain::OriginalMetadata::StripPrivate),
        // A real hash's length (23 bytes: an opaque landscape photo's).
        thumbhash: imgest_core::domain::ThumbHash::from_bytes(vec![0x5a; 23]).ok(),
        // With a trimmed part and an inner hash: the longest a signature is.
        signature: Some(sample_signature()),
    }
}

/// A signature with a trimmed part, an inner hash and every point it can have (the longest a
/// signature is), every field distinct.
pub fn sample_signature() -> imgest_core::domain::Signature {
    use imgest_core::domain::{HashPair, PdqHash, Point, STORED_POINTS, Signature, WeakBits};
    let hash = |byte: &str| PdqHash::from_hex(&byte.repeat(32)).unwrap_or_default();
    let pair = |a: &str, b: &str, weak: u8| HashPair {
        hash: hash(a),
        mirror: hash(b),
        hash_weak: WeakBits([weak; 16]),
        mirror_weak: WeakBits([weak.rotate_left(4); 16]),
    };
    Signature {
        quality: 83,
        whole: pair("0f", "f0", 0x21),
        trimmed: Some(pair("3c", "c3", 0x43)),
        inner: Some(hash("5a")),
        points: Some(
            (0..STORED_POINTS as u64)
                .filter_map(|i| {
                    Point::at(
                        i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                        i as f32 * 10.5,
                        127.875 - i as f32,
                    )
                })
                .collect(),
        ),
    }
}

/// The variant set version the checks' ready records are made with.
pub(crate) fn sample_version() -> imgest_core::domain::VariantSetVersion {
    imgest_core::domain::VariantSetVersion::of(&[b"large=fit:1280x1280,thumb=cover:200x200"])
}

/// Claims a fresh id and completes it at `now`: a ready, unlinked record expiring at
/// `now + ORPHAN_TTL`.
pub(crate) async fn ready_image(images: &dyn ImageIndex, now: Timestamp) -> ImageRecord {
    let id = random_image_id();
    let Claim::New { generation } = images
        .claim(&id, &Generation::random(), now, CLAIM_TTL, ORPHAN_TTL)
        .await
        .unwrap()
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

/// The tests of one suite for one adapter (what the suites' exported macros expand to).
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
                    let test = concat!(module_path!(), "::", stringify!($check));
                    let Some(fixture) = ($factory)(test).await else {
                        // Skipped (the factory said why).
                        return;
                    };
                    $crate::$suite::$check(::std::clone::Clone::clone(&fixture.port))
                        .await;
                    drop(fixture);
                }
            )+
        }
    };
}
