//! Port wrappers for model-based tests: one [`Faults`] per simulated process, shared by the
//! wrappers of its [`BlobStore`], [`ImageIndex`] and [`OfferLinks`], numbers every storage call
//! the process makes and, as told, lets the process die at the nth call (before it is made, or
//! after it was made but before its answer is seen: every later call fails too, as nothing of a
//! dead process runs), or stops it before its nth call until the test resumes it (another
//! process acts meanwhile). So a flow can be stopped between any two storage writes.
//!
//! Two faults misanswer a write and let the process live on, as a lost answer does on a real
//! network: its nth *write* is applied and then answered as if it had been refused (the same
//! request made again, as the AWS SDK retries a request whose answer it did not get: a
//! conditional write then meets its own result), or as a timeout. Every write of the wrapped
//! ports can be hit; reads are numbered apart, so the nth write is hit whatever reads come first.
//!
//! [`ClockedBlobs`] stamps files with the test's clock instead of the real one (a directory's
//! mtime, S3's `LastModified`), so the sweep's grace period follows a clock the test moves.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::watch;

use imgest_core::domain::{
    BlobKey, ContentHash, Generation, ImageId, ImageRecord, JobPart, OfferKey, Signature,
    ThumbHash, Timestamp,
};
use imgest_core::ports::{
    BlobPage, BlobStore, Claim, Clock, ImageIndex, KeyedLink, LinkError, OfferLinks, PhotoListPage,
    ReadyImage, ScanPage, StoreError,
};

/// What happens to a process at its nth storage call (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// The process dies as it makes its nth call: the call is not made.
    CrashBefore(u32),
    /// The nth call is made, then the process dies before it sees the answer.
    CrashAfter(u32),
    /// The process stops before its nth call until [`Faults::resume`]: every call from the nth
    /// on waits.
    PauseAt(u32),
    /// The nth *write* is applied, its answer is lost and the very request is made again (an
    /// SDK's retry): the process sees the second answer (a conditional write: refused).
    RefusedAfterApply(u32),
    /// The nth *write* is applied, then the process sees a timeout (`Unavailable`).
    TimedOutAfterApply(u32),
}

#[derive(Debug, Default, Clone, Copy)]
struct Calls {
    /// Calls made and not answered yet (not counting waiting ones).
    inflight: u32,
    /// Calls waiting for [`Faults::resume`].
    waiting: u32,
}

/// One simulated process: its call counter, its fault and what it did.
pub struct Faults {
    fault: Fault,
    calls: AtomicU32,
    writes: AtomicU32,
    dead: AtomicBool,
    misanswered: AtomicBool,
    state: watch::Sender<Calls>,
    resumed: watch::Sender<bool>,
    log: Mutex<Vec<String>>,
    claimed: Mutex<Option<Generation>>,
    made_ready: Mutex<Vec<(ImageId, Generation)>>,
    offer_written: Mutex<Option<u64>>,
}

/// Orders the offer writes of every process: which one was the last.
static OFFER_WRITES: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn died(n: u32) -> StoreError {
    StoreError::Unavailable {
        message: format!("the process died at its storage call {n}"),
        source: None,
    }
}

impl Faults {
    pub fn new(fault: Fault) -> Arc<Self> {
        Arc::new(Self {
            fault,
            calls: AtomicU32::new(0),
            writes: AtomicU32::new(0),
            dead: AtomicBool::new(false),
            misanswered: AtomicBool::new(false),
            state: watch::Sender::new(Calls::default()),
            resumed: watch::Sender::new(false),
            log: Mutex::new(Vec::new()),
            claimed: Mutex::new(None),
            made_ready: Mutex::new(Vec::new()),
            offer_written: Mutex::new(None),
        })
    }

    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Whether the process died (a crash fault was reached).
    pub fn crashed(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Whether a write was answered wrongly (refused or timed out after it was applied): the
    /// process lived on, but what it did with the answer is as uncertain as after a crash.
    pub fn misanswered(&self) -> bool {
        self.misanswered.load(Ordering::SeqCst)
    }

    /// Storage calls made (or attempted) so far.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The calls in order, `"n:port.method"`.
    pub fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// The generation of the last claim this process won (`Claim::New`).
    pub fn claimed(&self) -> Option<Generation> {
        lock(&self.claimed).clone()
    }

    /// The ready records this process wrote (`complete`, `create_ready`), answered or not.
    pub fn made_ready(&self) -> Vec<(ImageId, Generation)> {
        lock(&self.made_ready).clone()
    }

    /// When this process last changed an offer (`set_photos`, `set_photos_keyed`,
    /// `delete_offer` applied, answered or not): a number that grows with every such change by
    /// any process.
    pub fn offer_written(&self) -> Option<u64> {
        *lock(&self.offer_written)
    }

    fn wrote_offer(&self) {
        *lock(&self.offer_written) = Some(OFFER_WRITES.fetch_add(1, Ordering::SeqCst) + 1);
    }

    /// Returns once the process is stopped: a call waits for [`resume`](Self::resume) and no
    /// other call is in flight, so storage holds still until it is resumed.
    pub async fn stopped(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|c| c.waiting > 0 && c.inflight == 0).await;
    }

    /// Lets a stopped process go on (from then on it runs without faults).
    pub fn resume(&self) {
        self.resumed.send_replace(true);
    }

    /// Makes one storage call through the fault: `f` makes the request (called twice when the
    /// fault replays it); `write` says whether it changes storage.
    async fn call<T, E, Fut>(&self, what: &str, write: bool, f: impl Fn() -> Fut) -> Result<T, E>
    where
        E: From<StoreError>,
        Fut: Future<Output = Result<T, E>>,
    {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let w = if write {
            self.writes.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            0
        };
        lock(&self.log).push(format!("{n}:{what}"));
        if self.crashed() {
            return Err(died(n).into());
        }
        match self.fault {
            Fault::CrashBefore(k) if n == k => {
                self.dead.store(true, Ordering::SeqCst);
                return Err(died(n).into());
            }
            Fault::PauseAt(k) if n >= k => {
                self.state.send_modify(|c| c.waiting += 1);
                let mut rx = self.resumed.subscribe();
                let _ = rx.wait_for(|r| *r).await;
                self.state.send_modify(|c| c.waiting -= 1);
            }
            _ => {}
        }
        self.state.send_modify(|c| c.inflight += 1);
        let out = f().await;
        let out = match self.fault {
            Fault::RefusedAfterApply(k) if w == k && out.is_ok() => {
                self.misanswered.store(true, Ordering::SeqCst);
                lock(&self.log).push(format!("{n}:{what} applied, answered as made again"));
                f().await
            }
            Fault::TimedOutAfterApply(k) if w == k => {
                self.misanswered.store(true, Ordering::SeqCst);
                lock(&self.log).push(format!("{n}:{what} applied, answered as timed out"));
                Err(StoreError::Unavailable {
                    message: format!("storage call {n} timed out"),
                    source: None,
                }
                .into())
            }
            _ => out,
        };
        self.state.send_modify(|c| c.inflight -= 1);
        if matches!(self.fault, Fault::CrashAfter(k) if k == n) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(died(n).into());
        }
        out
    }
}

/// A [`BlobStore`] of one simulated process.
pub struct FaultyBlobs {
    pub inner: Arc<dyn BlobStore>,
    pub faults: Arc<Faults>,
}

#[async_trait]
impl BlobStore for FaultyBlobs {
    async fn put(&self, key: &BlobKey, body: Bytes, content_type: &str) -> Result<(), StoreError> {
        let what = format!("blobs.put {key}");
        self.faults
            .call(&what, true, || {
                self.inner.put(key, body.clone(), content_type)
            })
            .await
    }

    async fn get(&self, key: &BlobKey) -> Result<Bytes, StoreError> {
        self.faults
            .call("blobs.get", false, || self.inner.get(key))
            .await
    }

    async fn delete(&self, keys: &[BlobKey]) -> Result<(), StoreError> {
        let what = format!("blobs.delete {} keys", keys.len());
        self.faults
            .call(&what, true, || self.inner.delete(keys))
            .await
    }

    async fn list(
        &self,
        prefix: &str,
        after: Option<&BlobKey>,
        limit: usize,
    ) -> Result<BlobPage, StoreError> {
        let what = format!("blobs.list {prefix}");
        self.faults
            .call(&what, false, || self.inner.list(prefix, after, limit))
            .await
    }
}

/// An [`ImageIndex`] of one simulated process.
pub struct FaultyImages {
    pub inner: Arc<dyn ImageIndex>,
    pub faults: Arc<Faults>,
}

#[async_trait]
impl ImageIndex for FaultyImages {
    async fn claim(
        &self,
        id: &ImageId,
        proposed: &Generation,
        now: Timestamp,
        claim_ttl: Duration,
        orphan_ttl: Duration,
    ) -> Result<Claim, StoreError> {
        self.faults
            .call("images.claim", true, || async {
                let claim = self
                    .inner
                    .claim(id, proposed, now, claim_ttl, orphan_ttl)
                    .await;
                if let Ok(Claim::New { generation }) = &claim {
                    *lock(&self.faults.claimed) = Some(generation.clone());
                }
                claim
            })
            .await
    }

    async fn complete(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<ImageRecord, StoreError> {
        self.faults
            .call("images.complete", true, || async {
                let done = self
                    .inner
                    .complete(id, generation, ready.clone(), now, orphan_ttl)
                    .await;
                if done.is_ok() {
                    lock(&self.faults.made_ready).push((id.clone(), generation.clone()));
                }
                done
            })
            .await
    }

    async fn create_ready(
        &self,
        id: &ImageId,
        generation: &Generation,
        ready: ReadyImage,
        now: Timestamp,
        orphan_ttl: Duration,
        first_link: Option<&KeyedLink>,
    ) -> Result<Option<ImageRecord>, StoreError> {
        self.faults
            .call("images.create_ready", true, || async {
                let done = self
                    .inner
                    .create_ready(id, generation, ready.clone(), now, orphan_ttl, first_link)
                    .await;
                if matches!(done, Ok(Some(_))) {
                    lock(&self.faults.made_ready).push((id.clone(), generation.clone()));
                }
                done
            })
            .await
    }

    async fn abandon(&self, id: &ImageId, generation: &Generation) -> Result<(), StoreError> {
        self.faults
            .call("images.abandon", true, || {
                self.inner.abandon(id, generation)
            })
            .await
    }

    async fn get(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        self.faults
            .call("images.get", false, || self.inner.get(id))
            .await
    }

    async fn peek(&self, id: &ImageId) -> Result<Option<ImageRecord>, StoreError> {
        self.faults
            .call("images.peek", false, || self.inner.peek(id))
            .await
    }

    async fn get_many(&self, ids: &[ImageId]) -> Result<Vec<ImageRecord>, StoreError> {
        self.faults
            .call("images.get_many", false, || self.inner.get_many(ids))
            .await
    }

    async fn expired_in(
        &self,
        part: JobPart,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<ImageRecord>, StoreError> {
        self.faults
            .call("images.expired", false, || {
                self.inner.expired_in(part, now, limit)
            })
            .await
    }

    async fn delete_if_expired(
        &self,
        id: &ImageId,
        generation: &Generation,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.faults
            .call("images.delete_if_expired", true, || {
                self.inner.delete_if_expired(id, generation, now)
            })
            .await
    }

    async fn replace_files(
        &self,
        id: &ImageId,
        expected: &Generation,
        generation: &Generation,
        ready: ReadyImage,
        keep_previous_until: Timestamp,
    ) -> Result<Option<ImageRecord>, StoreError> {
        self.faults
            .call("images.replace_files", true, || async {
                let done = self
                    .inner
                    .replace_files(id, expected, generation, ready.clone(), keep_previous_until)
                    .await;
                if matches!(done, Ok(Some(_))) && generation != expected {
                    lock(&self.faults.made_ready).push((id.clone(), generation.clone()));
                }
                done
            })
            .await
    }

    async fn set_strong_hash(
        &self,
        id: &ImageId,
        generation: &Generation,
        sha256: &ContentHash,
    ) -> Result<bool, StoreError> {
        self.faults
            .call("images.set_strong_hash", true, || {
                self.inner.set_strong_hash(id, generation, sha256)
            })
            .await
    }

    async fn set_thumbhash(
        &self,
        id: &ImageId,
        generation: &Generation,
        thumbhash: &ThumbHash,
    ) -> Result<bool, StoreError> {
        self.faults
            .call("images.set_thumbhash", true, || {
                self.inner.set_thumbhash(id, generation, thumbhash)
            })
            .await
    }

    async fn set_signature(
        &self,
        id: &ImageId,
        generation: &Generation,
        signature: &Signature,
    ) -> Result<bool, StoreError> {
        self.faults
            .call("images.set_signature", true, || {
                self.inner.set_signature(id, generation, signature)
            })
            .await
    }

    async fn correct_link_count(
        &self,
        seen: &ImageRecord,
        count: u32,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.faults
            .call("images.correct_link_count", true, || {
                self.inner.correct_link_count(seen, count, now, orphan_ttl)
            })
            .await
    }

    async fn keyed_links(&self, id: &ImageId) -> Result<Vec<OfferKey>, StoreError> {
        self.faults
            .call("images.keyed_links", false, || self.inner.keyed_links(id))
            .await
    }

    async fn scan(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StoreError> {
        self.faults
            .call("images.scan", false, || {
                self.inner.scan(segment, segments, cursor, limit)
            })
            .await
    }
}

/// An [`OfferLinks`] of one simulated process.
pub struct FaultyOffers {
    pub inner: Arc<dyn OfferLinks>,
    pub faults: Arc<Faults>,
}

#[async_trait]
impl OfferLinks for FaultyOffers {
    async fn set_photos(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError> {
        self.faults
            .call("offers.set_photos", true, || async {
                let done = self.inner.set_photos(offer, images, now, orphan_ttl).await;
                if done.is_ok() {
                    self.faults.wrote_offer();
                }
                done
            })
            .await
    }

    async fn set_photos_keyed(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        key: &str,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError> {
        self.faults
            .call("offers.set_photos_keyed", true, || async {
                let done = self
                    .inner
                    .set_photos_keyed(offer, images, key, now, orphan_ttl)
                    .await;
                if done.is_ok() {
                    self.faults.wrote_offer();
                }
                done
            })
            .await
    }

    async fn offers_linking(
        &self,
        image: &ImageId,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<imgest_core::ports::OfferPage, StoreError> {
        self.faults
            .call("offers.offers_linking", false, || {
                self.inner.offers_linking(image, cursor, limit)
            })
            .await
    }

    async fn scan_photo_lists(
        &self,
        segment: u32,
        segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PhotoListPage, StoreError> {
        self.faults
            .call("offers.scan_photo_lists", false, || {
                self.inner
                    .scan_photo_lists(segment, segments, cursor, limit)
            })
            .await
    }

    async fn linking_clients(
        &self,
        image: &ImageId,
    ) -> Result<Vec<imgest_core::domain::ClientId>, StoreError> {
        self.faults
            .call("offers.linking_clients", false, || {
                self.inner.linking_clients(image)
            })
            .await
    }

    async fn photos(&self, offer: &OfferKey) -> Result<Option<Vec<ImageId>>, StoreError> {
        self.faults
            .call("offers.photos", false, || self.inner.photos(offer))
            .await
    }

    async fn delete_offer(
        &self,
        offer: &OfferKey,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.faults
            .call("offers.delete_offer", true, || async {
                let done = self.inner.delete_offer(offer, now, orphan_ttl).await;
                if done.is_ok() {
                    self.faults.wrote_offer();
                }
                done
            })
            .await
    }
}

/// A [`BlobStore`] whose files are stamped with `clock` when written (listings report that
/// time as their `last_modified`): files written before this wrapper keep the store's time.
pub struct ClockedBlobs {
    inner: Arc<dyn BlobStore>,
    clock: Arc<dyn Clock>,
    written: Mutex<HashMap<BlobKey, Timestamp>>,
}

impl ClockedBlobs {
    pub fn new(inner: Arc<dyn BlobStore>, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            clock,
            written: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl BlobStore for ClockedBlobs {
    async fn put(&self, key: &BlobKey, body: Bytes, content_type: &str) -> Result<(), StoreError> {
        let now = self.clock.now();
        self.inner.put(key, body, content_type).await?;
        lock(&self.written).insert(key.clone(), now);
        Ok(())
    }

    async fn get(&self, key: &BlobKey) -> Result<Bytes, StoreError> {
        self.inner.get(key).await
    }

    async fn delete(&self, keys: &[BlobKey]) -> Result<(), StoreError> {
        self.inner.delete(keys).await
    }

    async fn list(
        &self,
        prefix: &str,
        after: Option<&BlobKey>,
        limit: usize,
    ) -> Result<BlobPage, StoreError> {
        let mut page = self.inner.list(prefix, after, limit).await?;
        let written = lock(&self.written);
        for blob in &mut page.blobs {
            if let Some(at) = written.get(&blob.key) {
                blob.last_modified = *at;
            }
        }
        Ok(page)
    }
}
