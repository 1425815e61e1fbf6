//! `imgest-bench backfill`: re-processing a corpus under a new variant set while live uploads
//! go on, on the embedded default (a fresh temporary data directory).
//!
//! The runner is configured with the default variant set plus one size (`small=fit:160x160`);
//! the corpus is stored first by a service over the same storage with the default set, so
//! every one of its records is of the old version. Then, through the runner's API on 127.0.0.1:
//!
//! 1. `--live` uploads of new photos one after another, alone: their latencies;
//! 2. a backfill started on the runner's own service (as `imgest serve` runs it: the same
//!    decoding slots as the API) and worked a batch at a time, while another `--live` uploads
//!    go through the API one after another. Half-way, the run is paused for a second (nothing
//!    may finish meanwhile but the batch in flight), then resumed.
//!
//! Printed: the backfill's time and rate, the upload latencies' median and 99th percentile
//! alone and beside the backfill, side by side, and the checks: every corpus record is of the
//! new version, and the backfill decoded each exactly once. Build with --release.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use imgest_flows::Service;
use imgest_flows::backfill::RunState;
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_pipeline::{Pipeline, PipelineConfig};
use imgest_settings::Settings;

use crate::data_dir::TempDir;
use crate::init_logs;

pub struct Options {
    pub images: usize,
    pub live: usize,
    /// `IMGEST_BACKFILL_RATE`.
    pub rate: u32,
}

/// A distinct photo of about 0.2 MP for each `n` (its size differs).
fn photo(n: usize) -> Vec<u8> {
    let (w, h) = (480 + (n % 160) as u32, 360 + (n / 160) as u32);
    imgest_hosts::hostile::jpeg(w, h, false, None)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

/// Uploads photos `from..from + n` through the API one after another: their latencies in ms.
async fn live_uploads(base: &str, from: usize, n: usize) -> Result<Vec<f64>> {
    let client = reqwest::Client::new();
    let mut times = Vec::with_capacity(n);
    for i in from..from + n {
        let body = photo(i);
        let started = Instant::now();
        let status = client
            .post(format!("{base}/v1/images"))
            .header("content-type", "image/jpeg")
            .body(body)
            .send()
            .await
            .context("uploading")?
            .status();
        times.push(started.elapsed().as_secs_f64() * 1e3);
        ensure!(
            status.as_u16() == 201,
            "a live upload was answered {status}"
        );
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Works on the run until it is finished, pausing it for a second half-way.
async fn work(service: Arc<Service>, images: usize) -> Result<(Duration, u64)> {
    let started = Instant::now();
    let mut paused_once = false;
    let mut steps = 0u64;
    loop {
        let step = service.backfill_step(8).await?;
        steps += 1;
        // The status costs store reads: looked at as rarely as `imgest serve`'s worker would
        // need it (when idle), and every 16 batches for the pause.
        if step.did_work() && !steps.is_multiple_of(16) {
            tokio::time::sleep(step.next_step_in(Duration::ZERO)).await;
            continue;
        }
        let status = service.backfill_status().await?;
        if status.finished {
            return Ok((started.elapsed(), status.done));
        }
        if !paused_once && status.done as usize >= images / 2 {
            paused_once = true;
            service.backfill_pause().await?;
            // Paused: a batch does nothing.
            let before = service.backfill_status().await?.done;
            let idle = service.backfill_step(8).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let after = service.backfill_status().await?;
            ensure!(
                !idle.did_work() && after.done == before,
                "work went on while paused"
            );
            ensure!(after.run.map(|r| r.state) == Some(RunState::Paused));
            service.backfill_resume().await?;
            println!(
                "  paused at {before} of {images} done for 1 s: nothing done meanwhile; resumed"
            );
        }
        tokio::time::sleep(step.next_step_in(Duration::from_millis(20))).await;
    }
}

pub async fn run(o: Options) -> Result<()> {
    init_logs("warn");
    imgest_download::install_default_provider();
    let dir = TempDir::new("backfill", "run")?;
    let old_variants = PipelineConfig::default().variants.to_string();
    let vars = std::collections::HashMap::from([
        ("IMGEST_DATA_DIR".to_owned(), dir.0.display().to_string()),
        (
            "IMGEST_VARIANTS".to_owned(),
            format!("{old_variants},small=fit:160x160"),
        ),
        ("IMGEST_BACKFILL_RATE".to_owned(), o.rate.to_string()),
    ]);
    let settings = Settings::from_map(&vars)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let runner = LocalRunner::start(&settings, Some(listener), RunnerOptions::default())
        .await
        .context("starting the runner")?;
    let service = Arc::clone(runner.service());
    let base = runner.base_url().to_owned();

    // The corpus, stored under the old set.
    let mut config = imgest_pipeline::configure::from_settings(&settings, None)?
        .config()
        .clone();
    config.variants = old_variants.parse()?;
    let old = Arc::new(
        Service::new(service.ports().clone(), service.policy().clone())
            .with_imaging(Arc::new(Pipeline::new(config))),
    );
    let started = Instant::now();
    let indices: Vec<usize> = (0..o.images).collect();
    for chunk in indices.chunks(4) {
        let uploads = chunk.iter().map(|&i| {
            let old = Arc::clone(&old);
            async move { old.upload_bytes(photo(i).into()).await }
        });
        for r in futures_util::future::join_all(uploads).await {
            r?;
        }
    }
    println!(
        "corpus: {} photos of about 0.2 MP stored under the old variant set in {:.1?}",
        o.images,
        started.elapsed()
    );

    let alone = live_uploads(&base, o.images, o.live).await?;

    let decodes_before = service.counts().backfill_runs;
    service.confirm_variants(&[]).await?;
    service.backfill_start().await?;
    let worker = tokio::spawn(work(Arc::clone(&service), o.images));
    let beside = live_uploads(&base, o.images + o.live, o.live).await?;
    let (took, done) = worker.await.context("the backfill worker")??;
    let decoded = service.counts().backfill_runs - decodes_before;

    let mut stale = 0;
    for i in 0..o.images {
        let id = imgest_core::domain::ImageId::of_bytes(&photo(i));
        let record = service.ports().images.get(&id).await?;
        if record.and_then(|r| r.variant_set().cloned())
            != Some(service.imaging()?.version().clone())
        {
            stale += 1;
        }
    }
    println!(
        "backfill (rate limit {}): {done} tasks done in {took:.1?} ({:.0} photos/s), {decoded} decodes for {} photos, {stale} left on the old set",
        match o.rate {
            0 => "none".to_owned(),
            r => format!("{r}/s"),
        },
        done as f64 / took.as_secs_f64(),
        o.images
    );
    println!(
        "live uploads (n = {} each): alone p50 {:.1} ms p99 {:.1} ms; beside the backfill p50 {:.1} ms p99 {:.1} ms; ratio p50 {:.2}x p99 {:.2}x",
        o.live,
        percentile(&alone, 0.5),
        percentile(&alone, 0.99),
        percentile(&beside, 0.5),
        percentile(&beside, 0.99),
        percentile(&beside, 0.5) / percentile(&alone, 0.5),
        percentile(&beside, 0.99) / percentile(&alone, 0.99),
    );
    ensure!(stale == 0, "{stale} corpus photos were not re-processed");
    ensure!(
        decoded as usize == o.images,
        "{decoded} decodes for {} photos: some were processed twice",
        o.images
    );
    runner.stop().await;
    Ok(())
}
