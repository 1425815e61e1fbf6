//! Settling: a URL's outcome reaches the crawls that wait for it; a crawl whose last URL
//! settles links the offer's photos and sends its result.

use std::collections::HashMap;

use tracing::info;

use super::records::{self, CRAWL_KIND, Change, CrawlRecord};
use super::{Built, CLIENT_ATTRIBUTE, Crawler, Finishing};
use crate::messages::{
    CrawlResult, CrawlState, PhotoError, PhotoResult, PhotoStatus, SettleMessage, SettledCrawl,
    rfc3339_millis,
};
use imgest_core::domain::UrlHash;
use imgest_core::domain::{ImageId, OfferKey, Timestamp};
use imgest_core::ports::OutgoingMessage;
use imgest_download::{FailureClass, FetchErrorKind};
use imgest_flows::FlowError;

impl Crawler {
    /// Applies `outcomes` to the offer's crawl `crawl_id` (ignored if a newer crawl replaced
    /// it), and finishes the crawl if nothing is pending any more. Idempotent: settling again
    /// changes nothing, and a crawl left settled but unfinished by a crash is finished.
    pub(super) async fn settle(
        &self,
        offer: &OfferKey,
        crawl_id: &str,
        outcomes: &HashMap<UrlHash, PhotoStatus>,
    ) -> Result<CrawlState, FlowError> {
        let now = self.now();
        let settled = self
            .update_record(
                CRAWL_KIND,
                &offer.to_string(),
                now,
                |crawl: Option<CrawlRecord>| {
                    let Some(mut crawl) = crawl.filter(|c| c.crawl_id == crawl_id) else {
                        return Ok(Change::Keep(None));
                    };
                    let mut changed = false;
                    for photo in &mut crawl.photos {
                        let outcome = photo.url_hash.as_ref().and_then(|h| outcomes.get(h));
                        if let Some(outcome) = outcome
                            && photo.status == PhotoStatus::Pending
                        {
                            photo.status = outcome.clone();
                            changed = true;
                        }
                    }
                    let finish = (crawl.state == CrawlState::Pending && crawl.is_settled())
                        .then(|| crawl.clone());
                    Ok(if changed {
                        Change::Write(crawl, finish)
                    } else {
                        Change::Keep(finish)
                    })
                },
            )
            .await?;
        match (settled, self.finishing) {
            (Some(crawl), Finishing::Here) => {
                self.finish_crawl(offer, crawl, Built::Elsewhere).await?;
                Ok(CrawlState::Done)
            }
            (Some(crawl), Finishing::Handoff) => {
                self.hand_over(offer, &crawl.crawl_id).await?;
                Ok(CrawlState::Pending)
            }
            (None, _) => Ok(CrawlState::Pending),
        }
    }

    /// Hands a crawl whose URLs all settled to the settle queue (together with the other
    /// crawls of this batch that settled: one send).
    async fn hand_over(&self, offer: &OfferKey, crawl_id: &str) -> Result<(), FlowError> {
        let message = SettleMessage {
            settle: SettledCrawl {
                offer: offer.clone(),
                crawl_id: crawl_id.to_owned(),
            },
        };
        self.send_to_settle(&message).await
    }

    /// Sends `message` to [`SETTLE_QUEUE`](super::SETTLE_QUEUE) (with the other sends of this
    /// batch: one send).
    pub(super) async fn send_to_settle(
        &self,
        message: &impl serde::Serialize,
    ) -> Result<(), FlowError> {
        let body = serde_json::to_string(message)
            .map_err(|e| FlowError::Internal(format!("cannot encode a settle message: {e}")))?;
        self.sends
            .send(
                self.service.ports().messages.as_ref(),
                super::SETTLE_QUEUE,
                OutgoingMessage::now(body),
            )
            .await?;
        Ok(())
    }

    /// Finishes a crawl handed over by [`hand_over`](Self::hand_over): links its offer's photos
    /// and sends its result, if it is still the offer's crawl and not finished yet (the
    /// message delivered again, or the crawl replaced since, does nothing). Idempotent.
    pub async fn finish_handed_off(&self, settled: &SettledCrawl) -> Result<(), FlowError> {
        let now = self.now();
        let crawl = records::read::<CrawlRecord>(
            self.service.ports().documents.as_ref(),
            CRAWL_KIND,
            &settled.offer.to_string(),
            now,
        )
        .await?;
        match crawl {
            Some(crawl)
                if crawl.crawl_id == settled.crawl_id
                    && crawl.state == CrawlState::Pending
                    && crawl.is_settled() =>
            {
                self.finish_crawl(&settled.offer, crawl, Built::Elsewhere)
                    .await
            }
            _ => Ok(()),
        }
    }

    /// Links the successful photos in the request's order, sends the result, marks the crawl done.
    /// A crawl `built` elsewhere (settled by other functions) is first checked against its
    /// seal and its URLs' records when this crawler verifies settled crawls (the intake
    /// function).
    ///
    /// A revalidation (the crawl carries what its partner was [`told`](CrawlRecord::told)) keeps
    /// a told photo whose URL now fails transiently (a host's bad hour does not unlink it), and
    /// when every photo is as told, links and sends nothing: the crawl becomes the told one
    /// again, settled now (its URL window starts again).
    pub(super) async fn finish_crawl(
        &self,
        offer: &OfferKey,
        crawl: CrawlRecord,
        built: Built,
    ) -> Result<(), FlowError> {
        // Where other functions settle crawls, what this one links is what the store bears out.
        let mut crawl = match built {
            Built::Elsewhere if self.verifies_settled => self.verified(offer, crawl).await?,
            Built::Elsewhere | Built::Here => crawl,
        };
        if let Some(told) = crawl.told.clone() {
            keep_told_through_transient_failures(&mut crawl, &told.images);
            if crawl.images().as_ref() == Some(&told.images) {
                return self.finish_unchanged(offer, &crawl, told.crawl_id).await;
            }
            self.counters.revalidations_changed.increment(1);
        }
        let mut images: Vec<ImageId> = Vec::new();
        for photo in &crawl.photos {
            if let PhotoStatus::Ok { image_id } = &photo.status
                && !images.contains(image_id)
            {
                images.push(image_id.clone());
            }
        }
        // Keyed by the crawl: a finish cut short and run again links each photo once. A photo
        // erased since its URL was downloaded is not linked, and the result says so.
        loop {
            match self
                .service
                .link_offer_photos(offer, &images, Some(&crawl.crawl_id))
                .await
            {
                Ok(()) => break,
                Err(FlowError::UnknownImage(gone)) if images.contains(&gone) => {
                    images.retain(|id| id != &gone);
                    for photo in &mut crawl.photos {
                        if matches!(&photo.status, PhotoStatus::Ok { image_id } if *image_id == gone)
                        {
                            photo.status = PhotoStatus::Failed {
                                error: PhotoError::new(FetchErrorKind::Erased, None, 0),
                            };
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let now = self.now();
        // A finish cut short and run again sends the result again, with the same crawl id (and
        // a later settled_at): the partner keeps one.
        self.send_result(offer, &crawl, now, WebhookDelivery::Queue)
            .await?;
        self.mark_done(offer, &crawl, &crawl.crawl_id, now).await?;
        // A revalidation's offer was counted when it was answered (`offers_unchanged`).
        if crawl.told.is_none() {
            self.counters.offers_settled.increment(1);
        }
        info!(offer_id = %offer, photos = images.len(), urls = crawl.photos.len(), "crawl settled");
        Ok(())
    }

    /// Ends a revalidation that found every photo as told: the crawl becomes the told one
    /// (`told_id`, the id its partner has) again, settled now; nothing is linked or sent.
    async fn finish_unchanged(
        &self,
        offer: &OfferKey,
        crawl: &CrawlRecord,
        told_id: String,
    ) -> Result<(), FlowError> {
        self.mark_done(offer, crawl, &told_id, self.now()).await?;
        self.counters.revalidations_unchanged.increment(1);
        info!(offer_id = %offer, urls = crawl.photos.len(), "revalidated: unchanged");
        Ok(())
    }

    /// Marks the offer's crawl `crawl` done, settled `now`, with its photos as finished and
    /// `id` as its crawl id (its own, or the told one after a revalidation that changed
    /// nothing), if it is still that pending crawl.
    async fn mark_done(
        &self,
        offer: &OfferKey,
        crawl: &CrawlRecord,
        id: &str,
        now: Timestamp,
    ) -> Result<(), FlowError> {
        self.update_record(
            CRAWL_KIND,
            &offer.to_string(),
            now,
            |current: Option<CrawlRecord>| {
                Ok(match current {
                    Some(mut c)
                        if c.crawl_id == crawl.crawl_id && c.state == CrawlState::Pending =>
                    {
                        id.clone_into(&mut c.crawl_id);
                        c.state = CrawlState::Done;
                        c.settled_at = Some(now);
                        c.photos = crawl.photos.clone();
                        c.told = None;
                        Change::Write(c, ())
                    }
                    _ => Change::Keep(()),
                })
            },
        )
        .await
    }

    /// Sends the crawl's result, settled at `settled_at`, with its client as the message's
    /// `client_id` attribute: on AWS the results go to a topic, and each client's subscription
    /// takes only the messages with its own (a client never reads another's results). It is
    /// filed in the client's feed first ([`feed`](super::feed)), and queued for its client's
    /// webhook unless `delivery` says it was when it first settled.
    pub(super) async fn send_result(
        &self,
        offer: &OfferKey,
        crawl: &CrawlRecord,
        settled_at: Timestamp,
        delivery: WebhookDelivery,
    ) -> Result<(), FlowError> {
        let mut result = result_of(offer, crawl, CrawlState::Done);
        result.settled_at = Some(rfc3339_millis(settled_at));
        if self.service.reports_similar() {
            self.report_similar(&mut result).await?;
        }
        let body = serde_json::to_string(&result)
            .map_err(|e| FlowError::Internal(format!("cannot encode a crawl result: {e}")))?;
        // Filed before it is sent: a result a partner was sent is in its feed (and its webhook
        // delivery, which reads it there).
        let filed_ms = self.file_in_feed(&result, &body).await?;
        if delivery == WebhookDelivery::Queue {
            self.queue_webhook(&crawl.client_id, &result.crawl_id, filed_ms)
                .await?;
        }
        let message =
            OutgoingMessage::now(body).with_attribute(CLIENT_ATTRIBUTE, crawl.client_id.as_str());
        self.service
            .ports()
            .messages
            .send(super::RESULTS_QUEUE, &[message])
            .await?;
        Ok(())
    }

    /// Forgets that the offer's last crawl settled, after its photos were changed or deleted
    /// through the API: the next crawl that lists the same URLs links them again instead
    /// of settling at once as unchanged. A revalidation running then is given up (the record
    /// goes back to the told crawl, which its outcomes no longer reach): it would link the
    /// feed's photos over the API's change.
    pub async fn forget_settled_crawl(&self, offer: &OfferKey) -> Result<(), FlowError> {
        let now = self.now();
        self.update_record(
            CRAWL_KIND,
            &offer.to_string(),
            now,
            |crawl: Option<CrawlRecord>| {
                Ok(match crawl {
                    Some(c) if c.told.is_some() => {
                        let mut told = c.as_told().into_owned();
                        told.told = None;
                        told.fingerprint.clear();
                        Change::Write(told, ())
                    }
                    Some(mut c) if !c.fingerprint.is_empty() && c.state == CrawlState::Done => {
                        c.fingerprint.clear();
                        Change::Write(c, ())
                    }
                    _ => Change::Keep(()),
                })
            },
        )
        .await
    }

    /// The offer's latest crawl, per URL (`GET /v1/offers/{id}/crawl`); `None` if the offer
    /// was never crawled (or its crawl expired).
    pub async fn crawl_status(&self, offer: &OfferKey) -> Result<Option<CrawlResult>, FlowError> {
        let now = self.now();
        let crawl = records::read::<CrawlRecord>(
            self.service.ports().documents.as_ref(),
            CRAWL_KIND,
            &offer.to_string(),
            now,
        )
        .await?;
        // `done` only once the offer's photos are linked, not as soon as the last URL settles;
        // while a revalidation runs, what the partner was told.
        Ok(crawl.map(|c| {
            let told = c.as_told();
            result_of(offer, &told, told.state)
        }))
    }
}

/// A revalidated photo whose URL failed transiently (a 5xx, a timeout, a host's open circuit)
/// keeps the image its partner was told: only a definite answer (another image, a 404, a body
/// that is no photo) changes an offer that was re-sent unchanged.
fn keep_told_through_transient_failures(crawl: &mut CrawlRecord, told: &[ImageId]) {
    if told.len() != crawl.photos.len() {
        return;
    }
    for (photo, image_id) in crawl.photos.iter_mut().zip(told) {
        if let PhotoStatus::Failed { error } = &photo.status
            && error.kind.class() != FailureClass::Permanent
        {
            photo.status = PhotoStatus::Ok {
                image_id: image_id.clone(),
            };
        }
    }
}

impl Crawler {
    /// Names each stored photo's near-duplicates under other clients' offers
    /// (`IMGEST_SIMILAR=report`).
    async fn report_similar(&self, result: &mut CrawlResult) -> Result<(), FlowError> {
        let now = self.now();
        for photo in &mut result.photos {
            let PhotoStatus::Ok { image_id } = &photo.status else {
                continue;
            };
            let Some(record) = self
                .service
                .ports()
                .images
                .get(image_id)
                .await?
                .filter(|r| r.is_live(now))
            else {
                continue;
            };
            let found = self
                .service
                .report_similar(&record, Some(&result.client_id))
                .await?;
            photo.near_duplicates = Some(found.into_iter().map(Into::into).collect());
        }
        Ok(())
    }
}

fn result_of(offer: &OfferKey, crawl: &CrawlRecord, state: CrawlState) -> CrawlResult {
    CrawlResult {
        client_id: crawl.client_id.clone(),
        offer_id: offer.id().clone(),
        crawl_id: crawl.crawl_id.clone(),
        state,
        settled_at: crawl.settled_at.map(rfc3339_millis),
        photos: crawl
            .photos
            .iter()
            .map(|p| PhotoResult {
                url: p.url.clone(),
                status: p.status.clone(),
                near_duplicates: None,
            })
            .collect(),
    }
}

/// Whether a result sent goes to its client's webhook too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WebhookDelivery {
    /// A result settled now: queued for the webhook.
    Queue,
    /// An unchanged offer's result sent again, the same crawl id (the same `webhook-id`): its
    /// delivery was queued when it first settled, and is retried (and redrivable) on its own;
    /// a second one would be a duplicate the partner drops.
    AlreadyQueued,
}
