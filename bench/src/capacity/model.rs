//! The capacity model's formulas: from a scenario (named inputs, the deployment, limits) and
//! the measured profiles, one row per figure, each with the limit it is held against and a
//! trace of where it came from. `docs/capacity.md` explains each group.

use anyhow::Result;

use super::measured::{FULL_VCPU_MB, Figure, GcRecord, Measured, decode_span};
use super::scenario::{AuditMode, Checkpoint, Latency, LatencyClass, LongWaits, Scenario};
use imgest_core::budget::MemoryBudget;
use imgest_crawl::{JOINER_GROUPS, JOINERS_PER_PAGE, RECORD_REUSE};

/// The API's routes the model holds against their throttles (a scenario's
/// `deployment.api.routes` may name these and `"default"`, nothing else).
pub const ROUTES: [&str; 9] = [
    "POST /v1/images",
    "POST /v1/uploads",
    "GET /v1/uploads/{upload_id}",
    "PUT /v1/offers/{offer_id}/photos",
    "DELETE /v1/offers/{offer_id}",
    "POST /v1/crawl",
    "GET /v1/offers/{offer_id}/crawl",
    "GET /v1/crawls",
    "GET /v1/images/{image_id}",
];
/// SQS returns at most this many messages per receive: without a batching window, a batch
/// holds no more.
const SQS_RECEIVE_MAX: f64 = 10.0;
const MB: f64 = 1024.0 * 1024.0;
/// The item class of a popular URL's waiters filed as items of their own.
const WAITER_CLASS: &str = "rec waiter";
/// The item class of the results' feed's entries.
const FEED_CLASS: &str = "rec feed";

/// One figure of the model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub group: &'static str,
    pub item: String,
    pub value: f64,
    pub unit: &'static str,
    /// What it is held against (`None`: reported only).
    pub limit: Option<f64>,
    pub breach: bool,
    pub trace: String,
}

/// A suggested deployment value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Suggestion {
    pub parameter: String,
    pub value: String,
    pub trace: String,
    #[serde(skip)]
    pub setting: Setting,
}

/// What a suggestion sets: a template parameter, or a quota AWS raises on request.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    FetchConcurrency(usize, f64),
    IntakeConcurrency(f64),
    ProcessMaxConcurrency(f64),
    WebhookReservedConcurrency(f64),
    ApiConcurrency(f64),
    /// A route's throttle: rate, burst.
    Throttle(String, f64, f64),
    TableWarmWriteUnits(f64),
    TableWarmReadUnits(f64),
    BackfillConcurrency(f64),
    BackfillRate(f64),
    /// The biggest client's `ClientRpmOverrides` entry.
    BiggestClientRpm(f64),
    HostConcurrency(f64),
    /// The scheduled maintenance function's `MemorySize`.
    ScheduledGcMemory(f64),
    /// GC's runs side by side (`GcParts`).
    GcParts(f64),
    /// The sweep's runs side by side (`SweepParts`).
    SweepParts(f64),
    /// Quotas: Lambda's concurrent executions, SNS's publish rate, API Gateway's account rate.
    AccountConcurrency(f64),
    SnsPublishRate(f64),
    ApiAccountRate(f64),
    /// CloudFront's invalidation paths in progress per distribution; SQS's messages in flight
    /// per queue.
    CdnPathsInProgress(f64),
    SqsInFlight(f64),
    /// The template's `LongWaits`.
    LongWaits(LongWaits),
}

impl Setting {
    /// The template parameter (or quota) and its value, as the table prints them.
    fn named(&self) -> (String, String) {
        let n = |v: &f64| format!("{v}");
        match self {
            Self::FetchConcurrency(t, v) => (format!("FetchConcurrency[{t}]"), n(v)),
            Self::IntakeConcurrency(v) => ("IntakeConcurrency".into(), n(v)),
            Self::ProcessMaxConcurrency(v) => ("ProcessMaxConcurrency".into(), n(v)),
            Self::WebhookReservedConcurrency(v) => ("WebhookReservedConcurrency".into(), n(v)),
            Self::ApiConcurrency(v) => ("ApiConcurrency".into(), n(v)),
            Self::Throttle(route, rate, burst) => {
                (format!("throttle {route}"), format!("{rate}/{burst}"))
            }
            Self::TableWarmWriteUnits(v) => ("TableWarmWriteUnits".into(), n(v)),
            Self::TableWarmReadUnits(v) => ("TableWarmReadUnits".into(), n(v)),
            Self::BackfillConcurrency(v) => ("BackfillConcurrency".into(), n(v)),
            Self::BackfillRate(v) => ("BackfillRate".into(), n(v)),
            Self::BiggestClientRpm(v) => {
                ("ClientRpmOverrides".into(), format!("BIGGEST_CLIENT={v}"))
            }
            Self::HostConcurrency(v) => ("HostConcurrency".into(), n(v)),
            Self::ScheduledGcMemory(v) => ("ScheduledGcFunction.MemorySize".into(), n(v)),
            Self::GcParts(v) => ("GcParts".into(), n(v)),
            Self::SweepParts(v) => ("SweepParts".into(), n(v)),
            Self::AccountConcurrency(v) => ("quota: Lambda concurrent executions".into(), n(v)),
            Self::SnsPublishRate(v) => ("quota: SNS Publish (messages/s)".into(), n(v)),
            Self::ApiAccountRate(v) => ("quota: API Gateway throttle (requests/s)".into(), n(v)),
            Self::CdnPathsInProgress(v) => (
                "quota: CloudFront invalidation paths in progress".into(),
                n(v),
            ),
            Self::SqsInFlight(v) => ("quota: SQS messages in flight per queue".into(), n(v)),
            Self::LongWaits(w) => (
                "LongWaits".into(),
                match w {
                    LongWaits::StepFunctions => "step-functions",
                    LongWaits::SqsChain => "sqs-chain",
                }
                .into(),
            ),
        }
    }

    /// The scenario with this set.
    pub fn apply(&self, s: &mut Scenario) {
        let d = &mut s.deployment;
        match self {
            Self::FetchConcurrency(t, v) => d.fetch[*t].reserved = *v,
            Self::IntakeConcurrency(v) => d.intake.max_concurrency = *v,
            Self::ProcessMaxConcurrency(v) => d.process.max_concurrency = *v,
            Self::WebhookReservedConcurrency(v) => d.webhooks.max_concurrency = *v,
            Self::ApiConcurrency(v) => d.api.reserved = *v,
            Self::Throttle(route, rate, burst) => {
                d.api.routes.insert(route.clone(), [*rate, *burst]);
            }
            Self::TableWarmWriteUnits(v) => d.warm_wcu = *v,
            Self::TableWarmReadUnits(v) => d.warm_rcu = *v,
            Self::BackfillConcurrency(v) => {
                d.backfill.concurrency = *v;
                // Its reserved concurrency holds its queue's instances and the enumerator.
                d.backfill.reserved = v + 1.0;
            }
            Self::BackfillRate(v) => d.backfill.rate = *v,
            Self::BiggestClientRpm(v) => d.biggest_client_rpm = *v,
            Self::HostConcurrency(v) => d.host_concurrency = *v,
            Self::ScheduledGcMemory(v) => d.gc.memory_mb = *v,
            Self::GcParts(v) => {
                // Each part is an instance of the maintenance function beside the sweep's.
                d.maintenance_instances += v - d.gc.jobs;
                d.gc.jobs = *v;
            }
            Self::SweepParts(v) => {
                d.maintenance_instances += v - d.sweep.jobs;
                d.sweep.jobs = *v;
            }
            Self::AccountConcurrency(v) => s.limits.account_concurrency = *v,
            Self::SnsPublishRate(v) => s.limits.sns_publish_per_s = *v,
            Self::ApiAccountRate(v) => s.limits.api_account_rps = *v,
            Self::CdnPathsInProgress(v) => s.limits.cdn_paths_in_progress = *v,
            Self::SqsInFlight(v) => s.limits.sqs_in_flight = *v,
            Self::LongWaits(w) => d.long_waits = *w,
        }
    }
}

#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub suggestions: Vec<Suggestion>,
}

impl Report {
    pub fn breaches(&self) -> usize {
        self.rows.iter().filter(|r| r.breach).count()
    }

    pub(super) fn row(
        &mut self,
        group: &'static str,
        item: impl Into<String>,
        value: f64,
        unit: &'static str,
        limit: Option<f64>,
        trace: impl Into<String>,
    ) {
        let breach = limit.is_some_and(|l| value > l + 1e-9);
        self.rows.push(Row {
            group,
            item: item.into(),
            value,
            unit,
            limit,
            breach,
            trace: trace.into(),
        });
    }

    /// A row that must be at least `floor`.
    fn row_at_least(
        &mut self,
        group: &'static str,
        item: impl Into<String>,
        value: f64,
        unit: &'static str,
        floor: f64,
        trace: impl Into<String>,
    ) {
        self.rows.push(Row {
            group,
            item: item.into(),
            value,
            unit,
            limit: Some(floor),
            breach: value + 1e-9 < floor,
            trace: format!("{} (at least {})", trace.into(), fmt(floor)),
        });
    }

    fn suggest(&mut self, setting: Setting, trace: String) {
        let (parameter, value) = setting.named();
        self.suggestions.push(Suggestion {
            parameter,
            value,
            trace,
            setting,
        });
    }
}

/// The state transitions of one delayed-send execution (`infra/statemachine/delayed-send.asl.json`:
/// which queue, its URL, the wait, the send), each billed on Standard workflows.
const SFN_TRANSITIONS: f64 = 4.0;

/// `headroom × value`, rounded up to a whole `step` (a suggested setting or quota).
fn sized(headroom: f64, value: f64, step: f64) -> f64 {
    (headroom * value / step).ceil() * step
}

/// Numbers in traces: few digits, no noise.
pub fn fmt(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn f(fig: &Figure) -> String {
    format!("{} [{}]", fmt(fig.value), fig.source)
}

/// How a shared item's writes grow with a fetch invocation.
#[derive(Clone, Copy)]
enum Writes {
    /// A flush per invocation that holds the entity's tasks (and every `FLUSH_EVERY` of it).
    PerFlush,
    /// With the entity's tasks in the batch (a rate limit: a request per gathered group).
    PerTask,
}

/// What one function needs at peak.
struct FunctionLoad {
    name: String,
    invocations_per_s: f64,
    concurrency: f64,
    memory_mb: f64,
}

/// The probability that a batch of `batch` tasks holds one for an entity with `share` of them.
pub(super) fn in_batch(share: f64, batch: f64) -> f64 {
    1.0 - (1.0 - share).powf(batch)
}

/// How long a fetch invocation holds its instance, seconds: until its slowest task gives up
/// (in the model the tier's deadline: a batch of a hundred has a download that runs out its
/// time) or until its photos are processed, whichever is later. Processing starts as the
/// answers come (`answer_s`), not after the slowest task: the batch's CPU (`cpu_s`, on a whole
/// core) runs at the function's share of a vCPU from then on, with its requests (`waits_s`:
/// the records, files and messages of its photos) chained to the decodes as a processed
/// photo's are ([`decode_span`]).
pub fn fetch_invocation_s(
    slowest_s: f64,
    answer_s: f64,
    cpu_s: f64,
    vcpu: f64,
    waits_s: f64,
) -> f64 {
    slowest_s.max(answer_s + decode_span(cpu_s / vcpu.max(1e-9), cpu_s, waits_s))
}

/// The requests of one sweep page: its LIST, its records' lookups (`BatchGetItem`s, one after
/// another), its checkpoints and other single-item reads and writes.
#[derive(Debug, Clone, Copy)]
pub struct SweepPage {
    pub files: f64,
    pub batch_gets: f64,
    pub saves: f64,
    pub reads: f64,
}

/// A sweep job's files per second, a page at a time: the page's requests one after another,
/// each with its CPU (`cpu_ms_per_request` on a whole core) at the function's share of a vCPU,
/// the waits hiding behind the quota as in `StageTime::total`.
pub fn sweep_job_rate(
    page: SweepPage,
    cpu_ms_per_request: f64,
    vcpu: f64,
    latency: &Latency,
) -> f64 {
    let waits_ms = latency.of(LatencyClass::S3)
        + page.batch_gets * latency.of(LatencyClass::DynamodbBatch)
        + (page.saves + page.reads) * latency.of(LatencyClass::Dynamodb);
    let cpu_ms = (1.0 + page.batch_gets + page.saves + page.reads) * cpu_ms_per_request;
    let page_ms = (cpu_ms / vcpu.max(1e-9)).max(cpu_ms + waits_ms);
    page.files / (page_ms / 1000.0).max(1e-9)
}

/// A GC job's records per second, in rounds of `per_round` records: each round lists its
/// records (its requests' CPU and waits one after another), then collects them `concurrency`
/// at a time, each its own chain of CPU (on a core)
/// and requests; one record's CPU runs while others wait, so the round's collecting takes the
/// longer of all its CPU at the function's share of a vCPU and its waves of chains.
/// Runs of a job side by side for `rate` (with its headroom) at `per_job` a run busy `duty`
/// of the time: the next power of two (the template's `GcParts` and `SweepParts` take those,
/// so each part has as many first digits), at most
/// [`MAX_JOB_PARTS`](imgest_core::domain::MAX_JOB_PARTS), at least `today`; and the reason.
fn parts_for(rate: f64, per_job: f64, duty: f64, today: f64) -> (f64, String) {
    let max = f64::from(imgest_core::domain::MAX_JOB_PARTS);
    let needed = rate / (per_job * duty).max(1e-9);
    let parts = needed.max(1.0).log2().ceil().exp2().clamp(today, max);
    let why = format!(
        "{} with the headroom ÷ (a run's {} × its share of the time {}) = {} runs' work, the next power of two, at most {} (a part is a first hex digit's ids), at least today's",
        fmt(rate),
        fmt(per_job),
        fmt(duty),
        fmt(needed),
        fmt(max)
    );
    (parts, why)
}

pub fn gc_job_rate(g: &GcRecord, concurrency: f64, per_round: f64) -> f64 {
    let r = &g.record;
    let vcpu = r.vcpu.max(1e-9);
    let listing = (g.listing_cpu_s / vcpu).max(g.listing_cpu_s + g.listing_s);
    let waves = (per_round / concurrency.max(1.0)).ceil();
    let collecting = (per_round * r.cpu_s).max(waves * (r.cpu_s * r.vcpu + r.wait_s));
    per_round / (listing + collecting).max(1e-9)
}

pub fn model(s: &Scenario, m: &Measured) -> Result<Report> {
    let mut r = Report::default();
    let l = &s.load;
    let d = &s.deployment;
    let lim = &s.limits;
    let p = l.photos_per_hour / 3600.0;
    let extra = (l.attempts_per_photo - 1.0).max(0.0) * p;
    // Revalidations: a conditional request per photo of an unchanged offer re-sent past the URL
    // window. Intake routes each by its host's learned tier, as it routes a new download, so
    // they spread over the tiers as the downloads do.
    let unchanged = p * l.unchanged_resent_per_new;
    let revalidated = unchanged * l.unchanged_past_window_share;
    let lambda = [
        l.tier_mix[0] * (p + revalidated) + extra,
        l.tier_mix[1] * (p + revalidated),
        l.tier_mix[2] * (p + revalidated),
    ];
    let lambda_trace = [
        "tier_mix[0]·(p + r) + (attempts_per_photo − 1)·p, r = p·unchanged_resent_per_new·unchanged_past_window_share",
        "tier_mix[1]·(p + r)",
        "tier_mix[2]·(p + r)",
    ];
    let c = m.cpu_ms_per_item("new: fetch")?;
    // A fetch invocation's own requests, as deep as measured, at the scenario's latencies.
    let (fetch_waits_s, fetch_waits_trace) = m.invocation_waits_s("new: fetch", &s.latency_ms)?;
    let mut functions: Vec<FunctionLoad> = Vec::new();

    // 1. Functions: fetch tiers.
    let mut fetch_batches = [0.0; 3];
    let mut fetch_invocations = [0.0; 3];
    let mut fetch_durations = [0.0; 3];
    for t in 0..3 {
        let fx = &d.fetch[t];
        let g = "functions";
        let name = format!("fetch-{t}");
        let batch = if fx.window_s <= 0.0 {
            fx.batch.min(SQS_RECEIVE_MAX)
        } else {
            fx.batch.min(lambda[t] * fx.window_s / lim.sqs_pollers)
        };
        let batch_trace = if fx.window_s <= 0.0 {
            format!(
                "min(batch {}, 10 per receive without a window)",
                fmt(fx.batch)
            )
        } else {
            format!(
                "min(batch {}, λ{t} {} [{}] × window {} s ÷ {} pollers)",
                fmt(fx.batch),
                fmt(lambda[t]),
                lambda_trace[t],
                fmt(fx.window_s),
                fmt(lim.sqs_pollers)
            )
        };
        r.row_at_least(
            g,
            format!("{name}: tasks per batch"),
            batch,
            "tasks",
            fx.batch / 2.0,
            batch_trace.clone(),
        );
        // The share of the tier's tasks that download a new photo (the rest are timeouts'
        // retries and revalidations, which process nothing).
        let success = l.tier_mix[t] * p / lambda[t].max(1e-9);
        let vcpu = (fx.memory_mb / FULL_VCPU_MB).min(1.0);
        let cpu_s = batch * success * l.new_content_share * c.value / 1000.0;
        let duration = fetch_invocation_s(
            d.fetch_tiers_s[t],
            l.tier_mean_answer_s[t],
            cpu_s,
            vcpu,
            fetch_waits_s,
        );
        let invocations = lambda[t] / batch.max(1e-9);
        let concurrency = invocations * duration;
        fetch_batches[t] = batch;
        fetch_invocations[t] = invocations;
        fetch_durations[t] = duration;
        let trace = format!(
            "{} inv/s [λ{t} {} ÷ batch {}] × {} s [max(deadline {}, mean answer {} + decode span of (batch × success {} × new {} × c {} ÷ vCPU {}, requests {} s [{}]))]",
            fmt(invocations),
            fmt(lambda[t]),
            fmt(batch),
            fmt(duration),
            fmt(d.fetch_tiers_s[t]),
            fmt(l.tier_mean_answer_s[t]),
            fmt(success),
            fmt(l.new_content_share),
            f(&c),
            fmt(vcpu),
            fmt(fetch_waits_s),
            fetch_waits_trace,
        );
        r.row(
            g,
            format!("{name}: concurrency vs reserved"),
            concurrency,
            "instances",
            Some(fx.reserved),
            trace.clone(),
        );
        r.suggest(
            Setting::FetchConcurrency(t, (s.targets.headroom * concurrency).ceil().max(2.0)),
            format!(
                "⌈headroom {} × {}⌉",
                fmt(s.targets.headroom),
                fmt(concurrency)
            ),
        );
        r.row(
            g,
            format!("{name}: invocation length vs timeout"),
            duration,
            "s",
            Some(fx.timeout_s),
            "the later of the deadline and the answers plus the batch's processing (above)",
        );
        let pool = MemoryBudget::new((fx.memory_mb * MB) as u64).body_pool() as f64 / MB;
        r.row(
            g,
            format!("{name}: bodies in flight vs body pool"),
            batch * d.reservation_estimate_mb,
            "MB",
            Some(pool),
            format!(
                "batch {} × reservation {} MB; pool = MemoryBudget::new({} MB).body_pool()",
                fmt(batch),
                fmt(d.reservation_estimate_mb),
                fmt(fx.memory_mb)
            ),
        );
        // A task waiting for one of its host's slots spends its tier's deadline waiting: the
        // slots must get through the host's tasks of a batch within that deadline.
        r.row(
            g,
            format!("{name}: biggest host's tasks per batch vs its slots"),
            l.biggest_host_share * batch,
            "tasks",
            Some(d.host_concurrency * d.fetch_tiers_s[t] / l.tier_mean_answer_s[t]),
            format!(
                "biggest_host_share {} × batch {}; slots {} × the tier's deadline {} s ÷ mean answer {} s",
                fmt(l.biggest_host_share),
                fmt(batch),
                fmt(d.host_concurrency),
                fmt(d.fetch_tiers_s[t]),
                fmt(l.tier_mean_answer_s[t])
            ),
        );
        r.row(
            "queues",
            format!("{name}: messages in flight"),
            concurrency * batch,
            "messages",
            Some(lim.sqs_in_flight),
            format!("concurrency {} × batch {}", fmt(concurrency), fmt(batch)),
        );
        if concurrency * batch > lim.sqs_in_flight {
            r.suggest(
                Setting::SqsInFlight(sized(s.targets.headroom, concurrency * batch, 10_000.0)),
                format!(
                    "a quota raise for {name}'s queue: ⌈headroom × {} messages⌉ (in ten thousands)",
                    fmt(concurrency * batch)
                ),
            );
        }
        functions.push(FunctionLoad {
            name,
            invocations_per_s: invocations,
            concurrency,
            memory_mb: fx.memory_mb,
        });
    }

    service_limit_rows(&mut r, s, &lambda);
    // The host slots the biggest host's share of a batch needs within each tier's deadline.
    let slots = (0..3)
        .map(|t| {
            l.biggest_host_share * fetch_batches[t] * l.tier_mean_answer_s[t] / d.fetch_tiers_s[t]
        })
        .fold(0.0, f64::max);
    r.suggest(
        Setting::HostConcurrency((s.targets.headroom * slots).ceil().max(d.host_concurrency)),
        format!(
            "⌈headroom × {}⌉ [max over tiers of biggest_host_share × batch × mean answer ÷ deadline], at least today's",
            fmt(slots)
        ),
    );

    // Intake: offers of new, known and unchanged photos.
    let offers = [
        (
            "new: intake",
            p / l.photos_per_offer,
            "p ÷ photos_per_offer",
        ),
        (
            "known URLs: intake",
            p * l.known_url_photos_per_new / l.photos_per_offer,
            "p × known_url_photos_per_new ÷ photos_per_offer",
        ),
        (
            "unchanged: intake",
            (unchanged - revalidated) / l.photos_per_offer,
            "p × unchanged_resent_per_new × (1 − unchanged_past_window_share) ÷ photos_per_offer",
        ),
        (
            "revalidate: intake",
            revalidated / l.photos_per_offer,
            "p × unchanged_resent_per_new × unchanged_past_window_share ÷ photos_per_offer",
        ),
    ];
    // Stages of offers were measured on offers of `photos_per_offer()` photos: an offer of more
    // costs in proportion (an upper bound: part of an offer's work is per offer).
    let offer_scale = (l.photos_per_offer / m.photos_per_offer()).max(1.0);
    let intake_time = |stage: &str| -> Result<Figure> {
        Ok(
            m.stage_time(stage, d.intake.memory_mb, &s.latency_ms, offer_scale)?
                .figure(),
        )
    };
    let mut intake_c = 0.0;
    let mut intake_inv = 0.0;
    let mut intake_trace = Vec::new();
    for (stage, rate, how) in offers {
        let per = intake_time(stage)?;
        intake_c += rate * per.value;
        intake_inv += rate / d.intake.batch;
        intake_trace.push(format!("{} offers/s [{how}] × {} s", fmt(rate), f(&per)));
    }
    // The crawls the fetch and process functions settle come back to the intake function (its
    // settle queue), one message per crawl.
    let settled = [
        (
            "new: settle",
            p / l.photos_per_offer,
            "p ÷ photos_per_offer",
        ),
        (
            "revalidate: settle",
            revalidated / l.photos_per_offer,
            "revalidations ÷ photos_per_offer",
        ),
    ];
    for (stage, rate, how) in settled {
        let per = intake_time(stage)?;
        intake_c += rate * per.value;
        intake_inv += rate / d.intake.batch;
        intake_trace.push(format!(
            "{} settled crawls/s [{how}] × {}",
            fmt(rate),
            f(&per)
        ));
    }
    // Each result is filed in its client's feed as it is sent, a PutItem of the intake
    // function's: in the measured stages once the profile has feed entries, added here until then.
    if m.largest_item("new: settle", FEED_CLASS)?.value == 0.0 {
        let filed = (p * (1.0 + l.known_url_photos_per_new) + unchanged) / l.photos_per_offer;
        let put_s = s.latency_ms.dynamodb / 1000.0;
        intake_c += filed * put_s;
        intake_trace.push(format!(
            "{} results filed/s × {} s [latency.dynamodb; not in the profile]",
            fmt(filed),
            fmt(put_s)
        ));
    }
    r.row(
        "functions",
        "intake: concurrency vs its queues' maximum",
        intake_c,
        "instances",
        Some(d.intake.max_concurrency),
        intake_trace.join(" + "),
    );
    r.suggest(
        Setting::IntakeConcurrency((s.targets.headroom * intake_c).ceil().max(2.0)),
        format!("⌈headroom × {}⌉", fmt(intake_c)),
    );
    functions.push(FunctionLoad {
        name: "intake".into(),
        invocations_per_s: intake_inv,
        concurrency: intake_c,
        memory_mb: d.intake.memory_mb,
    });

    // Process: presigned uploads and hand-offs, each about an upload's work.
    let upload_time = |stage: &str, memory_mb: f64| -> Result<Figure> {
        Ok(m.stage_time(stage, memory_mb, &s.latency_ms, 1.0)?.figure())
    };
    // A new photo's upload decodes it; a known one's does not.
    let decode_time = |stage: &str, memory_mb: f64| -> Result<Figure> {
        Ok(m.decode_time(stage, memory_mb, &s.latency_ms, 1.0)?
            .figure())
    };
    let process_new = decode_time("upload: new", d.process.memory_mb)?;
    let process_rate =
        l.uploads_per_s * (1.0 - l.upload_inline_share) + p * l.new_content_share * l.handoff_share;
    let process_c = process_rate * process_new.value;
    r.row(
        "functions",
        "process: concurrency vs its queue's maximum",
        process_c,
        "instances",
        Some(d.process.max_concurrency),
        format!(
            "{} photos/s [uploads × (1 − inline) + p × new × handoff_share] × {}",
            fmt(process_rate),
            f(&process_new)
        ),
    );
    r.suggest(
        Setting::ProcessMaxConcurrency((s.targets.headroom * process_c).ceil().max(2.0)),
        format!("⌈headroom × {}⌉", fmt(process_c)),
    );
    functions.push(FunctionLoad {
        name: "process".into(),
        invocations_per_s: process_rate / d.process.batch,
        concurrency: process_c,
        memory_mb: d.process.memory_mb,
    });

    // API: routes and the function behind them.
    let inline = l.uploads_per_s * l.upload_inline_share;
    let presigned = l.uploads_per_s * (1.0 - l.upload_inline_share);
    let routes: [(&str, f64, &str); ROUTES.len()] = [
        (
            "POST /v1/images",
            inline,
            "uploads_per_s × upload_inline_share",
        ),
        (
            "POST /v1/uploads",
            presigned,
            "uploads_per_s × (1 − upload_inline_share)",
        ),
        (
            "GET /v1/uploads/{upload_id}",
            presigned * l.upload_polls_per_presigned,
            "presigned × upload_polls_per_presigned",
        ),
        (
            "PUT /v1/offers/{offer_id}/photos",
            l.hand_offers_per_s,
            "hand_offers_per_s",
        ),
        (
            "DELETE /v1/offers/{offer_id}",
            l.hand_deletes_per_s,
            "hand_deletes_per_s",
        ),
        ("POST /v1/crawl", l.http_crawls_per_s, "http_crawls_per_s"),
        (
            "GET /v1/offers/{offer_id}/crawl",
            l.crawl_status_polls_per_s,
            "crawl_status_polls_per_s",
        ),
        ("GET /v1/crawls", l.feed_polls_per_s, "feed_polls_per_s"),
        (
            "GET /v1/images/{image_id}",
            l.image_reads_per_s,
            "image_reads_per_s",
        ),
    ];
    let default_throttle = d.api.routes.get("default").copied().unwrap_or([0.0, 0.0]);
    let mut api_rps = 0.0;
    for (route, rate, how) in routes {
        let throttle = d.api.routes.get(route).copied().unwrap_or(default_throttle);
        api_rps += rate;
        r.row(
            "api routes",
            format!("{route}: requests/s vs throttle"),
            rate,
            "req/s",
            Some(throttle[0]),
            format!(
                "{how}; throttle {} rps, burst {}",
                fmt(throttle[0]),
                fmt(throttle[1])
            ),
        );
        r.row_at_least(
            "api routes",
            format!("{route}: burst vs rate"),
            throttle[1],
            "req",
            throttle[0],
            "a burst below the rate throttles the steady rate".to_owned(),
        );
        let rate_suggested = (2.0 * rate).max(10.0).ceil();
        r.suggest(
            Setting::Throttle(route.to_owned(), rate_suggested, 2.0 * rate_suggested),
            format!("[2 × {} (at least 10), twice that]", fmt(rate)),
        );
    }
    r.row(
        "api routes",
        "all routes vs the account's API rate",
        api_rps,
        "req/s",
        Some(lim.api_account_rps),
        "Σ routes",
    );
    if api_rps > lim.api_account_rps {
        r.suggest(
            Setting::ApiAccountRate(sized(s.targets.headroom, api_rps, 1000.0)),
            format!(
                "a quota raise: ⌈headroom × {} req/s⌉ (in thousands)",
                fmt(api_rps)
            ),
        );
    }
    let upload_new = decode_time("upload: new", d.api.memory_mb)?;
    let upload_dedup = upload_time("upload: dedup", d.api.memory_mb)?;
    let offer_write = m
        .stage_time(
            &format!("deleted: {}", crate::cost::STILL_LINKED),
            d.api.memory_mb,
            &s.latency_ms,
            offer_scale,
        )?
        .figure();
    let read_s = 2.0 * s.latency_ms.dynamodb / 1000.0;
    // A feed poll queries every shard of a day side by side, then refills a shard or two.
    let poll_s = 2.0 * s.latency_ms.dynamodb_batch / 1000.0;
    let api_c = inline
        * ((1.0 - l.upload_dedup_share) * upload_new.value
            + l.upload_dedup_share * upload_dedup.value)
        + (l.hand_offers_per_s + l.hand_deletes_per_s) * offer_write.value
        + (presigned * (1.0 + l.upload_polls_per_presigned)
            + l.http_crawls_per_s
            + l.crawl_status_polls_per_s
            + l.image_reads_per_s)
            * read_s
        + l.feed_polls_per_s * poll_s;
    r.row(
        "functions",
        "api: concurrency vs reserved",
        api_c,
        "instances",
        Some(d.api.reserved),
        format!(
            "inline {} × ((1 − dedup) × {} + dedup × {}) + offer writes {} × {} + small routes × {} s [2 × latency.dynamodb] + feed polls {} × {} s [2 × latency.dynamodb_batch: the shards side by side, a refill]",
            fmt(inline),
            f(&upload_new),
            f(&upload_dedup),
            fmt(l.hand_offers_per_s + l.hand_deletes_per_s),
            f(&offer_write),
            fmt(read_s),
            fmt(l.feed_polls_per_s),
            fmt(poll_s)
        ),
    );
    r.suggest(
        Setting::ApiConcurrency((s.targets.headroom * api_c).ceil().max(10.0)),
        format!("⌈headroom × {}⌉", fmt(api_c)),
    );
    functions.push(FunctionLoad {
        name: "api".into(),
        invocations_per_s: api_rps,
        concurrency: api_c,
        memory_mb: d.api.memory_mb,
    });

    // Webhooks: every attempt reads the client's endpoint, its cooling and the feed entry, then
    // waits for the partner's answer; a batch's deliveries run side by side, so an invocation
    // lasts about one delivery. A failed attempt is retried (about twice on average, as most
    // failures are brief) and cools the endpoint.
    let crawl_results_per_s =
        (p * (1.0 + l.known_url_photos_per_new) + unchanged) / l.photos_per_offer;
    let deliveries = crawl_results_per_s * l.webhook_share;
    let attempts = deliveries * (1.0 + 2.0 * l.webhook_failure_share);
    let attempt_s = l.webhook_answer_ms / 1000.0
        + 2.0 * s.latency_ms.dynamodb / 1000.0
        + s.latency_ms.dynamodb_batch / 1000.0
        + l.webhook_failure_share * s.latency_ms.sqs / 1000.0;
    let webhooks_c = attempts / d.webhooks.batch * attempt_s;
    r.row(
        "functions",
        "webhooks: concurrency vs its reserved",
        webhooks_c,
        "instances",
        Some(d.webhooks.max_concurrency),
        format!(
            "results {} × webhook_share {} × (1 + 2 × failure_share {}) ÷ batch {} × ({} s answer + 2 reads + a Query + a retry's send)",
            fmt(crawl_results_per_s),
            fmt(l.webhook_share),
            fmt(l.webhook_failure_share),
            fmt(d.webhooks.batch),
            fmt(l.webhook_answer_ms / 1000.0)
        ),
    );
    r.suggest(
        Setting::WebhookReservedConcurrency((s.targets.headroom * webhooks_c).ceil().max(2.0)),
        format!("⌈headroom × {}⌉", fmt(webhooks_c)),
    );
    functions.push(FunctionLoad {
        name: "webhooks".into(),
        invocations_per_s: attempts / d.webhooks.batch,
        concurrency: webhooks_c,
        memory_mb: d.webhooks.memory_mb,
    });

    // Account.
    let reserved: f64 = d.fetch.iter().map(|fx| fx.reserved).sum::<f64>()
        + d.api.reserved
        + d.backfill.reserved
        + d.webhooks.max_concurrency;
    r.row(
        "functions",
        "account: reserved concurrency vs what may be reserved",
        reserved,
        "instances",
        Some(lim.account_concurrency - lim.unreserved_min),
        "Σ fetch reserved + api + backfill + webhooks ≤ account − unreserved_min",
    );
    // A backfill may run through the peak, with every instance its concurrency allows.
    let used: f64 = functions.iter().map(|fl| fl.concurrency).sum::<f64>()
        + d.maintenance_instances
        + d.backfill.concurrency;
    r.row(
        "functions",
        "account: concurrency at peak",
        used,
        "instances",
        Some(lim.account_concurrency),
        format!(
            "Σ {} + maintenance {} + backfill {}",
            functions
                .iter()
                .map(|fl| format!("{} {}", fl.name, fmt(fl.concurrency)))
                .collect::<Vec<_>>()
                .join(" + "),
            fmt(d.maintenance_instances),
            fmt(d.backfill.concurrency)
        ),
    );
    // What the account must allow: the peak's instances, and the reserved ones beside the
    // unreserved minimum (a quota AWS raises on request).
    let account = (s.targets.headroom * used).max(reserved + lim.unreserved_min);
    if account > lim.account_concurrency {
        r.suggest(
            Setting::AccountConcurrency(sized(1.0, account, 100.0)),
            format!(
                "a quota raise: ⌈max(headroom × {}, reserved {} + unreserved_min {})⌉ (in hundreds)",
                fmt(used),
                fmt(reserved),
                fmt(lim.unreserved_min)
            ),
        );
    }

    // 2. DynamoDB item classes.
    let hot = lim.partition_fraction * lim.partition_wcu;
    let rmw_ceiling = 1000.0 / (2.0 * s.latency_ms.dynamodb);
    let flush_every = imgest_crawl::FLUSH_EVERY.as_secs_f64();
    // The measured batches' tasks, all of one client on one host: a batch's writes to the
    // client's rate limit grow with its tasks (those that wait for the host's slots ask
    // apart), so a client with a share of a batch's tasks makes at most that share of them.
    let measured_batch = {
        let fetch = m.stage("new: fetch")?;
        fetch.items as f64 / (fetch.invocations as f64).max(1.0)
    };
    let shared_item = |r: &mut Report,
                       name: &str,
                       class: &str,
                       share: f64,
                       share_trace: &str,
                       target: &str,
                       writes: Writes,
                       spread: Option<(f64, String)>|
     -> Result<()> {
        // A counter series is spread over shards, an add to one of them: the series' adds
        // (the benchmark's tasks are all of one host: one series) over its shards.
        let sharded = class.starts_with("ctr ");
        let w = if sharded {
            m.series_writes_per_invocation("new: fetch", class)?
        } else {
            m.writes_per_invocation("new: fetch", class)?
        };
        // The items the writes spread over (a write goes to one of them), and why.
        let (items, items_trace) = spread.unwrap_or((1.0, String::new()));
        let wcu = m.wcu_per_write("new: fetch", class)?;
        let mut rate = 0.0;
        let mut parts = Vec::new();
        for t in 0..3 {
            let (per, per_trace) = match writes {
                Writes::PerFlush => (
                    in_batch(share, fetch_batches[t]) * (fetch_durations[t] / flush_every).max(1.0),
                    format!(
                        "{} [1 − (1 − {share_trace})^{}] × max(1, {} s ÷ FLUSH_EVERY {} s)",
                        fmt(in_batch(share, fetch_batches[t])),
                        fmt(fetch_batches[t]),
                        fmt(fetch_durations[t]),
                        fmt(flush_every)
                    ),
                ),
                Writes::PerTask => {
                    let part = (share * fetch_batches[t] / measured_batch).min(1.0);
                    (
                        part,
                        format!(
                            "{} [min(1, {share_trace} × batch {} ÷ measured batch {})]",
                            fmt(part),
                            fmt(fetch_batches[t]),
                            fmt(measured_batch)
                        ),
                    )
                }
            };
            rate += fetch_invocations[t] * per * w.value;
            parts.push(format!("{} inv/s × {per_trace}", fmt(fetch_invocations[t])));
        }
        let (_, rmw, how) = m.contention(target)?;
        r.row(
            "dynamodb",
            format!("{name}: write units/s vs a hot partition"),
            rate * wcu.value / items,
            "WCU/s",
            Some(hot),
            format!(
                "({}) × {} × {}{}",
                parts.join(" + "),
                f(&w),
                f(&wcu),
                items_trace
            ),
        );
        if rmw {
            r.row(
                "dynamodb",
                format!("{name}: commits/s vs half its read-then-write ceiling"),
                rate,
                "writes/s",
                Some(rmw_ceiling / 2.0),
                format!(
                    "ceiling 1000 ÷ (read {} + write {} ms); {how}",
                    fmt(s.latency_ms.dynamodb),
                    fmt(s.latency_ms.dynamodb)
                ),
            );
        } else {
            r.row(
                "dynamodb",
                format!("{name}: writes per successful update"),
                m.contention(target)?.0.write_requests_per_update,
                "requests",
                Some(1.05),
                how,
            );
        }
        Ok(())
    };
    // A rate limit past its threshold is split into counters with a share each (the biggest
    // client's configured rate: its override, else ClientRpm).
    let rpm = if d.biggest_client_rpm > 0.0 {
        d.biggest_client_rpm
    } else {
        d.client_rpm
    };
    let counters = imgest_aws::dynamodb::rate_limit_shards(
        rpm.min(f64::from(u32::MAX)) as u32,
        std::time::Duration::from_secs(60),
    ) as f64;
    shared_item(
        &mut r,
        "rate limit of the biggest client",
        "ratelimit",
        l.biggest_client_share,
        "biggest_client_share",
        "ratelimit",
        Writes::PerTask,
        Some((
            counters,
            format!(
                " ÷ {} counters (its {}/min split at PERMITS_PER_S_PER_SHARD {}/s: a request takes from one)",
                fmt(counters),
                fmt(rpm),
                imgest_aws::dynamodb::PERMITS_PER_S_PER_SHARD
            ),
        )),
    )?;
    let host_class = if m
        .stage("new: fetch")?
        .keys
        .iter()
        .any(|k| k.class == "ctr host")
    {
        "ctr host"
    } else {
        "rec host"
    };
    let route_class = if host_class == "ctr host" {
        "ctr route"
    } else {
        "rec tier"
    };
    // A counter series is spread over COUNTER_SHARDS items.
    let series = |class: &str| {
        class.starts_with("ctr ").then(|| {
            let shards = f64::from(imgest_aws::dynamodb::COUNTER_SHARDS);
            (
                shards,
                format!(
                    " ÷ {} shards (COUNTER_SHARDS: an add goes to one)",
                    fmt(shards)
                ),
            )
        })
    };
    shared_item(
        &mut r,
        "the biggest host's health",
        host_class,
        l.biggest_host_share,
        "biggest_host_share",
        "host",
        Writes::PerFlush,
        series(host_class),
    )?;
    shared_item(
        &mut r,
        "the biggest (client, host)'s tiers",
        route_class,
        l.biggest_client_share * l.biggest_host_share,
        "client share × host share",
        "host",
        Writes::PerFlush,
        series(route_class),
    )?;

    // The biggest host's counts are read by every process that uses them (the fetch
    // functions' instances, and the intake function's to route), once per FRESH_FOR each, a
    // Query of every shard: each shard's partition takes all of those reads.
    let readers: f64 = functions
        .iter()
        .filter(|fl| fl.name.starts_with("fetch-") || fl.name == "intake")
        .map(|fl| fl.concurrency)
        .sum();
    // The biggest client's rate limit is read by every fetch instance that takes its tasks
    // (nearly every batch holds some), a Query of a counter's window each time a new bucket
    // (a sixtieth of the window: a second) is current. Each instance takes from its home
    // counter (picked once per process, so a counter is home to its share of the instances),
    // and reads another only when its home ran short: counted as one more for every instance
    // every bucket, a bound for a client under its rate; a client whose demand is above its
    // rate has every instance walk every counter.
    let limit_readers: f64 = functions
        .iter()
        .filter(|fl| fl.name.starts_with("fetch-"))
        .map(|fl| fl.concurrency)
        .sum();
    let limit_demand = l.biggest_client_share * lambda.iter().sum::<f64>() * 60.0;
    let (counter_readers, readers_trace) = if counters <= 1.0 {
        (
            limit_readers,
            "one counter, read by every instance".to_owned(),
        )
    } else if limit_demand >= rpm {
        (
            limit_readers,
            format!(
                "its demand {}/min is at its rate {}/min: every instance walks every counter",
                fmt(limit_demand),
                fmt(rpm)
            ),
        )
    } else {
        (
            limit_readers / counters * 2.0,
            format!(
                "÷ {} counters (each the home of its share of the instances) × 2 (another counter when the home runs short, every bucket: a bound)",
                fmt(counters)
            ),
        )
    };
    let q = m.rcu_per_query("new: fetch", "ratelimit")?;
    r.row(
        "dynamodb",
        "rate limit of the biggest client: read units/s per counter",
        counter_readers * q.value.max(0.5),
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "fetch instances {} × a Query a second (a bucket is a sixtieth of the 60-s window) × {} [{}, at least ½]; {readers_trace}",
            fmt(limit_readers),
            fmt(q.value),
            q.source
        ),
    );
    let fresh_for = imgest_crawl::FRESH_FOR.as_secs_f64();
    for (name, class) in [
        ("the biggest host's health", host_class),
        ("the biggest (client, host)'s tiers", route_class),
    ] {
        if !class.starts_with("ctr ") {
            continue;
        }
        let q = m.rcu_per_query("new: fetch", class)?;
        r.row(
            "dynamodb",
            format!("{name}: read units/s per shard"),
            readers / fresh_for * q.value.max(0.5),
            "RCU/s",
            Some(lim.partition_fraction * lim.partition_rcu),
            format!(
                "readers {} [fetch and intake instances] ÷ FRESH_FOR {} s × {} [{}, at least ½]",
                fmt(readers),
                fmt(fresh_for),
                fmt(q.value.max(0.5)),
                q.source
            ),
        );
    }

    // The popular URL: what a join writes.
    let joins = l.popular_url.join_per_s;
    let url_writes = m.writes_per_item("join: intake", "rec url")?;
    let wait_writes = m.writes_per_item("join: intake", WAITER_CLASS)?;
    let base = m.largest_item("new: intake", "rec url")?;
    let joined = m.largest_item("join: intake", "rec url")?;
    let joins_measured = m.stage("join: intake")?.items as f64;
    // A record that joins rewrite grows by what each adds; one they do not write (the first
    // joiner marks it, once) stays the size measured.
    let rewritten = url_writes.value >= 0.5;
    let growth = if rewritten {
        ((joined.value - base.value) / joins_measured.max(1.0)).max(0.0)
    } else {
        0.0
    };
    let url_size = joined.value.max(base.value) + growth * l.popular_url.offers;
    r.row(
        "dynamodb",
        "the popular URL's record: size with every offer waiting",
        url_size / 1024.0,
        "KB",
        Some(lim.item_kb),
        if rewritten {
            format!(
                "{} + {} B per join [({} − {}) ÷ {} joins] × offers {}",
                fmt(joined.value.max(base.value)),
                fmt(growth),
                f(&joined),
                f(&base),
                fmt(joins_measured),
                fmt(l.popular_url.offers)
            )
        } else {
            format!(
                "{}; joins do not rewrite it ({} writes per join)",
                f(&joined),
                f(&url_writes)
            )
        },
    );
    let url_wcu = joins * url_writes.value * (url_size / 1024.0).ceil().max(1.0);
    r.row(
        "dynamodb",
        "the popular URL's record: write units/s from joins",
        url_wcu,
        "WCU/s",
        Some(hot),
        format!("join_per_s {} × {} × ⌈size KB⌉", fmt(joins), f(&url_writes)),
    );
    // Waiters as items of their own, spread over groups by a hash of the crawl (a partition
    // key each), where the design has them; each checks its group's end mark after filing (a
    // consistent read of a small item), not the URL's record.
    if wait_writes.value > 0.0 {
        let groups = JOINER_GROUPS as f64;
        let wait_wcu = m.wcu_per_write("join: intake", WAITER_CLASS)?;
        r.row(
            "dynamodb",
            "the popular URL's waiters: write units/s on a group's partition",
            joins * wait_writes.value * wait_wcu.value / groups,
            "WCU/s",
            Some(hot),
            format!(
                "join_per_s {} × {} × {} ÷ {JOINER_GROUPS} groups (JOINER_GROUPS: a joiner's group by a hash of its crawl)",
                fmt(joins),
                f(&wait_writes),
                f(&wait_wcu)
            ),
        );
        r.row(
            "dynamodb",
            "the popular URL's group end marks: read units/s on a group's partition",
            joins / groups,
            "RCU/s",
            Some(lim.partition_fraction * lim.partition_rcu),
            format!(
                "join_per_s {} ÷ {JOINER_GROUPS} groups × 1 RCU (a consistent read of its group's mark after each filing) vs partition_fraction {} × partition_rcu {}",
                fmt(joins),
                fmt(lim.partition_fraction),
                fmt(lim.partition_rcu)
            ),
        );
    }
    // When its download settles, the invocation that ran it tells the waiters a page at most
    // and hands the next page on (each page's message hands on the one after before it tells
    // its own); where the design tells them all in that invocation, the page is all of them.
    let per_waiter = m.settle_seconds_per_waiter()?;
    let paged = wait_writes.value > 0.0;
    let per_invocation = if paged {
        l.popular_url.offers.min(JOINERS_PER_PAGE as f64)
    } else {
        l.popular_url.offers
    };
    let tier = 2;
    r.row(
        "functions",
        "the popular URL: waiters told in one invocation",
        per_invocation * per_waiter.value,
        "s",
        Some(d.fetch[tier].timeout_s),
        format!(
            "{} waiters × {}; against the slowest tier's timeout",
            if paged {
                format!(
                    "min(offers {}, a page {JOINERS_PER_PAGE})",
                    fmt(l.popular_url.offers)
                )
            } else {
                format!("offers {}", fmt(l.popular_url.offers))
            },
            f(&per_waiter)
        ),
    );
    // Telling a waiter links its offer to the photo: a transaction that writes the image's
    // item, so a drain is a burst of writes on one item. Pages run side by side, as many as
    // the intake function's instances; past the item's partition, DynamoDB throttles and the
    // pages are retried, so the drain goes at the lower of the two.
    if paged {
        let pages = (l.popular_url.offers / JOINERS_PER_PAGE as f64).ceil();
        let by_instances = pages.min(d.intake.max_concurrency) / per_waiter.value.max(1e-9);
        // A link of the image is on one of its shards (it is hot long before the drain ends),
        // and reads the image's item first (as often as the contention profile measured a
        // change of a hot image to read it, each a consistent read of an item under 4 KB).
        let by_item = hot / 2.0 * f64::from(imgest_aws::dynamodb::LINK_SHARDS);
        let item_reads = m.contention("image")?.0.reads_per_update.max(1e-9);
        let by_reads = lim.partition_fraction * lim.partition_rcu / item_reads;
        let told = by_instances.min(by_item).min(by_reads);
        r.row(
            "dynamodb",
            "the popular URL's drain: seconds to tell every waiter",
            l.popular_url.offers / told.max(1e-9),
            "s",
            Some(s.targets.popular_drain_s),
            format!(
                "offers {} ÷ min({} waiters/s [min(pages {}, IntakeConcurrency {}) ÷ {}], {} [its {} link shards' hot partitions {} WCU/s each ÷ 2 per transactional link], {} [its item's hot partition {} RCU/s ÷ {} reads a link])",
                fmt(l.popular_url.offers),
                fmt(by_instances),
                fmt(pages),
                fmt(d.intake.max_concurrency),
                f(&per_waiter),
                fmt(by_item),
                imgest_aws::dynamodb::LINK_SHARDS,
                fmt(hot),
                fmt(by_reads),
                fmt(lim.partition_fraction * lim.partition_rcu),
                fmt(item_reads)
            ),
        );
    }
    let (_, url_rmw, url_how) = m.contention("url")?;
    if url_rmw {
        r.row(
            "dynamodb",
            "the popular URL: joins/s vs half its read-then-write ceiling",
            joins,
            "joins/s",
            Some(rmw_ceiling / 2.0),
            url_how,
        );
    } else {
        r.row(
            "dynamodb",
            "the popular URL: writes per join",
            m.contention("url")?.0.write_requests_per_update,
            "requests",
            Some(1.05),
            url_how,
        );
    }

    // The hot items judged by protocol: the contention benchmark's writers again with the
    // hottest key's partition refusing half of what they asked (throttled past it) and
    // transactions on one item conflicting, as DynamoDB would (moto does neither).
    for (target, label) in [
        ("ratelimit", "rate limit of the biggest client"),
        ("host", "the biggest host's learning"),
        ("url", "the popular URL's joins"),
        ("image", "the popular image's links"),
    ] {
        let (t, _, _) = m.contention(target)?;
        let Some(refused) = &t.refused else {
            continue;
        };
        // A host's learning is advice: what its partition refuses is kept for the next flush
        // up to a cap per key, and past it dropped by design (a few seconds of samples).
        let limit = (target != "host").then_some(0.0);
        r.row(
            "dynamodb",
            format!("{label}: updates lost when its partition refuses writes"),
            refused.lost as f64,
            "updates",
            limit,
            format!(
                "contention {target} at {} writers, each {} key given {} WCU/s (half of what they asked of the hottest) and transactions conflicting: {} write requests per update, {} refused, {} errors (left to their queues' retries)",
                m.contention.writers,
                if refused.class.is_empty() { "" } else { refused.class.as_str() },
                fmt(refused.partition_wcu),
                fmt(refused.write_requests_per_update),
                fmt(refused.refused_per_update),
                refused.errors
            ),
        );
    }

    // The popular image. Past `HOT_LINKS` links an image is hot: a link or unlink is an ADD on
    // one of its `LINK_SHARDS` delta items, chosen at random, in the offer's transaction (two
    // write units, a shard item is under a kilobyte); its own item is written only by a
    // client's first link, or turning it hot (the contention benchmark counts what it takes
    // per update, and the reads of the item).
    let (image, image_rmw, image_how) = m.contention("image")?;
    let changes = l.popular_image.changes_per_s;
    let shards = f64::from(imgest_aws::dynamodb::LINK_SHARDS);
    let image_kb = (m
        .largest_item(&format!("deleted: {}", crate::cost::STILL_LINKED), "image")?
        .value
        / 1024.0)
        .ceil()
        .max(1.0);
    r.row(
        "dynamodb",
        "the popular image: write units/s on one of its link shards",
        changes * 2.0 / shards,
        "WCU/s",
        Some(hot),
        format!(
            "changes_per_s {} × 2 (transactional, under 1 KB) ÷ {} shards (hot past {} links)",
            fmt(changes),
            fmt(shards),
            imgest_aws::dynamodb::HOT_LINKS
        ),
    );
    r.row(
        "dynamodb",
        "the popular image: write units/s on its item",
        changes * image.write_requests_per_update * 2.0 * image_kb,
        "WCU/s",
        Some(hot),
        format!(
            "changes_per_s {} × its item's write requests/update × 2 (transactional) × ⌈{} KB⌉; {image_how}",
            fmt(changes),
            fmt(image_kb)
        ),
    );
    r.row(
        "dynamodb",
        "the popular image: read units/s on its item",
        changes * image.reads_per_update * (image_kb / 4.0).ceil(),
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "changes_per_s {} × its item's reads/update {} (measured; each counted a consistent read, 1 RCU per 4 KB: a change reads the images it adds or drops) vs partition_fraction {} × partition_rcu {}",
            fmt(changes),
            fmt(image.reads_per_update),
            fmt(lim.partition_fraction),
            fmt(lim.partition_rcu)
        ),
    );
    // After each unlink of a hot image, a look at whether it may cool: every shard read once,
    // eventually consistently (half a unit). Counted for every change: a bound.
    r.row(
        "dynamodb",
        "the popular image: read units/s on one of its link shards",
        changes * 0.5,
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "changes_per_s {} × 0.5 RCU (after an unlink, each shard read eventually consistently) vs partition_fraction {} × partition_rcu {}",
            fmt(changes),
            fmt(lim.partition_fraction),
            fmt(lim.partition_rcu)
        ),
    );
    // An image's links change when an offer listing it is set, changed or deleted: a dealer's
    // logo is in one client's offers, so its changes are at most that client's share of the
    // offers that change (new, with known URLs, by hand, deleted). A scenario above that
    // contradicts itself.
    let changing_offers = (p + p * l.known_url_photos_per_new) / l.photos_per_offer
        + l.hand_offers_per_s
        + l.hand_deletes_per_s;
    r.row(
        "dynamodb",
        "the popular image: changes/s vs its client's offers that change",
        changes,
        "changes/s",
        Some(l.biggest_client_share * changing_offers),
        format!(
            "changes_per_s vs biggest_client_share {} × ((p + p × known_url_photos_per_new) ÷ photos_per_offer + hand_offers_per_s + hand_deletes_per_s) [{} offers/s]",
            fmt(l.biggest_client_share),
            fmt(changing_offers)
        ),
    );
    if image_rmw {
        let ceiling = 1000.0 / (s.latency_ms.dynamodb + s.latency_ms.transaction);
        r.row(
            "dynamodb",
            "the popular image: changes/s vs half its read-then-write ceiling",
            changes,
            "changes/s",
            Some(ceiling / 2.0),
            format!(
                "ceiling 1000 ÷ (read {} + transaction {} ms)",
                fmt(s.latency_ms.dynamodb),
                fmt(s.latency_ms.transaction)
            ),
        );
    }
    let orphans = l.orphans_per_hour / 3600.0;
    r.row(
        "dynamodb",
        "a gc-index partition: write units/s",
        2.0 * orphans / d.gc.buckets,
        "WCU/s",
        Some(hot),
        format!(
            "2 (entry put, then deleted) × orphans {}/s ÷ {} buckets",
            fmt(orphans),
            fmt(d.gc.buckets)
        ),
    );

    // The table as a whole.
    let photos = m.photos();
    let new_stages = [
        "new: intake",
        "new: fetch",
        "new: process",
        "new: settle",
        "new: results",
    ];
    let known_stages = ["known URLs: intake", "known URLs: results"];
    let unchanged_stages = ["unchanged: intake", "unchanged: results"];
    let revalidated_stages = [
        "revalidate: intake",
        "revalidate: fetch",
        "revalidate: settle",
        "revalidate: results",
    ];
    let still = format!("deleted: {}", crate::cost::STILL_LINKED);
    let last = format!("deleted: {}", crate::cost::LAST_LINK);
    let streams: Vec<(String, f64, Vec<&str>, f64)> = vec![
        (
            "new photos".into(),
            p * l.new_content_share,
            new_stages.to_vec(),
            photos,
        ),
        (
            "known-URL photos".into(),
            p * l.known_url_photos_per_new,
            known_stages.to_vec(),
            photos,
        ),
        (
            "unchanged photos".into(),
            unchanged - revalidated,
            unchanged_stages.to_vec(),
            photos,
        ),
        (
            "revalidated photos".into(),
            revalidated,
            revalidated_stages.to_vec(),
            photos,
        ),
        (
            "unlinked photos".into(),
            p * l.unlinked_photos_per_new,
            vec![still.as_str(), last.as_str()],
            2.0 * photos,
        ),
        (
            "new uploads".into(),
            l.uploads_per_s * (1.0 - l.upload_dedup_share),
            vec!["upload: new"],
            m.stage("upload: new")?.items as f64,
        ),
        (
            "dedup uploads".into(),
            l.uploads_per_s * l.upload_dedup_share,
            vec!["upload: dedup"],
            m.stage("upload: dedup")?.items as f64,
        ),
        (
            "collected orphans".into(),
            orphans,
            vec!["gc: collect"],
            m.stage("gc: collect")?.items as f64,
        ),
    ];
    let (mut wcu, mut rcu) = (0.0, 0.0);
    let (mut wcu_trace, mut rcu_trace) = (Vec::new(), Vec::new());
    for (name, rate, stages, per) in &streams {
        let (w, rd) = m.units_per_item(stages, *per)?;
        wcu += rate * w.value;
        rcu += rate * rd.value;
        wcu_trace.push(format!("{name} {}/s × {}", fmt(*rate), fmt(w.value)));
        rcu_trace.push(format!("{name} {}/s × {}", fmt(*rate), fmt(rd.value)));
    }
    let new_photos = p * l.new_content_share + l.uploads_per_s * (1.0 - l.upload_dedup_share);
    let index = super::similar::rows(&mut r, s, new_photos, orphans);
    if index.wcu > 0.0 {
        wcu += index.wcu;
        wcu_trace.push(format!("near-duplicate index {}", fmt(index.wcu)));
    }
    if index.rcu > 0.0 {
        rcu += index.rcu;
        rcu_trace.push(format!("near-duplicate lookups {}", fmt(index.rcu)));
    }
    let (wcu_limit, rcu_limit) = if d.warm_wcu > 0.0 {
        (d.warm_wcu, d.warm_rcu)
    } else {
        (lim.table_initial_wcu, lim.table_initial_rcu)
    };
    r.row(
        "dynamodb",
        "table: write units/s vs its warm throughput",
        wcu,
        "WCU/s",
        Some(wcu_limit),
        format!("{} (per item: measured stages)", wcu_trace.join(" + ")),
    );
    r.row(
        "dynamodb",
        "table: read units/s vs its warm throughput",
        rcu,
        "RCU/s",
        Some(rcu_limit),
        rcu_trace.join(" + "),
    );
    // A backfill may run through the peak, at its rate: its records' rewrites come on top.
    let backfill_wcu = d.backfill.rate * d.backfill.wcu_per_photo;
    r.row(
        "dynamodb",
        "table: write units/s with a backfill running vs its warm throughput",
        wcu + backfill_wcu,
        "WCU/s",
        Some(wcu_limit),
        format!(
            "{} at peak + BackfillRate {} × {} WCU per photo",
            fmt(wcu),
            fmt(d.backfill.rate),
            fmt(d.backfill.wcu_per_photo)
        ),
    );
    r.suggest(
        Setting::TableWarmWriteUnits(
            sized(s.targets.headroom, wcu + backfill_wcu, 1000.0).max(lim.table_initial_wcu),
        ),
        format!(
            "headroom × {} WCU/s (a backfill running), in thousands",
            fmt(wcu + backfill_wcu)
        ),
    );
    r.suggest(
        Setting::TableWarmReadUnits(
            sized(s.targets.headroom, rcu, 1000.0).max(lim.table_initial_rcu),
        ),
        format!(
            "headroom × {} RCU/s, in thousands (at least a new table's {})",
            fmt(rcu),
            fmt(lim.table_initial_rcu)
        ),
    );

    // The popular URL's record is peeked by every join (is it running, where do I wait), but
    // an intake instance reuses what it read less than RECORD_REUSE ago, so the record is
    // peeked at most once per instance per reuse, however often its crawls list it (a
    // profile measured in one process would count its reuse, not the instances': the design's
    // bound is the row). After filing, a join reads its group's mark, not the record.
    let peek_rcu = 0.5 * (url_size / 1024.0 / 4.0).ceil().max(1.0);
    let reuse_s = RECORD_REUSE.as_secs_f64();
    let peeks = joins.min(d.intake.max_concurrency / reuse_s);
    r.row(
        "dynamodb",
        "the popular URL's record: read units/s from joins",
        peeks * peek_rcu,
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "min(join_per_s {}, IntakeConcurrency {} ÷ a record reused {} s per instance) × {} RCU a peek vs partition_fraction {} × partition_rcu {}",
            fmt(joins),
            fmt(d.intake.max_concurrency),
            fmt(reuse_s),
            fmt(peek_rcu),
            fmt(lim.partition_fraction),
            fmt(lim.partition_rcu)
        ),
    );

    // Results: one message per settled crawl (and per erasure) published to the results
    // topic, against SNS's publish rate in the scenario's region.
    let results = (p * (1.0 + l.known_url_photos_per_new) + unchanged) / l.photos_per_offer
        + l.erasures_per_s;
    r.row(
        "queues",
        "results: messages published/s vs SNS's publish quota",
        results,
        "messages/s",
        Some(s.sns_publish_per_s()),
        format!(
            "(p × (1 + known_url_photos_per_new) + unchanged {}) ÷ photos_per_offer + erasures_per_s; the quota of {} (limits.sns_publish_per_s, or the region's default)",
            fmt(unchanged),
            s.region
        ),
    );
    if results > s.sns_publish_per_s() {
        r.suggest(
            Setting::SnsPublishRate(sized(s.targets.headroom, results, 1000.0)),
            format!(
                "a quota raise in {}: ⌈headroom × {} messages/s⌉ (in thousands)",
                s.region,
                fmt(results)
            ),
        );
    }

    // The results' feed: each crawl result (not erasures) is also filed under its client, day and
    // shard; the biggest client's entries spread over the shards' partitions. An entry carries
    // the crawl's photos, as the crawl record does: that record's size where the profile
    // predates the feed.
    let crawl_results = results - l.erasures_per_s;
    let measured_entry = m.largest_item("new: settle", FEED_CLASS)?;
    let feed_measured = measured_entry.value > 0.0;
    let entry = if feed_measured {
        measured_entry
    } else {
        let crawl = m.largest_item("new: settle", "rec crawl")?;
        Figure {
            value: crawl.value,
            source: format!("{} (no feed entry in the profile)", crawl.source),
        }
    };
    let entry_wcu = (entry.value / 1024.0).ceil().max(1.0);
    let shards = f64::from(imgest_crawl::feed::SHARDS);
    r.row(
        "dynamodb",
        "the results' feed: the biggest client's write units/s per shard",
        l.biggest_client_share * crawl_results * entry_wcu / shards,
        "WCU/s",
        Some(lim.partition_fraction * lim.partition_wcu),
        format!(
            "biggest_client_share {} × results {} × ⌈{} KB⌉ [{}] ÷ {} shards",
            fmt(l.biggest_client_share),
            fmt(crawl_results),
            fmt(entry.value / 1024.0),
            entry.source,
            fmt(shards)
        ),
    );
    // A poll queries each shard of a day once, for a chunk of a default page's share and a few
    // (strongly consistent: a read unit per 4 KB).
    let chunk = (imgest_crawl::feed::DEFAULT_PAGE as f64 / shards).ceil() + 4.0;
    let query_rcu = (chunk * entry.value / 4096.0).ceil().max(1.0);
    r.row(
        "dynamodb",
        "the results' feed: polls' read units/s per shard",
        l.feed_polls_per_s * query_rcu,
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "feed_polls_per_s {} (every partner's, as if one's) × a Query of {} entries [{} B] per shard = {} RCU",
            fmt(l.feed_polls_per_s),
            fmt(chunk),
            fmt(entry.value),
            fmt(query_rcu)
        ),
    );

    // Webhooks' records, one of each per client: the endpoint, wanted (an eventually
    // consistent read: half a unit) for every result sent and every delivery's turn, and its
    // cooling, wanted per turn and written per failure. While the biggest client's endpoint is
    // down, the deliveries it holds come round on their own backoff (5 s doubling): over an
    // outage of `o` seconds a delivery takes about log2(o ÷ 5 s) turns. Each process keeps what
    // it read, the endpoint 5 s and the cooling 1 s, so an item is read at most that often per
    // instance of the functions that want it.
    let biggest_results = l.biggest_client_share * crawl_results_per_s;
    let outage_turns = (l.webhook_outage_s / 5.0).max(1.0).log2().ceil() + 1.0;
    let turns =
        l.biggest_client_share * attempts + l.webhook_share * biggest_results * outage_turns;
    let wanting = intake_c + api_c + webhooks_c;
    r.row(
        "dynamodb",
        "webhooks: the biggest client's endpoint record, read units/s",
        0.5 * (biggest_results + turns).min(wanting / 5.0),
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "½ × min(results {} [a check per result] + turns {} [its attempts, and its deliveries' turns through an outage of {} s: ⌈log2(outage ÷ 5 s)⌉ + 1 = {} each], instances {} [intake, api, webhooks] ÷ 5 s)",
            fmt(biggest_results),
            fmt(turns),
            fmt(l.webhook_outage_s),
            fmt(outage_turns),
            fmt(wanting)
        ),
    );
    r.row(
        "dynamodb",
        "webhooks: the biggest client's cooling record, read units/s",
        0.5 * turns.min(webhooks_c),
        "RCU/s",
        Some(lim.partition_fraction * lim.partition_rcu),
        format!(
            "½ × min(turns {}, webhooks instances {} ÷ 1 s)",
            fmt(turns),
            fmt(webhooks_c)
        ),
    );
    r.row(
        "dynamodb",
        "webhooks: the biggest client's cooling record, write units/s",
        2.0 * l.biggest_client_share * attempts * l.webhook_failure_share,
        "WCU/s",
        Some(lim.partition_fraction * lim.partition_wcu),
        "2 × biggest_client_share × attempts × failure_share (a write per failed attempt, and at most one to end the cooling after it)",
    );

    // 3. S3 prefixes (256 shards per area).
    let stored_per_s = p * l.new_content_share + l.uploads_per_s * (1.0 - l.upload_dedup_share);
    if l.fresh_bucket {
        let writes = stored_per_s * l.files_per_image
            + orphans * l.files_per_image
            + p * l.new_content_share * l.handoff_share;
        r.row(
            "s3",
            "a fresh bucket: writes/s before S3 partitions it",
            writes,
            "req/s",
            Some(lim.s3_put_per_prefix),
            "(stored photos + orphans) × files_per_image + hand-offs: one prefix's limit until S3 has split the bucket under the load (ramp the traffic up, or ask AWS to pre-partition)",
        );
    }
    r.row(
        "s3",
        "a shard prefix: PUT/s",
        stored_per_s * l.files_per_image / 256.0,
        "req/s",
        Some(lim.s3_put_per_prefix),
        format!(
            "(new photos + new uploads) {}/s × files_per_image {} ÷ 256 shards",
            fmt(stored_per_s),
            fmt(l.files_per_image)
        ),
    );
    r.row(
        "s3",
        "a shard prefix: DELETE/s",
        orphans * l.files_per_image / 256.0,
        "req/s",
        Some(lim.s3_put_per_prefix),
        "orphans/s × files_per_image ÷ 256",
    );
    r.row(
        "s3",
        "fetched/: PUT/s (hand-offs)",
        p * l.new_content_share * l.handoff_share,
        "req/s",
        Some(lim.s3_put_per_prefix),
        "p × new_content_share × handoff_share",
    );

    // 4. Long waits.
    let attempts: f64 = lambda.iter().sum();
    let waits = l.long_wait_share * attempts;
    let open = waits * l.long_wait_mean_s;
    let hops = open / lim.sqs_max_delay_s;
    // What each way costs an hour: an execution's state transitions (its four states: which
    // queue, its URL, the wait, the send) and its send; a hop's share of the batched requests
    // that carry it (a tenth each of the SendMessageBatch that sends it on, the event source
    // mapping's receive and its batched delete).
    let sfn_hourly =
        waits * 3600.0 * (SFN_TRANSITIONS * s.prices.sfn_transition + s.prices.sqs_request);
    let chain_hourly = hops * 3600.0 * 0.3 * s.prices.sqs_request;
    // The state machine is the default (the design's); the chain is the better choice when
    // the open executions would pass their quota, a design limit the chain does not have.
    let over_quota = open * s.targets.headroom > lim.sfn_open_executions;
    r.suggest(
        Setting::LongWaits(if over_quota {
            LongWaits::SqsChain
        } else {
            d.long_waits
        }),
        format!(
            "open waits {} × headroom {} vs the account's open Step Functions executions {}: {}; the bill an hour ${} with the state machine, ${} with the chain",
            fmt(open),
            fmt(s.targets.headroom),
            fmt(lim.sfn_open_executions),
            if over_quota {
                "over, so the chain (no quota of open waits)"
            } else {
                "within, so as deployed"
            },
            fmt(sfn_hourly),
            fmt(chain_hourly)
        ),
    );
    match d.long_waits {
        LongWaits::StepFunctions => r.row(
            "queues",
            "long waits: open Step Functions executions",
            open,
            "executions",
            Some(lim.sfn_open_executions),
            format!(
                "long_wait_share {} × attempts {}/s × long_wait_mean_s {}",
                fmt(l.long_wait_share),
                fmt(attempts),
                fmt(l.long_wait_mean_s)
            ),
        ),
        LongWaits::SqsChain => r.row(
            "queues",
            "long waits: delayed messages (not in flight)",
            open,
            "messages",
            None,
            format!(
                "long_wait_share {} × attempts {}/s × long_wait_mean_s {}; {} hops/s [open waits ÷ sqs_max_delay_s {}: each wait hops once per delay]",
                fmt(l.long_wait_share),
                fmt(attempts),
                fmt(l.long_wait_mean_s),
                fmt(hops),
                fmt(lim.sqs_max_delay_s)
            ),
        ),
    }

    // 5. Maintenance against the rate of new work.
    // A job collects `concurrency` records side by side: each waits on its own request chain,
    // and all of them share the function's slice of a vCPU. Its rate is the lower of the two.
    // Each of GC's parts lists its own share of the buckets: those written, and the 16 of the
    // layout before (listed until they drain).
    let gc = m.per_record(
        "gc: collect",
        d.gc.memory_mb,
        &s.latency_ms,
        d.gc.buckets + 16.0,
        d.gc.jobs,
    )?;
    let gc_per_round = imgest_flows::gc::GC_BATCH as f64;
    let gc_per_job = gc_job_rate(&gc, d.gc.concurrency, gc_per_round);
    let gc_flat_out = d.gc.jobs * gc_per_job;
    let gc_record = &gc.record;
    let gc_rate = gc_flat_out * d.gc.duty;
    // Past what one job collects, jobs side by side (each lists its own buckets).
    let (parts, why) = parts_for(
        s.targets.headroom * orphans,
        gc_per_job,
        d.gc.duty,
        d.gc.jobs,
    );
    r.suggest(Setting::GcParts(parts), format!("records/s: {why}"));
    // The share of a vCPU its records' CPU needs (at most a whole one: one job is one thread),
    // as memory in 64-MB steps.
    let vcpu_needed = s.targets.headroom * orphans / (d.gc.jobs * d.gc.duty)
        * (gc_record.cpu_s * (d.gc.memory_mb / FULL_VCPU_MB).min(1.0));
    r.suggest(
        Setting::ScheduledGcMemory(
            ((vcpu_needed.min(1.0) * FULL_VCPU_MB / 64.0).ceil() * 64.0)
                .clamp(d.gc.memory_mb, FULL_VCPU_MB.ceil()),
        ),
        format!(
            "headroom × orphans ÷ (jobs × duty) × CPU s per record on a whole core: {} vCPU (a job uses one at most), in 64-MB steps, at least today's",
            fmt(vcpu_needed)
        ),
    );
    r.row_at_least(
        "maintenance",
        "GC: records collected/s vs orphans expiring",
        gc_rate,
        "records/s",
        orphans,
        format!(
            "jobs {} × {} records a round ÷ (listing {} s + max({} × CPU {} s, ⌈{} ÷ concurrency {}⌉ × (CPU on a core + {} s of requests))) × duty {} [{}]",
            fmt(d.gc.jobs),
            fmt(gc_per_round),
            fmt(gc.listing_s),
            fmt(gc_per_round),
            fmt(gc_record.cpu_s),
            fmt(gc_per_round),
            fmt(d.gc.concurrency),
            fmt(gc_record.wait_s),
            fmt(d.gc.duty),
            gc_record.source
        ),
    );
    // The runs' time GC does not need is the sweep's, unless GC has runs of its own.
    let gc_used = if d.gc.beside_sweep {
        0.0
    } else {
        (orphans / gc_flat_out.max(1e-9)).min(d.gc.duty)
    };
    let sweep_duty = (d.sweep.run_s / d.sweep.period_s - gc_used).max(0.0);
    let files = l.stored_images * l.files_per_image;
    let sweep_needed = files / (s.targets.sweep_pass_days * 86_400.0);
    // A job's rate: the scenario's, if measured there; else a full page's cost from the
    // profile's sweep (at 10⁹ images a prefix holds millions of files: every page is full).
    let (per_job, per_job_trace) = match d.sweep.files_per_s_per_job {
        Some(v) => (v, "files_per_s_per_job".to_owned()),
        None => {
            let c = m.sweep_costs(crate::cost::SWEEP_STAGE)?;
            let prefixes = imgest_core::domain::SHARD_COUNT as f64
                * imgest_flows::sweep::PREFIXES_PER_SHARD as f64;
            let page = (imgest_flows::sweep::SWEEP_PAGE as f64)
                .min(files / prefixes)
                .max(1.0);
            // A page's records: its files over the files per image, looked up 100 at a time.
            let batch_gets = (page / l.files_per_image.max(1.0) / 100.0).ceil();
            let vcpu = (d.gc.memory_mb / FULL_VCPU_MB).min(1.0);
            let full = SweepPage {
                files: page,
                batch_gets,
                saves: 1.0,
                reads: 0.0,
            };
            let rate = sweep_job_rate(full, c.cpu_ms_per_request, vcpu, &s.latency_ms);
            (
                rate,
                format!(
                    "a page of {} files ÷ max(CPU ÷ vCPU {}, CPU + LIST {} ms + {} BatchGetItems × {} ms + a checkpoint {} ms), CPU {} ms per request [{}]",
                    fmt(page),
                    fmt(vcpu),
                    fmt(s.latency_ms.s3),
                    fmt(batch_gets),
                    fmt(s.latency_ms.dynamodb_batch),
                    fmt(s.latency_ms.dynamodb),
                    fmt(c.cpu_ms_per_request),
                    c.source
                ),
            )
        }
    };
    let sweep_rate = d.sweep.jobs * per_job * sweep_duty;
    let (parts, why) = parts_for(
        s.targets.headroom * sweep_needed,
        per_job,
        sweep_duty,
        d.sweep.jobs,
    );
    r.suggest(Setting::SweepParts(parts), format!("files/s: {why}"));
    let shard_s = files / d.sweep.shards / per_job;
    let sweep_progress = if d.sweep.checkpoint == Checkpoint::Shard && shard_s > d.sweep.run_s {
        0.0
    } else {
        sweep_rate
    };
    r.row_at_least(
        "maintenance",
        "sweep: files judged/s vs a pass in sweep_pass_days",
        sweep_progress,
        "files/s",
        sweep_needed,
        format!(
            "jobs {} × {} files/s [{per_job_trace}] × its share of the time {} [run {} s ÷ every {} s − GC's {} (0: GC runs beside it)]; a shard takes {} s of a {}-s run, checkpoint per {:?}",
            fmt(d.sweep.jobs),
            fmt(per_job),
            fmt(sweep_duty),
            fmt(d.sweep.run_s),
            fmt(d.sweep.period_s),
            fmt(gc_used),
            fmt(shard_s),
            fmt(d.sweep.run_s),
            d.sweep.checkpoint
        ),
    );
    erasure_rows(
        &mut r,
        s,
        m.sweep_costs(crate::cost::SWEEP_STAGE)?.cpu_ms_per_request,
    );
    let audit_per_week;
    match d.audit.mode {
        AuditMode::Listing => {
            let per_segment = l.stored_images / d.audit.segments * d.audit.bytes_per_record / MB;
            r.row(
                "maintenance",
                "audit: a segment's records in memory",
                per_segment,
                "MB",
                Some(lim.lambda_max_memory_mb),
                format!(
                    "stored {} ÷ segments {} × {} B",
                    fmt(l.stored_images),
                    fmt(d.audit.segments),
                    fmt(d.audit.bytes_per_record)
                ),
            );
            let lists = 2.0 * l.stored_images;
            audit_per_week = lists * s.prices.s3_put * 7.0 / s.targets.audit_cycle_days;
            r.row(
                "maintenance",
                "audit: dollars per cycle (LIST per prefix)",
                lists * s.prices.s3_put,
                "$",
                None,
                "2 LISTs per live record × S3 LIST price",
            );
        }
        AuditMode::Inventory => {
            let inventory = files / 1e6 * s.prices.inventory_per_million_objects;
            let export_gb = l.stored_images * d.audit.export_bytes_per_image / 1e9;
            let scanned_tb = (export_gb + files * d.audit.inventory_bytes_per_file / 1e9) / 1000.0;
            let cycle = inventory
                + export_gb * s.prices.export_per_gb
                + scanned_tb * s.prices.athena_per_tb;
            let pitr = export_gb * s.prices.pitr_per_gb_month * 7.0 / 30.0;
            audit_per_week = (cycle * 7.0 / s.targets.audit_cycle_days) + pitr;
            r.row(
                "maintenance",
                "audit: dollars per week (inventory, export, Athena, PITR)",
                audit_per_week,
                "$",
                None,
                format!(
                    "inventory {} + export {} GB × {} + Athena {} TB × {} + PITR {}",
                    fmt(inventory),
                    fmt(export_gb),
                    fmt(s.prices.export_per_gb),
                    fmt(scanned_tb),
                    fmt(s.prices.athena_per_tb),
                    fmt(pitr)
                ),
            );
        }
    }
    let bf = &d.backfill;
    let bf_vcpu = (bf.memory_mb / FULL_VCPU_MB).min(1.0);
    let bf_instances = bf.rate * bf.cpu_s_per_photo / bf_vcpu;
    r.row(
        "maintenance",
        "backfill: instances at BackfillRate vs BackfillConcurrency",
        bf_instances,
        "instances",
        Some(bf.concurrency),
        format!(
            "rate {} × {} CPU s ÷ vCPU {} (one decode at a time per instance)",
            fmt(bf.rate),
            fmt(bf.cpu_s_per_photo),
            fmt(bf_vcpu)
        ),
    );
    r.suggest(
        Setting::BackfillConcurrency((s.targets.headroom * bf_instances).ceil().max(2.0)),
        format!("⌈headroom × {}⌉", fmt(bf_instances)),
    );
    // Enumeration: a round scans a page of each segment, then queues its tasks in
    // `SendMessageBatch`es (`SqsSender`'s batches, so many at once); the schedule enumerates
    // half of every minute.
    let round_tasks = bf.segments * imgest_flows::backfill::SCAN_PAGE as f64;
    let (entries, at_once) = (
        imgest_aws::sqs::BATCH_ENTRIES as f64,
        imgest_aws::sqs::BATCHES_AT_ONCE as f64,
    );
    let sends = (round_tasks / entries / at_once).ceil();
    let round_s = (3.0 * s.latency_ms.dynamodb + sends * s.latency_ms.sqs) / 1000.0;
    let duty = imgest_lambda::backfill::ENUMERATE_BUDGET.as_secs_f64() / 60.0;
    r.row_at_least(
        "maintenance",
        "backfill: tasks queued/s vs BackfillRate",
        round_tasks / round_s * duty,
        "tasks/s",
        bf.rate,
        format!(
            "{} tasks a round [segments {} × page {}] ÷ {} s [scan and state {} ms × 3 + {} sends of {} batches × {} ms] × {} of each minute",
            fmt(round_tasks),
            fmt(bf.segments),
            imgest_flows::backfill::SCAN_PAGE,
            fmt(round_s),
            fmt(s.latency_ms.dynamodb),
            fmt(sends),
            fmt(at_once),
            fmt(s.latency_ms.sqs),
            fmt(duty)
        ),
    );
    let backfill_needed = l.stored_images / (s.targets.backfill_days * 86_400.0);
    r.row_at_least(
        "maintenance",
        "backfill: photos/s vs a full backfill in backfill_days",
        d.backfill.rate,
        "photos/s",
        backfill_needed,
        format!(
            "BackfillRate; needs stored {} ÷ ({} days); at {} CPU s each: {} vCPU",
            fmt(l.stored_images),
            fmt(s.targets.backfill_days),
            fmt(d.backfill.cpu_s_per_photo),
            fmt(d.backfill.rate * d.backfill.cpu_s_per_photo)
        ),
    );
    r.suggest(
        Setting::BackfillRate(
            sized(s.targets.headroom, backfill_needed, 100.0).max(d.backfill.rate),
        ),
        format!(
            "⌈headroom × {} photos/s⌉ (in hundreds), at least today's",
            fmt(backfill_needed)
        ),
    );

    // 6. The bill per hour at peak.
    let pr = &s.prices;
    let mut bill = 0.0;
    let mut bill_row = |r: &mut Report, item: String, dollars: f64, trace: String| {
        bill += dollars;
        r.row("bill", item, dollars, "$/h", None, trace);
    };
    for (name, rate, stages, per) in &streams {
        let tq = m.table_and_queues_per_item(stages, *per)?;
        let puts = m.s3_puts_per_item(stages, *per)?;
        bill_row(
            &mut r,
            format!("{name}: table, queues, S3"),
            rate * 3600.0 * (tq.value + puts.value),
            format!(
                "{}/s × 3600 × (${}/M [{}] + ${}/M [{}])",
                fmt(*rate),
                fmt(tq.value * 1e6),
                tq.source,
                fmt(puts.value * 1e6),
                puts.source
            ),
        );
    }
    for fl in &functions {
        let dollars = fl.concurrency * fl.memory_mb / 1024.0 * 3600.0 * pr.lambda_gb_second
            + fl.invocations_per_s * 3600.0 * pr.lambda_request;
        bill_row(
            &mut r,
            format!("{}: Lambda", fl.name),
            dollars,
            format!(
                "{} instances × {} MB × 3600 s × GB-s price + {} inv/s × request price",
                fmt(fl.concurrency),
                fmt(fl.memory_mb),
                fmt(fl.invocations_per_s)
            ),
        );
    }
    // Webhooks beside their function: a send per delivery and per retry, a receive and a
    // delete per batch, and through the biggest client's outage a send, a receive and a delete
    // per turn; the feed entry's Query per attempt (a unit), the records' reads as the rows
    // above bound them; the cooling's writes.
    let outage_sqs = 3.0 * l.webhook_share * biggest_results * outage_turns;
    let webhook_sqs =
        deliveries + (attempts - deliveries) + 2.0 * attempts / d.webhooks.batch + outage_sqs;
    let webhook_rcu = attempts + 0.5 * (wanting / 5.0 + webhooks_c);
    bill_row(
        &mut r,
        "webhooks: queue, reads and cooling".into(),
        3600.0
            * (webhook_sqs * pr.sqs_request
                + webhook_rcu * pr.dynamodb_rcu
                + 2.0 * attempts * l.webhook_failure_share * pr.dynamodb_wcu),
        format!(
            "({} SQS requests/s × price + {} RCU/s × price + failures' writes) × 3600",
            fmt(webhook_sqs),
            fmt(webhook_rcu)
        ),
    );
    bill_row(
        &mut r,
        "API Gateway requests".into(),
        api_rps * 3600.0 * pr.api_request,
        format!("{} req/s × 3600 × price", fmt(api_rps)),
    );
    let (wait_dollars, wait_trace) = match d.long_waits {
        LongWaits::StepFunctions => (
            sfn_hourly,
            format!(
                "{} waits/s × 3600 × ({} transitions [which queue, its URL, the wait, the send] + 1 send) × price",
                fmt(waits),
                fmt(SFN_TRANSITIONS)
            ),
        ),
        LongWaits::SqsChain => (
            chain_hourly,
            format!(
                "{} hops/s × 3600 × 0.3 requests [a tenth each of the SendMessageBatch that sends it on, the event source mapping's receive and its batched delete] × price",
                fmt(hops)
            ),
        ),
    };
    bill_row(&mut r, "long waits".into(), wait_dollars, wait_trace);
    let sweep_pass = files / 1000.0 * pr.s3_put + l.stored_images * 0.5 * pr.dynamodb_rcu;
    bill_row(
        &mut r,
        "sweep and audit, amortised".into(),
        (sweep_pass * 7.0 / s.targets.sweep_pass_days + audit_per_week) / 168.0,
        format!(
            "sweep pass {} [files ÷ 1000 per LIST + ½ RCU per image] + audit {}/week, ÷ 168 h",
            fmt(sweep_pass),
            fmt(audit_per_week)
        ),
    );
    // Storage: what is kept, and what GC's deletions keep as noncurrent versions for 30 days
    // (the bucket's lifecycle rule), as an hour of a month's price.
    let gb = 1e9;
    let month_h = 730.0;
    let noncurrent = orphans * 3600.0 * 24.0 * 30.0 * l.bytes_per_image;
    bill_row(
        &mut r,
        "storage: S3 (current and 30 days of noncurrent versions)".into(),
        (l.stored_images * l.bytes_per_image + noncurrent) / gb * pr.s3_gb_month / month_h,
        format!(
            "(stored {} × {} B + orphans {}/s × 30 days × {} B) ÷ 1 GB × ${}/GB-month ÷ 730 h",
            fmt(l.stored_images),
            fmt(l.bytes_per_image),
            fmt(orphans),
            fmt(l.bytes_per_image),
            fmt(pr.s3_gb_month)
        ),
    );
    bill_row(
        &mut r,
        "storage: the table".into(),
        l.stored_images * l.record_bytes / gb * pr.dynamodb_gb_month / month_h,
        format!(
            "stored {} × {} B ÷ 1 GB × ${}/GB-month ÷ 730 h",
            fmt(l.stored_images),
            fmt(l.record_bytes),
            fmt(pr.dynamodb_gb_month)
        ),
    );
    // The feed's entries are in the measured stages once the profile has them.
    if !feed_measured {
        bill_row(
            &mut r,
            "the results' feed: entries (not in the profile)".into(),
            crawl_results * entry_wcu * 3600.0 * pr.dynamodb_wcu,
            format!(
                "results {}/s × ⌈entry KB⌉ {} × 3600 × ${}/WCU",
                fmt(crawl_results),
                fmt(entry_wcu),
                pr.dynamodb_wcu
            ),
        );
    }
    if index.wcu + index.rcu > 0.0 {
        let (storage, trace) = super::similar::storage_dollars_per_h(s);
        bill_row(
            &mut r,
            "near-duplicate index: writes, lookups, storage".into(),
            index.wcu * 3600.0 * pr.dynamodb_wcu + index.rcu * 3600.0 * pr.dynamodb_rcu + storage,
            format!(
                "{} WCU/s × 3600 × ${}/WCU + {} RCU/s × 3600 × ${}/RCU + {}",
                fmt(index.wcu),
                pr.dynamodb_wcu,
                fmt(index.rcu),
                pr.dynamodb_rcu,
                trace
            ),
        );
    }
    let invocations: f64 = functions.iter().map(|fl| fl.invocations_per_s).sum();
    bill_row(
        &mut r,
        "CloudWatch Logs ingestion".into(),
        invocations * 3600.0 * l.log_bytes_per_invocation / gb * pr.logs_per_gb,
        format!(
            "{} invocations/s × 3600 × {} B ÷ 1 GB × ${}/GB",
            fmt(invocations),
            fmt(l.log_bytes_per_invocation),
            fmt(pr.logs_per_gb)
        ),
    );
    r.row(
        "bill",
        "total at peak",
        bill,
        "$/h",
        None,
        "Σ the rows above",
    );
    Ok(r)
}

/// The erasure path (`flows::erase`): its list of filed erasures is one partition
/// (`rec#erasing#requests`), the erasure function works through it a minute at a time, and a
/// CDN keeps each erased file's invalidation in progress for a while.
fn erasure_rows(r: &mut Report, s: &Scenario, cpu_ms_per_request: f64) {
    let l = &s.load;
    let lim = &s.limits;
    let lat = &s.latency_ms;
    let hot = lim.partition_fraction * lim.partition_wcu;
    // Filed (one member put) and removed once done (one delete): 1 unit each, a request's
    // body is well under a kilobyte.
    r.row(
        "maintenance",
        "erasures under way: write units/s on their list's partition",
        l.erasures_per_s * 2.0,
        "WCU/s",
        Some(hot),
        format!(
            "erasures_per_s {} × 2 [filed, removed] vs partition_fraction {} × partition_wcu {}",
            fmt(l.erasures_per_s),
            fmt(lim.partition_fraction),
            fmt(lim.partition_wcu)
        ),
    );
    // One erasure, in requests (counted from the flow, not measured): the record, the
    // receipt read and written, the member removed; the public files listed, the versions of
    // four prefixes listed, two `DeleteObjects`; the invalidation. Each request's CPU is the
    // SDK's (signing, sending, parsing), as the sweep's measured per request.
    let erasure_ms = 4.0 * lat.dynamodb + 7.0 * lat.s3 + lat.cloudfront;
    let requests = 12.0;
    // A run every minute, for its timeout (60 s) less its margin (6 s).
    let duty = 54.0 / 60.0;
    let at_once = imgest_flows::erase::ERASING_AT_ONCE as f64;
    let vcpu = (s.deployment.erasure_memory_mb / FULL_VCPU_MB).min(1.0);
    // A wave of erasures side by side: their chains, or all their CPU at the function's share.
    let wave_ms = erasure_ms.max(at_once * requests * cpu_ms_per_request / vcpu);
    r.row_at_least(
        "maintenance",
        "erasure function: erasures/s its runs get through vs erasures filed",
        at_once * duty * 1000.0 / wave_ms,
        "erasures/s",
        l.erasures_per_s,
        format!(
            "{} at once × duty {} ÷ max({} ms [4 × dynamodb {} + 7 × s3 {} + cloudfront {}], {} at once × {} requests × CPU {} ms ÷ vCPU {})",
            fmt(at_once),
            fmt(duty),
            fmt(erasure_ms),
            fmt(lat.dynamodb),
            fmt(lat.s3),
            fmt(lat.cloudfront),
            fmt(at_once),
            fmt(requests),
            fmt(cpu_ms_per_request),
            fmt(vcpu)
        ),
    );
    let paths = l.erasures_per_s * (l.files_per_image - 1.0).max(0.0) * lim.cdn_invalidation_s;
    r.row(
        "maintenance",
        "CDN: invalidation paths in progress vs the distribution's quota",
        paths,
        "paths",
        Some(lim.cdn_paths_in_progress),
        format!(
            "erasures_per_s {} × public files {} [files_per_image − the original] × cdn_invalidation_s {} (with a distribution configured)",
            fmt(l.erasures_per_s),
            fmt((l.files_per_image - 1.0).max(0.0)),
            fmt(lim.cdn_invalidation_s)
        ),
    );
    if paths > lim.cdn_paths_in_progress {
        r.suggest(
            Setting::CdnPathsInProgress(sized(s.targets.headroom, paths, 1000.0)),
            format!(
                "a quota raise: ⌈headroom × {} paths⌉ (in thousands)",
                fmt(paths)
            ),
        );
    }
}

/// The service's own limits: the rate a client may start downloads at, a seller's uploads, and
/// what the biggest host takes. A client whose demand is above its configured rate is not
/// capped silently: its row says how fast its backlog grows and how long it takes to drain.
fn service_limit_rows(r: &mut Report, s: &Scenario, lambda: &[f64; 3]) {
    let l = &s.load;
    let d = &s.deployment;
    let attempts: f64 = lambda.iter().sum();
    // The rate limiter counts every download a client starts: retries and revalidations too.
    let demand = l.biggest_client_share * attempts * 60.0;
    let (rate, which) = if d.biggest_client_rpm > 0.0 {
        (d.biggest_client_rpm, "its ClientRpmOverrides entry")
    } else {
        (d.client_rpm, "ClientRpm")
    };
    let growth = (demand - rate).max(0.0) / 60.0;
    let backlog = growth * l.peak_hours * 3600.0;
    let drain = (rate - l.offpeak_share * demand) / 60.0;
    let backlog_trace = if growth <= 0.0 {
        "no backlog".to_owned()
    } else if drain <= 0.0 {
        format!(
            "its backlog grows {} tasks/s and never drains (off-peak demand {} ≥ the rate)",
            fmt(growth),
            fmt(l.offpeak_share * demand)
        )
    } else {
        format!(
            "its backlog grows {} tasks/s: {} after a {}-h peak, drained {} h later at (rate − offpeak_share × demand) ÷ 60",
            fmt(growth),
            fmt(backlog),
            fmt(l.peak_hours),
            fmt(backlog / drain / 3600.0)
        )
    };
    r.row(
        "service",
        "the biggest client: downloads started/min vs its configured rate",
        demand,
        "per min",
        Some(rate),
        format!(
            "biggest_client_share {} × attempts {}/s × 60 vs {which} {}; {backlog_trace}",
            fmt(l.biggest_client_share),
            fmt(attempts),
            fmt(rate)
        ),
    );
    r.suggest(
        Setting::BiggestClientRpm(sized(s.targets.headroom, demand, 100.0)),
        format!(
            "⌈headroom × {} a minute⌉ (in hundreds): the biggest client's own rate; ClientRpm stays the bound for an unknown partner",
            fmt(demand)
        ),
    );
    r.row(
        "service",
        "the busiest seller: uploads/min vs UploadRpm",
        l.biggest_seller_uploads_per_min,
        "per min",
        Some(d.upload_rpm),
        "biggest_seller_uploads_per_min vs UploadRpm",
    );
    r.row(
        "service",
        "the biggest host: requests/s vs what it takes",
        l.biggest_host_share * attempts,
        "req/s",
        Some(l.biggest_host_rps),
        format!(
            "biggest_host_share {} × attempts {}/s vs biggest_host_rps",
            fmt(l.biggest_host_share),
            fmt(attempts)
        ),
    );
    let open: f64 = (0..3)
        .map(|t| l.biggest_host_share * lambda[t] * l.tier_mean_answer_s[t])
        .sum();
    r.row(
        "service",
        "the biggest host: connections open vs what it takes",
        open,
        "connections",
        Some(l.biggest_host_connections),
        format!(
            "Σ tiers biggest_host_share {} × λ × mean answer [{} s] vs biggest_host_connections",
            fmt(l.biggest_host_share),
            l.tier_mean_answer_s
                .iter()
                .map(|a| fmt(*a))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
}

/// The scenario under its suggested deployment: every suggestion applied, and the model run
/// again until the suggestions stop changing it (a bigger intake function drains a popular
/// URL faster, a raised concurrency asks more of the account).
pub fn suggested(s: &Scenario, m: &Measured) -> Result<Scenario> {
    let mut out = s.clone();
    for _ in 0..10 {
        let report = model(&out, m)?;
        let before = out.clone();
        for suggestion in &report.suggestions {
            suggestion.setting.apply(&mut out);
        }
        if out == before {
            break;
        }
    }
    out.name = format!("{}, under its suggested deployment", s.name);
    Ok(out)
}
