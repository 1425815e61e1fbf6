//! A model-based randomized test of the storage invariants, with crashes and pauses injected.
//!
//! Each history is a short random sequence of steps by simulated processes over one store:
//! uploads, crawled photos (`store_fetched` naming the crawl's link, then a keyed link), links,
//! relinks, reorders, unlinks, offer deletions, expiry (the clock past the orphan TTL), GC and
//! sweeps, and redeliveries of a crawl's settling. Each process runs its flow through the `Service`
//! directly, over port wrappers (`testing::crashing`) that may let it die at its nth storage
//! call (before or after the call is made; the request is retried later, as a client or a
//! redelivered message would), stop it there while other processes act (then it goes on), or
//! apply its nth write and then answer it as refused (the request made again, as the SDK
//! retries a lost answer) or as timed out (the process lives on; a failed request is retried).
//! After each GC or sweep, and after each history (everything finished or retried, then one
//! sweep past the grace period), the invariants are checked:
//!
//! 1. every ready record's files (original and variants) exist (also after every GC and sweep);
//! 2. every image an offer lists has a ready record;
//! 3. after the final sweep, no image file is left without a record of its generation;
//! 4. no content was decoded more often than ready records of it were written, except where a
//!    crash or a pause touched it (those extra decodes are counted and printed);
//! 5. every offer's photo list is the last one written, in order;
//! 6. every ready record's `link_count` is the number of offers listing it (on DynamoDB, at
//!    least that for photos a crawl's keyed link touched: `docs/consistency.md`, "Keyed links").
//!
//! A run of at least 50 histories fails unless it met every kind of fault (crashes, misanswered
//! writes, pauses, and the retries after them): histories that met none would prove nothing.
//!
//! `IMGEST_MODEL_HISTORIES=n` sets how many histories run (default 2000 embedded, 100 on AWS);
//! `IMGEST_MODEL_SEED=s` replays one seed (its history is printed when it fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fastrand::Rng;
use imgest_aws::{DynamoStore, S3BlobStore};
use imgest_core::domain::{IMAGE_AREAS, ImageId, ImageRecord, ImageState, OfferId, OfferKey};
use imgest_core::ports::{BlobStore, Clock, ImageIndex, KeyedLink, ManualClock, OfferLinks};
use imgest_embedded::sqlite::QueueSender;
use imgest_embedded::{FsBlobStore, LocalUploadUrls, SqliteStore};
use imgest_flows::sweep::{SweepOptions, SweepReport};
use imgest_flows::{FlowError, Policy, Ports, Service};
use imgest_pipeline::{Pipeline, PipelineConfig};
use imgest_settings::Settings;
use imgest_testing::crashing::{
    ClockedBlobs, Fault, Faults, FaultyBlobs, FaultyImages, FaultyOffers,
};
use tokio::task::JoinHandle;

const ORPHAN_TTL: Duration = Duration::from_secs(3600);
const CLAIM_TTL: Duration = Duration::from_secs(120);
const SWEEP_GRACE: Duration = Duration::from_secs(86_400);
const CONTENTS: usize = 3;
const OFFERS: usize = 2;
/// A resumed or retried flow that does not finish in this long is stuck: the test fails
/// (a hang guard, not a timing assertion).
const STUCK: Duration = Duration::from_secs(60);

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The seeds to run: `IMGEST_MODEL_SEED` alone, or `IMGEST_MODEL_HISTORIES` (or `default`) of
/// them.
fn seeds(default: u64) -> Vec<u64> {
    if let Some(seed) = env_number("IMGEST_MODEL_SEED") {
        return vec![seed];
    }
    (1..=env_number("IMGEST_MODEL_HISTORIES").unwrap_or(default)).collect()
}

fn policy() -> Policy {
    let mut policy = Policy::from_settings(&Settings::defaults());
    policy.orphan_ttl = ORPHAN_TTL;
    policy.claim_ttl = CLAIM_TTL;
    policy.sweep_grace = SWEEP_GRACE;
    // The invariants are the model's subject, not the sweep's stop at a mass deletion.
    policy.sweep_max_share = 100;
    policy.process_concurrency = 1;
    policy.max_pending_uploads = 16;
    // Backfill tasks due at once: the clock moves only when a history says so.
    policy.backfill_rate = 0;
    policy
}

/// The stores a history runs over, with the ports no flow here uses from a scratch SQLite.
fn base_ports(
    blobs: Arc<dyn BlobStore>,
    images: Arc<dyn ImageIndex>,
    offers: Arc<dyn OfferLinks>,
    clock: Arc<ManualClock>,
) -> Ports {
    let scratch = Arc::new(SqliteStore::open_in_memory().unwrap());
    Ports {
        blobs: Arc::new(ClockedBlobs::new(blobs, clock.clone())),
        images,
        offers,
        uploads: scratch.clone(),
        upload_urls: Arc::new(LocalUploadUrls::new("http://127.0.0.1:9")),
        checkpoints: scratch.clone(),
        documents: scratch.clone(),
        rate_limits: scratch.clone(),
        messages: Arc::new(QueueSender::new(scratch.clone(), clock.clone())),
        queue: Some(scratch),
        clock,
    }
}

/// A tiny PNG, different for every (`salt`, `i`).
fn png(salt: u64, i: usize) -> Bytes {
    let img = image::RgbImage::from_fn(8, 8, |x, y| {
        let byte = (salt >> ((x % 8) * 8)) as u8;
        image::Rgb([byte, i as u8, (x * 8 + y) as u8])
    });
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    Bytes::from(out)
}

#[derive(Debug, Clone)]
enum Op {
    Upload(usize),
    /// A crawl's photos stored (`store_fetched`), then its change of the offer (keyed).
    Crawl {
        offer: usize,
        photos: Vec<usize>,
        key: String,
    },
    Link {
        offer: usize,
        photos: Vec<usize>,
    },
    DeleteOffer(usize),
    Gc,
    Sweep,
    /// Re-processing of one content by a service configured with the other variant set
    /// (`true`: with a size more), as a backfill task does.
    Backfill(usize, bool),
    /// The audit (files, and link counts from the offers), with no process stopped mid-change.
    Audit,
}

impl Op {
    fn contents(&self) -> Vec<usize> {
        match self {
            Op::Upload(c) | Op::Backfill(c, _) => vec![*c],
            Op::Crawl { photos, .. } => photos.clone(),
            _ => Vec::new(),
        }
    }
}

/// What a history shares with the processes it runs.
struct Ctx {
    ids: Vec<ImageId>,
    bodies: Vec<Bytes>,
    offers: Vec<OfferKey>,
    shards: Vec<String>,
}

/// One attempt of an op by one process.
struct Attempt {
    op: usize,
    faults: Arc<Faults>,
    /// The content each service's decodes count for (`None`: decodes nothing).
    services: Vec<(Option<usize>, Arc<Service>)>,
    handle: JoinHandle<Result<(), FlowError>>,
}

#[derive(Default, Debug, Clone, Copy)]
pub struct Totals {
    histories: u64,
    steps: u64,
    crashes: u64,
    misanswered: u64,
    pauses: u64,
    retries: u64,
    decodes: u64,
    extra_after_crash: u64,
    extra_after_pause: u64,
    refused_links: u64,
}

struct History {
    seed: u64,
    rng: Rng,
    base: Ports,
    clock: Arc<ManualClock>,
    ctx: Arc<Ctx>,
    /// Whether counts may be one too high after a keyed link (DynamoDB).
    keyed_counts_may_leak: bool,
    ops: Vec<Op>,
    paused: Vec<Attempt>,
    pending: Vec<usize>,
    crawls_done: Vec<usize>,
    uploaded: HashSet<usize>,
    /// Each offer's last list written, with when it was written (`Faults::offer_written`).
    model: HashMap<usize, (u64, Vec<usize>)>,
    keyed: HashSet<usize>,
    decodes: HashMap<usize, u64>,
    made_ready: HashMap<ImageId, u64>,
    crashed_contents: HashSet<usize>,
    paused_contents: HashSet<usize>,
    log: Vec<String>,
    totals: Totals,
}

impl History {
    fn new(seed: u64, base: Ports, clock: Arc<ManualClock>, keyed_counts_may_leak: bool) -> Self {
        let mut rng = Rng::with_seed(seed);
        let salt = rng.u64(..);
        let bodies: Vec<Bytes> = (0..CONTENTS).map(|i| png(salt, i)).collect();
        let ids: Vec<ImageId> = bodies.iter().map(|b| ImageId::of_bytes(b)).collect();
        let mut shards: Vec<String> = ids.iter().map(|id| id.shard().to_owned()).collect();
        shards.sort();
        shards.dedup();
        let offers = (0..OFFERS)
            .map(|j| OfferKey::shared(OfferId::parse(&format!("m{salt:x}-{j}")).unwrap()))
            .collect();
        Self {
            seed,
            rng,
            base,
            clock,
            ctx: Arc::new(Ctx {
                ids,
                bodies,
                offers,
                shards,
            }),
            keyed_counts_may_leak,
            ops: Vec::new(),
            paused: Vec::new(),
            pending: Vec::new(),
            crawls_done: Vec::new(),
            uploaded: HashSet::new(),
            model: HashMap::new(),
            keyed: HashSet::new(),
            decodes: HashMap::new(),
            made_ready: HashMap::new(),
            crashed_contents: HashSet::new(),
            paused_contents: HashSet::new(),
            log: Vec::new(),
            totals: Totals::default(),
        }
    }

    fn fail(&self, message: impl std::fmt::Display) -> String {
        let mut out = format!(
            "model history failed: {message}\nreplay: IMGEST_MODEL_SEED={} (contents {:?}, offers {:?})\n",
            self.seed,
            self.ctx
                .ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>(),
            self.ctx
                .offers
                .iter()
                .map(|o| o.to_string())
                .collect::<Vec<_>>(),
        );
        for line in &self.log {
            let _ = writeln!(out, "  {line}");
        }
        out
    }

    fn services(&self, faults: &Arc<Faults>) -> Arc<Service> {
        self.services_making(faults, PipelineConfig::default())
    }

    /// The process's services with the pipeline of the other variant set (`more`: a size
    /// more than the default set; otherwise the default set at another quality).
    fn backfill_services(&self, faults: &Arc<Faults>, more: bool) -> Arc<Service> {
        let mut config = PipelineConfig::default();
        if more {
            config.variants = format!("{},tiny=fit:4x4", config.variants).parse().unwrap();
        } else {
            config.jpeg_quality = 70;
        }
        self.services_making(faults, config)
    }

    fn services_making(&self, faults: &Arc<Faults>, config: PipelineConfig) -> Arc<Service> {
        let mut ports = self.base.clone();
        ports.blobs = Arc::new(FaultyBlobs {
            inner: self.base.blobs.clone(),
            faults: faults.clone(),
        });
        ports.images = Arc::new(FaultyImages {
            inner: self.base.images.clone(),
            faults: faults.clone(),
        });
        ports.offers = Arc::new(FaultyOffers {
            inner: self.base.offers.clone(),
            faults: faults.clone(),
        });
        Arc::new(Service::new(ports, policy()).with_imaging(Arc::new(Pipeline::new(config))))
    }

    fn random_fault(&mut self) -> Fault {
        let k = self.rng.u32(1..=9);
        // Writes are numbered apart: an upload's record write is its 5th, a backfill's its
        // 5th or 6th, so the range covers every flow's last one.
        let w = self.rng.u32(1..=8);
        match self.rng.u32(0..100) {
            0..45 => Fault::None,
            45..60 => Fault::CrashBefore(k),
            60..72 => Fault::CrashAfter(k),
            72..82 => Fault::RefusedAfterApply(w),
            82..90 => Fault::TimedOutAfterApply(w),
            _ => Fault::PauseAt(k),
        }
    }

    fn random_photos(&mut self) -> Vec<usize> {
        let mut known: Vec<usize> = self.uploaded.iter().copied().collect();
        known.sort_unstable();
        self.rng.shuffle(&mut known);
        let n = self.rng.usize(0..=known.len().min(3));
        known.truncate(n);
        known
    }

    /// A client request: an op, with a random fault.
    fn random_op(&mut self) -> Op {
        let offer = self.rng.usize(0..OFFERS);
        match self.rng.u32(0..100) {
            0..35 => Op::Upload(self.rng.usize(0..CONTENTS)),
            35..50 => {
                let mut photos: Vec<usize> = (0..CONTENTS).collect();
                self.rng.shuffle(&mut photos);
                photos.truncate(self.rng.usize(1..=2));
                let key = format!("crawl-{}", self.ops.len());
                Op::Crawl { offer, photos, key }
            }
            50..65 => Op::Link {
                offer,
                photos: self.random_photos(),
            },
            65..72 => {
                // A reorder of what the offer lists.
                let mut photos = self
                    .model
                    .get(&offer)
                    .map(|(_, p)| p.clone())
                    .unwrap_or_default();
                self.rng.shuffle(&mut photos);
                Op::Link { offer, photos }
            }
            72..80 => Op::DeleteOffer(offer),
            80..90 => Op::Gc,
            90..95 => Op::Backfill(self.rng.usize(0..CONTENTS), self.rng.bool()),
            // An audit corrects counts changed more than its settle time ago: it must not
            // meet a change stopped between its links and its offer's write for that long
            // (a process lives less), so it runs only while no process is stopped.
            95..97 if self.paused.is_empty() => Op::Audit,
            _ => Op::Sweep,
        }
    }

    /// Runs one history of `steps` steps, then finishes everything and checks.
    async fn run(&mut self, steps: usize) -> Result<(), String> {
        for _ in 0..steps {
            self.totals.steps += 1;
            let roll = self.rng.u32(0..100);
            if roll < 12 && !self.paused.is_empty() {
                let i = self.rng.usize(0..self.paused.len());
                let attempt = self.paused.remove(i);
                self.resume(attempt).await?;
            } else if roll < 22 && !self.pending.is_empty() {
                let i = self.rng.usize(0..self.pending.len());
                let op = self.pending.remove(i);
                self.totals.retries += 1;
                let fault = self.random_fault();
                self.log.push(format!("retry #{op}"));
                self.start(op, fault).await?;
            } else if roll < 27 && !self.crawls_done.is_empty() {
                // The crawl's last message delivered again.
                let op = self.crawls_done[self.rng.usize(0..self.crawls_done.len())];
                let fault = self.random_fault();
                self.log.push(format!("redeliver #{op}"));
                self.start(op, fault).await?;
            } else if roll < 34 {
                self.clock.advance(ORPHAN_TTL + Duration::from_secs(1));
                self.log.push("clock + orphan TTL".into());
            } else if roll < 38 {
                self.past_grace().await?;
                let op = self.push(Op::Sweep);
                let fault = self.random_fault();
                self.start(op, fault).await?;
            } else {
                let op = self.random_op();
                let op = self.push(op);
                let fault = self.random_fault();
                self.start(op, fault).await?;
            }
        }
        self.finish().await
    }

    fn push(&mut self, op: Op) -> usize {
        self.ops.push(op);
        self.ops.len() - 1
    }

    /// Lets every stopped process go on, then moves the clock past the sweep's grace period
    /// (no process lives that long).
    async fn past_grace(&mut self) -> Result<(), String> {
        while !self.paused.is_empty() {
            let attempt = self.paused.remove(0);
            self.resume(attempt).await?;
        }
        self.clock.advance(SWEEP_GRACE + Duration::from_secs(1));
        self.log.push("clock + sweep grace".into());
        Ok(())
    }

    /// A process about to work on `contents` would wait for an unexpired claim that is not its
    /// own (a dead process's, or a stopped one's): a real one waits until the claim expires,
    /// so the clock moves there first.
    async fn unblock(&mut self, contents: &[usize], own: Option<&imgest_core::domain::Generation>) {
        for &c in contents {
            let Some(record) = self.base.images.get(&self.ctx.ids[c]).await.unwrap() else {
                continue;
            };
            let now = self.clock.now();
            if let ImageState::Processing { claim_expires_at } = record.state
                && claim_expires_at > now
                && own != Some(&record.generation)
            {
                self.clock
                    .advance(claim_expires_at.since(now) + Duration::from_millis(1));
                self.log
                    .push(format!("  clock past the claim on content {c}"));
            }
        }
    }

    async fn start(&mut self, op: usize, fault: Fault) -> Result<(), String> {
        let contents = self.ops[op].contents();
        self.unblock(&contents, None).await;
        let faults = Faults::new(fault);
        let services: Vec<(Option<usize>, Arc<Service>)> = match &self.ops[op] {
            Op::Crawl { photos, .. } => photos
                .iter()
                .map(|&c| (Some(c), self.services(&faults)))
                .chain([(None, self.services(&faults))])
                .collect(),
            Op::Upload(c) => vec![(Some(*c), self.services(&faults))],
            Op::Backfill(c, more) => vec![(Some(*c), self.backfill_services(&faults, *more))],
            _ => vec![(None, self.services(&faults))],
        };
        if self.paused.iter().any(|p| {
            self.ops[p.op]
                .contents()
                .iter()
                .any(|c| contents.contains(c))
        }) {
            self.paused_contents.extend(contents.iter().copied());
        }
        let handle = tokio::spawn(perform(
            self.ops[op].clone(),
            services.iter().map(|(_, s)| s.clone()).collect(),
            self.ctx.clone(),
        ));
        let mut attempt = Attempt {
            op,
            faults,
            services,
            handle,
        };
        let stopped = tokio::select! {
            biased;
            result = &mut attempt.handle => Some(result),
            () = attempt.faults.stopped() => None,
        };
        match stopped {
            Some(result) => {
                let result = result.map_err(|e| self.fail(format!("op #{op} panicked: {e}")))?;
                self.finished(attempt, result).await
            }
            None => {
                self.totals.pauses += 1;
                self.log.push(format!(
                    "#{op} {:?} with {fault:?}: stopped after {:?}",
                    self.ops[op],
                    attempt.faults.log()
                ));
                self.paused_contents.extend(contents);
                self.paused.push(attempt);
                Ok(())
            }
        }
    }

    async fn resume(&mut self, mut attempt: Attempt) -> Result<(), String> {
        let op = attempt.op;
        let contents = self.ops[op].contents();
        let own = attempt.faults.claimed();
        self.unblock(&contents, own.as_ref()).await;
        self.log.push(format!("resume #{op}"));
        attempt.faults.resume();
        let result = match tokio::time::timeout(STUCK, &mut attempt.handle).await {
            Ok(result) => result.map_err(|e| self.fail(format!("op #{op} panicked: {e}")))?,
            Err(_) => return Err(self.fail(format!("op #{op} is stuck after resuming"))),
        };
        self.finished(attempt, result).await
    }

    /// Books an attempt that ended, and updates the model when it succeeded.
    async fn finished(
        &mut self,
        attempt: Attempt,
        result: Result<(), FlowError>,
    ) -> Result<(), String> {
        let op = attempt.op;
        for (content, service) in &attempt.services {
            let runs = service.counts().pipeline_runs;
            self.totals.decodes += runs;
            if let Some(c) = content {
                *self.decodes.entry(*c).or_default() += runs;
            } else {
                assert_eq!(runs, 0, "a link, GC or sweep decodes nothing");
            }
        }
        for (id, _) in attempt.faults.made_ready() {
            *self.made_ready.entry(id).or_default() += 1;
        }
        // A misanswered write leaves the process as unsure as a crash does: a failed request
        // is retried, and its contents may be decoded again.
        let misanswered = attempt.faults.misanswered();
        let crashed = attempt.faults.crashed() || misanswered;
        let calls = attempt.faults.log();
        if attempt.faults.crashed() {
            self.totals.crashes += 1;
        }
        if misanswered {
            self.totals.misanswered += 1;
        }
        if crashed {
            self.crashed_contents.extend(self.ops[op].contents());
        }
        let outcome = match &result {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("{}: {e}", e.kind()),
        };
        self.log.push(format!(
            "#{op} {:?} with {:?}: {outcome}; calls {calls:?}",
            self.ops[op],
            attempt.faults.fault()
        ));
        match result {
            Ok(()) => self.apply(op, attempt.faults.offer_written()),
            Err(_) if crashed => {
                self.pending.push(op);
                Ok(())
            }
            Err(FlowError::UnknownImage(_)) => {
                // An image expired and was collected before the link: refused, nothing changes.
                self.totals.refused_links += 1;
                Ok(())
            }
            Err(e) => Err(self.fail(format!("op #{op} failed without a crash: {e}"))),
        }?;
        if matches!(
            self.ops[op],
            Op::Gc | Op::Sweep | Op::Backfill(..) | Op::Audit
        ) {
            self.check_files().await?;
        }
        Ok(())
    }

    fn apply(&mut self, op: usize, written: Option<u64>) -> Result<(), String> {
        let change = match self.ops[op].clone() {
            Op::Upload(c) => {
                self.uploaded.insert(c);
                None
            }
            Op::Crawl { offer, photos, .. } => {
                self.uploaded.extend(photos.iter().copied());
                self.keyed.extend(photos.iter().copied());
                if !self.crawls_done.contains(&op) {
                    self.crawls_done.push(op);
                }
                Some((offer, photos))
            }
            Op::Link { offer, photos } => Some((offer, photos)),
            Op::DeleteOffer(offer) => Some((offer, Vec::new())),
            Op::Gc | Op::Sweep | Op::Backfill(..) | Op::Audit => None,
        };
        if let Some((offer, photos)) = change {
            let Some(at) = written else {
                return Err(self.fail(format!("op #{op} succeeded without writing its offer")));
            };
            // The last write is the one made last, not the one answered last.
            if self.model.get(&offer).is_none_or(|(last, _)| *last < at) {
                self.model.insert(offer, (at, photos));
            }
        }
        Ok(())
    }

    /// Finishes every stopped process and retries every failed request (without faults), then
    /// sweeps once past the grace period and checks everything.
    async fn finish(&mut self) -> Result<(), String> {
        self.log.push("-- finish".into());
        let mut rounds = 0;
        while !self.paused.is_empty() || !self.pending.is_empty() {
            rounds += 1;
            if rounds > 20 {
                return Err(self.fail("requests still fail after 20 rounds of retries"));
            }
            while !self.paused.is_empty() {
                let attempt = self.paused.remove(0);
                self.resume(attempt).await?;
            }
            for op in std::mem::take(&mut self.pending) {
                self.totals.retries += 1;
                self.log.push(format!("retry #{op}"));
                self.start(op, Fault::None).await?;
            }
        }
        self.past_grace().await?;
        let op = self.push(Op::Sweep);
        self.start(op, Fault::None).await?;
        self.check_all().await?;
        // 6, after an audit past its settle time: every count is exact, keyed links included.
        self.clock
            .advance(imgest_flows::audit::SETTLE + Duration::from_secs(1));
        self.log.push("clock + audit settle time".into());
        let op = self.push(Op::Audit);
        self.start(op, Fault::None).await?;
        self.keyed_counts_may_leak = false;
        self.check_all().await
    }

    /// The record of each content, if any.
    async fn records(&self) -> Vec<Option<ImageRecord>> {
        let mut out = Vec::new();
        for id in &self.ctx.ids {
            out.push(self.base.images.get(id).await.unwrap());
        }
        out
    }

    /// Invariant 1: every ready record's files exist.
    async fn check_files(&self) -> Result<(), String> {
        for record in self.records().await.into_iter().flatten() {
            if !record.is_ready() {
                continue;
            }
            for key in record.file_keys() {
                if let Err(e) = self.base.blobs.get(&key).await {
                    return Err(self.fail(format!(
                        "invariant 1: {} (generation {}) needs {key}, which is missing: {e}",
                        record.id, record.generation
                    )));
                }
            }
        }
        Ok(())
    }

    async fn check_all(&mut self) -> Result<(), String> {
        self.check_files().await?;
        let records = self.records().await;
        let by_id: HashMap<&ImageId, &ImageRecord> =
            records.iter().flatten().map(|r| (&r.id, r)).collect();

        // 3: no file without a record of its generation.
        for (c, id) in self.ctx.ids.iter().enumerate() {
            for area in IMAGE_AREAS {
                let prefix = format!("{area}{}/{id}/", id.shard());
                let page = self.base.blobs.list(&prefix, None, 1000).await.unwrap();
                for blob in page.blobs {
                    let part = blob.key.image_part().unwrap();
                    let owned = by_id.get(id).is_some_and(|r| {
                        r.generation == part.generation
                            && (!r.is_ready() || r.file_keys().contains(&blob.key))
                    });
                    if !owned {
                        return Err(self.fail(format!(
                            "invariant 3: {} (content {c}) is left after the sweep; record: {:?}",
                            blob.key,
                            by_id.get(id)
                        )));
                    }
                }
            }
        }

        // 5: each offer lists the last list written; 2: every listed image has a ready record.
        let mut listed: HashMap<ImageId, u32> = HashMap::new();
        for (j, offer) in self.ctx.offers.iter().enumerate() {
            let actual = self
                .base
                .offers
                .photos(offer)
                .await
                .unwrap()
                .unwrap_or_default();
            let expected: Vec<ImageId> = self
                .model
                .get(&j)
                .map(|(_, cs)| cs.iter().map(|&c| self.ctx.ids[c].clone()).collect())
                .unwrap_or_default();
            if actual != expected {
                return Err(self.fail(format!(
                    "invariant 5: offer {j} lists {actual:?}, the last write was {expected:?}"
                )));
            }
            for id in actual {
                if !by_id.get(&id).is_some_and(|r| r.is_ready()) {
                    return Err(self.fail(format!(
                        "invariant 2: offer {j} lists {id}, which has no ready record"
                    )));
                }
                *listed.entry(id).or_default() += 1;
            }
        }

        // 6: link counts.
        for (c, id) in self.ctx.ids.iter().enumerate() {
            let Some(record) = by_id.get(id).filter(|r| r.is_ready()) else {
                continue;
            };
            let actual = listed.get(id).copied().unwrap_or(0);
            // DynamoDB's keyed links may leave a count one too high after a crash (the
            // documented trade); never too low.
            let ok = if self.keyed_counts_may_leak && self.keyed.contains(&c) {
                record.link_count >= actual
            } else {
                record.link_count == actual
            };
            if !ok {
                return Err(self.fail(format!(
                    "invariant 6: {id} (content {c}) has link_count {} but {actual} offers list it",
                    record.link_count
                )));
            }
        }

        // 4: decodes.
        for (c, id) in self.ctx.ids.iter().enumerate() {
            let decodes = self.decodes.get(&c).copied().unwrap_or(0);
            let made = self.made_ready.get(id).copied().unwrap_or(0);
            if decodes < made {
                return Err(self.fail(format!(
                    "content {c}: {made} ready records written from {decodes} decodes"
                )));
            }
            let extra = decodes - made;
            if extra == 0 {
                continue;
            }
            if self.crashed_contents.contains(&c) {
                self.totals.extra_after_crash += extra;
            } else if self.paused_contents.contains(&c) {
                self.totals.extra_after_pause += extra;
            } else {
                return Err(self.fail(format!(
                    "invariant 4: content {c} was decoded {decodes} times for {made} ready records, with no crash or pause"
                )));
            }
        }
        Ok(())
    }
}

/// One attempt of `op`, by the process whose ports `services` use.
async fn perform(op: Op, services: Vec<Arc<Service>>, ctx: Arc<Ctx>) -> Result<(), FlowError> {
    let last = services.last().unwrap();
    match op {
        Op::Upload(c) => {
            last.upload_bytes(ctx.bodies[c].clone()).await?;
        }
        Op::Crawl { offer, photos, key } => {
            // Each new photo's record may be created with this crawl's link counted.
            let first = KeyedLink {
                offer: ctx.offers[offer].clone(),
                key: key.clone(),
            };
            for (i, &c) in photos.iter().enumerate() {
                services[i]
                    .store_fetched(
                        ctx.ids[c].clone(),
                        ctx.bodies[c].clone(),
                        Some(first.clone()),
                    )
                    .await?;
            }
            let ids: Vec<ImageId> = photos.iter().map(|&c| ctx.ids[c].clone()).collect();
            last.link_offer_photos(&ctx.offers[offer], &ids, Some(&key))
                .await?;
        }
        Op::Link { offer, photos } => {
            let ids: Vec<ImageId> = photos.iter().map(|&c| ctx.ids[c].clone()).collect();
            last.set_offer_photos(&ctx.offers[offer], &ids).await?;
        }
        Op::DeleteOffer(offer) => {
            last.delete_offer(&ctx.offers[offer]).await?;
        }
        Op::Gc => {
            last.gc().await?;
        }
        Op::Sweep => {
            let mut report = SweepReport::default();
            for shard in &ctx.shards {
                last.sweep_shard(shard, SweepOptions::default(), &mut report)
                    .await?;
            }
        }
        Op::Backfill(c, _) => {
            last.reprocess(&ctx.ids[c]).await?;
        }
        Op::Audit => {
            let report = last.audit(false).await?;
            assert_eq!(
                (
                    report.images_broken,
                    report.link_counts_too_low,
                    report.links_to_missing_images
                ),
                (0, 0, 0),
                "{report:?}"
            );
        }
    }
    Ok(())
}

/// Runs the histories of `seeds`, each over the stores `make` gives; panics with the first
/// failure's seed and history.
async fn run_histories<F, Fut>(name: &str, seeds: Vec<u64>, make: F) -> Totals
where
    F: Fn(Arc<ManualClock>) -> Fut,
    Fut: std::future::Future<Output = (Ports, bool, Option<tempfile::TempDir>)>,
{
    let started = Instant::now();
    let mut totals = Totals::default();
    for seed in seeds {
        let clock = Arc::new(ManualClock::starting_now());
        let (base, keyed_counts_may_leak, _dir) = make(clock.clone()).await;
        let mut history = History::new(seed, base, clock, keyed_counts_may_leak);
        let steps = history.rng.usize(3..=12);
        if let Err(message) = history.run(steps).await {
            panic!("{name}: {message}");
        }
        let t = history.totals;
        totals.histories += 1;
        totals.steps += t.steps;
        totals.crashes += t.crashes;
        totals.misanswered += t.misanswered;
        totals.pauses += t.pauses;
        totals.retries += t.retries;
        totals.decodes += t.decodes;
        totals.extra_after_crash += t.extra_after_crash;
        totals.extra_after_pause += t.extra_after_pause;
        totals.refused_links += t.refused_links;
    }
    eprintln!("{name}: {totals:?} in {:.1?}", started.elapsed());
    totals.check_faults_were_met(name);
    totals
}

/// Histories from which on every kind of fault is expected (a replay of a few seeds may meet
/// none).
const HISTORIES_MEETING_EVERY_FAULT: u64 = 50;

impl Totals {
    /// Fails unless the histories met what they are about: processes that died, writes
    /// misanswered, processes stopped while others acted, requests retried after them, and
    /// photos decoded. Histories that met none of it would pass whatever the flows do.
    fn check_faults_were_met(&self, name: &str) {
        if self.histories < HISTORIES_MEETING_EVERY_FAULT {
            return;
        }
        let met = [
            ("crashes", self.crashes),
            ("misanswered writes", self.misanswered),
            ("pauses", self.pauses),
            ("retries", self.retries),
            ("decodes", self.decodes),
        ];
        let missing: Vec<&str> = met
            .iter()
            .filter(|(_, n)| *n == 0)
            .map(|(kind, _)| *kind)
            .collect();
        assert!(
            missing.is_empty(),
            "{name}: {} histories met no {missing:?}: {self:?}",
            self.histories
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_with_crashes_keep_the_storage_invariants_embedded() {
    run_histories("model (embedded)", seeds(2000), |clock| async move {
        // In memory where there is a tmpfs: deletes on a disk cost tens of milliseconds.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let store = Arc::new(SqliteStore::open_in_memory().unwrap());
        // No fsync: nothing here survives a power cut, and fsyncs would be most of the time.
        let blobs = Arc::new(FsBlobStore::new(dir.path()).with_fsync(false));
        (
            base_ports(blobs, store.clone(), store, clock),
            false,
            Some(dir),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_with_crashes_keep_the_storage_invariants_on_aws() {
    let Some(config) = imgest_testing::aws::sdk_config("model on aws").await else {
        return;
    };
    run_histories("model (aws)", seeds(100), |clock| {
        aws_ports(config.clone(), clock, None)
    })
    .await;
}

/// The same histories with every image turning hot at its first link (the next change that
/// reads it linked turns it hot; its link changes then go to delta items beside it, folded back
/// when none is left: `shared/aws/src/dynamodb/hot_links.rs`), so the crashes, pauses, audits,
/// erasures and collections meet that protocol too (about 15 images turn hot and 9 cool in the
/// 30 histories).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_with_crashes_keep_the_storage_invariants_on_aws_with_hot_images() {
    let Some(config) = imgest_testing::aws::sdk_config("model on aws, hot images").await else {
        return;
    };
    run_histories("model (aws, hot images)", seeds(30), |clock| {
        aws_ports(config.clone(), clock, Some(1))
    })
    .await;
}

/// A history's stores on the emulator: a bucket and a table of its own (the audit walks the
/// whole table), images turning hot at `hot_links` links if given.
async fn aws_ports(
    config: aws_config::SdkConfig,
    clock: Arc<ManualClock>,
    hot_links: Option<u32>,
) -> (Ports, bool, Option<tempfile::TempDir>) {
    let aws = crate::support::AwsStorage::create(&config).await;
    let blobs: Arc<dyn BlobStore> = Arc::new(S3BlobStore::new(aws.s3, aws.bucket));
    let mut records = DynamoStore::new(aws.dynamodb, aws.table);
    if let Some(links) = hot_links {
        records = records.with_hot_links(links);
    }
    let records = Arc::new(records);
    (
        base_ports(blobs, records.clone(), records, clock),
        true,
        None,
    )
}
