//! The `BlobStore` contract on S3 (`S3BlobStore`), plus what only S3 has: presigned upload
//! URLs, batched deletes and objects that other writers put in the bucket.
//!
//! Runs against the emulator `infra/test.sh` starts (`AWS_ENDPOINT_URL`); without one the
//! tests say they skipped (unless `IMGEST_TEST_AWS=1` or `CI` is set: then they fail).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use imgest_aws::S3BlobStore;
use imgest_core::domain::{BlobKey, UploadId};
use imgest_core::ports::{BlobStore, StoreError, UploadUrls};
use imgest_testing as testing;
use imgest_testing::{Fixture, aws};

/// An S3 client for the emulator (path-style addressing: no per-bucket host names there).
///
/// More attempts than the SDK's default 3: moto's S3 is not atomic under concurrent writes of
/// one key (a GET racing an overwrite can fail with a 500, "I/O operation on closed file"),
/// which the concurrency check provokes on purpose; the adapter reports a 500 as retryable and
/// the SDK retries it, as it would on S3 itself.
async fn s3_client(test: &str) -> Option<aws_sdk_s3::Client> {
    let config = aws::sdk_config(test).await?;
    let s3 = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(true)
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::standard().with_max_attempts(10))
        .build();
    Some(aws_sdk_s3::Client::from_conf(s3))
}

/// A store on a fresh bucket of its own, or `None` when AWS tests are skipped.
async fn s3_store(test: &str) -> Option<S3BlobStore> {
    let client = s3_client(test).await?;
    let bucket = aws::unique_name("imgest-test");
    client.create_bucket().bucket(&bucket).send().await.unwrap();
    Some(S3BlobStore::new(client, bucket))
}

/// The contract's factory: a store on a fresh bucket of its own for each test.
async fn s3_blob_store(test: &str) -> Option<Fixture<Arc<dyn BlobStore>>> {
    let store = s3_store(test).await?;
    Some(Fixture::new(Arc::new(store)))
}

imgest_testing::blob_store_contract_tests!(s3_blob_store, super::s3_blob_store);

/// The whole suite on one bucket, twice: checks must not trip over each other's objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_suite_twice_on_one_bucket() {
    let Some(store) = s3_store("the_whole_suite_twice_on_one_bucket").await else {
        return;
    };
    let store: Arc<dyn BlobStore> = Arc::new(store);
    testing::blob_store::contract(store.clone()).await;
    testing::blob_store::contract(store).await;
}

fn key(s: &str) -> BlobKey {
    BlobKey::parse(s).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presigned_url_accepts_a_put_of_the_body() {
    let Some(store) = s3_store("a_presigned_url_accepts_a_put_of_the_body").await else {
        return;
    };
    let k = BlobKey::incoming(&UploadId::random());
    let body: Bytes = std::iter::repeat_with(|| fastrand::u8(..))
        .take(70_000)
        .collect();
    let url = store
        .presign_put(
            &k,
            body.len() as u64,
            "application/octet-stream",
            Duration::from_secs(300),
        )
        .await
        .unwrap();
    let signed = url::Url::parse(&url)
        .unwrap()
        .query_pairs()
        .find(|(name, _)| name == "X-Amz-SignedHeaders")
        .map(|(_, v)| v.into_owned());
    assert_eq!(
        signed.as_deref(),
        Some("content-length;content-type;host"),
        "{url}"
    );

    imgest_download::install_default_provider();
    let response = reqwest::Client::new()
        .put(&url)
        .header("content-type", "application/octet-stream")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "PUT {url}: {}",
        response.status()
    );
    assert_eq!(store.get(&k).await.unwrap(), body);
    let page = store.list("incoming/", None, 10).await.unwrap();
    assert_eq!(page.blobs.len(), 1);
    assert_eq!(page.blobs[0].key, k);
    assert_eq!(page.blobs[0].size, body.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_of_more_than_a_thousand_keys_go_in_batches() {
    let Some(store) = s3_store("deletes_of_more_than_a_thousand_keys_go_in_batches").await else {
        return;
    };
    // 2,500 keys (three DeleteObjects calls), of which only a few exist, in both batches.
    let keys: Vec<BlobKey> = (0..2500).map(|i| key(&format!("d/{i:05}"))).collect();
    let written = [0, 999, 1000, 1001, 2499];
    for i in written {
        store
            .put(&keys[i], Bytes::from_static(b"x"), "text/plain")
            .await
            .unwrap();
    }
    store.put(&key("keep/me"), Bytes::new(), "").await.unwrap();
    store.delete(&keys).await.unwrap();
    for i in written {
        assert!(matches!(
            store.get(&keys[i]).await,
            Err(StoreError::NotFound(_))
        ));
    }
    let page = store.list("", None, 10).await.unwrap();
    let listed: Vec<_> = page.blobs.iter().map(|b| b.key.as_str()).collect();
    assert_eq!(listed, ["keep/me"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_whose_keys_are_not_blob_keys_are_never_listed() {
    let Some(store) = s3_store("objects_whose_keys_are_not_blob_keys_are_never_listed").await
    else {
        return;
    };
    for raw in ["s/a", "s/b c", "s/b d", "s/b~e", "s/f"] {
        store
            .client()
            .put_object()
            .bucket(store.bucket())
            .key(raw)
            .body(Vec::from(&b"."[..]).into())
            .send()
            .await
            .unwrap();
    }
    // Page by page: a page of foreign keys only is read through, not returned empty.
    let mut after = None;
    let mut listed = Vec::new();
    for _ in 0..10 {
        let page = store.list("s/", after.as_ref(), 1).await.unwrap();
        listed.extend(page.blobs.into_iter().map(|b| b.key.as_str().to_owned()));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(listed, ["s/a", "s/f"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_a_failure_not_a_missing_key() {
    let Some(client) = s3_client("a_missing_bucket_is_a_failure_not_a_missing_key").await else {
        return;
    };
    let store = S3BlobStore::new(client, aws::unique_name("imgest-never-created"));
    let err = store.get(&key("a/b")).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Backend { .. }),
        "expected a backend failure, got {err:?}"
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "keeps the SDK error"
    );
    let err = store
        .put(&key("a/b"), Bytes::from_static(b"x"), "text/plain")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
}

/// In a versioned bucket (as the template's), an erasure leaves no version and no deletion
/// marker of what it erased: a deleted object's noncurrent version, an overwritten one's
/// earlier version and the markers go too; what it keeps stays (its earlier versions go).
#[tokio::test]
async fn erase_deletes_every_version_in_a_versioned_bucket() {
    let test = "erase_deletes_every_version_in_a_versioned_bucket";
    let Some(client) = s3_client(test).await else {
        return;
    };
    let bucket = aws::unique_name("imgest-test");
    client.create_bucket().bucket(&bucket).send().await.unwrap();
    client
        .put_bucket_versioning()
        .bucket(&bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let store = S3BlobStore::new(client.clone(), &bucket);
    let deleted = key("public/ab/img/g1/large.jpg");
    // A variant may be overwritten (a versioned bucket keeps the earlier version); an
    // original is written once, so its second write leaves one version.
    let overwritten = key("public/ab/img/g1/medium.jpg");
    let kept = key("originals/ab/img/g2/original");
    for k in [&deleted, &overwritten, &kept, &overwritten, &kept] {
        store.put(k, Bytes::from_static(b"v"), "").await.unwrap();
    }
    store.delete(std::slice::from_ref(&deleted)).await.unwrap();
    let versions = |prefix: &'static str| {
        let client = client.clone();
        let bucket = bucket.clone();
        async move {
            let out = client
                .list_object_versions()
                .bucket(&bucket)
                .prefix(prefix)
                .send()
                .await
                .unwrap();
            (out.versions().len(), out.delete_markers().len())
        }
    };
    assert_eq!(versions("public/").await, (3, 1));
    assert_eq!(versions("originals/").await, (1, 0));
    let keep = kept.clone();
    let mut erased = imgest_core::ports::Erased::default();
    for prefix in ["public/ab/img/", "originals/ab/img/"] {
        let e = store
            .erase(prefix, &|b: &imgest_core::ports::BlobMeta| b.key == keep)
            .await
            .unwrap();
        erased.objects += e.objects;
        erased.versions += e.versions;
    }
    // The current `overwritten`; its earlier version, and `deleted`'s version and its marker.
    assert_eq!((erased.objects, erased.versions), (1, 3), "{erased:?}");
    assert_eq!(versions("public/").await, (0, 0));
    assert_eq!(versions("originals/").await, (1, 0));
    assert_eq!(store.get(&kept).await.unwrap(), &b"v"[..]);
}
