//! The port contract suites against the embedded adapters: `FsBlobStore` on a real temporary
//! directory, `SqliteStore` on a real temporary file and `QueueSender` into that file's task
//! queue.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use imgest_core::domain::Generation;
use imgest_core::ports::{
    BlobStore, Claim, Clock, Documents, ImageIndex, OfferLinks, RateLimiter, SystemClock, TaskQueue,
};
use imgest_embedded::sqlite::QueueSender;
use imgest_embedded::{FsBlobStore, SqliteStore};
use imgest_testing as testing;
use imgest_testing::message_sender::TaskQueueReader;
use imgest_testing::{BASE, Fixture, LinkPorts, SenderPorts, UploadPorts};
use tempfile::TempDir;

// The factories never skip: the embedded backends are always there.

async fn fs_blob_store(_test: &str) -> Option<Fixture<Arc<dyn BlobStore>>> {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path().join("blobs")).unwrap();
    Some(Fixture::with_guard(Arc::new(store), dir))
}

fn sqlite_file() -> (Arc<SqliteStore>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("imgest.sqlite3")).unwrap();
    (Arc::new(store), dir)
}

async fn sqlite_images(_test: &str) -> Option<Fixture<Arc<dyn ImageIndex>>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(store, dir))
}

async fn sqlite_links(_test: &str) -> Option<Fixture<LinkPorts>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(LinkPorts::of(store), dir))
}

async fn sqlite_queue(_test: &str) -> Option<Fixture<Arc<dyn TaskQueue>>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(store, dir))
}

async fn sqlite_documents(_test: &str) -> Option<Fixture<Arc<dyn Documents>>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(store, dir))
}

async fn sqlite_rate_limits(_test: &str) -> Option<Fixture<Arc<dyn RateLimiter>>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(store, dir))
}

async fn sqlite_uploads(_test: &str) -> Option<Fixture<UploadPorts>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(UploadPorts::of(store), dir))
}

/// `QueueSender` into a fresh queue of `store`'s task queue, read back from there, both on the
/// system clock (as the local runner has them).
fn queue_sender_ports(store: Arc<SqliteStore>) -> SenderPorts {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let queue = testing::unique_name("messages");
    SenderPorts {
        sender: Arc::new(QueueSender::new(store.clone(), clock.clone())),
        reader: Arc::new(TaskQueueReader::new(store, queue.clone(), clock)),
        queue,
        // Every name is a queue of the task queue (queues exist by being used), so no name is
        // unknown to `QueueSender`: the unknown-name check sends to another name instead, and
        // checks that nothing of it arrives on this queue.
        unknown_queue: None,
    }
}

async fn queue_sender(_test: &str) -> Option<Fixture<SenderPorts>> {
    let (store, dir) = sqlite_file();
    Some(Fixture::with_guard(queue_sender_ports(store), dir))
}

imgest_testing::blob_store_contract_tests!(fs_blob_store, super::fs_blob_store);
imgest_testing::image_index_contract_tests!(sqlite_image_index, super::sqlite_images);
imgest_testing::offer_links_contract_tests!(sqlite_offer_links, super::sqlite_links);
imgest_testing::task_queue_contract_tests!(sqlite_task_queue, super::sqlite_queue);
imgest_testing::documents_contract_tests!(sqlite_documents, super::sqlite_documents);
imgest_testing::rate_limiter_contract_tests!(sqlite_rate_limiter, super::sqlite_rate_limits);
imgest_testing::uploads_contract_tests!(sqlite_uploads, super::sqlite_uploads);
imgest_testing::message_sender_contract_tests!(sqlite_queue_sender, super::queue_sender);

/// Every suite on one backend, one after another.
async fn every_suite(blobs: Arc<FsBlobStore>, store: Arc<SqliteStore>, messages: SenderPorts) {
    testing::blob_store::contract(blobs).await;
    every_sqlite_suite(store, messages).await;
}

/// Every suite `SqliteStore` has an adapter for, on one store (`messages`: `QueueSender` into
/// its task queue).
async fn every_sqlite_suite(store: Arc<SqliteStore>, messages: SenderPorts) {
    testing::image_index::contract(store.clone()).await;
    testing::offer_links::contract(LinkPorts::of(store.clone())).await;
    testing::task_queue::contract(store.clone()).await;
    testing::documents::contract(store.clone()).await;
    testing::rate_limiter::contract(store.clone()).await;
    testing::uploads::contract(UploadPorts::of(store)).await;
    testing::message_sender::contract(messages).await;
}

/// The whole suites in a row on one shared backend, as the AWS adapters run them: checks
/// must not trip over each other's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_suite_on_one_shared_backend() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Arc::new(FsBlobStore::open(dir.path().join("blobs")).unwrap());
    let store = Arc::new(SqliteStore::open(&dir.path().join("imgest.sqlite3")).unwrap());
    let messages = queue_sender_ports(store.clone());
    every_suite(blobs.clone(), store.clone(), messages.clone()).await;
    // And once more over what the first run left behind.
    every_suite(blobs, store, messages).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_store_passes_every_suite_of_the_sqlite_store() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    every_sqlite_suite(store.clone(), queue_sender_ports(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_share_records_and_keep_claims_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imgest.sqlite3");
    let one = Arc::new(SqliteStore::open(&path).unwrap());
    let two = Arc::new(SqliteStore::open(&path).unwrap());
    let ttl = std::time::Duration::from_secs(600);

    // Writes through one are read through the other.
    let image = testing::random_image_id();
    let Claim::New { generation } = one
        .claim(&image, &Generation::random(), BASE, ttl, ttl)
        .await
        .unwrap()
    else {
        panic!("a fresh id is new");
    };
    assert!(matches!(
        two.claim(&image, &Generation::random(), BASE, ttl, ttl)
            .await
            .unwrap(),
        Claim::InProgress { .. }
    ));
    let ready = imgest_core::ports::ReadyImage {
        format: imgest_core::domain::SourceFormat::Png,
        width: 10,
        height: 20,
        original_bytes: 30,
        variants: Vec::new(),
        variant_set: imgest_core::domain::VariantSetVersion::of(&[b"none"]),
        sha256: None,
        original_metadata: None,
        thumbhash: None,
        signature: None,
    };
    let record = two
        .complete(&image, &generation, ready, BASE, ttl)
        .await
        .unwrap();
    assert_eq!(one.get(&image).await.unwrap(), Some(record));
    let offer = testing::random_offer();
    one.set_photos(&offer, std::slice::from_ref(&image), BASE, ttl)
        .await
        .unwrap();
    assert_eq!(two.photos(&offer).await.unwrap(), Some(vec![image.clone()]));
    assert_eq!(two.get(&image).await.unwrap().unwrap().link_count, 1);
    let queue = testing::unique_name("shared");
    one.enqueue(&queue, "k", "p", BASE).await.unwrap();
    let d = two.receive(&queue, BASE, 1, ttl).await.unwrap().remove(0);
    assert!(one.receive(&queue, BASE, 1, ttl).await.unwrap().is_empty());
    assert!(one.ack(&d).await.unwrap());

    // Claims raced from both connections: exactly one wins.
    for round in 0..4 {
        let id = testing::random_image_id();
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let store = if i % 2 == 0 { one.clone() } else { two.clone() };
                let id = id.clone();
                tokio::spawn(async move {
                    store
                        .claim(&id, &Generation::random(), BASE, ttl, ttl)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut new = 0;
        for task in tasks {
            match task.await.unwrap() {
                Claim::New { .. } => new += 1,
                Claim::InProgress { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(new, 1, "round {round}");
    }
}

/// Workers in two processes share one file: versioned writes and rate limits hold across
/// connections as they do within one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_share_records_and_rate_limits() {
    use imgest_core::ports::StoreError;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imgest.sqlite3");
    let one = Arc::new(SqliteStore::open(&path).unwrap());
    let two = Arc::new(SqliteStore::open(&path).unwrap());
    let hour = std::time::Duration::from_secs(3600);

    let key = testing::unique_name("shared");
    let v1 = one
        .put_document("url", &key, "a", None, BASE.plus(hour), BASE)
        .await
        .unwrap();
    assert_eq!(
        two.get_document("url", &key, BASE)
            .await
            .unwrap()
            .unwrap()
            .version,
        v1
    );
    let writes: Vec<_> = (0..16)
        .map(|i| {
            let store = if i % 2 == 0 { one.clone() } else { two.clone() };
            let key = key.clone();
            tokio::spawn(async move {
                store
                    .put_document(
                        "url",
                        &key,
                        &format!("w{i}"),
                        Some(v1),
                        BASE.plus(hour),
                        BASE,
                    )
                    .await
            })
        })
        .collect();
    let mut won = 0;
    for write in writes {
        match write.await.unwrap() {
            Ok(_) => won += 1,
            Err(StoreError::Conflict(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);

    let client = testing::unique_name("client");
    let window = std::time::Duration::from_secs(60);
    let asks: Vec<_> = (0..30)
        .map(|i| {
            let store = if i % 2 == 0 { one.clone() } else { two.clone() };
            let client = client.clone();
            tokio::spawn(async move { store.acquire(&client, 1, 7, window, BASE).await.unwrap() })
        })
        .collect();
    let mut granted = 0;
    for ask in asks {
        granted += ask.await.unwrap().granted;
    }
    assert_eq!(granted, 7);
}
