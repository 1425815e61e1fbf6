//! The operator commands: each parses settings, builds what it needs and calls a flow (or
//! starts the local runner).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use imgest_core::domain::JobPart;
use imgest_core::ports::SystemClock;
use imgest_flows::Service;
use imgest_flows::audit::AuditScope;
use imgest_http::auth::{LocalIssuer, TokenSpec};
use imgest_local::app;
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::{Backend, Settings};

use crate::progress::Progress;
use tracing::info;

pub(crate) fn init_logs(default: &str) {
    imgest_core::telemetry::init(default);
}

/// The settings, which must name the embedded backend: `command` keeps its queues in the
/// SQLite file (on AWS the functions and their SQS queues do its work).
pub(crate) fn embedded_settings(command: &str) -> Result<Settings> {
    let settings = Settings::from_env()?;
    match settings.backend {
        Backend::Embedded { .. } => Ok(settings),
        Backend::Aws(_) => bail!(
            "`imgest {command}` runs on the embedded backend only (IMGEST_BACKEND=embedded); on AWS the Lambda functions do this"
        ),
    }
}

/// The service over the settings' backend (either), with the system clock.
/// What an operator command runs on: its logs set up (warnings and errors), the settings from
/// the environment, and the service on their backend.
pub(crate) async fn operator_service() -> Result<(Settings, Service)> {
    init_logs("warn");
    let settings = Settings::from_env()?;
    let service = service(&settings).await?;
    Ok((settings, service))
}

pub(crate) async fn service(settings: &Settings) -> Result<Service> {
    let context = match settings.data_dir() {
        Some(dir) => format!("opening the data directory {}", dir.display()),
        None => "connecting to the AWS backend".to_owned(),
    };
    app::service(settings, &settings.public_base_url(), Arc::new(SystemClock))
        .await
        .context(context)
}

/// Starts the local runner on `settings` without an API (commands that only crawl).
pub(crate) async fn runner_without_api(settings: &Settings) -> Result<LocalRunner> {
    LocalRunner::start(settings, None, RunnerOptions::default())
        .await
        .context("starting the local runner")
}

pub async fn serve() -> Result<()> {
    init_logs("info");
    let settings = embedded_settings("serve")?;
    let metrics = imgest_local::prometheus::install()?;
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("binding {}", settings.listen))?;
    let options = RunnerOptions {
        gc_every: Some(settings.gc_interval),
        backfill: true,
        ..RunnerOptions::default()
    };
    let runner = LocalRunner::start(&settings, Some(listener), options)
        .await
        .context("starting the local runner")?;
    let data_dir = settings
        .data_dir()
        .unwrap_or(std::path::Path::new(""))
        .display();
    info!(addr = %runner.base_url(), %data_dir, metrics = metrics.as_str(), "imgest serving");
    println!(
        "imgest serving on {} (data in {data_dir})",
        runner.base_url()
    );
    let _ = tokio::signal::ctrl_c().await;
    runner.stop().await;
    Ok(())
}

pub async fn process(out: Option<PathBuf>, json: bool, files: Vec<PathBuf>) -> Result<()> {
    init_logs("warn");
    let settings = Settings::from_env()?;
    let pipeline = Arc::new(imgest_pipeline::configure::from_settings(&settings, None)?);
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let progress = Progress::new(files.len() as u64, "files");
    let mut failures = 0;
    let mut times = Vec::new();
    for file in &files {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let p = Arc::clone(&pipeline);
        let started = Instant::now();
        let (bytes, result) = tokio::task::spawn_blocking(move || {
            let r = p.process(&bytes);
            (bytes, r)
        })
        .await?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let id = imgest_core::domain::ImageId::of_bytes(&bytes);
        match result {
            Ok(processed) => {
                times.push(ms);
                progress.println(&processed_line(file, &id, &processed, ms, json));
                if let Some(dir) = &out {
                    let stem = file
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    processed
                        .write_variants(dir, &stem)
                        .map_err(|(path, e)| anyhow::anyhow!("writing {}: {e}", path.display()))?;
                }
            }
            Err(e) => {
                failures += 1;
                let line = if json {
                    serde_json::json!({"file": file.display().to_string(), "image_id": id.to_string(),
                        "ms": ms, "error": {"kind": e.kind(), "message": e.to_string()}})
                    .to_string()
                } else {
                    format!("{}  error {}: {e}  {:.1} ms", file.display(), e.kind(), ms)
                };
                progress.println(&line);
            }
        }
        progress.inc();
    }
    progress.finish();
    if !times.is_empty() && !json {
        times.sort_by(f64::total_cmp);
        println!(
            "{} processed, {} failed, median {:.1} ms",
            times.len(),
            failures,
            times[times.len() / 2]
        );
    }
    if failures > 0 {
        anyhow::bail!("{failures} of {} files failed", files.len());
    }
    Ok(())
}

/// One processed file, as `imgest process` prints it: a line, or a JSON object.
fn processed_line(
    file: &std::path::Path,
    id: &imgest_core::domain::ImageId,
    processed: &imgest_pipeline::Processed,
    ms: f64,
    json: bool,
) -> String {
    if json {
        let variants: serde_json::Map<String, serde_json::Value> = processed
            .variants
            .iter()
            .map(|v| {
                let facts = serde_json::json!({"width": v.width, "height": v.height, "bytes": v.bytes.len(), "format": v.format.as_str()});
                (v.name.to_string(), facts)
            })
            .collect();
        let mut line = serde_json::json!({
            "file": file.display().to_string(),
            "image_id": id.to_string(),
            "format": processed.format.as_str(),
            "width": processed.width,
            "height": processed.height,
            "colour": processed.colour.as_str(),
            "ms": ms,
            "variants": variants,
        });
        if let imgest_pipeline::Colour::Ignored(why) = &processed.colour {
            line["colour_ignored"] = why.as_str().into();
        }
        return line.to_string();
    }
    let sizes: Vec<String> = processed
        .variants
        .iter()
        .map(|v| {
            format!(
                "{}={}x{} {} {}kB",
                v.name,
                v.width,
                v.height,
                v.format,
                v.bytes.len() / 1000
            )
        })
        .collect();
    let colour = match &processed.colour {
        imgest_pipeline::Colour::Ignored(why) => format!("colour profile ignored ({why})"),
        other => other.as_str().to_owned(),
    };
    format!(
        "{}  {}  {}x{} {} {}  {:.1} ms  {}",
        file.display(),
        id,
        processed.width,
        processed.height,
        processed.format.as_str(),
        colour,
        ms,
        sizes.join(" ")
    )
}

pub async fn gc(json: bool) -> Result<()> {
    let (_, service) = operator_service().await?;
    let progress = Progress::counter("expired records");
    let report = service
        .gc_watched(JobPart::WHOLE, None, |so_far| {
            progress.count(so_far.examined);
            progress.message(format!("{} deleted", so_far.images_deleted));
        })
        .await?;
    progress.finish();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "gc: {} expired records examined, {} images deleted ({} files), {} kept (re-used meanwhile)",
        report.examined, report.images_deleted, report.files_deleted, report.kept
    );
    Ok(())
}

pub async fn queue(json: bool, dead_letters: usize) -> Result<()> {
    init_logs("warn");
    let settings = embedded_settings("queue")?;
    let service = service(&settings).await?;
    let overview = service.queue_overview(dead_letters).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&overview)?);
        return Ok(());
    }
    println!(
        "{:<10} {:<9} {:>4} {:>9} {:>9} {:>9} {:>9}",
        "queue", "priority", "tier", "ready", "delayed", "in flight", "dead"
    );
    for q in &overview.queues {
        let priority = serde_json::to_value(q.priority)?;
        println!(
            "{:<10} {:<9} {:>4} {:>9} {:>9} {:>9} {:>9}",
            q.queue,
            priority.as_str().unwrap_or_default(),
            q.tier.map_or_else(|| "-".to_owned(), |t| t.to_string()),
            q.ready,
            q.delayed,
            q.in_flight,
            q.dead
        );
    }
    if !overview.dead_letters.is_empty() {
        println!("newest dead letters:");
        for d in &overview.dead_letters {
            println!(
                "  {} {} after {} attempts: {}",
                d.queue, d.key, d.attempts, d.reason
            );
        }
    }
    Ok(())
}

pub async fn stats(json: bool) -> Result<()> {
    let (_, service) = operator_service().await?;
    let stats = imgest_crawl::stats::stats(&service).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    println!(
        "images: {} live ({} orphans, {} links from offers), {} being processed, {} expired awaiting GC",
        stats.images, stats.orphans, stats.links, stats.processing, stats.expired
    );
    println!(
        "files: {} variants ({} bytes), {} originals ({} bytes)",
        stats.variant_files, stats.variant_bytes, stats.original_files, stats.original_bytes
    );
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>9}",
        "queue", "ready", "delayed", "in flight", "dead"
    );
    for (name, q) in &stats.queues {
        println!(
            "{name:<10} {:>9} {:>9} {:>9} {:>9}",
            q.ready, q.delayed, q.in_flight, q.dead
        );
    }
    for (kind, n) in &stats.dead_letters_by_kind {
        println!("dead letters of kind {kind}: {n}");
    }
    let failed: u64 = stats.crawl_failures_by_kind.values().sum();
    println!(
        "crawls (each offer's latest): {} offers, {} photos, {failed} failed",
        stats.crawled_offers, stats.crawled_photos
    );
    for (kind, n) in &stats.crawl_failures_by_kind {
        println!("crawl failures of kind {kind}: {n}");
    }
    for h in &stats.top_failing_hosts {
        println!(
            "failing host {}: {} of {} photos failed",
            h.host, h.failed, h.photos
        );
    }
    if stats.unreadable_crawl_records > 0 {
        println!(
            "crawl records that do not parse (left out, see the log): {}",
            stats.unreadable_crawl_records
        );
    }
    for s in &stats.results_subscribers {
        match &s.client {
            Some(client) => println!("results subscriber {} (client {client})", s.endpoint),
            None => println!(
                "WARNING: results subscriber {} ({}) filters on no single client: it may read every client's results",
                s.endpoint, s.subscription
            ),
        }
    }
    Ok(())
}

pub async fn audit(dry_run: bool, json: bool) -> Result<()> {
    let (_, service) = operator_service().await?;
    let progress = Progress::counter("records");
    let r = service
        .audit_scope_watched(AuditScope::All, dry_run, |so_far| {
            progress.count(so_far.images_checked + so_far.offers_counted);
            progress.message(format!(
                "{} images checked, {} offers counted",
                so_far.images_checked, so_far.offers_counted
            ));
        })
        .await?;
    progress.finish();
    audit_done(&r, dry_run, json)
}

/// The most findings one run takes: a comparison that finds more has found something other
/// than damage (a wrong bucket, a wrong export) and is refused whole.
const MAX_FINDINGS: usize = 1_000_000;

pub async fn audit_findings(
    file: &std::path::Path,
    as_of: std::time::SystemTime,
    options: imgest_flows::audit::FindingsOptions,
    json: bool,
) -> Result<()> {
    use std::io::BufRead;
    let reader = std::io::BufReader::new(
        std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?,
    );
    let mut findings = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", file.display()))?;
        let found = imgest_flows::audit::Finding::parse(&line)
            .map_err(|e| anyhow::anyhow!("{}:{}: {e}", file.display(), n + 1))?;
        findings.extend(found);
        if findings.len() > MAX_FINDINGS {
            anyhow::bail!(
                "{}: more than {MAX_FINDINGS} findings: check the comparison (the bucket, the export) before mending",
                file.display()
            );
        }
    }
    let (_, service) = operator_service().await?;
    let as_of = imgest_core::domain::Timestamp::from_system(as_of);
    let r = service.audit_findings(&findings, as_of, options).await?;
    let dry_run = !options.apply;
    if r.link_counts_over_cap > 0 {
        let what = format!(
            "{}: the findings would lower {} link counts, more than --max-lowered {}",
            file.display(),
            r.link_counts_over_cap,
            options.max_lowered
        );
        let check = "a wrong or tampered comparison would let GC delete photos that offers still show: check the export and the query; if they are right, run again with --max-lowered set to that many";
        if dry_run {
            eprintln!("imgest: {what}: --apply would change nothing; {check}");
        } else {
            print_audit_report(&r, dry_run, json)?;
            return Err(Stopped(format!("{what}: nothing was changed; {check}")).into());
        }
    }
    audit_done(&r, dry_run, json)
}

/// Prints an audit's report; fails if it left damage it cannot mend.
fn audit_done(r: &imgest_flows::audit::AuditReport, dry_run: bool, json: bool) -> Result<()> {
    print_audit_report(r, dry_run, json)?;
    if r.link_counts_too_low > 0 {
        eprintln!(
            "imgest: {} link counts were too low (a bug: please report it with the log)",
            r.link_counts_too_low
        );
    }
    if r.images_broken + r.links_to_missing_images > 0 {
        anyhow::bail!("the audit found damage it cannot mend (see the log)");
    }
    Ok(())
}

fn print_audit_report(
    r: &imgest_flows::audit::AuditReport,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    println!(
        "audit{}: {} images checked: {} with missing files ({} repaired, {} broken); {} offers counted: {} link counts too high, {} too low, {} corrected, {} left (changed in the last {}), {} disputed (the live store does not confirm the finding); {} links to images with no record",
        if dry_run { " (dry run)" } else { "" },
        r.images_checked,
        r.images_missing_files,
        r.images_repaired,
        r.images_broken,
        r.offers_counted,
        r.link_counts_too_high,
        r.link_counts_too_low,
        r.link_counts_corrected,
        r.link_counts_unsettled,
        humantime::format_duration(imgest_flows::audit::SETTLE),
        r.link_counts_disputed,
        r.links_to_missing_images,
    );
    Ok(())
}

/// A flow that stopped rather than do something an operator must check first (`imgest`
/// exits with status 2).
#[derive(Debug)]
pub struct Stopped(pub String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stopped {}

pub async fn sweep(dry_run: bool, shard: Option<String>, go_on: bool, json: bool) -> Result<()> {
    let (settings, service) = operator_service().await?;
    let options = imgest_flows::sweep::SweepOptions { dry_run, go_on };
    let r = match shard {
        Some(shard) => {
            let ok = shard.len() == 2 && shard.bytes().all(|b| b.is_ascii_hexdigit());
            anyhow::ensure!(ok, "--shard {shard:?}: expected two hex digits, e.g. 3f");
            let mut report = imgest_flows::sweep::SweepReport::default();
            service
                .sweep_shard(&shard.to_ascii_lowercase(), options, &mut report)
                .await?;
            report
        }
        None => {
            let progress = Progress::new(imgest_core::domain::SHARD_COUNT as u64, "shards");
            let r = service
                .sweep_watched(options, |so_far| {
                    progress.inc();
                    progress.message(format!("{} files scanned", so_far.files_scanned));
                })
                .await?;
            progress.finish();
            r
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "sweep{}: {} shards, {} files scanned, {} garbage ({} bytes: {} of no record, {} unlisted variants, {} previous generations, {} unrecognised), {} deleted, {} records stopped listing retired variants, {} records list unconfirmed drops (kept), {} not needed but younger than {}",
            if dry_run { " (dry run)" } else { "" },
            r.shards,
            r.files_scanned,
            r.garbage_files,
            r.garbage_bytes,
            r.unowned_files,
            r.unlisted_files,
            r.previous_files,
            r.unrecognised_files,
            r.files_deleted,
            r.records_retired,
            r.variants_kept_unconfirmed,
            r.young_unowned_files,
            humantime::format_duration(settings.sweep_grace),
        );
    }
    match r.stopped {
        Some(stop) => Err(Stopped(stop.to_string()).into()),
        None => Ok(()),
    }
}

/// Writes a fresh key's JWKS to `jwks_file` and prints a token it signed (`imgest token`).
pub fn token(jwks_file: &Path, issuer: &str, audience: &str, spec: &TokenSpec<'_>) -> Result<()> {
    let signer = LocalIssuer::es256(issuer, audience)?;
    signer
        .write_jwks(jwks_file)
        .with_context(|| format!("writing {}", jwks_file.display()))?;
    println!("{}", signer.token(spec)?);
    Ok(())
}
