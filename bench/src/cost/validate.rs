//! `imgest-bench validate`: the capacity model's per-instance rates checked against the real
//! handlers at reduced scale. Each function's invocations run under a CPU quota equal to its
//! share of a vCPU (`memory ÷ 1,769 MB`, [`quota`](super::quota)) with the scenario's memory
//! and trigger settings, against the emulator through the counting proxy; every stage's items
//! per second per instance, as measured (items ÷ the invocations' wall time), is set beside what
//! the model's own formulas predict from the same run's counted CPU and requests, at the
//! latencies the functions met (each kind of request's mean wait in that stage, as the proxy saw
//! it: the emulator queues requests behind a busy stage's, which a quiet stage never met). A row
//! more than the tolerance apart fails the command: the model is wrong there.
//!
//! The stages:
//! - intake: offers of new photos from one partner host;
//! - fetch, each tier: most photos answer at once (`--host-latency`), some only after the
//!   first tier's deadline and some only after the second's, so each tier's batches carry
//!   their own answers and the tasks that outlast them (moved to the next tier);
//! - process: photos a fetch function hands off (as when its memory cannot hold their decode);
//! - settle: the crawls back through the intake function;
//! - API upload: new photos, one an invocation (the model's stand-in for the process
//!   function's work, checked at that function's memory too);
//! - GC: the uploads, left unlinked and expired, collected by runs of one job, each its clock a
//!   step further through their expiries;
//! - the sweep: every stored file judged (a dry run) in runs of a share of the shards, in the
//!   same function.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use imgest_core::domain::{ClientId, OfferId};
use imgest_core::ports::SystemClock;
use imgest_crawl::{Crawler, Processing};
use imgest_hosts::{Answer, PartnerHost};
use serde::Serialize;

use super::proxy::{self, ProxyOptions, Tally};
use super::quota::CpuQuota;
use super::{
    Deployed, FULL_VCPU_MB, INTAKE_BATCH, PROCESS_BATCH, SAMPLES, Stages, collect_in_runs,
    on_function_thread, profile, sweep,
};
use crate::capacity::{
    Measured, Scenario, SweepPage, fetch_invocation_s, fmt, gc_job_rate, sweep_job_rate,
};
use crate::contention::ContentionProfile;
use crate::photos::PhotoMix;

/// What the validation is asked to do.
pub struct Options {
    pub offers: usize,
    pub photos_per_offer: usize,
    /// How long the partner host takes to answer the first tier's photos.
    pub host_latency: Duration,
    /// The scenario whose deployment (memory, batches, tiers) the functions run under.
    pub scenario: PathBuf,
    /// Where to write the table as JSON.
    pub out: Option<PathBuf>,
    /// How far apart model and measurement may be (0.25: within 25 % of the measurement).
    pub tolerance: f64,
}

/// The validation's table.
#[derive(Debug, Serialize)]
pub struct Validation {
    /// The command, the build and the commit.
    pub source: String,
    pub scenario: String,
    pub tolerance: f64,
    /// Per stage, each kind of request's mean wait, ms: the latencies the model was given
    /// for that stage's row.
    pub latency_ms: BTreeMap<String, BTreeMap<String, f64>>,
    pub rows: Vec<Check>,
}

/// One row: the model's rate beside the measured one.
#[derive(Debug, Serialize)]
pub struct Check {
    /// The model's row it stands behind.
    pub row: String,
    pub stage: String,
    pub memory_mb: f64,
    pub vcpu: f64,
    pub invocations: u64,
    pub items: u64,
    /// Items per second per instance.
    pub model: f64,
    pub measured: f64,
    /// `model ÷ measured`.
    pub ratio: f64,
    pub within: bool,
    pub trace: String,
}

/// Every this-many photos (by their number), which tier they answer in: the rest answer in
/// the first.
const TIER_OF: [(usize, usize); 3] = [(3, 1), (16, 1), (7, 2)];
const TIER_CYCLE: usize = 20;

/// The tier photo `n` is fetched in: it outlasts the deadlines of the tiers before.
fn tier_of(n: usize) -> usize {
    TIER_OF
        .iter()
        .find(|(at, _)| n % TIER_CYCLE == *at)
        .map_or(0, |(_, tier)| *tier)
}

/// Invocations per stage the batches aim for.
const INVOCATIONS: usize = 20;

pub async fn run(o: Options) -> Result<()> {
    let upstream = super::emulator("warn", "validate", "bench/capacity.sh --validate")?;
    if o.offers == 0 || o.photos_per_offer == 0 {
        bail!("--offers and --photos must be at least 1");
    }
    let text = std::fs::read_to_string(&o.scenario)
        .with_context(|| format!("reading {}", o.scenario.display()))?;
    let scenario = Scenario::parse(&text)
        .with_context(|| format!("{} is not a scenario", o.scenario.display()))?;
    let quota = Arc::new(CpuQuota::create()?);
    let tally = Arc::new(Tally::default());
    // Sizes are not billed here: the proxy's own reads would only slow the writes down.
    let proxy_url = proxy::start_with(
        &upstream,
        Arc::clone(&tally),
        ProxyOptions {
            latency: Duration::ZERO,
            sizes: false,
            refusals: None,
        },
    )
    .await?;

    let deadlines = scenario.deployment.fetch_tiers_s;
    // Between the deadlines: a photo of tier 1 outlasts tier 0's and answers within tier 1's.
    let answers_s = [
        o.host_latency.as_secs_f64(),
        f64::midpoint(deadlines[0], deadlines[1]),
        f64::midpoint(deadlines[1], deadlines[2]).min(2.0 * deadlines[1]),
    ];
    let mix = PhotoMix::new(&SAMPLES)?;
    let photos = o.offers * o.photos_per_offer;
    let mut served = Vec::new();
    let mut paths = Vec::new();
    let mut tasks = [0_usize; 3];
    for n in 0..photos {
        let path = format!("/v{n}");
        let tier = tier_of(n);
        for t in tasks.iter_mut().take(tier + 1) {
            *t += 1;
        }
        let (_, bytes) = mix.photo(n, &path)?;
        served.push((
            path.clone(),
            Answer::delay(
                Duration::from_secs_f64(answers_s[tier]),
                Answer::photo(bytes),
            ),
        ));
        paths.push(path);
    }
    // The photos the fetch function hands to the process function: a tenth of the offers'
    // worth, each answering at once.
    let handed = (photos / 10).max(1);
    let mut handoff_paths = Vec::new();
    for n in 0..handed {
        let path = format!("/h{n}");
        let (_, bytes) = mix.photo(photos + n, &path)?;
        served.push((
            path.clone(),
            Answer::delay(Duration::from_secs_f64(answers_s[0]), Answer::photo(bytes)),
        ));
        handoff_paths.push(path);
    }
    let uploads: Vec<Vec<u8>> = (0..o.offers)
        .map(|i| Ok(mix.photo(photos + handed + i, &format!("/upload/{i}"))?.1))
        .collect::<Result<_>>()?;
    let host = PartnerHost::builder().serve_all(served).start().await?;
    let urls = |paths: &[String]| -> Vec<Vec<String>> {
        paths
            .chunks(o.photos_per_offer)
            .map(|c| c.iter().map(|p| host.url(p)).collect())
            .collect()
    };
    let offers = urls(&paths);
    let handoffs = urls(&handoff_paths);
    let batches: [i32; 3] = std::array::from_fn(|t| {
        let aim = tasks[t].div_ceil(INVOCATIONS).max(1);
        i32::try_from(aim)
            .unwrap_or(i32::MAX)
            .min(scenario.deployment.fetch[t].batch as i32)
    });

    let run = Run {
        scenario: scenario.clone(),
        offers,
        handoffs,
        uploads,
        batches,
    };
    let driver = (Arc::clone(&tally), Arc::clone(&quota), proxy_url);
    on_function_thread(move || async move {
        let (tally, quota, proxy_url) = driver;
        run.drive(&proxy_url, &tally, &quota).await
    })
    .await?;
    drop(quota);

    let source = format!(
        "imgest-bench validate --offers {} --photos {} --host-latency {}ms --scenario {} ({} build) at {}",
        o.offers,
        o.photos_per_offer,
        o.host_latency.as_millis(),
        o.scenario.display(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        crate::revision()
    );
    let validation = compare(&tally, &scenario, source, &o, answers_s, tasks)?;
    print(&validation);
    if let Some(path) = &o.out {
        std::fs::write(path, serde_json::to_string_pretty(&validation)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("\nThe table is in {}.", path.display());
    }
    let off = validation.rows.iter().filter(|r| !r.within).count();
    if off > 0 {
        bail!(
            "{off} of the model's rows are more than {:.0} % from their measurement",
            o.tolerance * 100.0
        );
    }
    Ok(())
}

/// What the functions' thread runs.
struct Run {
    scenario: Scenario,
    offers: Vec<Vec<String>>,
    /// Offers whose photos the fetch function hands to the process function.
    handoffs: Vec<Vec<String>>,
    uploads: Vec<Vec<u8>>,
    /// Each tier's trigger batch: the scenario's, or less, so that each tier has about
    /// [`INVOCATIONS`] invocations.
    batches: [i32; 3],
}

impl Run {
    async fn drive<'a>(&'a self, proxy_url: &str, tally: &Tally, quota: &CpuQuota) -> Result<()> {
        let d = &self.scenario.deployment;
        let deployed = &Deployed::create(proxy_url).await?;
        let names = &deployed.names;
        let tiers = d
            .fetch_tiers_s
            .iter()
            .map(|s| format!("{}ms", (s * 1000.0).round()))
            .collect::<Vec<_>>()
            .join(",");
        // A function's settings: its memory budget as Lambda's memory sets it (seven eighths),
        // and every task of a batch a slot on the one partner host (the host's slots have a
        // row of their own: here the tier's time is measured).
        let settings = |memory_mb: f64, tier: usize| {
            deployed.settings(&[
                ("IMGEST_FETCH_TIERS", tiers.clone()),
                ("IMGEST_FETCH_TIER", tier.to_string()),
                ("IMGEST_DOMAIN_CONCURRENCY", "1024".to_owned()),
                (
                    "IMGEST_MEMORY_BUDGET",
                    format!("{}MiB", (memory_mb * 7.0 / 8.0).floor()),
                ),
            ])
        };
        let settings = &settings;
        let crawler = |memory_mb: f64, tier: usize, processing| async move {
            let settings = settings(memory_mb, tier)?;
            let service = deployed.service(&settings, Arc::new(SystemClock)).await?;
            Ok::<_, anyhow::Error>(Crawler::new(Arc::new(service), settings.crawl, processing))
        };
        let intake = crawler(d.intake.memory_mb, 0, Processing::Handoff).await?;
        let client = ClientId::parse("bench").context("client id")?;
        let lambda = |memory_mb| deployed.lambda(tally, Some(quota), memory_mb);

        let intake_lambda = lambda(d.intake.memory_mb);
        let stages = Stages {
            lambda: &intake_lambda,
            names,
            client: &client,
            crawler: &intake,
        };
        let listing =
            |offers: &'a [Vec<String>], prefix: &str| -> Result<Vec<(OfferId, &'a Vec<String>)>> {
                offers
                    .iter()
                    .enumerate()
                    .map(|(o, urls)| Ok((OfferId::parse(&format!("{prefix}-{o}"))?, urls)))
                    .collect()
            };
        stages
            .intake_stage("validate: intake", &listing(&self.offers, "offer")?)
            .await?;

        let mut failed = 0;
        for t in 0..3 {
            let fetcher = crawler(d.fetch[t].memory_mb, t, Processing::InlineWhenItFits)
                .await?
                .finishing_elsewhere();
            tally.enter(&format!("validate: fetch-{t}"));
            let queue = &names.queues[["fetch-0", "fetch-1", "fetch-2"][t]];
            lambda(d.fetch[t].memory_mb)
                .deliver(queue, self.batches[t], |e| {
                    imgest_lambda_crawl::fetch::handle(&fetcher, e)
                })
                .await?;
            let counts = fetcher.counts();
            failed += counts.urls_failed;
            println!(
                "fetch-{t}: {} downloads, {} photos processed here, {} moved on a tier",
                counts.download_attempts, counts.processed_here, counts.tier_moves
            );
        }
        tally.enter("validate: settle");
        intake_lambda
            .deliver(&names.queues["settle"], INTAKE_BATCH, |e| {
                imgest_lambda_crawl::settle::handle(&intake, e)
            })
            .await?;
        tally.enter("validate: results");
        intake_lambda
            .consume_results(&names.queues["results"], self.offers.len())
            .await?;
        if failed > 0 {
            bail!("{failed} photos failed: the tiers' answers did not come as planned");
        }

        // Hand-offs: a fetch function that passes every photo on (as when its memory cannot
        // hold their decode), and the process function that takes them.
        stages
            .intake_stage(
                "validate: intake (hand-offs)",
                &listing(&self.handoffs, "handed")?,
            )
            .await?;
        // Intake routes them by what the host taught it above: any tier.
        tally.enter("validate: fetch (hand-offs)");
        for t in 0..3 {
            let handing = crawler(d.fetch[t].memory_mb, t, Processing::Handoff)
                .await?
                .finishing_elsewhere();
            lambda(d.fetch[t].memory_mb)
                .deliver(
                    &names.queues[["fetch-0", "fetch-1", "fetch-2"][t]],
                    self.batches[t],
                    |e| imgest_lambda_crawl::fetch::handle(&handing, e),
                )
                .await?;
        }
        let processor = crawler(d.process.memory_mb, 0, Processing::Handoff)
            .await?
            .finishing_elsewhere();
        tally.enter("validate: process");
        lambda(d.process.memory_mb)
            .deliver(&names.queues["process"], PROCESS_BATCH, |e| {
                imgest_lambda_crawl::process::handle(&processor, e)
            })
            .await?;
        tally.enter("validate: settle (hand-offs)");
        intake_lambda
            .deliver(&names.queues["settle"], INTAKE_BATCH, |e| {
                imgest_lambda_crawl::settle::handle(&intake, e)
            })
            .await?;
        intake_lambda
            .consume_results(&names.queues["results"], self.handoffs.len())
            .await?;

        // Uploads through the API function, one an invocation.
        let api_settings = settings(d.api.memory_mb, 0)?;
        let api = deployed
            .service(&api_settings, Arc::new(SystemClock))
            .await?;
        tally.enter("validate: upload");
        let api_lambda = lambda(d.api.memory_mb);
        let uploading = imgest_core::ports::Clock::now(&SystemClock);
        for bytes in &self.uploads {
            let body = bytes::Bytes::from(bytes.clone());
            api_lambda
                .invoke(1, async { api.upload_bytes(body).await.map(drop) })
                .await?;
        }
        let uploaded = imgest_core::ports::Clock::now(&SystemClock);

        // Left unlinked, they expire: GC runs collect them, a step of their expiries each.
        let gc_settings = settings(d.gc.memory_mb, 0)?;
        tally.enter("validate: gc");
        let collected = collect_in_runs(
            &lambda(d.gc.memory_mb),
            deployed,
            &gc_settings,
            uploading,
            uploaded,
        )
        .await?;
        if collected != self.uploads.len() as u64 {
            bail!(
                "GC collected {collected} of {} expired uploads",
                self.uploads.len()
            );
        }

        // The sweep over every stored file, in the same function.
        let sweeper = deployed
            .service(&gc_settings, Arc::new(SystemClock))
            .await?;
        tally.enter("validate: sweep");
        sweep(&lambda(d.gc.memory_mb), &sweeper).await?;
        Ok(())
    }
}

/// Each validated stage's measured rate beside the model's.
fn compare(
    tally: &Tally,
    scenario: &Scenario,
    source: String,
    o: &Options,
    answers_s: [f64; 3],
    tasks: [usize; 3],
) -> Result<Validation> {
    let d = &scenario.deployment;
    // Each stage's row gets the waits that stage met: the emulator queues requests behind a
    // busy stage's, and a quiet stage must not be charged them.
    let latency_in = |stage: &str| scenario.latency_ms.observed(&tally.observed_ms(stage));
    let profile = profile::profile(
        tally,
        source.clone(),
        o.offers * o.photos_per_offer,
        o.offers,
        o.host_latency.as_secs_f64() * 1000.0,
    );
    let measured = Measured {
        cost: profile,
        contention: ContentionProfile::default(),
    };
    let mut rows = Vec::new();
    let mut check = |row: String, stage: &str, memory_mb: f64, model: f64, trace: String| {
        let counts = tally.stage(stage);
        let wall_s: f64 = counts.runs.iter().map(|r| r.measured_ms).sum::<f64>() / 1000.0;
        if counts.items == 0 || wall_s <= 0.0 {
            return;
        }
        let measured = counts.items as f64 / wall_s;
        let ratio = model / measured;
        rows.push(Check {
            row,
            stage: stage.to_owned(),
            memory_mb,
            vcpu: (memory_mb / FULL_VCPU_MB).min(1.0),
            invocations: counts.invocations,
            items: counts.items,
            model,
            measured,
            ratio,
            within: (ratio - 1.0).abs() <= o.tolerance,
            trace,
        });
    };
    let per_item = |stage: &str, memory_mb: f64, met_in: &str| -> Result<(f64, String)> {
        let t = measured.stage_time(stage, memory_mb, &latency_in(met_in), 1.0)?;
        Ok((1.0 / t.total().max(1e-9), t.source))
    };
    // A stage whose items decode photos (as the model takes them).
    let per_decode = |stage: &str, memory_mb: f64| -> Result<(f64, String)> {
        let t = measured.decode_time(stage, memory_mb, &latency_in(stage), 1.0)?;
        Ok((1.0 / t.total().max(1e-9), t.source))
    };

    let (rate, trace) = per_item("validate: intake", d.intake.memory_mb, "validate: intake")?;
    check(
        "intake: concurrency vs its queues' maximum".into(),
        "validate: intake",
        d.intake.memory_mb,
        rate,
        format!("1 ÷ stage time [{trace}]"),
    );
    for t in 0..3 {
        let stage = format!("validate: fetch-{t}");
        let s = measured.stage(&stage)?;
        let per_inv = s.items as f64 / (s.invocations.max(1)) as f64;
        let vcpu = (d.fetch[t].memory_mb / FULL_VCPU_MB).min(1.0);
        // The slowest task of a batch: the tier's deadline when a task of the batch outlasts
        // it (moved to the next tier: a share `q` of the tier's tasks), else its answers'.
        let q = if t < 2 {
            tasks[t + 1] as f64 / tasks[t].max(1) as f64
        } else {
            0.0
        };
        let straggler = 1.0 - (1.0 - q).powf(per_inv);
        let cpu_s = s.cpu_ms_per_invocation / 1000.0;
        let answer = answers_s[t];
        let (waits_s, waits) = measured.invocation_waits_s(&stage, &latency_in(&stage))?;
        let length = straggler
            * fetch_invocation_s(d.fetch_tiers_s[t], answer, cpu_s, vcpu, waits_s)
            + (1.0 - straggler) * fetch_invocation_s(answer, answer, cpu_s, vcpu, waits_s);
        check(
            format!("fetch-{t}: concurrency vs reserved"),
            &stage,
            d.fetch[t].memory_mb,
            per_inv / length,
            format!(
                "{} tasks/inv ÷ max(slowest: the deadline {} s in {} of batches [a task outlasts it], else the answer; answer {} s + decode span of (CPU {} s/inv ÷ vCPU {}, requests {} s [{waits}]))",
                fmt(per_inv),
                fmt(d.fetch_tiers_s[t]),
                fmt(straggler),
                fmt(answer),
                fmt(cpu_s),
                fmt(vcpu),
                fmt(waits_s)
            ),
        );
    }
    // The model takes an upload's work for a handed-off photo's (a profile choice: its
    // photos are other photos of the mix); the formula is checked on the process function's
    // own photos, as every other row on its own stage's.
    let (rate, trace) = per_decode("validate: process", d.process.memory_mb)?;
    check(
        "process: concurrency vs its queue's maximum".into(),
        "validate: process",
        d.process.memory_mb,
        rate,
        format!("1 ÷ stage time [{trace}]"),
    );
    let (rate, trace) = per_item("validate: settle", d.intake.memory_mb, "validate: settle")?;
    check(
        "intake: concurrency vs its queues' maximum (settled crawls)".into(),
        "validate: settle",
        d.intake.memory_mb,
        rate,
        format!("1 ÷ stage time [{trace}]"),
    );
    let (rate, trace) = per_decode("validate: upload", d.api.memory_mb)?;
    check(
        "api: concurrency vs reserved (uploads)".into(),
        "validate: upload",
        d.api.memory_mb,
        rate,
        format!("1 ÷ stage time [{trace}]"),
    );
    let gc = measured.per_record(
        "validate: gc",
        d.gc.memory_mb,
        &latency_in("validate: gc"),
        imgest_aws::dynamodb::GC_LISTED_BUCKETS as f64,
        1.0,
    )?;
    check(
        "GC: records collected/s vs orphans expiring (one job)".into(),
        "validate: gc",
        d.gc.memory_mb,
        gc_job_rate(&gc, d.gc.concurrency, gc.records_per_round),
        format!(
            "{} records a round ÷ (listing {} s + max(CPU at its share, ⌈records ÷ concurrency {}⌉ × (CPU on a core + {} s of requests))) [{}]",
            fmt(gc.records_per_round),
            fmt(gc.listing_s),
            fmt(d.gc.concurrency),
            fmt(gc.record.wait_s),
            gc.record.source
        ),
    );
    let c = measured.sweep_costs("validate: sweep")?;
    let vcpu = (d.gc.memory_mb / FULL_VCPU_MB).min(1.0);
    check(
        "sweep: files judged/s vs a pass in sweep_pass_days (one job)".into(),
        "validate: sweep",
        d.gc.memory_mb,
        sweep_job_rate(
            SweepPage {
                files: c.files_per_list,
                batch_gets: c.batch_gets_per_list,
                saves: c.saves_per_list,
                reads: c.reads_per_list,
            },
            c.cpu_ms_per_request,
            vcpu,
            &latency_in("validate: sweep"),
        ),
        format!(
            "pages of {} files ÷ max(CPU ÷ vCPU {}, CPU + a LIST + {} BatchGetItems + {} checkpoints + {} reads) [{}]",
            fmt(c.files_per_list),
            fmt(vcpu),
            fmt(c.batch_gets_per_list),
            fmt(c.saves_per_list),
            fmt(c.reads_per_list),
            c.source
        ),
    );
    Ok(Validation {
        source,
        scenario: scenario.name.clone(),
        tolerance: o.tolerance,
        latency_ms: rows
            .iter()
            .map(|r| {
                let met = tally.observed_ms(&r.stage);
                let ms = met.into_iter().map(|(k, (ms, _))| (k, ms)).collect();
                (r.stage.clone(), ms)
            })
            .collect(),
        rows,
    })
}

fn print(v: &Validation) {
    println!("# The capacity model against measurements\n");
    println!("Measured: {}", v.source);
    println!("Scenario: {}\n", v.scenario);
    println!("Latencies the functions met (mean ms per request), by stage:\n");
    for (stage, met) in &v.latency_ms {
        let met: Vec<String> = met
            .iter()
            .map(|(op, ms)| format!("{op} {}", fmt(*ms)))
            .collect();
        println!("- {stage}: {}", met.join(", "));
    }
    println!(
        "\n| | row | stage | memory (vCPU) | invocations | items | model items/s per instance | measured | model ÷ measured |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &v.rows {
        println!(
            "| {} | {} | {} | {} MB ({}) | {} | {} | {} | {} | {} |",
            if r.within { "" } else { "OFF" },
            r.row,
            r.stage,
            fmt(r.memory_mb),
            fmt(r.vcpu),
            r.invocations,
            r.items,
            fmt(r.model),
            fmt(r.measured),
            fmt(r.ratio)
        );
    }
    println!("\nTraces:\n");
    for r in &v.rows {
        println!("- {}: {}", r.stage, r.trace);
    }
}
