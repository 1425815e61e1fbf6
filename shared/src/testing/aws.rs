//! Connecting tests to AWS APIs served by an emulator (moto's server, started by
//! `infra/test.sh`). A test asked to run against AWS that finds no endpoint fails loudly.

use aws_config::{BehaviorVersion, SdkConfig};

/// The emulator's endpoint (`AWS_ENDPOINT_URL`), if one is configured.
pub fn endpoint() -> Option<String> {
    std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// Whether AWS tests are required (`IMGEST_TEST_AWS=1`, or running in CI).
pub fn required() -> bool {
    std::env::var("IMGEST_TEST_AWS").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| !v.is_empty())
}

/// The SDK configuration for the emulator, or `None` when no endpoint is configured and AWS
/// tests are not required (a developer running `cargo test` alone; the test says it skipped).
/// Panics when the tests are required and there is no endpoint.
pub async fn sdk_config(test: &str) -> Option<SdkConfig> {
    match endpoint() {
        Some(_) => Some(aws_config::load_defaults(BehaviorVersion::latest()).await),
        None if required() => {
            panic!(
                "{test}: AWS tests are required (IMGEST_TEST_AWS=1 or CI) but AWS_ENDPOINT_URL is not set; run infra/test.sh"
            )
        }
        None => {
            eprintln!(
                "{test}: skipped, no AWS_ENDPOINT_URL (infra/test.sh starts an emulator and sets it)"
            );
            None
        }
    }
}

/// A fresh resource name (bucket, table, queue), so tests can share one emulator.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}-{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}
