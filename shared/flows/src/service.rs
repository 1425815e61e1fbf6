//! The service: the ports, the lifecycle policy and (in a process that decodes photos) the
//! pipeline, that every flow runs over. The pipeline comes in through its port
//! ([`Imaging`]): a function that never decodes (the collectors) runs without one and links
//! no codec.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{FlowCounters, FlowCounts, FlowError};
pub use imgest_core::Ports;
use imgest_core::budget::{MemoryBudget, Refusal, Reservation};
use imgest_core::domain::{SimilarMode, VariantSet};
use imgest_core::imaging::{Imaging, PipelineError};
use imgest_core::telemetry::counters::Tally;
use imgest_settings::Settings;

/// How long a body waits for room in the memory budget before it is refused as overloaded:
/// long enough to ride out a burst, short enough that a client is not left hanging.
pub const BODY_WAIT: Duration = Duration::from_secs(10);

/// Lifecycle and limit settings the flows apply.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The variant set configured (`IMGEST_VARIANTS`): what the sweep keeps, in a process
    /// without the pipeline too.
    pub variants: VariantSet,
    /// The largest photo body accepted (`IMGEST_MAX_BODY`), in bytes.
    pub max_body: u64,
    pub orphan_ttl: Duration,
    pub claim_ttl: Duration,
    pub sweep_grace: Duration,
    /// How long an API upload waits for another request's claim on the same bytes
    /// (`IMGEST_DEDUP_WAIT`) before answering `still_processing`.
    pub dedup_wait: Duration,
    /// The share of a shard's files (percent) a sweep may delete before it stops and reports
    /// (`IMGEST_SWEEP_MAX_SHARE`).
    pub sweep_max_share: u8,
    pub max_photos_per_offer: usize,
    pub process_concurrency: usize,
    /// New photos allowed to wait for a decode slot; beyond that uploads are refused (429).
    pub max_pending_uploads: usize,
    /// How long a presigned upload URL (and its record) stays valid.
    pub upload_url_ttl: Duration,
    /// Offers live in their clients' namespaces (identity on), not in one shared one: what
    /// trusted paths (the intake queue, `imgest crawl`) take a request's client for.
    pub per_client_offers: bool,
    /// Uploads per minute per token subject (`IMGEST_UPLOAD_RPM`).
    pub upload_rpm: u32,
    /// The memory the process should stay within (`IMGEST_MEMORY_BUDGET`).
    pub memory_budget: u64,
    /// How many download tiers there are (`IMGEST_FETCH_TIERS`): their queues are live work.
    pub fetch_tiers: usize,
    /// Photos a backfill re-processes per second at most (`IMGEST_BACKFILL_RATE`; 0: no limit).
    pub backfill_rate: u32,
    /// Parts of the index a backfill enumerates side by side (`IMGEST_BACKFILL_SEGMENTS`).
    pub backfill_segments: u32,
    /// The receive limit of the queue this process consumes (`IMGEST_MAX_RECEIVES`): a
    /// message still failing on that receive is given up on, with its reason.
    pub max_receives: u32,
    /// Erasures delete files here (the embedded backend, the erasure function, the CLI), or
    /// file them for the erasure function (the other AWS functions may not delete versions).
    pub erase_files_here: bool,
    /// Near-duplicate detection (`IMGEST_SIMILAR`).
    pub similar: SimilarMode,
}

impl Policy {
    pub fn from_settings(s: &Settings) -> Self {
        Self {
            variants: s.variants.clone(),
            max_body: s.max_body,
            orphan_ttl: s.orphan_ttl,
            claim_ttl: s.claim_ttl,
            sweep_grace: s.sweep_grace,
            dedup_wait: s.dedup_wait,
            sweep_max_share: s.sweep_max_share,
            max_photos_per_offer: s.max_photos_per_offer,
            process_concurrency: s.process_concurrency,
            max_pending_uploads: s.max_pending_uploads,
            upload_url_ttl: s.upload_url_ttl,
            per_client_offers: s.auth.per_client_offers(),
            upload_rpm: s.upload_rpm,
            memory_budget: s.memory_budget,
            fetch_tiers: s.crawl.tiers.len(),
            backfill_rate: s.backfill_rate,
            backfill_segments: s.backfill_segments,
            max_receives: s.max_receives,
            erase_files_here: matches!(s.backend, imgest_settings::Backend::Embedded { .. }),
            similar: s.similar,
        }
    }
}

pub struct Service {
    pub(crate) ports: Ports,
    /// `None` in a process that never decodes (see [`with_imaging`](Self::with_imaging)).
    imaging: Option<Arc<dyn Imaging>>,
    pub(crate) policy: Policy,
    /// Bounds concurrent decodes to the cores we have: more only adds memory, not speed.
    pub(crate) process_slots: Arc<Semaphore>,
    /// Bounds backfill's decodes to one fewer than `process_slots` (live work first).
    pub(crate) backfill_slots: Arc<Semaphore>,
    /// Bounds new photos in memory (decoding or waiting to): each holds its whole body.
    pub(crate) admission: Arc<Semaphore>,
    /// `admission`'s size: fewer permits available means a new photo is being uploaded.
    pub(crate) admitted: usize,
    /// What bodies and decodes may hold (see `budget.rs`).
    pub(crate) budget: MemoryBudget,
    /// What the flows count (see [`counts`](Self::counts)).
    pub(crate) counters: FlowCounters,
    /// The CDN erasures tell, if one is configured.
    pub(crate) cdn: Option<Arc<dyn super::erase::Cdn>>,
    tally: Arc<Tally>,
}

impl Service {
    /// The service over `ports`, without the pipeline: the flows that decode photos refuse
    /// ([`FlowError::NoPipeline`]) until it is given ([`with_imaging`](Self::with_imaging)).
    pub fn new(ports: Ports, policy: Policy) -> Self {
        let slots = policy.process_concurrency.max(1);
        let admitted = slots + policy.max_pending_uploads;
        let tally = Arc::new(Tally::default());
        Self {
            ports,
            imaging: None,
            process_slots: Arc::new(Semaphore::new(slots)),
            backfill_slots: super::backfill::backfill_slots(slots),
            admission: Arc::new(Semaphore::new(admitted)),
            admitted,
            budget: MemoryBudget::new(policy.memory_budget),
            counters: FlowCounters::register(&tally),
            cdn: None,
            tally,
            policy,
        }
    }

    /// Holds room for a body of `len` bytes before it is read (an upload, an object read
    /// back): waits up to [`BODY_WAIT`] for it, then refuses as overloaded (429, to retry).
    pub async fn reserve_body(&self, len: u64) -> Result<Reservation, FlowError> {
        match self.budget.body(len, BODY_WAIT).await {
            Ok(reservation) => Ok(reservation),
            Err(Refusal::Busy { .. }) => Err(FlowError::Overloaded),
            Err(Refusal::NeverFits { needed, pool }) => {
                Err(FlowError::Image(PipelineError::TooLarge {
                    size: needed,
                    limit: pool,
                }))
            }
        }
    }

    /// Whether this process's decoding pool can ever hold `body`'s decode (its footprint, from
    /// the header). A header that does not read says yes: processing it gives the error.
    pub fn fits_in_memory(&self, body: &[u8]) -> bool {
        match self.imaging.as_ref().map(|imaging| imaging.footprint(body)) {
            Some(Ok(footprint)) => footprint.bytes <= self.budget.work_pool(),
            Some(Err(_)) | None => true,
        }
    }

    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// This service with the pipeline: what a process that decodes photos starts with. What the
    /// pipeline makes and accepts is then the policy's too (one answer for the sweep and the
    /// body limits).
    pub fn with_imaging(mut self, imaging: Arc<dyn Imaging>) -> Self {
        self.policy.variants = imaging.variants().clone();
        self.policy.max_body = imaging.max_body();
        self.imaging = Some(imaging);
        self
    }

    /// The pipeline, or [`FlowError::NoPipeline`] in a process started without it.
    pub fn imaging(&self) -> Result<&Arc<dyn Imaging>, FlowError> {
        self.imaging.as_ref().ok_or(FlowError::NoPipeline)
    }

    /// The largest photo body accepted.
    pub fn max_body(&self) -> u64 {
        self.policy.max_body
    }

    /// The variant set configured.
    pub fn variants(&self) -> &VariantSet {
        &self.policy.variants
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// This process deletes erased files itself (the erasure function, the operator's CLI).
    pub fn erasing_files_here(mut self) -> Self {
        self.policy.erase_files_here = true;
        self
    }

    /// What this service's flows did so far, read from its counters.
    pub fn counts(&self) -> FlowCounts {
        FlowCounts::read(&self.tally)
    }
}
