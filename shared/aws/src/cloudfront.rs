//! The CDN on AWS: CloudFront invalidations ([`CloudFrontCdn`]), so that an erased image's
//! variants stop being served from the edge caches (its files carry a year-long, immutable
//! cache lifetime: without an invalidation an edge would keep serving them).
//!
//! One `CreateInvalidation` per erased image, of its public files' paths (the flows list them
//! before they delete them): CloudFront keeps at most 3,000 paths in progress at once per
//! distribution, but only 15 wildcard paths, so a wildcard per image would cap erasures at a
//! few a minute. The caller's reference is the invalidation's `CallerReference`, so the same
//! erasure asked twice (a retried run) is the same invalidation, not a second one. Too many
//! invalidations in progress is CloudFront's throttle: retryable, the erasure stays filed.

use async_trait::async_trait;
use aws_sdk_cloudfront::types::{InvalidationBatch, Paths};

use crate::sdk_error::sdk_error;
use imgest_core::ports::{Cdn, StoreError};

/// Invalidations of one distribution.
#[derive(Clone)]
pub struct CloudFrontCdn {
    client: aws_sdk_cloudfront::Client,
    distribution_id: String,
}

impl CloudFrontCdn {
    pub fn new(client: aws_sdk_cloudfront::Client, distribution_id: &str) -> Self {
        Self {
            client,
            distribution_id: distribution_id.to_owned(),
        }
    }
}

#[async_trait]
impl Cdn for CloudFrontCdn {
    async fn invalidate(&self, paths: &[String], reference: &str) -> Result<String, StoreError> {
        let context = || {
            format!(
                "invalidating {paths:?} on CloudFront distribution {}",
                self.distribution_id
            )
        };
        let quantity = i32::try_from(paths.len())
            .map_err(|e| StoreError::backend(format!("{}: too many paths", context()), e))?;
        let batch = Paths::builder()
            .quantity(quantity)
            .set_items(Some(paths.to_vec()))
            .build()
            .and_then(|paths| {
                InvalidationBatch::builder()
                    .paths(paths)
                    .caller_reference(reference)
                    .build()
            })
            .map_err(|e| StoreError::backend(context(), e))?;
        let out = self
            .client
            .create_invalidation()
            .distribution_id(&self.distribution_id)
            .invalidation_batch(batch)
            .send()
            .await
            .map_err(|e| sdk_error(context(), e))?;
        out.invalidation()
            .map(|i| i.id().to_owned())
            .ok_or_else(|| {
                StoreError::corrupt(format!(
                    "{}: CloudFront answered without the invalidation",
                    context()
                ))
            })
    }
}
