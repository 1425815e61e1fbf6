//! Restoring a collected photo on AWS: the files bucket, versioned as the template makes it,
//! keeps the original GC deleted behind a delete marker, and `imgest restore` (the `restore`
//! flow) stores it again with its variants under a new record; the API then serves it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use imgest_core::domain::{BlobKey, ImageId, ImageState};
use imgest_flows::restore::Restored;

use crate::support::{TestApp, fixture};

/// The app's bucket, versioned as the template makes it; its S3 client.
async fn versioned(app: &TestApp, config: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let (bucket, _) = app.aws.clone().unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(config)
            .force_path_style(true)
            .build(),
    );
    s3.put_bucket_versioning()
        .bucket(&bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    s3
}

#[tokio::test]
async fn a_collected_photo_is_restored_from_its_deleted_original_with_a_new_record() {
    let test = "restore on aws";
    let Some(config) = imgest_testing::aws::sdk_config(test).await else {
        return;
    };
    let app = TestApp::start_aws(test, &[]).await.unwrap();
    let (bucket, _) = app.aws.clone().unwrap();
    let s3 = versioned(&app, &config).await;
    let photo = fixture("photo.jpg");
    let id = ImageId::parse(&app.upload_ok(&photo).await).unwrap();
    let images = &app.service.ports().images;
    let collected = images.get(&id).await.unwrap().unwrap();
    let original = BlobKey::original(&id, &collected.generation);
    assert_eq!(
        app.service.restore(&id).await.unwrap(),
        Restored::Live,
        "a live image needs no restore"
    );

    // GC collects it: record first, then its files, each behind a delete marker.
    app.advance_clock(Duration::from_secs(15 * 86_400));
    assert_eq!(app.gc().await.images_deleted, 1);
    assert!(images.get(&id).await.unwrap().is_none());
    assert!(app.files_of(id.as_str()).await.is_empty());
    assert_eq!(app.get(&format!("/v1/images/{id}")).await.status, 404);
    let versions = s3
        .list_object_versions()
        .bucket(&bucket)
        .prefix(original.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(versions.delete_markers().len(), 1, "{versions:?}");

    // Restored: the original again, its variants, then a record the API serves.
    let Restored::Restored {
        from, generation, ..
    } = app.service.restore(&id).await.unwrap()
    else {
        panic!("restored");
    };
    assert_eq!(from, original.as_str());
    assert_ne!(
        generation,
        collected.generation.to_string(),
        "a new generation"
    );
    let record = images.get(&id).await.unwrap().unwrap();
    assert!(
        matches!(record.state, ImageState::Ready { .. }),
        "{record:?}"
    );
    assert_eq!(
        app.files_of(id.as_str()).await.len(),
        4,
        "an original and three variants"
    );
    let image = app.get(&format!("/v1/images/{id}")).await;
    assert_eq!(image.status, 200, "{}", image.json);
    for variant in image.json["variants"].as_object().unwrap().values() {
        assert_eq!(app.get_bytes(variant["url"].as_str().unwrap()).await.0, 200);
    }
    let kept = app
        .service
        .ports()
        .blobs
        .get(&BlobKey::original(&id, &record.generation))
        .await
        .unwrap();
    assert_eq!(kept.as_ref(), photo.as_slice());
    // An offer links it as any image.
    assert_eq!(app.link("restored", &[id.as_str()]).await.status, 200);
    // Once restored, it is live: a second restore does nothing.
    assert_eq!(app.service.restore(&id).await.unwrap(), Restored::Live);
}

#[tokio::test]
async fn a_restore_finds_nothing_for_an_image_never_stored_and_skips_bytes_that_are_not_its() {
    let test = "restore refusals on aws";
    let Some(config) = imgest_testing::aws::sdk_config(test).await else {
        return;
    };
    let app = TestApp::start_aws(test, &[]).await.unwrap();
    versioned(&app, &config).await;
    let never = ImageId::of_bytes(b"never stored");
    assert_eq!(
        app.service.restore(&never).await.unwrap(),
        Restored::NothingKept
    );

    // Someone else's bytes under the image's original key, deleted: not the image's, skipped.
    let id = ImageId::of_bytes(&fixture("photo.jpg"));
    let generation = imgest_core::domain::Generation::random();
    let foreign = BlobKey::original(&id, &generation);
    let blobs = &app.service.ports().blobs;
    blobs
        .put(&foreign, Bytes::from(fixture("small.png")), "image/png")
        .await
        .unwrap();
    blobs.delete(std::slice::from_ref(&foreign)).await.unwrap();
    assert_eq!(
        app.service.restore(&id).await.unwrap(),
        Restored::NothingKept
    );
    assert!(
        app.service.ports().images.get(&id).await.unwrap().is_none(),
        "no record is made of bytes that are not the image's"
    );
}
