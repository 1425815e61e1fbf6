//! A CDN in front of the public files (CloudFront on AWS; none locally, where `imgest serve`
//! serves them and an erased file is gone at once), told when an image's files are erased.

use async_trait::async_trait;

use super::StoreError;

#[async_trait]
pub trait Cdn: Send + Sync {
    /// Drops the CDN's copies of `paths` (each `/`-rooted, `*` at the end for a prefix), once
    /// for `reference` (the same reference asked again is the same invalidation); returns the
    /// invalidation's id.
    async fn invalidate(&self, paths: &[String], reference: &str) -> Result<String, StoreError>;
}
