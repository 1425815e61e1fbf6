//! Upload: the same bytes are decoded, resized and written once, however many callers send them.
//!
//! The image id is the MD5 of the body (computed while the body streams in). A claim — a
//! conditional write in the image index — decides who processes new content; everyone else
//! gets the existing record (a dedup hit costs one read, plus one conditional write when the
//! record was last refreshed longer ago than the refresh granularity; no decoding) or waits
//! for the claimant. Files are written before the record becomes ready, so a ready record never
//! points at a missing file; a failed or cancelled processing run removes its claim and its
//! variants (its original is left to the sweep: only the collectors delete originals).
//!
//! A dedup hit is the common case and should cost what hashing costs: so the body is kept as
//! the chunks it arrived in (joined only for new content), and only its magic bytes are checked
//! before the claim; the header is parsed after the claim, for new content only (the bytes of a
//! ready record passed that check when they first came).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tracing::{Instrument, error, info, warn};

use super::decode::decode;
use super::files::{
    Answer, FileScope, FilesFate, RecordWrite, Source, delete_generation_files, settle_files,
    write_files,
};
use super::service::Ports;
use super::{FlowError, Service};
use imgest_core::domain::{
    BlobKey, ContentHash, Generation, ImageId, ImageRecord, ImageState, Owner, Timestamp,
};
use imgest_core::ports::{Claim, KeyedLink, StoreError};
use imgest_core::telemetry::metrics::Stage;

/// What an upload returns: the record and whether the bytes were already known.
#[derive(Debug, Clone)]
pub struct UploadOutcome {
    pub record: ImageRecord,
    pub deduplicated: bool,
}

/// An upload body as it arrived: its chunks, not joined until the content turns out to be new.
#[derive(Debug, Clone, Default)]
pub struct UploadBody {
    chunks: Vec<Bytes>,
    len: usize,
}

impl UploadBody {
    pub fn push(&mut self, chunk: Bytes) {
        self.len += chunk.len();
        if !chunk.is_empty() {
            self.chunks.push(chunk);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first `n` bytes (fewer if the body is shorter), copied only if they span chunks.
    fn head(&self, n: usize) -> std::borrow::Cow<'_, [u8]> {
        match self.chunks.first() {
            Some(first) if first.len() >= n || self.chunks.len() == 1 => {
                std::borrow::Cow::Borrowed(&first[..n.min(first.len())])
            }
            _ => std::borrow::Cow::Owned(
                self.chunks
                    .iter()
                    .flat_map(|c| c.iter().copied())
                    .take(n)
                    .collect(),
            ),
        }
    }

    /// SHA-256 of the whole body, over its chunks as they arrived.
    pub fn strong_hash(&self) -> ContentHash {
        ContentHash::of_chunks(self.chunks.iter().map(|c| c.as_ref()))
    }

    /// The whole body in one buffer (no copy when it arrived in one chunk).
    pub fn into_bytes(self) -> Bytes {
        match self.chunks.len() {
            0 => Bytes::new(),
            1 => self.chunks.into_iter().next().unwrap_or_default(),
            _ => {
                let mut joined = bytes::BytesMut::with_capacity(self.len);
                for chunk in &self.chunks {
                    joined.extend_from_slice(chunk);
                }
                joined.freeze()
            }
        }
    }
}

impl From<Bytes> for UploadBody {
    fn from(bytes: Bytes) -> Self {
        let mut body = Self::default();
        body.push(bytes);
        body
    }
}

/// Enough leading bytes to tell every accepted format from its magic bytes.
const MAGIC_LEN: usize = imgest_core::domain::SNIFF_LEN;
/// The window `IMGEST_UPLOAD_RPM` counts in.
const UPLOAD_RATE_WINDOW: Duration = Duration::from_secs(60);

/// How often a caller waiting for another caller's claim looks again (doubling, capped).
const WAIT_FIRST_POLL: Duration = Duration::from_millis(10);
const WAIT_MAX_POLL: Duration = Duration::from_millis(250);
/// The `Retry-After` a caller waiting for another's claim is given: the claim's time left,
/// within these bounds.
const RETRY_AFTER_MIN: Duration = Duration::from_secs(1);
const RETRY_AFTER_MAX: Duration = Duration::from_secs(5);

impl Service {
    /// Uploads `body`, whose MD5 the caller computed while receiving it (an API request): the
    /// same bytes being processed by another request are waited for `IMGEST_DEDUP_WAIT` at
    /// most, then answered [`FlowError::StillProcessing`] (`503` with `Retry-After`), well
    /// before API Gateway gives up on the request.
    pub async fn upload(
        &self,
        id: ImageId,
        body: impl Into<UploadBody>,
    ) -> Result<UploadOutcome, FlowError> {
        self.upload_within(id, body, self.policy.dedup_wait).await
    }

    /// [`upload`](Self::upload) for work from a queue (a presigned upload's processing, a
    /// crawled photo): it may wait up to a claim's lifetime (`IMGEST_CLAIM_TTL`), as a
    /// message that still finds the bytes in progress then fails retryably and comes back.
    pub(crate) async fn upload_queued(
        &self,
        id: ImageId,
        body: impl Into<UploadBody>,
    ) -> Result<UploadOutcome, FlowError> {
        self.upload_within(id, body, self.policy.claim_ttl).await
    }

    /// Uploads `body`, waiting at most `wait` (wall-clock time: whatever the store's clock
    /// says) for another caller's claim on the same bytes.
    async fn upload_within(
        &self,
        id: ImageId,
        body: impl Into<UploadBody>,
        wait: Duration,
    ) -> Result<UploadOutcome, FlowError> {
        let deadline = tokio::time::Instant::now() + wait;
        let body = body.into();
        if body.is_empty() {
            return Err(FlowError::EmptyBody);
        }
        // Size and magic bytes first: a body that is no image of an accepted format never
        // creates a claim. The header is read below, once the content is known to be new.
        self.imaging()?
            .check_format(body.len(), &body.head(MAGIC_LEN))
            .inspect_err(|_| {
                self.counters.pipeline_rejections.increment(1);
            })?;
        // Every hit on the MD5 is checked against the body's SHA-256 (computed once, when a
        // record is found: new content gets its hash from the files step).
        let mut sha256: Option<ContentHash> = None;
        let mut body = Some(body);
        let mut joined = Bytes::new();
        let mut strong_hash = |body: &Option<UploadBody>, joined: &Bytes| {
            *sha256.get_or_insert_with(|| match body {
                Some(parts) => parts.strong_hash(),
                None => ContentHash::of_bytes(joined),
            })
        };

        // A waiter re-claims when the claimant gave up (abandoned or expired claim); the loop is
        // bounded because each round either returns or sees a claim end.
        let mut waited_rounds = 0u32;
        loop {
            match self.claim(&id).await? {
                Claim::Existing(record) => {
                    let record = self
                        .verify_hit(record, &strong_hash(&body, &joined))
                        .await?;
                    self.counters.uploads_deduplicated.increment(1);
                    return Ok(UploadOutcome {
                        record,
                        deduplicated: true,
                    });
                }
                Claim::New { generation } => {
                    // Bytes an operator erased and blocked are refused here, where new
                    // content starts (a dedup hit has a record, which a blocked content has not).
                    if let Err(e) = self.refuse_if_blocked(&id).await {
                        if let Err(abandon) = self.ports.images.abandon(&id, &generation).await {
                            warn!(image_id = %id, error = %abandon, "could not remove a refused claim; it expires by itself");
                        }
                        return Err(e);
                    }
                    if let Some(parts) = body.take() {
                        joined = parts.into_bytes();
                    }
                    // Header checks (declared size against the pixel limit) before any decoding;
                    // a refused body gives its claim back at once.
                    if let Err(e) = self.imaging()?.inspect(&joined) {
                        self.counters.pipeline_rejections.increment(1);
                        if let Err(abandon) = self.ports.images.abandon(&id, &generation).await {
                            warn!(image_id = %id, error = %abandon, "could not remove a refused claim; it expires by itself");
                        }
                        return Err(e.into());
                    }
                    match self
                        .process_and_store(
                            id.clone(),
                            generation,
                            joined.clone(),
                            Record::Claimed,
                            Admission::Refuse,
                            None,
                        )
                        .await?
                    {
                        Some(record) => {
                            self.counters.uploads_new.increment(1);
                            return Ok(UploadOutcome {
                                record,
                                deduplicated: false,
                            });
                        }
                        // Our claim was taken over while we worked: the other worker's record wins.
                        None => continue,
                    }
                }
                Claim::InProgress { claim_expires_at } => {
                    waited_rounds += 1;
                    let waited = if waited_rounds > 3 {
                        Waited::Deadline { claim_expires_at }
                    } else {
                        self.wait_for_claim(&id, claim_expires_at, deadline).await?
                    };
                    match waited {
                        Waited::Ready(record) => {
                            let record = self
                                .verify_hit(*record, &strong_hash(&body, &joined))
                                .await?;
                            self.counters.uploads_deduplicated.increment(1);
                            return Ok(UploadOutcome {
                                record,
                                deduplicated: true,
                            });
                        }
                        Waited::Ended => {}
                        Waited::Deadline { claim_expires_at } => {
                            let left = claim_expires_at.since(self.ports.clock.now());
                            return Err(FlowError::StillProcessing {
                                id,
                                retry_after: left.clamp(RETRY_AFTER_MIN, RETRY_AFTER_MAX),
                            });
                        }
                    }
                }
            }
        }
    }

    /// A record found under an MD5 is the bytes we hold only if their SHA-256s agree too:
    /// MD5 collisions between two different photos are cheap to make. A mismatch is refused
    /// (`409 hash_collision`), counted and logged, and never linked. A record written before
    /// strong hashes were recorded is checked against its original once, and given the hash.
    pub async fn verify_hit(
        &self,
        record: ImageRecord,
        ours: &ContentHash,
    ) -> Result<ImageRecord, FlowError> {
        let theirs = match record.sha256() {
            Some(theirs) => *theirs,
            None => self.adopt_strong_hash(&record).await?,
        };
        if &theirs != ours {
            self.counters.hash_collisions.increment(1);
            error!(image_id = %record.id, ours = %ours, theirs = %theirs, "an MD5 collision: the bytes differ from the stored image's; refused");
            return Err(FlowError::HashCollision(record.id));
        }
        Ok(record)
    }

    /// The SHA-256 of a record's original (one written before strong hashes), recorded on it.
    async fn adopt_strong_hash(&self, record: &ImageRecord) -> Result<ContentHash, FlowError> {
        let original = self
            .ports
            .blobs
            .get(&BlobKey::original(&record.id, &record.generation))
            .await?;
        let hash = ContentHash::of_bytes(&original);
        // Conditional on the generation, and on no hash yet: a race changes nothing.
        self.ports
            .images
            .set_strong_hash(&record.id, &record.generation, &hash)
            .await?;
        info!(image_id = %record.id, "recorded the SHA-256 of an image stored before strong hashes");
        Ok(hash)
    }

    /// The images among `photos` (MD5 and SHA-256 of each) that are stored, each refreshed as
    /// an upload of its bytes would refresh it (its orphan expiry pushed back, an expired one
    /// not yet collected revived), in the order of `photos` (each once): a client that hashed
    /// its photos asks first and sends only the others. Only a record whose SHA-256 is the one
    /// asked about is known: one of another (an MD5 collision) or of none (stored before strong
    /// hashes; its upload checks it against its original) is left for the client to upload.
    /// An id without a record stays without one: only ids with a ready record are claimed, and
    /// a record collected in between gets the claim back at once.
    pub async fn known_images(
        &self,
        owner: &Owner,
        photos: &[(ImageId, ContentHash)],
    ) -> Result<Vec<ImageRecord>, FlowError> {
        let mut seen = std::collections::HashSet::with_capacity(photos.len());
        let photos: Vec<&(ImageId, ContentHash)> =
            photos.iter().filter(|(id, _)| seen.insert(id)).collect();
        let ids: Vec<ImageId> = photos.iter().map(|(id, _)| id.clone()).collect();
        let asked: std::collections::HashMap<&ImageId, &ContentHash> =
            photos.iter().map(|(id, h)| (id, h)).collect();
        let same = |record: &ImageRecord| record.sha256() == asked.get(&record.id).copied();
        let stored = self.ports.images.get_many(&ids).await?;
        // Each known photo is the caller's upload from now on, filed before its refresh (as an
        // upload files its uploader before its claim: `erase`).
        let known: Vec<ImageRecord> = stored
            .into_iter()
            .filter(|r| r.is_ready() && same(r))
            .collect();
        futures_util::future::try_join_all(known.iter().map(|r| self.note_uploader(owner, &r.id)))
            .await?;
        let refreshes = known
            .into_iter()
            .map(|record| self.refresh_known(record.id));
        let refreshed = futures_util::future::try_join_all(refreshes).await?;
        Ok(refreshed.into_iter().flatten().filter(same).collect())
    }

    /// The claim an upload of `id`'s bytes would make, for an id that had a ready record a
    /// moment ago.
    pub(crate) async fn refresh_known(
        &self,
        id: ImageId,
    ) -> Result<Option<ImageRecord>, FlowError> {
        match self.claim(&id).await? {
            Claim::Existing(record) => Ok(Some(record)),
            Claim::InProgress { .. } => Ok(None),
            // Collected meanwhile: the claim just made is given back, and the client uploads.
            Claim::New { generation } => {
                self.ports.images.abandon(&id, &generation).await?;
                Ok(None)
            }
        }
    }

    /// What an upload of `id`'s bytes claims now (see [`ImageIndex::claim`](imgest_core::ports::ImageIndex::claim)),
    /// proposing a fresh generation: a claim made again after its answer was lost finds it.
    async fn claim(&self, id: &ImageId) -> Result<Claim, StoreError> {
        let now = self.ports.clock.now();
        let (claim_ttl, orphan_ttl) = (self.policy.claim_ttl, self.policy.orphan_ttl);
        self.ports
            .images
            .claim(id, &Generation::random(), now, claim_ttl, orphan_ttl)
            .await
    }

    /// Counts one upload against `owner`'s limit (`IMGEST_UPLOAD_RPM` per minute, shared by
    /// every process through the rate limiter); `RateLimited` past it. Open mode (`None`) has
    /// no per-caller limit.
    pub async fn admit_upload(&self, owner: Option<&Owner>) -> Result<(), FlowError> {
        let Some(owner) = owner else {
            return Ok(());
        };
        let now = self.ports.clock.now();
        // `/` is in no client id, so these budgets never mix with the crawls' per-client ones.
        let grant = self
            .ports
            .rate_limits
            .acquire(
                &format!("upload/{owner}"),
                1,
                self.policy.upload_rpm,
                UPLOAD_RATE_WINDOW,
                now,
            )
            .await?;
        if grant.granted == 0 {
            let retry_after = grant
                .retry_at
                .map_or(UPLOAD_RATE_WINDOW, |at| at.since(now));
            return Err(FlowError::RateLimited { retry_after });
        }
        Ok(())
    }

    /// Uploads bytes whose id is not known yet (the CLI's `process`, tests).
    pub async fn upload_bytes(&self, body: Bytes) -> Result<UploadOutcome, FlowError> {
        let id = ImageId::of_bytes(&body);
        self.upload(id, body).await
    }

    /// Stores bytes that an offer links a moment later (a crawled photo), whose MD5 the caller
    /// computed: like [`upload`](Self::upload), but new bytes are processed without a claim and
    /// their record is written once, after the files
    /// ([`create_ready`](imgest_core::ports::ImageIndex::create_ready)). The claim is what makes
    /// concurrent uploads of the same new bytes wait for one of them; a crawled URL is already
    /// downloaded once however many offers list it, so the same new bytes arrive at the same
    /// moment only under two URLs. Then both are processed, one record wins and the other run
    /// deletes its files. Known bytes (any record) go the claim's way, decoding nothing.
    ///
    /// `first_link` names the crawl change that will link the photo (the one that started its
    /// URL's download, read from the store): a new record may be created with that link
    /// counted ([`create_ready`](imgest_core::ports::ImageIndex::create_ready)).
    pub async fn store_fetched(
        &self,
        id: ImageId,
        body: Bytes,
        first_link: Option<KeyedLink>,
    ) -> Result<UploadOutcome, FlowError> {
        if body.is_empty() {
            return Err(FlowError::EmptyBody);
        }
        // A peek: new bytes are stored with a conditional write, and a record seen is claimed.
        if self.ports.images.peek(&id).await?.is_some() {
            return self.upload_queued(id, body).await;
        }
        self.refuse_if_blocked(&id).await?;
        let imaging = self.imaging()?;
        let checked = imaging
            .check_format(body.len(), &body[..MAGIC_LEN.min(body.len())])
            .and_then(|_| imaging.inspect(&body).map(drop));
        if let Err(e) = checked {
            self.counters.pipeline_rejections.increment(1);
            return Err(e.into());
        }
        let generation = Generation::random();
        match self
            .process_and_store(
                id.clone(),
                generation,
                body.clone(),
                Record::New,
                Admission::Wait,
                first_link,
            )
            .await?
        {
            Some(record) => {
                self.counters.uploads_new.increment(1);
                Ok(UploadOutcome {
                    record,
                    deduplicated: false,
                })
            }
            // Stored meanwhile (the same bytes under another URL, or uploaded): theirs wins.
            None => self.upload_queued(id, body).await,
        }
    }

    /// Waits until another caller's claim on `id` ends, or until `deadline`.
    async fn wait_for_claim(
        &self,
        id: &ImageId,
        mut claim_expires_at: Timestamp,
        deadline: tokio::time::Instant,
    ) -> Result<Waited, FlowError> {
        let mut poll = WAIT_FIRST_POLL;
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(Waited::Deadline { claim_expires_at });
            }
            tokio::time::sleep(poll.min(deadline - now)).await;
            poll = (poll * 2).min(WAIT_MAX_POLL);
            let now = self.ports.clock.now();
            match self.ports.images.get(id).await? {
                Some(record) if record.is_ready() => return Ok(Waited::Ready(Box::new(record))),
                Some(record) if !record.is_expired(now) => {
                    if let ImageState::Processing {
                        claim_expires_at: at,
                    } = record.state
                    {
                        claim_expires_at = at;
                    }
                }
                _ => return Ok(Waited::Ended),
            }
        }
    }

    /// Runs the pipeline and writes files under `generation`, then the record: the completion
    /// of our claim, or a new record. Returns `None` if the claim was lost meanwhile, or if a
    /// record appeared meanwhile. Runs as its own task, so a client that disconnects does not
    /// cancel it half-way; the guard cleans up on any failure, panic included.
    async fn process_and_store(
        &self,
        id: ImageId,
        generation: Generation,
        body: Bytes,
        record: Record,
        admission_when_full: Admission,
        first_link: Option<KeyedLink>,
    ) -> Result<Option<ImageRecord>, FlowError> {
        let ports = self.ports.clone();
        let pipeline = Arc::clone(self.imaging()?);
        let slots = Arc::clone(&self.process_slots);
        let admission = Arc::clone(&self.admission);
        let budget = self.budget.clone();
        let counters = self.counters.clone();
        let orphan_ttl = self.policy.orphan_ttl;
        let similar = self.policy.similar;
        let version = pipeline.version().clone();
        let task = tokio::spawn(async move {
            let mut guard = ClaimGuard::new(ports.clone(), id.clone(), generation.clone(), record);
            let admitted = match admission_when_full {
                Admission::Refuse => admission.try_acquire_owned().ok(),
                Admission::Wait => admission.acquire_owned().await.ok(),
            };
            let Some(_admitted) = admitted else {
                guard.release().await;
                return Err(FlowError::Overloaded);
            };
            let processed = decode(&pipeline, &budget, &slots, &body).await?;
            counters.pipeline_runs.increment(1);
            let processed = match processed {
                Ok(p) => p,
                Err(e) => {
                    counters.pipeline_rejections.increment(1);
                    guard.release().await;
                    return Err(FlowError::Image(e));
                }
            };
            let source = crate::similar::signature_file(pipeline.as_ref(), similar, &processed);
            let ready = Stage::Store
                .time_async(write_files(
                    &ports,
                    &id,
                    &generation,
                    Source::sent(&body),
                    processed,
                    version,
                    &counters,
                ))
                .await?;
            let now = ports.clock.now();
            let written = match record {
                Record::Claimed => ports
                    .images
                    .complete(&id, &generation, ready, now, orphan_ttl)
                    .await
                    .map(Some),
                Record::New => {
                    ports
                        .images
                        .create_ready(
                            &id,
                            &generation,
                            ready,
                            now,
                            orphan_ttl,
                            first_link.as_ref(),
                        )
                        .await
                }
            };
            let write = match record {
                Record::Claimed => RecordWrite::Complete,
                Record::New => RecordWrite::CreateReady,
            };
            let answer = match &written {
                Ok(Some(record)) => Answer::Applied(Box::new(record.clone())),
                Ok(None) | Err(StoreError::Conflict(_)) => Answer::Refused,
                Err(e) => Answer::Failed(e),
            };
            match settle_files(&ports, &counters, &id, &generation, write, answer).await {
                FilesFate::Ours(record) => {
                    crate::similar::index_stored(&ports, &pipeline, similar, &record, source)
                        .await;
                    Ok(Some(stored(&mut guard, *record)))
                }
                // Someone else's record (or none, and ours can never be written): theirs wins.
                FilesFate::Delete => {
                    info!(image_id = %id, generation = %generation, "the record was written by another run meanwhile");
                    guard.release_files_only().await;
                    Ok(None)
                }
                // Unknown: the files stay (a file without a record is garbage the sweep
                // collects; a record without its files is a broken image). Our claim, if it is
                // still there, is given back: then our completion can never land.
                FilesFate::Leave => {
                    guard.disarm();
                    if record == Record::Claimed
                        && let Err(e) = ports.images.abandon(&id, &generation).await
                    {
                        warn!(image_id = %id, generation = %generation, error = %e, "could not remove a claim whose completion is unknown; it expires by itself");
                    }
                    Err(FlowError::Store(written.err().unwrap_or_else(|| {
                        StoreError::Conflict(format!(
                            "image {id}: the record write of generation {generation} was refused unexplained"
                        ))
                    })))
                }
            }
        }
        .instrument(tracing::Span::current()));
        task.await
            .map_err(|e| FlowError::Internal(format!("upload task failed: {e}")))?
    }
}

/// How a wait for another caller's claim ended.
enum Waited {
    /// Its record is ready.
    Ready(Box<ImageRecord>),
    /// It ended without one (failed, or expired): claim again.
    Ended,
    /// Still held at the deadline; it expires at `claim_expires_at`.
    Deadline { claim_expires_at: Timestamp },
}

/// A record of ours is written: the files are its now.
fn stored(guard: &mut ClaimGuard, record: ImageRecord) -> ImageRecord {
    guard.disarm();
    info!(image_id = %record.id, generation = %record.generation, "image processed");
    record
}

/// What a new photo does when as many are being processed or wait for a slot as the process
/// admits (`IMGEST_MAX_PENDING_UPLOADS` beyond its decode slots).
#[derive(Debug, Clone, Copy)]
enum Admission {
    /// An upload: refused (429, to retry), so a flood of uploads holds no more bodies.
    Refuse,
    /// A downloaded photo: waits its turn. Its body is held in the memory budget already
    /// (the fetch function's holds bound how many there are), and refusing it would put the
    /// whole download back on its queue, to be fetched again.
    Wait,
}

/// Which record the files of a processing run end up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    /// The caller's claim, completed.
    Claimed,
    /// A record created once the files are written (no claim: see [`Service::store_fetched`]).
    New,
}

/// Partial work of a processing run: unless disarmed, dropping it removes the generation's files
/// and the claim if there is one (in a background task, so cancellation and panics are covered
/// too).
struct ClaimGuard {
    ports: Ports,
    id: ImageId,
    generation: Generation,
    claimed: bool,
    armed: bool,
}

impl ClaimGuard {
    fn new(ports: Ports, id: ImageId, generation: Generation, record: Record) -> Self {
        Self {
            ports,
            id,
            generation,
            claimed: record == Record::Claimed,
            armed: true,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }

    /// Cleans up now (files, then the claim if any) and disarms.
    async fn release(&mut self) {
        self.armed = false;
        cleanup(
            self.ports.clone(),
            self.id.clone(),
            self.generation.clone(),
            self.claimed,
        )
        .await;
    }

    /// Removes our generation's files but leaves the (no longer ours) claim alone.
    async fn release_files_only(&mut self) {
        self.armed = false;
        cleanup(
            self.ports.clone(),
            self.id.clone(),
            self.generation.clone(),
            false,
        )
        .await;
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if self.armed
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            handle.spawn(cleanup(
                self.ports.clone(),
                self.id.clone(),
                self.generation.clone(),
                self.claimed,
            ));
        }
    }
}

/// Best effort: what it cannot delete, the sweeper deletes after its grace period.
async fn cleanup(ports: Ports, id: ImageId, generation: Generation, abandon_claim: bool) {
    if let Err(e) = delete_generation_files(&ports, &id, &generation, FileScope::Variants).await {
        warn!(image_id = %id, generation = %generation, error = %e, "could not remove files of a failed upload; the sweeper will");
    }
    if abandon_claim && let Err(e) = ports.images.abandon(&id, &generation).await {
        warn!(image_id = %id, generation = %generation, error = %e, "could not remove a failed claim; it expires by itself");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use imgest_core::ports::{ImageIndex, SystemClock};
    use imgest_embedded::{FsBlobStore, SqliteStore};
    use imgest_pipeline::{Pipeline, PipelineConfig};
    use imgest_settings::Settings;
    use imgest_testing::crashing::{Fault, Faults, FaultyImages};

    fn service(dir: &std::path::Path, max_pending_uploads: usize) -> Service {
        let store = Arc::new(SqliteStore::open_in_memory().unwrap());
        service_with(dir, max_pending_uploads, store.clone(), store)
    }

    fn service_with(
        dir: &std::path::Path,
        max_pending_uploads: usize,
        store: Arc<SqliteStore>,
        images: Arc<dyn imgest_core::ports::ImageIndex>,
    ) -> Service {
        let ports = Ports {
            blobs: Arc::new(FsBlobStore::new(dir)),
            images,
            offers: store.clone(),
            uploads: store.clone(),
            upload_urls: Arc::new(imgest_embedded::LocalUploadUrls::new(
                "http://127.0.0.1:8080",
            )),
            checkpoints: store.clone(),
            documents: store.clone(),
            rate_limits: store.clone(),
            messages: Arc::new(imgest_embedded::sqlite::QueueSender::new(
                store.clone(),
                Arc::new(SystemClock),
            )),
            queue: Some(store),
            clock: Arc::new(SystemClock),
        };
        let mut policy = Policy::from_settings(&Settings::defaults());
        policy.process_concurrency = 1;
        policy.max_pending_uploads = max_pending_uploads;
        Service::new(ports, policy).with_imaging(Arc::new(Pipeline::new(PipelineConfig::default())))
    }

    fn photo() -> Bytes {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/photo.jpg"
        );
        Bytes::from(std::fs::read(path).unwrap())
    }

    #[tokio::test]
    async fn a_downloaded_photo_beyond_the_admission_limit_waits_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let service = Arc::new(service(dir.path(), 0));
        let held = Arc::clone(&service.admission)
            .acquire_owned()
            .await
            .unwrap();
        let id = ImageId::of_bytes(&photo());
        let mut stored = {
            let service = Arc::clone(&service);
            let id = id.clone();
            tokio::spawn(async move { service.store_fetched(id, photo(), None).await })
        };
        // A refusal would come back at once (an upload's does, above): this one waits for
        // the permit.
        let early = tokio::time::timeout(std::time::Duration::from_millis(500), &mut stored).await;
        assert!(early.is_err(), "not waiting: {early:?}");
        drop(held);
        let outcome = stored.await.unwrap().unwrap();
        assert_eq!(outcome.record.id, id);
        assert!(!outcome.deduplicated);
    }

    #[tokio::test]
    async fn a_new_photo_beyond_the_admission_limit_is_refused_and_leaves_no_claim() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path(), 0);
        // Every admission permit is taken, as if a photo were being decoded.
        let held = Arc::clone(&service.admission)
            .acquire_owned()
            .await
            .unwrap();
        let err = service.upload_bytes(photo()).await.unwrap_err();
        assert!(matches!(err, FlowError::Overloaded), "{err:?}");
        assert_eq!(err.kind(), "too_many_requests");
        assert!(err.is_retryable());
        let id = ImageId::of_bytes(&photo());
        assert_eq!(
            service.ports.images.get(&id).await.unwrap(),
            None,
            "the claim was released"
        );

        drop(held);
        let outcome = service.upload_bytes(photo()).await.unwrap();
        assert!(!outcome.deduplicated);
    }

    /// The crash model's index for one request: its `write`th write applied and answered with
    /// `fault`.
    fn misanswering(store: &Arc<SqliteStore>, fault: Fault) -> Arc<dyn ImageIndex> {
        Arc::new(FaultyImages {
            inner: store.clone(),
            faults: Faults::new(fault),
        })
    }

    #[tokio::test]
    async fn a_record_written_whose_answer_was_lost_keeps_its_files() {
        let png = Bytes::from(
            std::fs::read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/fixtures/small.png"
            ))
            .unwrap(),
        );
        // The record write is a crawled photo's 1st write (`create_ready`, no claim) and an
        // upload's 2nd (its claim, then `complete`); answered as timed out or as refused.
        for fault in [Fault::TimedOutAfterApply(0), Fault::RefusedAfterApply(0)] {
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(SqliteStore::open_in_memory().unwrap());
            let at = |n| match fault {
                Fault::TimedOutAfterApply(_) => Fault::TimedOutAfterApply(n),
                _ => Fault::RefusedAfterApply(n),
            };
            let crawling = service_with(dir.path(), 8, store.clone(), misanswering(&store, at(1)));
            let fetched = crawling
                .store_fetched(ImageId::of_bytes(&photo()), photo(), None)
                .await
                .unwrap();
            let uploading = service_with(dir.path(), 8, store.clone(), misanswering(&store, at(2)));
            let uploaded = uploading.upload_bytes(png.clone()).await.unwrap();
            for (service, outcome) in [(&crawling, fetched), (&uploading, uploaded)] {
                assert!(!outcome.deduplicated, "{fault:?}");
                assert_eq!(service.counts().record_answers_lost, 1, "{fault:?}");
                let record = store.get(&outcome.record.id).await.unwrap();
                assert_eq!(record.as_ref(), Some(&outcome.record), "{fault:?}");
                for key in outcome.record.file_keys() {
                    assert!(
                        service.ports.blobs.get(&key).await.is_ok(),
                        "{key} is kept ({fault:?})"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn a_dedup_hit_is_admitted_even_when_decoding_is_saturated() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path(), 0);
        service.upload_bytes(photo()).await.unwrap();
        let _held = Arc::clone(&service.admission)
            .acquire_owned()
            .await
            .unwrap();
        assert!(service.upload_bytes(photo()).await.unwrap().deduplicated);
    }
}
