//! Erasure: a seller takes back their upload, an operator purges content, and the content goes
//! everywhere, every version of every file included, as soon as nothing references it.
//!
//! **References.** An image is referenced by the offers that link it (its link count) and by
//! the sellers whose upload of the bytes is within the orphan window: each upload (and each
//! precheck that finds it) files the token's subject as an *uploader* of the image, a member of
//! the image's group (one small write; members expire with the window). A seller's
//! `DELETE /v1/images/{id}` removes that seller's member only: another seller's upload of the
//! same bytes, or an offer of any client, keeps the content (pict-rs's purge removed every
//! alias of a content and broke other users' posts). An operator's purge removes the image from
//! every offer of every client first (telling each client), and every uploader.
//!
//! **The record's generation decides, as for GC.** Unreferenced content is erased by marking
//! its record expired now (a conditional write on the record as read: unchanged, unlinked),
//! reading the uploaders again, and deleting the record only if it is still that generation and
//! still expired. An upload files its uploader *before* it claims the record, so an upload
//! that saw the record before the mark is among the uploaders read after it (the erasure gives
//! up and refreshes the record); one that claims after the mark revives the record (a claim
//! refreshes an expired record), and the delete's condition then fails; one that claims after
//! the delete finds no record and writes a new generation, which the erasure never touches.
//! So a concurrent upload ends either kept or (blocked) refused, never with a record whose
//! files are gone.
//!
//! **Files after the record**, as everywhere: the erased generations' files, and every earlier
//! version of every file of the image that no record owns (an earlier life of the same bytes,
//! kept as noncurrent versions by a versioned bucket), are deleted by [`BlobStore::erase`]; the
//! current files of another generation are left when younger than the sweep's grace (a racing
//! upload's, whose record is not written yet). Then the CDN drops its copies of the image's
//! public keys, and a receipt records what went (ids and counts, never content). On AWS the API
//! function may not delete object versions: it files a request (a member of the `requests`
//! group) and answers, and [`Service::erase_pending`] deletes the files where that is allowed
//! (`imgest erase --pending`, with the operator's rights). Locally the files go before the
//! answer.
//!
//! **Blocked content.** A purge with `block` writes a tombstone first: new bytes with that id
//! are refused (`410 erased`) at their claim (uploads) or before processing (crawls); a
//! concurrent upload that claimed before it is erased by the purge's next round.
//!
//! **Cost**: a seller's erasure is a few reads and writes of small items (the uploaders'
//! group, the record, the request and the receipt) and, on the files' side, one listing of
//! versions per area and one delete per version; an operator's purge adds a walk of the offers
//! (an index read locally, a Scan on DynamoDB) and one offer write per offer. An upload pays
//! one member write for its uploader. `docs/cost.md` has the figures.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::{FlowError, Service};
use imgest_core::domain::{
    BlobKey, ClientId, ContentHash, Generation, IMAGE_AREAS, ImageId, OfferKey, Owner,
    PUBLIC_PREFIX, Tenant, Timestamp,
};
pub use imgest_core::ports::Cdn;
use imgest_core::ports::{BlobMeta, Erased, OutgoingMessage, StoreError};

/// Members: an image's uploaders (group: the image id; member: the owner).
pub const UPLOADER_KIND: &str = "uploader";
/// Documents: blocked content (key: the image id).
pub const TOMBSTONE_KIND: &str = "tombstone";
/// Documents: an image's erasure receipts (key: the image id).
pub const RECEIPT_KIND: &str = "erasure";
/// Members: erasures under way (groups [`REQUESTS`] and [`AWAITING`]; member: the image id).
pub const QUEUE_KIND: &str = "erasing";
/// Files to erase, filed when their record is gone.
const REQUESTS: &str = "requests";
/// Sellers' erasures waiting for the offers that still link the image to drop it.
const AWAITING: &str = "awaiting";

/// How long tombstones, receipts and waiting erasures are kept: for good, in practice.
const KEPT_FOR: Duration = Duration::from_secs(100 * 365 * 86_400);
/// Rounds of reading, marking and deleting before a record that keeps changing is given up on
/// (a retry comes back to it).
const ROUNDS: u32 = 8;
/// Members read per page.
const PAGE: usize = 500;
/// Filed erasures worked on side by side (the capacity model reads it): each is a dozen round
/// trips (the record, the versions of four prefixes, their deletes, the receipt, the CDN's
/// invalidation: about 460 ms), and little CPU, so a run of the erasure function (54 seconds
/// of each minute) gets through about 3,000. Eight carried 15.6 a second, below the 20 that
/// ten times seed 001's peak files (docs/capacity.md).
pub const ERASING_AT_ONCE: usize = 32;

/// Who asked for an erasure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requester {
    /// The seller who uploaded the photo (`DELETE /v1/images/{image_id}`).
    Seller,
    /// An operator (`imgest erase`, `POST /v1/operator/erasures`).
    Operator,
}

/// What was removed by one erasure, and when: ids and counts, never content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub image_id: ImageId,
    pub by: Requester,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub requested_at: Timestamp,
    pub erased_at: Timestamp,
    /// The generations whose record was deleted.
    pub generations: Vec<Generation>,
    /// Files deleted (current objects).
    pub files: u64,
    /// Earlier versions and deletion markers deleted (a versioned bucket's).
    pub versions: u64,
    /// Offers the image was removed from, and their clients (each told).
    pub offers_unlinked: u64,
    pub clients_told: Vec<ClientId>,
    /// Sellers' uploads removed.
    pub uploaders_removed: u64,
    /// The bytes are refused from now on.
    pub blocked: bool,
    /// The CDN's invalidation of the image's public keys, if a CDN is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdn_invalidation: Option<String>,
}

/// An erasure's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erasure {
    /// The record is gone (or there was none); `receipt` once the files are gone too (locally
    /// at once; on AWS once `erase_pending` ran).
    Erased { receipt: Option<Receipt> },
    /// Kept for other references: other sellers' uploads, offers. `awaiting`: erased as soon
    /// as the offers drop it (no other seller holds it).
    Kept {
        uploaders: usize,
        offers: u32,
        awaiting: bool,
    },
}

/// What an erasure knows before the files go (filed with a request).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    image_id: ImageId,
    by: Requester,
    #[serde(default)]
    reason: Option<String>,
    requested_at: Timestamp,
    #[serde(default)]
    generations: Vec<Generation>,
    #[serde(default)]
    offers_unlinked: u64,
    #[serde(default)]
    clients_told: Vec<ClientId>,
    #[serde(default)]
    uploaders_removed: u64,
    #[serde(default)]
    blocked: bool,
}

/// A blocked content's tombstone.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Tombstone {
    at: Timestamp,
    #[serde(default)]
    sha256: Option<ContentHash>,
    #[serde(default)]
    reason: Option<String>,
}

/// An image's receipts, oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Receipts {
    receipts: Vec<Receipt>,
}

/// What `imgest erase --status` shows of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErasureStatus {
    pub image_id: ImageId,
    pub receipts: Vec<Receipt>,
    /// Its files are filed for the erasure function.
    pub files_pending: bool,
    /// A seller's erasure waits for offers to drop it.
    pub awaiting_offers: bool,
    pub blocked: bool,
}

/// What one pass over the erasures under way did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PendingReport {
    /// Requests whose files were erased.
    pub erased: u64,
    /// Waiting erasures whose offers dropped the image (erased now) or that another seller's
    /// upload now keeps (no longer waiting).
    pub settled: u64,
    /// Erasures that failed this pass (each logged with its error): they stay filed and are
    /// tried again by the next pass; the others went on without them.
    pub failed: u64,
    /// The pass stopped at its deadline with erasures left: the next one goes on.
    pub unfinished: bool,
}

/// How an erasure treats offers that still link the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offers {
    /// A seller's: kept, and erased when the last offer drops it.
    Await,
    /// A purge's: they were just unlinked; a new link keeps it this round.
    Keep,
}

impl Service {
    /// Files `owner` as an uploader of `id` until the orphan window ends: called before the
    /// upload claims the record (see the module doc).
    pub async fn note_uploader(&self, owner: &Owner, id: &ImageId) -> Result<(), FlowError> {
        let now = self.ports.clock.now();
        let body = serde_json::json!({ "at": now }).to_string();
        self.ports
            .documents
            .put_member(
                UPLOADER_KIND,
                id.as_str(),
                owner.as_str(),
                &body,
                now.plus(self.policy.orphan_ttl),
                now,
            )
            .await?;
        Ok(())
    }

    /// Refuses bytes an operator blocked (`410 erased`); one read, for new content only.
    pub(crate) async fn refuse_if_blocked(&self, id: &ImageId) -> Result<(), FlowError> {
        let now = self.ports.clock.now();
        match self
            .ports
            .documents
            .peek_document(TOMBSTONE_KIND, id.as_str(), now)
            .await?
        {
            Some(_) => Err(FlowError::Erased(id.clone())),
            None => Ok(()),
        }
    }

    /// A seller takes back their upload of `id`: their uploader member goes at once; the
    /// content goes when nothing else references it (now, or when the last offer drops it).
    pub async fn erase_upload(&self, owner: &Owner, id: &ImageId) -> Result<Erasure, FlowError> {
        let uploaders = self.uploaders(id).await?;
        if !uploaders.iter().any(|u| u == owner.as_str()) {
            return Err(FlowError::NotUploaded(id.clone()));
        }
        self.ports
            .documents
            .delete_members(UPLOADER_KIND, id.as_str(), &[owner.as_str().to_owned()])
            .await?;
        let request = self.request(id, Requester::Seller, None);
        let request = Request {
            uploaders_removed: 1,
            ..request
        };
        let outcome = self.erase_unreferenced(request, Offers::Await).await?;
        info!(image_id = %id, ?outcome, "a seller's erasure");
        Ok(outcome)
    }

    /// An operator purges `id`: from every offer of every client (each told), every seller's
    /// upload, then everywhere; `block` refuses the same bytes from now on.
    pub async fn purge(
        &self,
        id: &ImageId,
        block: bool,
        reason: Option<String>,
    ) -> Result<Erasure, FlowError> {
        let mut request = Request {
            blocked: block,
            ..self.request(id, Requester::Operator, reason.clone())
        };
        if block {
            self.block(id, reason.as_deref()).await?;
        }
        for _ in 0..ROUNDS {
            request.uploaders_removed += self.remove_uploaders(id).await?;
            let (offers, clients) = self.unlink_everywhere(id, reason.as_deref()).await?;
            request.offers_unlinked += offers;
            for client in clients {
                if !request.clients_told.contains(&client) {
                    request.clients_told.push(client);
                }
            }
            let erased = match self.erase_unreferenced(request.clone(), Offers::Keep).await {
                // An upload of the same bytes being processed: its record is waited for.
                Err(FlowError::StillProcessing { retry_after, .. }) => {
                    tokio::time::sleep(retry_after.min(Duration::from_millis(200))).await;
                    continue;
                }
                other => other?,
            };
            match erased {
                Erasure::Erased { receipt } => {
                    // A blocked content's upload that claimed before the tombstone may have
                    // written a record since: erased in the next round.
                    let back = self.ports.images.get(id).await?;
                    if block && back.is_some() {
                        request.generations.clear();
                        continue;
                    }
                    info!(image_id = %id, block, "purged");
                    return Ok(Erasure::Erased { receipt });
                }
                // A link or an upload of the same moment: removed again in the next round.
                Erasure::Kept { .. } => continue,
            }
        }
        Err(FlowError::Store(StoreError::Conflict(format!(
            "image {id}: still referenced after {ROUNDS} rounds of purging; run it again"
        ))))
    }

    /// What is known of `id`'s erasures.
    pub async fn erasure_status(&self, id: &ImageId) -> Result<ErasureStatus, FlowError> {
        let now = self.ports.clock.now();
        let docs = &self.ports.documents;
        let receipts = match docs.get_document(RECEIPT_KIND, id.as_str(), now).await? {
            Some(doc) => parse::<Receipts>(&doc.body)?.receipts,
            None => Vec::new(),
        };
        let member = |group: &'static str| async move {
            let page = docs
                .list_members(QUEUE_KIND, group, None, PAGE, now)
                .await?;
            Ok::<bool, FlowError>(page.members.iter().any(|(m, _)| m == id.as_str()))
        };
        Ok(ErasureStatus {
            image_id: id.clone(),
            receipts,
            files_pending: member(REQUESTS).await?,
            awaiting_offers: member(AWAITING).await?,
            blocked: docs
                .get_document(TOMBSTONE_KIND, id.as_str(), now)
                .await?
                .is_some(),
        })
    }

    /// Works through the erasures under way: the files of records already deleted (the AWS
    /// API's requests), and sellers' erasures whose offers may have dropped the image. The
    /// local runner's worker, and `imgest erase --pending`.
    pub async fn erase_pending(&self) -> Result<PendingReport, FlowError> {
        self.erase_pending_until(None).await
    }

    /// [`erase_pending`](Self::erase_pending) until `deadline` (the erasure function's run):
    /// a page of [`PAGE`] at a time, [`ERASING_AT_ONCE`] side by side, so that a backlog
    /// never has to fit in memory and a long one is worked through over several runs. One
    /// erasure that fails (a store error, a request that does not read) is counted and left
    /// filed; it never holds up the ones after it.
    pub async fn erase_pending_until(
        &self,
        deadline: Option<Instant>,
    ) -> Result<PendingReport, FlowError> {
        let mut report = PendingReport::default();
        let past = || deadline.is_some_and(|d| Instant::now() >= d);
        for group in [REQUESTS, AWAITING] {
            let mut cursor: Option<String> = None;
            loop {
                if past() {
                    report.unfinished = true;
                    return Ok(report);
                }
                let now = self.ports.clock.now();
                let page = self
                    .ports
                    .documents
                    .list_members(QUEUE_KIND, group, cursor.as_deref(), PAGE, now)
                    .await?;
                let outcomes: Vec<Result<bool, FlowError>> =
                    futures_util::stream::iter(page.members)
                        .map(|(member, body)| self.work_on(group, member, body))
                        .buffer_unordered(ERASING_AT_ONCE)
                        .collect()
                        .await;
                for outcome in outcomes {
                    match outcome {
                        Ok(true) if group == REQUESTS => report.erased += 1,
                        Ok(true) => report.settled += 1,
                        Ok(false) => {}
                        Err(_) => report.failed += 1,
                    }
                }
                match page.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
        }
        Ok(report)
    }

    /// One filed erasure of `group`: whether it is done (and left the list).
    async fn work_on(&self, group: &str, member: String, body: String) -> Result<bool, FlowError> {
        let done = async {
            let request: Request = parse(&body)?;
            if group == REQUESTS {
                self.erase_files(request).await?;
            } else if let Erasure::Kept {
                uploaders: 0,
                offers: 1..,
                ..
            } = self.erase_unreferenced(request, Offers::Keep).await?
            {
                // Still linked by an offer: it waits on.
                return Ok(false);
            }
            self.dequeue(group, member.clone()).await?;
            Ok(true)
        };
        let outcome = done.await;
        if let Err(e) = &outcome {
            warn!(group, member, error = %e, "an erasure under way failed; it stays filed");
        }
        outcome
    }

    fn request(&self, id: &ImageId, by: Requester, reason: Option<String>) -> Request {
        Request {
            image_id: id.clone(),
            by,
            reason,
            requested_at: self.ports.clock.now(),
            generations: Vec::new(),
            offers_unlinked: 0,
            clients_told: Vec::new(),
            uploaders_removed: 0,
            blocked: false,
        }
    }

    /// Erases the image of `request` if nothing references it (see the module doc).
    async fn erase_unreferenced(
        &self,
        mut request: Request,
        offers: Offers,
    ) -> Result<Erasure, FlowError> {
        let id = request.image_id.clone();
        let images = &self.ports.images;
        for _ in 0..ROUNDS {
            let Some(record) = images.get(&id).await? else {
                // Nothing stored: what an earlier life of the bytes left in storage goes.
                return self.files_go(request).await;
            };
            if !record.is_ready() {
                return Err(FlowError::StillProcessing {
                    id,
                    retry_after: Duration::from_secs(1),
                });
            }
            let others = self.uploaders(&id).await?;
            if !others.is_empty() || record.link_count > 0 {
                let awaiting = offers == Offers::Await && others.is_empty();
                if awaiting {
                    self.enqueue(AWAITING, &request).await?;
                }
                return Ok(Erasure::Kept {
                    uploaders: others.len(),
                    offers: record.link_count,
                    awaiting,
                });
            }
            // Expired now, as GC sees an orphan past its window, if unchanged since read.
            let now = self.ports.clock.now();
            if !images
                .correct_link_count(&record, 0, now, Duration::ZERO)
                .await?
            {
                continue;
            }
            // An upload that saw the record before the mark filed its uploader before that.
            let others = self.uploaders(&id).await?;
            if !others.is_empty() {
                self.refresh_known(id.clone()).await?;
                return Ok(Erasure::Kept {
                    uploaders: others.len(),
                    offers: 0,
                    awaiting: false,
                });
            }
            let now = self.ports.clock.now();
            let deleted = images
                .delete_if_expired(&id, &record.generation, now)
                .await?;
            if !deleted
                && images
                    .get(&id)
                    .await?
                    .is_some_and(|r| r.generation == record.generation)
            {
                // Revived by an upload's claim: decided again.
                continue;
            }
            // Deleted, by us or by GC meanwhile: its files go.
            request.generations.push(record.generation.clone());
            if let Some(previous) = &record.previous {
                request.generations.push(previous.generation.clone());
            }
            return self.files_go(request).await;
        }
        Err(FlowError::Store(StoreError::Conflict(format!(
            "image {id}: its record kept changing while it was being erased"
        ))))
    }

    /// The record is gone: the files go now (locally), or are filed for the erasure function.
    async fn files_go(&self, request: Request) -> Result<Erasure, FlowError> {
        if self.policy.erase_files_here {
            let receipt = self.erase_files(request).await?;
            Ok(Erasure::Erased {
                receipt: Some(receipt),
            })
        } else {
            self.enqueue(REQUESTS, &request).await?;
            Ok(Erasure::Erased { receipt: None })
        }
    }

    /// Deletes the files of the request's generations and every earlier version of the
    /// image's files that no record owns, tells the CDN, and writes the receipt. A request
    /// proves nothing about itself: a generation a record still owns is never touched.
    async fn erase_files(&self, request: Request) -> Result<Receipt, FlowError> {
        let id = &request.image_id;
        let owned: BTreeSet<Generation> = match self.ports.images.get(id).await? {
            Some(record) => std::iter::once(record.generation)
                .chain(record.previous.map(|p| p.generation))
                .collect(),
            None => BTreeSet::new(),
        };
        // What a CDN may have cached: the current public files, listed before they go.
        let public = self.public_paths(id).await?;
        let mut erased = Erased::default();
        let mut add = |e: Erased| {
            erased.objects += e.objects;
            erased.versions += e.versions;
        };
        for generation in request.generations.iter().filter(|g| !owned.contains(*g)) {
            for prefix in BlobKey::generation_prefixes(id, generation) {
                add(self
                    .ports
                    .blobs
                    .erase(&prefix, &|_: &BlobMeta| false)
                    .await?);
            }
        }
        // Earlier lives of the same bytes: their versions go; current files of a generation
        // no record owns go once older than the sweep's grace (younger ones may be a racing
        // upload's, whose record is not written yet: the sweep takes them if they are not).
        let young = self.ports.clock.now().minus(self.policy.sweep_grace);
        let keep = move |b: &BlobMeta| {
            b.last_modified > young
                || b.key
                    .image_part()
                    .is_some_and(|part| owned.contains(&part.generation))
        };
        for area in IMAGE_AREAS {
            let prefix = format!("{area}{}/{id}/", id.shard());
            add(self.ports.blobs.erase(&prefix, &keep).await?);
        }
        // Each file by its path (CloudFront keeps 3,000 of those in progress per distribution,
        // but only 15 wildcards); the image's whole prefix when none was left to list (a run
        // retried after its deletes, before its invalidation).
        let paths = if public.is_empty() {
            vec![format!("/{PUBLIC_PREFIX}{}/{id}/*", id.shard())]
        } else {
            public
        };
        let cdn_invalidation = match &self.cdn {
            Some(cdn) => Some(
                cdn.invalidate(
                    &paths,
                    &format!("erase-{id}-{}", request.requested_at.as_millis()),
                )
                .await?,
            ),
            None => None,
        };
        let receipt = Receipt {
            image_id: id.clone(),
            by: request.by,
            reason: request.reason,
            requested_at: request.requested_at,
            erased_at: self.ports.clock.now(),
            generations: request.generations,
            files: erased.objects,
            versions: erased.versions,
            offers_unlinked: request.offers_unlinked,
            clients_told: request.clients_told,
            uploaders_removed: request.uploaders_removed,
            blocked: request.blocked,
            cdn_invalidation,
        };
        self.add_receipt(&receipt).await?;
        self.counters.images_erased.increment(1);
        info!(image_id = %id, files = receipt.files, versions = receipt.versions, "erased");
        Ok(receipt)
    }

    /// The `/`-rooted paths of `id`'s current public files, as a CDN in front of the bucket
    /// serves them (none without a CDN: nothing caches them).
    async fn public_paths(&self, id: &ImageId) -> Result<Vec<String>, FlowError> {
        let mut paths = Vec::new();
        if self.cdn.is_none() {
            return Ok(paths);
        }
        let prefix = format!("{PUBLIC_PREFIX}{}/{id}/", id.shard());
        let mut after: Option<BlobKey> = None;
        loop {
            let page = self.ports.blobs.list(&prefix, after.as_ref(), PAGE).await?;
            paths.extend(page.blobs.iter().map(|b| format!("/{}", b.key.as_str())));
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(paths),
            }
        }
    }

    /// Appends `receipt` to the image's receipts (a versioned write, read again on a race).
    /// One receipt per request: the same request worked again (a run that stopped between
    /// its receipt and its dequeue, or two erasers at once) keeps the first receipt's counts
    /// and only adds the CDN's invalidation if the first had none.
    async fn add_receipt(&self, receipt: &Receipt) -> Result<(), FlowError> {
        let key = receipt.image_id.as_str();
        for _ in 0..ROUNDS {
            let now = self.ports.clock.now();
            let docs = &self.ports.documents;
            let current = docs.get_document(RECEIPT_KIND, key, now).await?;
            let (mut all, version) = match current {
                Some(doc) => (parse::<Receipts>(&doc.body)?, Some(doc.version)),
                None => (Receipts::default(), None),
            };
            let same = all.receipts.iter_mut().find(|r| {
                (r.by, r.requested_at, &r.generations)
                    == (receipt.by, receipt.requested_at, &receipt.generations)
            });
            match same {
                Some(first)
                    if first.cdn_invalidation.is_some() || receipt.cdn_invalidation.is_none() =>
                {
                    return Ok(());
                }
                Some(first) => first.cdn_invalidation = receipt.cdn_invalidation.clone(),
                None => all.receipts.push(receipt.clone()),
            }
            let body = serde_json::to_string(&all)
                .map_err(|e| FlowError::Internal(format!("encoding a receipt: {e}")))?;
            match docs
                .put_document(RECEIPT_KIND, key, &body, version, now.plus(KEPT_FOR), now)
                .await
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(FlowError::Store(StoreError::Conflict(format!(
            "image {key}: its receipts kept changing"
        ))))
    }

    /// Writes the tombstone that refuses the bytes of `id` from now on.
    async fn block(&self, id: &ImageId, reason: Option<&str>) -> Result<(), FlowError> {
        let now = self.ports.clock.now();
        let sha256 = self
            .ports
            .images
            .get(id)
            .await?
            .and_then(|r| r.sha256().copied());
        let body = serde_json::to_string(&Tombstone {
            at: now,
            sha256,
            reason: reason.map(str::to_owned),
        })
        .map_err(|e| FlowError::Internal(format!("encoding a tombstone: {e}")))?;
        let docs = &self.ports.documents;
        let expected = docs
            .get_document(TOMBSTONE_KIND, id.as_str(), now)
            .await?
            .map(|d| d.version);
        match docs
            .put_document(
                TOMBSTONE_KIND,
                id.as_str(),
                &body,
                expected,
                now.plus(KEPT_FOR),
                now,
            )
            .await
        {
            // Blocked by another purge meanwhile: blocked either way.
            Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes `id` from every offer of every client that links it, and tells each client
    /// its offer lost a photo and why; returns the offers changed and their clients.
    async fn unlink_everywhere(
        &self,
        id: &ImageId,
        reason: Option<&str>,
    ) -> Result<(u64, Vec<ClientId>), FlowError> {
        let mut offers: Vec<OfferKey> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .ports
                .offers
                .offers_linking(id, cursor.as_deref(), PAGE)
                .await?;
            offers.extend(page.offers);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let mut clients = Vec::new();
        let mut changed = 0;
        for offer in offers {
            let Some(photos) = self.ports.offers.photos(&offer).await? else {
                continue;
            };
            if !photos.contains(id) {
                continue;
            }
            let kept: Vec<ImageId> = photos.into_iter().filter(|p| p != id).collect();
            self.link_offer_photos(&offer, &kept, None).await?;
            changed += 1;
            if let Tenant::Client(client) = offer.tenant() {
                self.tell_photo_erased(client, &offer, id, reason).await?;
                if !clients.contains(client) {
                    clients.push(client.clone());
                }
            }
        }
        Ok((changed, clients))
    }

    /// The client's result message that its offer lost a photo to an erasure.
    async fn tell_photo_erased(
        &self,
        client: &ClientId,
        offer: &OfferKey,
        id: &ImageId,
        reason: Option<&str>,
    ) -> Result<(), FlowError> {
        let body = serde_json::json!({
            "event": "photo_erased",
            "client_id": client,
            "offer_id": offer.id(),
            "image_id": id,
            "reason": reason.unwrap_or("erased by the operator"),
            "erased_at": humantime::format_rfc3339_millis(self.ports.clock.now().to_system()).to_string(),
        })
        .to_string();
        let message = OutgoingMessage::now(body)
            .with_attribute(crate::queues::CLIENT_ATTRIBUTE, client.as_str());
        self.ports
            .messages
            .send(crate::queues::RESULTS_QUEUE, &[message])
            .await?;
        Ok(())
    }

    /// The owners of `id`'s uploads within their window.
    pub(crate) async fn uploaders(&self, id: &ImageId) -> Result<Vec<String>, FlowError> {
        let now = self.ports.clock.now();
        let mut owners = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .ports
                .documents
                .list_members(UPLOADER_KIND, id.as_str(), cursor.as_deref(), PAGE, now)
                .await?;
            owners.extend(page.members.into_iter().map(|(owner, _)| owner));
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(owners),
            }
        }
    }

    /// Removes every uploader of `id`; returns how many there were.
    async fn remove_uploaders(&self, id: &ImageId) -> Result<u64, FlowError> {
        let owners = self.uploaders(id).await?;
        if !owners.is_empty() {
            self.ports
                .documents
                .delete_members(UPLOADER_KIND, id.as_str(), &owners)
                .await?;
        }
        Ok(owners.len() as u64)
    }

    async fn enqueue(&self, group: &str, request: &Request) -> Result<(), FlowError> {
        let now = self.ports.clock.now();
        let body = serde_json::to_string(request)
            .map_err(|e| FlowError::Internal(format!("encoding an erasure: {e}")))?;
        self.ports
            .documents
            .put_member(
                QUEUE_KIND,
                group,
                request.image_id.as_str(),
                &body,
                now.plus(KEPT_FOR),
                now,
            )
            .await?;
        Ok(())
    }

    async fn dequeue(&self, group: &str, member: String) -> Result<(), FlowError> {
        if let Err(e) = self
            .ports
            .documents
            .delete_members(QUEUE_KIND, group, std::slice::from_ref(&member))
            .await
        {
            warn!(member, error = %e, "could not remove a finished erasure; it runs again");
            return Err(e.into());
        }
        Ok(())
    }

    /// Sets the CDN that erasures tell (a distribution configured on AWS).
    pub fn with_cdn(mut self, cdn: Option<Arc<dyn Cdn>>) -> Self {
        self.cdn = cdn;
        self
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, FlowError> {
    serde_json::from_str(body)
        .map_err(|e| FlowError::Internal(format!("an erasure record does not read: {e}")))
}
