//! Signed webhooks: each result of a client's crawls POSTed to the endpoint its operator
//! registered, as the Standard Webhooks specification describes (`webhook-id` is the crawl id,
//! the same for every attempt; `webhook-timestamp`; `webhook-signature`, HMAC-SHA256 under the
//! client's secrets), at least once, retried for three days, then dead-lettered with the reason.
//!
//! - [`endpoint`]: the client's registration (URL, secrets, rotation, disabled on 410).
//! - [`sign`]: secrets and signatures.
//! - [`deliver`]: one delivery's turn, and the retry schedule.
//! - here: what a process shares between its deliveries (the HTTP client, a slot count per
//!   endpoint) and the endpoint's cooling, shared by every process through the store.
//!
//! Where it runs: a result is queued for delivery as it is filed in its client's feed
//! ([`send_result`](crate::Crawler)); the local runner's webhook workers and, on AWS, the
//! webhooks function take the queue.

pub mod deliver;
pub mod endpoint;
pub mod sign;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::Crawler;
use crate::records::{self, Change};
use imgest_core::domain::{ClientId, Timestamp};
use imgest_download::{AllowedPorts, PostConfig, Poster};
use imgest_flows::FlowError;
use imgest_settings::CrawlSettings;

pub use self::deliver::{Delivery, Outcome, WebhookMessage};
pub use self::endpoint::{Disabled, SecretView, WebhookView};
pub use imgest_flows::queues::WEBHOOK_QUEUE;

/// Why a registration was refused or could not be done.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("not an endpoint URL: {0}")]
    BadUrl(String),
    #[error("the endpoint is not allowed: {0}")]
    ForbiddenEndpoint(String),
    #[error(transparent)]
    BadSecret(#[from] sign::BadSecret),
    #[error("a rotation's overlap is at most {} days, not {}", endpoint::MAX_OVERLAP.as_secs() / 86_400, humantime::format_duration(*.0))]
    BadOverlap(Duration),
    #[error("client {0} has no webhook endpoint")]
    NotRegistered(ClientId),
    #[error(transparent)]
    Flow(#[from] FlowError),
}

impl From<imgest_core::ports::StoreError> for WebhookError {
    fn from(e: imgest_core::ports::StoreError) -> Self {
        Self::Flow(e.into())
    }
}

/// How long a process keeps a client's endpoint as it read it: every result sent and every
/// delivery's turn needs it, and one record per client read at each would be the busiest
/// client's hot item (ten times seed 001's peak: about 14,000 read units a second on one
/// item). A registration, a rotation or a removal reaches every process within this.
const ENDPOINT_FRESH_FOR: Duration = Duration::from_secs(5);
/// How long a process keeps an endpoint's cooling as it read it (a process's own failures and
/// successes update its copy at once).
const HEALTH_FRESH_FOR: Duration = Duration::from_secs(1);
/// Clients whose records a process keeps at most (beyond it, the oldest are dropped).
const CACHED_CLIENTS: usize = 10_000;

/// What a process's deliveries share.
#[derive(Default)]
pub(crate) struct Webhooks {
    poster: OnceLock<Poster>,
    /// Deliveries running per endpoint URL.
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    endpoints: Kept<Option<endpoint::Endpoint>>,
    health: Kept<Option<Health>>,
}

/// Records as this process last read them, by client, with when.
struct Kept<T>(Mutex<HashMap<ClientId, (Instant, T)>>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<T: Clone> Kept<T> {
    fn get(&self, client: &ClientId, fresh_for: Duration) -> Option<T> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.get(client)
            .filter(|(at, _)| at.elapsed() < fresh_for)
            .map(|(_, value)| value.clone())
    }

    fn put(&self, client: &ClientId, value: T) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= CACHED_CLIENTS {
            let oldest = kept
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(c, _)| c.clone());
            if let Some(oldest) = oldest {
                kept.remove(&oldest);
            }
        }
        kept.insert(client.clone(), (Instant::now(), value));
    }

    fn forget(&self, client: &ClientId) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(client);
    }
}

impl Webhooks {
    /// The HTTP client, built on first use (the functions that never deliver never read the
    /// TLS roots for it).
    pub(crate) fn poster(&self, settings: &CrawlSettings) -> Result<&Poster, WebhookError> {
        if let Some(poster) = self.poster.get() {
            return Ok(poster);
        }
        let poster = Poster::new(PostConfig {
            allow_private: settings.allow_private_networks,
            ports: if settings.allow_private_networks {
                settings.fetch_ports.clone()
            } else {
                AllowedPorts::default()
            },
            user_agent: settings.user_agent.clone(),
        })
        .map_err(|e| FlowError::Internal(format!("cannot build the webhooks' HTTP client: {e}")))?;
        Ok(self.poster.get_or_init(|| poster))
    }

    /// A slot of `url`'s deliveries in this process, waiting for one of `per_endpoint`.
    async fn slot(&self, url: &str, per_endpoint: usize) -> Option<OwnedSemaphorePermit> {
        let semaphore = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            // Endpoints nobody is delivering to are forgotten.
            slots.retain(|_, s| s.available_permits() < per_endpoint);
            Arc::clone(
                slots
                    .entry(url.to_owned())
                    .or_insert_with(|| Arc::new(Semaphore::new(per_endpoint))),
            )
        };
        semaphore.acquire_owned().await.ok()
    }
}

/// An endpoint's cooling, shared by every process: after a failed attempt no delivery to it is
/// attempted until `until_ms`; each failure in a row doubles the cooling, from [`COOL_FIRST`] to
/// [`COOL_LONGEST`]. Kind `webhook_health`, one record per client, written only on failures and
/// on the first success after them.
const HEALTH_KIND: &str = "webhook_health";
const COOL_FIRST: Duration = Duration::from_secs(5);
const COOL_LONGEST: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Health {
    url: String,
    failures: u32,
    until_ms: i64,
}

impl Crawler {
    /// Until when `client`'s endpoint at `url` cools, if it does at `now`.
    async fn cooling_until(
        &self,
        client: &ClientId,
        url: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, FlowError> {
        let health = match self.webhooks.health.get(client, HEALTH_FRESH_FOR) {
            Some(kept) => kept,
            None => {
                let documents = self.service.ports().documents.as_ref();
                let (health, _) =
                    records::peek::<Health>(documents, HEALTH_KIND, client.as_str(), now).await?;
                self.webhooks.health.put(client, health.clone());
                health
            }
        };
        Ok(health
            .filter(|h| h.url == url && now.as_millis() < h.until_ms)
            .map(|h| Timestamp::from_millis(h.until_ms)))
    }

    /// A failed attempt: the endpoint cools.
    async fn cool(&self, client: &ClientId, url: &str, now: Timestamp) -> Result<(), FlowError> {
        let documents = self.service.ports().documents.as_ref();
        let written = records::update(
            documents,
            HEALTH_KIND,
            client.as_str(),
            now,
            now.plus(COOL_LONGEST * 2),
            |current: Option<Health>| {
                let failures = current
                    .filter(|h| h.url == url)
                    .map_or(0, |h| h.failures)
                    .saturating_add(1);
                let cooling = COOL_FIRST
                    .saturating_mul(1 << failures.saturating_sub(1).min(16))
                    .min(COOL_LONGEST);
                let health = Health {
                    url: url.to_owned(),
                    failures,
                    until_ms: now.plus(cooling).as_millis(),
                };
                Ok(Change::Write(health.clone(), health))
            },
        )
        .await?;
        self.webhooks.health.put(client, Some(written));
        Ok(())
    }

    /// A delivered attempt: a cooling record left by earlier failures is ended (read first: no
    /// write while the endpoint is healthy).
    async fn cooled(&self, client: &ClientId, url: &str, now: Timestamp) -> Result<(), FlowError> {
        // What this process knows says the endpoint was healthy: nothing to end.
        if self
            .webhooks
            .health
            .get(client, HEALTH_FRESH_FOR)
            .is_some_and(|h| h.is_none_or(|h| h.url != url))
        {
            return Ok(());
        }
        let documents = self.service.ports().documents.as_ref();
        let (health, version) =
            records::peek::<Health>(documents, HEALTH_KIND, client.as_str(), now).await?;
        self.webhooks.health.put(client, None);
        if health.is_some_and(|h| h.url == url) {
            // Expired at once; a conflict means another attempt wrote meanwhile: left to it.
            let _ = documents
                .put_document(HEALTH_KIND, client.as_str(), "{}", version, now, now)
                .await;
        }
        Ok(())
    }
}
