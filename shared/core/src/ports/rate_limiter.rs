//! Request budgets shared by every worker: at most `limit` grants per client in any window of
//! `window` length, however many workers ask at once (SQLite locally, DynamoDB on AWS).

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Timestamp;

/// What a caller may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Permits granted now (0..=wanted); each allows one request, starting now.
    pub granted: u32,
    /// When the caller got fewer than it wanted: the earliest time at which another permit may
    /// be granted (if nobody else takes it first).
    pub retry_at: Option<Timestamp>,
}

#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Takes up to `wanted` permits for `client` at `now`, never letting the grants in any
    /// window of length `window` exceed `limit`. Grants are recorded at `now`; callers pass
    /// a non-decreasing clock. An adapter may be conservative (grant a little less than an
    /// exact sliding window would) but, when asked continuously, must grant at least 98 % of
    /// `limit` per window.
    async fn acquire(
        &self,
        client: &str,
        wanted: u32,
        limit: u32,
        window: Duration,
        now: Timestamp,
    ) -> Result<Grant, StoreError>;
}
