//! Delivering one result to its client's endpoint: the queue's message names the result (its
//! client, the crawl and when it was filed in the client's feed) and nothing else; the body
//! comes from the feed and the endpoint and its secrets from the client's registration, so a
//! message cannot point a delivery at another client's result or another address.
//!
//! An attempt that gets a 2xx is done. A 410 disables the endpoint (and the delivery goes to the
//! dead letters, redrivable once the operator registers the endpoint again). Any other answer,
//! a timeout or a failed connection is retried with backoff and full jitter, [`FIRST_RETRY`]
//! doubling up to [`LONGEST_RETRY`], for [`RETRY_FOR`] after the first attempt; then the delivery
//! goes to the dead letters with the last answer as its reason. A failed attempt also cools the
//! endpoint for every process (see the module above): deliveries due meanwhile wait without an
//! attempt, each as long as a failed attempt would have made it, so an endpoint that is down or
//! slow costs each delivery a few reads now and then, not a timeout each time.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::sign::signature_header;
use super::{WEBHOOK_QUEUE, WebhookError};
use crate::Crawler;
use imgest_core::domain::{ClientId, Timestamp};
use imgest_core::ports::{OutgoingMessage, Reason};
use imgest_flows::FlowError;

/// The first retry's delay; each failed attempt doubles it.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest delay between two attempts.
pub const LONGEST_RETRY: Duration = Duration::from_secs(6 * 3600);
/// How long a delivery is retried after its first attempt.
pub const RETRY_FOR: Duration = Duration::from_secs(3 * 86_400);
/// A delivery that comes this long after its window closed was redriven (a late one comes
/// within the queue's own delays).
const REDRIVEN_AFTER: Duration = Duration::from_secs(3600);

/// The webhook queue's message: which result to deliver, and how far its delivery got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookMessage {
    pub webhook: Delivery,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    #[serde(rename = "client_id")]
    pub client: ClientId,
    pub crawl_id: String,
    /// When the result was filed in the client's feed (milliseconds): where its body is.
    pub filed_ms: u64,
    /// Attempts made so far.
    #[serde(default)]
    pub attempts: u32,
    /// Turns that found the endpoint cooling and waited without an attempt: they lengthen the
    /// next wait as failed attempts do, so a backlog held by an endpoint that is down comes
    /// round less and less often instead of every cooling period.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waits: u32,
    /// The first attempt's time (milliseconds; `None` before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ms: Option<i64>,
}

/// What a delivery's turn came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The endpoint answered 2xx.
    Delivered { status: u16 },
    /// Sent again to the queue, due later (after a failed attempt, or while the endpoint
    /// cools).
    Rescheduled { after: Duration },
    /// Nothing to do: the client has no endpoint any more.
    Dropped,
    /// Given up on: for the queue's dead letters, with this reason (redrivable).
    GaveUp(Reason),
}

/// Why a delivery is given up on (dead letters' kinds).
pub const GONE: &str = "endpoint_gone";
pub const DISABLED: &str = "endpoint_disabled";
pub const EXPIRED: &str = "result_expired";
pub const GAVE_UP: &str = "gave_up";

/// The delay before the attempt after `attempts` failed ones: `FIRST_RETRY × 2^(attempts−1)`
/// capped at [`LONGEST_RETRY`], with full jitter (a uniform draw from its half to all of it,
/// so a crowd of deliveries failed together spreads out, and none waits less than half).
pub fn retry_delay(attempts: u32, draw: f64) -> Duration {
    let doublings = attempts.saturating_sub(1).min(20);
    let full = FIRST_RETRY
        .saturating_mul(1 << doublings)
        .min(LONGEST_RETRY);
    full.mul_f64(0.5 + 0.5 * draw.clamp(0.0, 1.0))
}

impl Crawler {
    /// Queues the delivery of a result just filed in `client`'s feed at `filed_ms`, if the
    /// client has an endpoint that is not disabled.
    pub(crate) async fn queue_webhook(
        &self,
        client: &ClientId,
        crawl_id: &str,
        filed_ms: u64,
    ) -> Result<(), FlowError> {
        let now = self.now();
        let endpoint = self.read_webhook(client, now).await.map_err(flow_error)?;
        if endpoint.is_none_or(|e| e.disabled.is_some()) {
            return Ok(());
        }
        let message = WebhookMessage {
            webhook: Delivery {
                client: client.clone(),
                crawl_id: crawl_id.to_owned(),
                filed_ms,
                attempts: 0,
                waits: 0,
                first_ms: None,
            },
        };
        self.send_webhook(&message, Duration::ZERO).await
    }

    async fn send_webhook(
        &self,
        message: &WebhookMessage,
        delay: Duration,
    ) -> Result<(), FlowError> {
        let body = serde_json::to_string(message)
            .map_err(|e| FlowError::Internal(format!("cannot encode a webhook delivery: {e}")))?;
        // With the other sends of this batch (a settle batch's results, a delivery batch's
        // retries): one request for up to ten.
        self.sends
            .send(
                self.service.ports().messages.as_ref(),
                WEBHOOK_QUEUE,
                OutgoingMessage::delayed(body, delay),
            )
            .await?;
        Ok(())
    }

    /// One turn of `delivery`: an attempt (or a wait while its endpoint cools), and what comes
    /// of it. A retry is sent to the queue before this returns; the caller then deletes the
    /// message it was given (or dead-letters it, [`Outcome::GaveUp`]). Errors are the stores'
    /// (retryable: the message is delivered again).
    pub async fn deliver_webhook(&self, delivery: &Delivery) -> Result<Outcome, FlowError> {
        let now = self.now();
        let client = &delivery.client;
        // A delivery is never scheduled past its window, so one that comes well after it was
        // given up on and redriven by the operator: it gets a window of its own.
        let redriven;
        let delivery = if delivery.first_ms.is_some_and(|first| {
            now > Timestamp::from_millis(first).plus(RETRY_FOR + REDRIVEN_AFTER)
        }) {
            redriven = Delivery {
                attempts: 0,
                waits: 0,
                first_ms: None,
                ..delivery.clone()
            };
            &redriven
        } else {
            delivery
        };
        let Some(endpoint) = self.read_webhook(client, now).await.map_err(flow_error)? else {
            info!(client_id = %client, crawl_id = %delivery.crawl_id, "webhook dropped: the client has no endpoint");
            return Ok(Outcome::Dropped);
        };
        if let Some(disabled) = &endpoint.disabled {
            return Ok(Outcome::GaveUp(Reason::new(
                DISABLED,
                format!(
                    "the endpoint was disabled at {} ({}); register it again, then redrive",
                    disabled.at, disabled.reason
                ),
            )));
        }
        let Some(result) = self
            .feed_entry(client, delivery.filed_ms, &delivery.crawl_id)
            .await?
        else {
            return Ok(Outcome::GaveUp(Reason::new(
                EXPIRED,
                "the result is no longer in the client's feed (kept 7 days)",
            )));
        };
        if let Some(until) = self.cooling_until(client, &endpoint.url, now).await? {
            let waited = Delivery {
                waits: delivery.waits.saturating_add(1),
                first_ms: Some(delivery.first_ms.unwrap_or(now.as_millis())),
                ..delivery.clone()
            };
            let after = until.since(now).max(retry_delay(
                waited.attempts.saturating_add(waited.waits),
                fastrand::f64(),
            ));
            return self.retry_later(&waited, after, now, None).await;
        }
        let url = url::Url::parse(&endpoint.url).map_err(|e| {
            FlowError::Internal(format!("a stored webhook URL does not parse: {e}"))
        })?;
        let keys = endpoint.signing_keys(now);
        if keys.is_empty() {
            return Ok(Outcome::GaveUp(Reason::new(
                DISABLED,
                "the endpoint has no secret in use; register it again, then redrive",
            )));
        }
        let body = payload(&result)?;
        let timestamp = now.as_secs();
        let headers = [
            ("webhook-id", delivery.crawl_id.clone()),
            ("webhook-timestamp", timestamp.to_string()),
            (
                "webhook-signature",
                signature_header(&keys, &delivery.crawl_id, timestamp, &body),
            ),
        ];
        let poster = self.webhooks.poster(&self.settings).map_err(flow_error)?;
        let slot = self
            .webhooks
            .slot(&endpoint.url, self.settings.webhook_concurrency)
            .await;
        let answer = poster
            .post(&url, &headers, body, self.settings.webhook_timeout)
            .await;
        drop(slot);
        let attempted = Delivery {
            attempts: delivery.attempts.saturating_add(1),
            first_ms: Some(delivery.first_ms.unwrap_or(now.as_millis())),
            ..delivery.clone()
        };
        let failure = match answer {
            Ok(answer) if (200..300).contains(&answer.status) => {
                self.counters.webhooks_delivered.increment(1);
                self.cooled(client, &endpoint.url, now).await?;
                return Ok(Outcome::Delivered {
                    status: answer.status,
                });
            }
            Ok(answer) if answer.status == 410 => {
                let reason = format!("the endpoint answered 410 Gone to {}", delivery.crawl_id);
                warn!(client_id = %client, url = %endpoint.url, "webhook endpoint disabled: it answered 410");
                self.disable_webhook(client, &endpoint.url, reason.clone())
                    .await
                    .map_err(flow_error)?;
                return Ok(Outcome::GaveUp(Reason::new(GONE, reason)));
            }
            Ok(answer) if (300..400).contains(&answer.status) => {
                format!("HTTP {} (redirects are not followed)", answer.status)
            }
            Ok(answer) => format!("HTTP {}", answer.status),
            Err(e) => format!("{} ({})", e.kind_str(), e),
        };
        self.counters.webhooks_failed.increment(1);
        warn!(client_id = %client, crawl_id = %delivery.crawl_id, attempts = attempted.attempts, failure = %failure, "webhook attempt failed");
        self.cool(client, &endpoint.url, now).await?;
        let after = retry_delay(
            attempted.attempts.saturating_add(attempted.waits),
            fastrand::f64(),
        );
        self.retry_later(&attempted, after, now, Some(&failure))
            .await
    }

    /// Sends `delivery` again, due `after` from now, unless that is past its retry window.
    async fn retry_later(
        &self,
        delivery: &Delivery,
        after: Duration,
        now: Timestamp,
        failure: Option<&str>,
    ) -> Result<Outcome, FlowError> {
        let first = delivery.first_ms.map_or(now, Timestamp::from_millis);
        if now.plus(after) > first.plus(RETRY_FOR) {
            return Ok(Outcome::GaveUp(Reason::new(
                GAVE_UP,
                format!(
                    "no 2xx in {} days ({} attempts; the last: {})",
                    RETRY_FOR.as_secs() / 86_400,
                    delivery.attempts,
                    failure.unwrap_or("none: the endpoint was cooling")
                ),
            )));
        }
        self.send_webhook(
            &WebhookMessage {
                webhook: delivery.clone(),
            },
            after,
        )
        .await?;
        Ok(Outcome::Rescheduled { after })
    }
}

/// The body posted: the result as the client's feed holds it, wrapped as the Standard Webhooks
/// specification suggests (`type`, `timestamp`, `data`).
fn payload(result: &str) -> Result<String, FlowError> {
    let data: serde_json::Value = serde_json::from_str(result)
        .map_err(|e| FlowError::Internal(format!("a feed entry does not parse: {e}")))?;
    let timestamp = data
        .get("settled_at")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    serde_json::to_string(&serde_json::json!({
        "type": "crawl.settled",
        "timestamp": timestamp,
        "data": data,
    }))
    .map_err(|e| FlowError::Internal(format!("cannot encode a webhook body: {e}")))
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn flow_error(e: WebhookError) -> FlowError {
    match e {
        WebhookError::Flow(e) => e,
        other => FlowError::Internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_five_seconds_to_six_hours_with_jitter() {
        assert_eq!(retry_delay(1, 1.0), Duration::from_secs(5));
        assert_eq!(retry_delay(1, 0.0), Duration::from_millis(2500));
        assert_eq!(retry_delay(3, 1.0), Duration::from_secs(20));
        assert_eq!(retry_delay(30, 1.0), LONGEST_RETRY);
        assert_eq!(retry_delay(u32::MAX, 0.0), LONGEST_RETRY / 2);
    }

    /// Three days of retries at the longest delays still make a handful of attempts a day.
    #[test]
    fn the_retry_window_holds_about_twenty_attempts() {
        let (mut spent, mut attempts) = (Duration::ZERO, 1);
        while spent + retry_delay(attempts, 1.0) <= RETRY_FOR {
            spent += retry_delay(attempts, 1.0);
            attempts += 1;
        }
        assert!((18..=26).contains(&attempts), "{attempts}");
    }
}
