//! The CDN on CloudFront (`CloudFrontCdn`): an erasure's invalidation reaches the distribution
//! with its paths, and a distribution that does not exist is an error no retry fixes.
//!
//! Runs against the emulator `infra/test.sh` starts (`AWS_ENDPOINT_URL`); without one the
//! tests say they skipped (unless `IMGEST_TEST_AWS=1` or `CI` is set: then they fail).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use imgest_aws::CloudFrontCdn;
use imgest_core::ports::Cdn;
use imgest_testing::aws;

/// A client for the emulator and a distribution of its own, or `None` when AWS tests are
/// skipped.
async fn distribution(test: &str) -> Option<(aws_sdk_cloudfront::Client, String)> {
    let config = aws::sdk_config(test).await?;
    let client = aws_sdk_cloudfront::Client::new(&config);
    let (id, _) = aws::distribution(&client, test).await;
    Some((client, id))
}

#[tokio::test]
async fn an_erasures_invalidation_reaches_the_distribution_with_its_paths() {
    let test = "an_erasures_invalidation_reaches_the_distribution_with_its_paths";
    let Some((client, id)) = distribution(test).await else {
        return;
    };
    let cdn = CloudFrontCdn::new(client.clone(), &id);
    let paths = vec!["/public/a/a0123456789abcdef0123456789abcde/*".to_owned()];
    let invalidation = cdn.invalidate(&paths, "erase-a012-1").await.unwrap();
    assert!(!invalidation.is_empty());
    let (reference, told) = aws::invalidation(&client, &id, &invalidation).await;
    assert_eq!(reference, "erase-a012-1");
    assert_eq!(told, paths);
}

#[tokio::test]
async fn a_distribution_that_does_not_exist_is_an_error_no_retry_fixes() {
    let test = "a_distribution_that_does_not_exist_is_an_error_no_retry_fixes";
    let Some((client, _)) = distribution(test).await else {
        return;
    };
    let cdn = CloudFrontCdn::new(client, "ENOSUCHDISTRIBUTION");
    let err = cdn
        .invalidate(&["/public/a/x/*".to_owned()], "erase-x-1")
        .await
        .unwrap_err();
    assert!(!err.is_retryable(), "{err}");
}
