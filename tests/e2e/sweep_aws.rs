//! The sweep on S3 (and the records on DynamoDB), as on the embedded backend: a mass deletion
//! stops until an operator says to go on, a size dropped from the variants is deleted only once
//! its drop is confirmed, and keys that are no image file's are deleted after the grace.

use crate::support::TestApp;

#[tokio::test]
async fn a_sweep_that_would_delete_most_of_a_shard_stops_on_s3_until_told_to_go_on() {
    let Some(app) = TestApp::start_aws("sweep stop on aws", &[]).await else {
        return;
    };
    crate::lifecycle::a_sweep_that_would_delete_most_of_a_shard_stops_on(&app).await;
}

#[tokio::test]
async fn a_size_dropped_from_the_variants_is_swept_from_s3_only_once_confirmed() {
    let vars = [("IMGEST_SWEEP_GRACE", "1h")];
    let Some(app) = TestApp::start_aws("dropped size on aws", &vars).await else {
        return;
    };
    crate::backfill::a_size_dropped_from_the_configuration_is_swept_on(&app).await;
}

#[tokio::test]
async fn keys_on_s3_that_are_no_image_files_are_swept_after_the_grace() {
    let vars = [("IMGEST_SWEEP_GRACE", "1h")];
    let Some(app) = TestApp::start_aws("unknown keys on aws", &vars).await else {
        return;
    };
    crate::backfill::the_sweeper_deletes_keys_it_does_not_recognise_on(&app).await;
}
