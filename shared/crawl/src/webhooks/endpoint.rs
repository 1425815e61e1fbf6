//! A client's webhook endpoint, as the operator registers it (`imgest webhook`, the operator's
//! routes): its URL, its secrets (the newest first; an older one kept until its rotation's
//! overlap ends) and whether it was disabled (its endpoint answered 410). One record per
//! client, kind `webhook`, read once per result sent and per delivery.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;
use utoipa::ToSchema;

use super::WebhookError;
use super::sign::{self, SigningKey};
use crate::Crawler;
use crate::records::{self, Change};
use imgest_core::domain::{ClientId, Timestamp};
use imgest_download::FetchErrorKind;

/// The records' kind.
pub(super) const WEBHOOK_KIND: &str = "webhook";
/// Registrations are kept until removed.
const KEPT_FOR: Duration = Duration::from_secs(100 * 365 * 86_400);
/// How long a registration waits for the endpoint's name to resolve.
const RESOLVE_WITHIN: Duration = Duration::from_secs(5);
/// The longest endpoint URL taken.
const MAX_URL: usize = 2048;
/// Secrets a registration holds at once (the newest and those still in their overlap).
const MAX_SECRETS: usize = 4;
/// The longest overlap a rotation may give the secret it replaces.
pub const MAX_OVERLAP: Duration = Duration::from_secs(7 * 86_400);

/// A client's endpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Endpoint {
    pub url: String,
    /// The newest first.
    pub secrets: Vec<StoredSecret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<Disabled>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct StoredSecret {
    pub secret: String,
    /// Signs until then (milliseconds; `None`: the newest, until rotated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Disabled {
    /// When (RFC 3339).
    pub at: String,
    /// Why: the answer that disabled it.
    pub reason: String,
}

impl Endpoint {
    /// The keys that sign at `now`: the newest, and those still in their overlap.
    pub fn signing_keys(&self, now: Timestamp) -> Vec<SigningKey> {
        self.secrets
            .iter()
            .filter(|s| s.until_ms.is_none_or(|until| now.as_millis() < until))
            .filter_map(|s| SigningKey::parse(&s.secret).ok())
            .collect()
    }
}

/// A client's endpoint as the operator sees it: with its secrets (to hand to the partner).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct WebhookView {
    #[schema(value_type = String)]
    pub client_id: ClientId,
    pub url: String,
    /// The secrets that sign deliveries now, the newest first.
    pub secrets: Vec<SecretView>,
    /// Set when its endpoint answered 410: nothing is delivered until it is registered again.
    pub disabled: Option<Disabled>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SecretView {
    pub secret: String,
    /// When it stops signing (RFC 3339); absent for the newest.
    pub until: Option<String>,
}

fn view(client: &ClientId, endpoint: &Endpoint, now: Timestamp) -> WebhookView {
    WebhookView {
        client_id: client.clone(),
        url: endpoint.url.clone(),
        secrets: endpoint
            .secrets
            .iter()
            .filter(|s| s.until_ms.is_none_or(|until| now.as_millis() < until))
            .map(|s| SecretView {
                secret: s.secret.clone(),
                until: s
                    .until_ms
                    .map(|ms| crate::messages::rfc3339_millis(Timestamp::from_millis(ms))),
            })
            .collect(),
        disabled: endpoint.disabled.clone(),
    }
}

impl Crawler {
    /// Registers `url` as `client`'s endpoint, or moves it there. A new registration gets
    /// `secret` (or a new one); one moved keeps its secrets unless `secret` is given (then it
    /// is the only one). Registering again re-enables a disabled endpoint. The URL must be
    /// https (http only where private networks are allowed), with no credentials, on an
    /// allowed port, and its name must resolve to addresses the guard allows (checked again
    /// at every delivery).
    pub async fn register_webhook(
        &self,
        client: &ClientId,
        url: &str,
        secret: Option<&str>,
    ) -> Result<WebhookView, WebhookError> {
        let url = self.endpoint_url(url).await?;
        if let Some(secret) = secret {
            SigningKey::parse(secret)?;
        }
        let fresh = sign::new_secret();
        let now = self.now();
        let endpoint = self
            .update_webhook(client, now, |current| {
                let secrets = match (current, secret) {
                    (_, Some(given)) => vec![StoredSecret {
                        secret: given.to_owned(),
                        until_ms: None,
                    }],
                    (Some(current), None) => current.secrets,
                    (None, None) => vec![StoredSecret {
                        secret: fresh.clone(),
                        until_ms: None,
                    }],
                };
                let endpoint = Endpoint {
                    url: url.to_string(),
                    secrets,
                    disabled: None,
                };
                Ok(Change::Write(endpoint.clone(), Some(endpoint)))
            })
            .await?;
        let endpoint = endpoint.ok_or_else(|| WebhookError::NotRegistered(client.clone()))?;
        Ok(view(client, &endpoint, now))
    }

    /// Adds a new secret to `client`'s endpoint; those it had sign for `overlap` more (at most
    /// [`MAX_OVERLAP`]), so a partner verifies with either while it changes over.
    pub async fn rotate_webhook_secret(
        &self,
        client: &ClientId,
        overlap: Duration,
    ) -> Result<WebhookView, WebhookError> {
        if overlap > MAX_OVERLAP {
            return Err(WebhookError::BadOverlap(overlap));
        }
        let fresh = sign::new_secret();
        let now = self.now();
        let until = now.plus(overlap).as_millis();
        let endpoint = self
            .update_webhook(client, now, |current| {
                let Some(mut endpoint) = current else {
                    return Ok(Change::Keep(None));
                };
                let mut secrets = vec![StoredSecret {
                    secret: fresh.clone(),
                    until_ms: None,
                }];
                secrets.extend(
                    endpoint
                        .secrets
                        .into_iter()
                        .filter(|s| s.until_ms.is_none_or(|u| now.as_millis() < u))
                        .map(|s| StoredSecret {
                            until_ms: Some(s.until_ms.map_or(until, |u| u.min(until))),
                            ..s
                        }),
                );
                secrets.truncate(MAX_SECRETS);
                endpoint.secrets = secrets;
                Ok(Change::Write(endpoint.clone(), Some(endpoint)))
            })
            .await?;
        let endpoint = endpoint.ok_or_else(|| WebhookError::NotRegistered(client.clone()))?;
        Ok(view(client, &endpoint, now))
    }

    /// `client`'s endpoint, if it has one.
    pub async fn webhook(&self, client: &ClientId) -> Result<Option<WebhookView>, WebhookError> {
        let now = self.now();
        Ok(self
            .read_webhook_as_stored(client, now)
            .await?
            .map(|e| view(client, &e, now)))
    }

    /// Removes `client`'s endpoint: nothing more is queued for it, and deliveries queued find
    /// none and are dropped (its results stay in its feed). False if it had none.
    pub async fn remove_webhook(&self, client: &ClientId) -> Result<bool, WebhookError> {
        let documents = self.service.ports().documents.as_ref();
        let now = self.now();
        let (current, version) =
            records::read_versioned::<Endpoint>(documents, WEBHOOK_KIND, client.as_str(), now)
                .await?;
        if current.is_none() {
            return Ok(false);
        }
        // Expired at once: read as absent from now on.
        documents
            .put_document(WEBHOOK_KIND, client.as_str(), "{}", version, now, now)
            .await
            .map_err(imgest_flows::FlowError::from)?;
        self.webhooks.endpoints.forget(client);
        Ok(true)
    }

    /// Disables `client`'s endpoint (it answered 410), if it is still at `url`.
    pub(super) async fn disable_webhook(
        &self,
        client: &ClientId,
        url: &str,
        reason: String,
    ) -> Result<(), WebhookError> {
        let now = self.now();
        self.update_webhook(client, now, |current| {
            Ok(match current {
                Some(mut e) if e.url == url && e.disabled.is_none() => {
                    e.disabled = Some(Disabled {
                        at: crate::messages::rfc3339_millis(now),
                        reason: reason.clone(),
                    });
                    Change::Write(e, None)
                }
                _ => Change::Keep(None),
            })
        })
        .await?;
        Ok(())
    }

    /// The endpoint as this process last read it, if within [`ENDPOINT_FRESH_FOR`](super), else
    /// as stored (what results and deliveries check).
    pub(super) async fn read_webhook(
        &self,
        client: &ClientId,
        now: Timestamp,
    ) -> Result<Option<Endpoint>, WebhookError> {
        if let Some(kept) = self
            .webhooks
            .endpoints
            .get(client, super::ENDPOINT_FRESH_FOR)
        {
            return Ok(kept);
        }
        let endpoint = self.read_webhook_as_stored(client, now).await?;
        self.webhooks.endpoints.put(client, endpoint.clone());
        Ok(endpoint)
    }

    /// The endpoint as stored (an eventually consistent read: a change is seen within about a
    /// second).
    async fn read_webhook_as_stored(
        &self,
        client: &ClientId,
        now: Timestamp,
    ) -> Result<Option<Endpoint>, WebhookError> {
        let documents = self.service.ports().documents.as_ref();
        Ok(
            records::peek::<Endpoint>(documents, WEBHOOK_KIND, client.as_str(), now)
                .await?
                .0,
        )
    }

    async fn update_webhook(
        &self,
        client: &ClientId,
        now: Timestamp,
        decide: impl FnMut(
            Option<Endpoint>,
        )
            -> Result<Change<Endpoint, Option<Endpoint>>, imgest_flows::FlowError>,
    ) -> Result<Option<Endpoint>, WebhookError> {
        let documents = self.service.ports().documents.as_ref();
        let updated = records::update(
            documents,
            WEBHOOK_KIND,
            client.as_str(),
            now,
            now.plus(KEPT_FOR),
            decide,
        )
        .await;
        self.webhooks.endpoints.forget(client);
        Ok(updated?)
    }

    /// `url` parsed and checked as an endpoint: the poster's rules, and every address its
    /// name resolves to now.
    async fn endpoint_url(&self, url: &str) -> Result<Url, WebhookError> {
        if url.len() > MAX_URL {
            return Err(WebhookError::BadUrl(format!("longer than {MAX_URL} bytes")));
        }
        let parsed = Url::parse(url).map_err(|e| WebhookError::BadUrl(e.to_string()))?;
        let poster = self.webhooks.poster(&self.settings)?;
        poster
            .check_resolved(&parsed, RESOLVE_WITHIN)
            .await
            .map_err(|e| match e.kind {
                FetchErrorKind::ForbiddenAddress => WebhookError::ForbiddenEndpoint(e.to_string()),
                _ => WebhookError::BadUrl(e.to_string()),
            })?;
        Ok(parsed)
    }
}
