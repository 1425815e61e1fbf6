//! Backfill: re-processing stored photos under the configured variant set (a new size, a new
//! quality, a watermark), without hurting live work.
//!
//! - **Keyed by content.** A task is one image id on the `backfill` queue (a set: an id is
//!   never queued twice), so an image is re-processed once however many offers link it. A
//!   record already of the configured version is skipped, so a duplicate delivery or a resumed
//!   run costs a read.
//! - **Nothing breaks half-way.** The new files are written under a new generation, then the
//!   record is pointed at them by a conditional write on the old generation (record after
//!   files, as for uploads); the old generation's files stay readable until the sweep grace
//!   has passed (the record's `previous`), then the sweeper deletes them. A record collected or
//!   changed meanwhile wins: the new files are deleted again.
//! - **Hot first.** Records are enumerated in passes over the whole index, each pass taking
//!   colder images than the last ([`PASSES`]): images linked by many offers first, orphans
//!   last.
//! - **Kill switch.** The run's state is a checkpoint read before every batch: paused means no
//!   new batch starts; tasks already queued stay queued and resume continues where it stopped.
//! - **Live work first.** No backfill task starts while live tasks (downloads, processing) are
//!   due on the local queue, no backfill decode starts while a seller's new photo is being
//!   processed, and backfill decodes at most one photo fewer at once than the process may
//!   (`process_concurrency - 1`, at least one), so a live upload always finds a slot.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::decode::decode;
use super::files::{
    Answer, FileScope, FilesFate, RecordWrite, Source, delete_generation_files, settle_files,
    write_files,
};
use super::{FlowError, Service};
use imgest_core::domain::{
    BlobKey, ContentHash, Generation, ImageId, ImageRecord, ImageState, OriginalMetadata,
    StoredVariant, Timestamp, VariantSetVersion,
};
use imgest_core::ports::{Delivery, OutgoingMessage, QueueCounts, Reason, StoreError, TaskQueue};
use imgest_core::telemetry::metrics::Stage;

/// The local task queue backfill tasks wait on.
pub const BACKFILL_QUEUE: &str = "backfill";

/// Where the run's state is saved.
const STATE_CHECKPOINT: &str = "backfill.state";

/// Records read per segment in one round of enumeration, at most.
pub const SCAN_PAGE: usize = 500;

/// How far ahead of now tasks are queued at the rate limit: enumeration waits while the last
/// task queued is due later than this, so a pause stops the work within it (on SQS too, where
/// queued tasks cannot be recalled).
const HORIZON: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a task that arrives while the run is paused is put back for (SQS's longest delay).
const PARKED: std::time::Duration = std::time::Duration::from_secs(900);

/// How long a backfill task is leased before another worker may take it.
const LEASE: std::time::Duration = std::time::Duration::from_secs(300);

/// Attempts before a task is dead-lettered.
const MAX_ATTEMPTS: u32 = 3;

/// The passes, hottest first: a record is enqueued in the first pass whose test it meets.
pub const PASSES: [Pass; 4] = [
    Pass::LinkedAtLeast(16),
    Pass::LinkedAtLeast(4),
    Pass::LinkedAtLeast(1),
    Pass::Orphans,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Images linked by at least this many offers.
    LinkedAtLeast(u32),
    /// Images no offer links (still in their orphan window).
    Orphans,
}

impl Pass {
    fn takes(self, record: &ImageRecord) -> bool {
        match self {
            Self::LinkedAtLeast(n) => record.link_count >= n,
            Self::Orphans => true,
        }
    }
}

/// Whether a run is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    Paused,
}

/// A backfill run, saved as a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackfillRun {
    /// The version every record is brought to.
    pub target: VariantSetVersion,
    pub state: RunState,
    /// The pass being enumerated (an index into [`PASSES`]).
    pub pass: usize,
    /// Where each segment's walk of the pass resumes. Empty at the start of a pass (and in a
    /// state saved before segments existed: that pass is walked again, which costs reads).
    #[serde(default)]
    pub segments: Vec<SegmentWalk>,
    /// When the next task queued is due: tasks are spaced at the rate limit.
    #[serde(default)]
    pub next_due: Option<Timestamp>,
    pub started_at: Timestamp,
    /// Records read so far (all passes) and tasks queued.
    pub scanned: u64,
    pub queued: u64,
}

/// One segment's walk of the index in the current pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentWalk {
    /// Where its next page starts (`None` before the first).
    pub cursor: Option<String>,
    pub done: bool,
}

impl BackfillRun {
    /// Every pass walked: what is queued is all there is to do.
    pub fn enumerated(&self) -> bool {
        self.pass >= PASSES.len()
    }
}

/// What `backfill status` shows: the run, and its queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackfillStatus {
    pub run: Option<BackfillRun>,
    /// Tasks queued and not yet finished (waiting, delayed or being processed).
    pub pending: u64,
    /// Tasks queued and finished (re-processed, or found current or gone).
    pub done: u64,
    /// Tasks that failed every attempt, by error kind.
    pub failed: Vec<(String, u64)>,
    /// Whether the run has nothing left to do.
    pub finished: bool,
    /// Tasks done per second since the run started (pauses included).
    pub rate_per_second: f64,
    /// At that rate, how long the pending tasks take (`None` before any is done, or while
    /// enumeration may still queue more).
    pub eta_seconds: Option<u64>,
}

/// What re-processing one image did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reprocessed {
    /// New files written and the record pointed at them.
    Done,
    /// The record was already of the configured version.
    Current,
    /// No live record (collected, never ready), or it changed while we worked.
    Gone,
}

/// What one call of [`Service::backfill_step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    pub scanned: u64,
    pub queued: u64,
    pub reprocessed: u64,
    pub current: u64,
    pub gone: u64,
    pub failed: u64,
    /// Live tasks were waiting: no backfill task was started.
    pub deferred: bool,
    /// Fewer tasks were due than the step could take: how long the rate limit takes to make
    /// a full batch due (0 when the batch was full, or there is no rate limit).
    pub wait_ms: u64,
}

impl StepReport {
    /// Whether the step read, queued or finished anything (an idle worker waits a moment).
    pub fn did_work(&self) -> bool {
        self.scanned + self.queued + self.reprocessed + self.current + self.gone + self.failed > 0
    }

    /// How long a worker waits before its next step: `idle` when this one found nothing to
    /// do, else what the rate limit asks ([`wait_ms`](Self::wait_ms)), so a rate-limited
    /// backfill does not poll its queue for every task.
    pub fn next_step_in(&self, idle: std::time::Duration) -> std::time::Duration {
        if self.did_work() {
            std::time::Duration::from_millis(self.wait_ms)
        } else {
            idle
        }
    }
}

impl Service {
    async fn load_run(&self) -> Result<Option<BackfillRun>, FlowError> {
        let Some(raw) = self
            .ports
            .checkpoints
            .load_checkpoint(STATE_CHECKPOINT)
            .await?
        else {
            return Ok(None);
        };
        serde_json::from_str(&raw).map(Some).map_err(|e| {
            FlowError::Internal(format!("the saved backfill state is unreadable: {e}"))
        })
    }

    async fn save_run(&self, run: &BackfillRun) -> Result<(), FlowError> {
        let raw = serde_json::to_string(run)
            .map_err(|e| FlowError::Internal(format!("encoding the backfill state: {e}")))?;
        self.ports
            .checkpoints
            .save_checkpoint(STATE_CHECKPOINT, &raw)
            .await?;
        Ok(())
    }

    /// Starts a run towards the configured variant set, from the first pass. A run already
    /// going towards it is resumed instead (nothing is enumerated twice).
    pub async fn backfill_start(&self) -> Result<BackfillRun, FlowError> {
        // Every record is rewritten to the configured set, and the sweep then deletes the
        // previous files: a set nobody confirmed (a typo) must not get that far.
        let variants = self.variant_set_status().await?;
        if !variants.is_confirmed() {
            return Err(FlowError::VariantSetUnconfirmed(format!(
                "added {:?}, dropped {:?}{}; confirm it with `imgest variants confirm` first",
                variants.added,
                variants.dropped,
                if variants.confirmed.is_none() {
                    " (none confirmed yet)"
                } else {
                    ""
                }
            )));
        }
        // The queue must exist before anything is enumerated onto it.
        self.ports.messages.counts(BACKFILL_QUEUE).await?;
        let target = self.imaging()?.version().clone();
        if let Some(run) = self.load_run().await?
            && run.target == target
            && (run.state == RunState::Paused || !run.enumerated())
        {
            return self.backfill_resume().await;
        }
        let run = BackfillRun {
            target,
            state: RunState::Running,
            pass: 0,
            segments: Vec::new(),
            next_due: None,
            started_at: self.ports.clock.now(),
            scanned: 0,
            queued: 0,
        };
        self.save_run(&run).await?;
        info!(target = %run.target, "backfill started");
        Ok(run)
    }

    /// Pauses the run: no new batch starts (each worker reads the state before its next one).
    pub async fn backfill_pause(&self) -> Result<BackfillRun, FlowError> {
        let mut run = self
            .load_run()
            .await?
            .ok_or_else(|| FlowError::Internal("no backfill has been started".into()))?;
        if run.state != RunState::Paused {
            run.state = RunState::Paused;
            self.save_run(&run).await?;
            info!(target = %run.target, "backfill paused");
        }
        Ok(run)
    }

    /// Resumes a paused run where it stopped.
    pub async fn backfill_resume(&self) -> Result<BackfillRun, FlowError> {
        let mut run = self
            .load_run()
            .await?
            .ok_or_else(|| FlowError::Internal("no backfill has been started".into()))?;
        if run.target != *self.imaging()?.version() {
            return Err(FlowError::Internal(format!(
                "the saved backfill targets variant set {} but this configuration is {}; \
                 start a new one",
                run.target,
                self.imaging()?.version()
            )));
        }
        if run.state == RunState::Paused {
            run.state = RunState::Running;
            self.save_run(&run).await?;
            info!(target = %run.target, "backfill resumed");
        }
        Ok(run)
    }

    pub async fn backfill_status(&self) -> Result<BackfillStatus, FlowError> {
        let run = self.load_run().await?;
        let counts: QueueCounts = self.ports.messages.counts(BACKFILL_QUEUE).await?;
        let pending = counts.ready + counts.delayed + counts.in_flight;
        let failed = match self.failure_kinds(BACKFILL_QUEUE).await? {
            Some(kinds) => kinds,
            None if counts.dead > 0 => {
                vec![("unknown (see the function's log)".to_owned(), counts.dead)]
            }
            None => Vec::new(),
        };
        let done = run
            .as_ref()
            .map_or(0, |r| r.queued.saturating_sub(pending + counts.dead));
        let finished = run
            .as_ref()
            .is_some_and(|r| r.state == RunState::Running && r.enumerated() && pending == 0);
        let elapsed = run.as_ref().map_or(0.0, |r| {
            self.ports.clock.now().since(r.started_at).as_secs_f64()
        });
        let rate_per_second = if elapsed > 0.0 {
            done as f64 / elapsed
        } else {
            0.0
        };
        let enumerated = run.as_ref().is_some_and(BackfillRun::enumerated);
        let eta_seconds = (enumerated && rate_per_second > 0.0)
            .then(|| (pending as f64 / rate_per_second).ceil() as u64);
        Ok(BackfillStatus {
            run,
            pending,
            done,
            failed,
            finished,
            rate_per_second,
            eta_seconds,
        })
    }

    /// One batch of a running backfill: reads the state (the kill switch), enumerates one page
    /// of records if enumeration is not over, then re-processes up to `max_tasks` queued images.
    /// Does nothing while paused or when no run was started.
    pub async fn backfill_step(&self, max_tasks: usize) -> Result<StepReport, FlowError> {
        let queue = Arc::clone(self.task_queue()?);
        let mut report = StepReport::default();
        let Some(mut run) = self.load_run().await? else {
            return Ok(report);
        };
        if run.state == RunState::Paused || run.target != *self.imaging()?.version() {
            return Ok(report);
        }
        if self.due_for_enumeration(&run) {
            self.enumerate_round(&mut run, &mut report).await?;
            if self.save_unless_paused(&mut run).await? == RunState::Paused {
                return Ok(report);
            }
        }
        // Live work first: no backfill task starts while a download or a processing task is
        // due and waiting.
        if self.live_backlog().await? > 0 {
            report.deferred = true;
            return Ok(report);
        }
        let now = self.ports.clock.now();
        let deliveries = queue.receive(BACKFILL_QUEUE, now, max_tasks, LEASE).await?;
        if deliveries.len() < max_tasks && self.policy.backfill_rate > 0 {
            let batch_ms = max_tasks as u64 * 1000 / u64::from(self.policy.backfill_rate);
            report.wait_ms = batch_ms.clamp(10, 1000);
        }
        let tasks = deliveries.into_iter().map(|d| {
            let queue = Arc::clone(&queue);
            async move {
                let outcome = self.run_task(&d).await;
                (queue, d, outcome)
            }
        });
        for (queue, delivery, outcome) in futures_util::future::join_all(tasks).await {
            match outcome {
                Ok(Reprocessed::Done) => report.reprocessed += 1,
                Ok(Reprocessed::Current) => report.current += 1,
                Ok(Reprocessed::Gone) => report.gone += 1,
                Err(_) => report.failed += 1,
            }
            self.finish_task(&queue, &delivery, outcome).await?;
        }
        Ok(report)
    }

    /// Whether the run should queue more tasks now: enumeration is not over and the tasks
    /// queued so far are due within [`HORIZON`] (so a pause stops the work within it).
    fn due_for_enumeration(&self, run: &BackfillRun) -> bool {
        let horizon = self.ports.clock.now().plus(HORIZON);
        !run.enumerated() && run.next_due.is_none_or(|due| due <= horizon)
    }

    /// Saves the run after a round of enumeration; a pause saved meanwhile wins. Saved after
    /// the tasks are queued: a crash queues a round again, never skips one.
    async fn save_unless_paused(&self, run: &mut BackfillRun) -> Result<RunState, FlowError> {
        if let Some(saved) = self.load_run().await?
            && saved.state == RunState::Paused
        {
            run.state = RunState::Paused;
        }
        self.save_run(run).await?;
        Ok(run.state)
    }

    /// Enumerates for up to `budget` on AWS (the `backfill` function's schedule): rounds of
    /// one page per segment, each saved, until the queued tasks reach [`HORIZON`], the run is
    /// paused or enumerated, or time is up. Tasks go to the `backfill` queue, due at the rate
    /// limit.
    pub async fn backfill_enumerate(
        &self,
        budget: std::time::Duration,
    ) -> Result<StepReport, FlowError> {
        let started = std::time::Instant::now();
        let mut report = StepReport::default();
        let Some(mut run) = self.load_run().await? else {
            return Ok(report);
        };
        if run.state == RunState::Paused || run.target != *self.imaging()?.version() {
            return Ok(report);
        }
        while started.elapsed() < budget && self.due_for_enumeration(&run) {
            self.enumerate_round(&mut run, &mut report).await?;
            if self.save_unless_paused(&mut run).await? == RunState::Paused {
                break;
            }
        }
        Ok(report)
    }

    /// One round: a page of every segment not yet done, its records of this pass queued (each
    /// due one rate interval after the last), then the walk moved on. Pages are bounded so
    /// that a round queues at most [`HORIZON`] of work at the rate limit.
    async fn enumerate_round(
        &self,
        run: &mut BackfillRun,
        report: &mut StepReport,
    ) -> Result<(), FlowError> {
        let Some(pass) = PASSES.get(run.pass).copied() else {
            return Ok(());
        };
        if run.segments.is_empty() {
            run.segments =
                vec![SegmentWalk::default(); self.policy.backfill_segments.max(1) as usize];
        }
        let segments = u32::try_from(run.segments.len()).unwrap_or(u32::MAX);
        let rate = u64::from(self.policy.backfill_rate);
        let page_limit = if rate == 0 {
            SCAN_PAGE
        } else {
            let per_round = rate.saturating_mul(HORIZON.as_secs()) / u64::from(segments);
            usize::try_from(per_round)
                .unwrap_or(SCAN_PAGE)
                .clamp(1, SCAN_PAGE)
        };
        let scans = run
            .segments
            .iter()
            .enumerate()
            .filter(|(_, walk)| !walk.done)
            .map(|(i, walk)| async move {
                let segment = u32::try_from(i).unwrap_or(u32::MAX);
                let page = self
                    .ports
                    .images
                    .scan(segment, segments, walk.cursor.as_deref(), page_limit)
                    .await;
                (i, page)
            });
        let pages = futures_util::future::join_all(scans).await;
        let now = self.ports.clock.now();
        // A record taken by an earlier (hotter) pass is not queued again.
        let earlier = &PASSES[..run.pass];
        let mut ids = Vec::new();
        let mut walked = Vec::new();
        for (i, page) in pages {
            let page = page?;
            for record in &page.records {
                report.scanned += 1;
                // With indexing on, current records are queued too: to be filed.
                if record.is_live(now)
                    && (!self.is_current(record, &run.target) || self.policy.similar.indexes())
                    && pass.takes(record)
                    && !earlier.iter().any(|p| p.takes(record))
                {
                    ids.push(record.id.clone());
                }
            }
            walked.push((i, page.next));
        }
        let next_due = self
            .queue_tasks(&ids, run.next_due.unwrap_or(now).max(now))
            .await?;
        run.next_due = Some(next_due);
        report.queued += ids.len() as u64;
        run.scanned += report.scanned;
        run.queued += ids.len() as u64;
        for (i, next) in walked {
            if let Some(walk) = run.segments.get_mut(i) {
                walk.done = next.is_none();
                walk.cursor = next;
            }
        }
        if run.segments.iter().all(|w| w.done) {
            run.pass += 1;
            run.segments.clear();
            if run.enumerated() {
                info!(
                    queued = run.queued,
                    scanned = run.scanned,
                    "backfill enumerated"
                );
            }
        }
        Ok(())
    }

    /// Queues one task per image, the first due at `first` and each next one a rate interval
    /// later; returns when the next one would be due. Locally the queue is a set (an id queued
    /// and not yet done is not queued again); on SQS a duplicate costs a read.
    async fn queue_tasks(&self, ids: &[ImageId], first: Timestamp) -> Result<Timestamp, FlowError> {
        let spacing = match self.policy.backfill_rate {
            0 => std::time::Duration::ZERO,
            rate => std::time::Duration::from_secs(1) / rate,
        };
        let now = self.ports.clock.now();
        let mut due = first;
        let mut messages = Vec::new();
        for id in ids {
            match &self.ports.queue {
                Some(queue) => {
                    queue.enqueue(BACKFILL_QUEUE, id.as_str(), "", due).await?;
                }
                None => messages.push(OutgoingMessage::delayed(id.as_str(), due.since(now))),
            }
            due = due.plus(spacing);
        }
        if !messages.is_empty() {
            self.ports.messages.send(BACKFILL_QUEUE, &messages).await?;
        }
        Ok(due)
    }

    /// Re-processes the images of a batch from the `backfill` queue (the AWS function's SQS
    /// trigger). While the run is paused the batch is put back on the queue, due in 15
    /// minutes, and nothing is re-processed: paused work is never lost, nor dead-lettered.
    pub async fn backfill_tasks(
        &self,
        ids: &[ImageId],
    ) -> Result<Vec<Result<Reprocessed, FlowError>>, FlowError> {
        if self
            .load_run()
            .await?
            .is_some_and(|run| run.state == RunState::Paused)
        {
            let parked: Vec<OutgoingMessage> = ids
                .iter()
                .map(|id| OutgoingMessage::delayed(id.as_str(), PARKED))
                .collect();
            self.ports.messages.send(BACKFILL_QUEUE, &parked).await?;
            info!(
                tasks = ids.len(),
                "backfill paused: tasks put back on the queue"
            );
            return Ok(Vec::new());
        }
        let runs = ids.iter().map(|id| self.reprocess(id));
        Ok(futures_util::future::join_all(runs).await)
    }

    async fn run_task(&self, delivery: &Delivery) -> Result<Reprocessed, FlowError> {
        let id = ImageId::parse(&delivery.key)?;
        self.reprocess(&id).await
    }

    async fn finish_task(
        &self,
        queue: &Arc<dyn TaskQueue>,
        delivery: &Delivery,
        outcome: Result<Reprocessed, FlowError>,
    ) -> Result<(), FlowError> {
        match outcome {
            Ok(_) => {
                queue.ack(delivery).await?;
            }
            Err(e) if e.is_retryable() && delivery.attempts < MAX_ATTEMPTS => {
                warn!(image_id = %delivery.key, error = %e, "backfill task failed; retried");
                let at = self
                    .ports
                    .clock
                    .now()
                    .plus(std::time::Duration::from_secs(10 << delivery.attempts));
                queue.retry(delivery, at).await?;
            }
            Err(e) => {
                warn!(image_id = %delivery.key, error = %e, "backfill task failed");
                let reason = Reason::new(e.kind(), e.to_string());
                queue
                    .dead_letter(delivery, &reason, self.ports.clock.now())
                    .await?;
            }
        }
        Ok(())
    }

    /// Re-processes one image from its original under the configured variant set: new files
    /// under a new generation, then the record pointed at them (the old generation's files
    /// kept for the sweep grace). Skips a record already of the configured version. With
    /// `IMGEST_SIMILAR` indexing, files the record in the near-duplicate index too (current or
    /// not: that is how photos stored before indexing was on get there).
    pub async fn reprocess(&self, id: &ImageId) -> Result<Reprocessed, FlowError> {
        let outcome = self.reprocess_unfiled(id).await?;
        if self.policy.similar.indexes() && outcome != Reprocessed::Gone {
            let now = self.ports.clock.now();
            if let Some(record) = self.ports.images.get(id).await?.filter(|r| r.is_live(now))
                && let Some(signature) = record.signature()
            {
                crate::similar::index(&self.ports, id, signature).await?;
            }
        }
        Ok(outcome)
    }

    async fn reprocess_unfiled(&self, id: &ImageId) -> Result<Reprocessed, FlowError> {
        let now = self.ports.clock.now();
        let Some(record) = self.ports.images.get(id).await?.filter(|r| r.is_live(now)) else {
            return Ok(Reprocessed::Gone);
        };
        if self.is_current(&record, self.imaging()?.version()) {
            return Ok(Reprocessed::Current);
        }
        if self.lacks_only_derived(&record, self.imaging()?.version())
            && let Some(added) = self.add_derived(&record).await?
        {
            return Ok(added);
        }
        Stage::Backfill
            .time_async(self.reprocess_record(&record))
            .await
    }

    /// Gives a record made before placeholders, signatures or inner hashes what it lacks of them
    /// (a signature without an inner hash is made again whole), each from
    /// the variant of the photo's shape it is made of (a small read and decode each: no new
    /// generation, no file written); `None` when a file cannot make one (an AVIF variant), to
    /// re-process the record whole.
    async fn add_derived(&self, record: &ImageRecord) -> Result<Option<Reprocessed>, FlowError> {
        let ImageState::Ready {
            width,
            height,
            variants,
            ..
        } = &record.state
        else {
            return Ok(None);
        };
        let full = (*width, *height);
        let imaging = Arc::clone(self.imaging()?);
        let sizes = || variants.iter().map(|v| (v.width, v.height));
        // The variant each is made of (`None`: not wanted): a record without a placeholder
        // source is re-processed whole; one without a signature source gets none.
        let placeholder = match record.thumbhash() {
            Some(_) => None,
            None => match imaging.placeholder_source(&mut sizes(), full) {
                Some(i) => Some(i),
                None => return Ok(None),
            },
        };
        let signature = record
            .signature()
            .is_none_or(|s| !s.is_complete())
            .then(|| imaging.signature_source(&mut sizes(), full))
            .flatten();
        // Each source read and decoded once (by default both are the `medium` variant).
        let mut sources: Vec<usize> = placeholder.into_iter().chain(signature).collect();
        sources.dedup();
        for i in sources {
            let Some(variant) = variants.get(i) else {
                return Ok(None);
            };
            let Some(file) = self.variant_file(record, variant).await? else {
                return Ok(Some(Reprocessed::Gone));
            };
            let (make_placeholder, make_signature) = (placeholder == Some(i), signature == Some(i));
            let pipeline = Arc::clone(&imaging);
            let (thumbhash, made_signature) = self
                .derive(move || {
                    pipeline.derive_from_variant(&file, make_placeholder, make_signature)
                })
                .await?;
            if make_placeholder {
                let Some(thumbhash) = thumbhash else {
                    return Ok(None);
                };
                if !self
                    .ports
                    .images
                    .set_thumbhash(&record.id, &record.generation, &thumbhash)
                    .await?
                {
                    return Ok(Some(Reprocessed::Gone));
                }
                info!(image_id = %record.id, "placeholder added");
            }
            if make_signature {
                let Some(signature) = made_signature else {
                    return Ok(None);
                };
                if !self
                    .ports
                    .images
                    .set_signature(&record.id, &record.generation, &signature)
                    .await?
                {
                    return Ok(Some(Reprocessed::Gone));
                }
                info!(image_id = %record.id, "perceptual signature added");
            }
        }
        Ok(Some(Reprocessed::Done))
    }

    /// A stored variant's file; `None` when it is gone (re-processed or collected since the
    /// record was read: the next step sees what is there now).
    pub(crate) async fn variant_file(
        &self,
        record: &ImageRecord,
        variant: &StoredVariant,
    ) -> Result<Option<bytes::Bytes>, FlowError> {
        let key = BlobKey::variant(
            &record.id,
            &record.generation,
            &variant.name,
            variant.format,
        );
        match self.ports.blobs.get(&key).await {
            Ok(file) => Ok(Some(file)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Runs a decode off the async workers.
    async fn derive<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, FlowError> {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| FlowError::Internal(format!("deriving from a variant: {e}")))
    }

    /// Re-processes a live record from its original, whatever its version (the audit's repair
    /// of missing files does too).
    pub(crate) async fn reprocess_record(
        &self,
        record: &ImageRecord,
    ) -> Result<Reprocessed, FlowError> {
        let id = &record.id;
        let original = match self
            .ports
            .blobs
            .get(&BlobKey::original(id, &record.generation))
            .await
        {
            Ok(original) => original,
            // Collected (or re-processed) since it was read: nothing to do. Still the record
            // read: its original is missing, which the caller reports.
            Err(StoreError::NotFound(key)) => {
                let now = self.ports.clock.now();
                let current = self.ports.images.get(id).await?;
                if current.is_some_and(|r| r.generation == record.generation && r.is_live(now)) {
                    return Err(StoreError::NotFound(key).into());
                }
                return Ok(Reprocessed::Gone);
            }
            Err(e) => return Err(e.into()),
        };
        let processed = {
            let _backfill = self
                .backfill_slots
                .acquire()
                .await
                .map_err(|e| FlowError::Internal(e.to_string()))?;
            self.until_no_upload_is_processing().await;
            let processed = decode(
                self.imaging()?,
                &self.budget,
                &self.process_slots,
                &original,
            )
            .await?;
            self.counters.pipeline_runs.increment(1);
            self.counters.backfill_runs.increment(1);
            processed?
        };
        let generation = Generation::random_other_than(&record.generation);
        // The strong hash is of the bytes sent: an original stored as sent gives it, a stripped
        // one has its record's.
        let as_sent = record
            .original_metadata()
            .is_none_or(|kept| kept == OriginalMetadata::Keep);
        let source = Source {
            bytes: &original,
            sha256: record
                .sha256()
                .copied()
                .or_else(|| as_sent.then(|| ContentHash::of_bytes(&original))),
            metadata: record.original_metadata(),
        };
        let ready = write_files(
            &self.ports,
            id,
            &generation,
            source,
            processed,
            self.imaging()?.version().clone(),
            &self.counters,
        )
        .await?;
        let keep = self.ports.clock.now().plus(self.policy.sweep_grace);
        let replaced = self
            .ports
            .images
            .replace_files(id, &record.generation, &generation, ready, keep)
            .await;
        let answer = match &replaced {
            Ok(Some(record)) => Answer::Applied(Box::new(record.clone())),
            Ok(None) => Answer::Refused,
            Err(e) => Answer::Failed(e),
        };
        let write = RecordWrite::Replace {
            expected: &record.generation,
        };
        match settle_files(&self.ports, &self.counters, id, &generation, write, answer).await {
            FilesFate::Ours(_) => {
                info!(image_id = %id, from = %record.generation, to = %generation, "re-processed");
                Ok(Reprocessed::Done)
            }
            // Collected or changed meanwhile: that record wins, and these files are no one's.
            FilesFate::Delete => {
                if let Err(e) =
                    delete_generation_files(&self.ports, id, &generation, FileScope::Variants).await
                {
                    warn!(image_id = %id, error = %e, "could not remove files of a re-processing that lost its record; the sweeper will");
                }
                Ok(Reprocessed::Gone)
            }
            // Unknown whether it was (or will be) applied: the files stay (the sweeper collects
            // them if not), and the task fails retryably (a redelivery finds the record current
            // if it was).
            FilesFate::Leave => Err(replaced
                .err()
                .unwrap_or_else(|| {
                    StoreError::Conflict(format!(
                        "image {id}: re-pointing from generation {} was refused unexplained",
                        record.generation
                    ))
                })
                .into()),
        }
    }
}

impl Service {
    /// Whether a record's files are what a backfill towards `target` makes: variants of that
    /// set, an original that keeps no more metadata than `IMGEST_ORIGINAL_METADATA` allows
    /// (a backfill rewrites the others' originals too, under a new generation), and a
    /// placeholder (records made before placeholders were get one).
    fn is_current(&self, record: &ImageRecord, target: &VariantSetVersion) -> bool {
        record.thumbhash().is_some()
            && !self.lacks_a_signature(record)
            && self.lacks_only_derived(record, target)
    }

    /// Whether a record has no signature, or one made before inner hashes were, though one of
    /// its variants could make it.
    fn lacks_a_signature(&self, record: &ImageRecord) -> bool {
        let ImageState::Ready {
            width,
            height,
            variants,
            signature,
            ..
        } = &record.state
        else {
            return false;
        };
        if signature.as_ref().is_some_and(|s| s.is_complete()) {
            return false;
        }
        let mut sizes = variants.iter().map(|v| (v.width, v.height));
        self.imaging().map_or(true, |i| {
            i.signature_source(&mut sizes, (*width, *height)).is_some()
        })
    }

    /// Whether a record's files are current (see [`is_current`](Self::is_current)) whatever
    /// its placeholder and signature.
    fn lacks_only_derived(&self, record: &ImageRecord, target: &VariantSetVersion) -> bool {
        record.variant_set() == Some(target)
            && self.imaging().is_ok_and(|imaging| {
                imaging
                    .original_metadata()
                    .is_met_by(record.original_metadata())
            })
    }

    /// Waits while a seller's new photo is being processed (or waits to be): a backfill decode
    /// started now would share the cores with it. Polled: a backfill task may wait a few
    /// milliseconds longer than it must, a live upload never waits for a backfill to start.
    async fn until_no_upload_is_processing(&self) {
        while self.admission.available_permits() < self.admitted {
            tokio::time::sleep(UPLOAD_POLL).await;
        }
    }
}

/// How often a waiting backfill task looks whether live uploads are done.
const UPLOAD_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// How many photos backfill may decode at once beside live work.
pub(crate) fn backfill_slots(process_concurrency: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(process_concurrency.saturating_sub(1).max(1)))
}
