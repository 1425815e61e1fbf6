//! `imgest backfill`: re-processing every stored photo under the configured variant set.
//! `start` and `resume` work in the foreground until the run is done or paused (by
//! `imgest backfill pause` from another shell: the run reads its state before every batch);
//! `imgest serve` works on a running backfill too. On AWS (`IMGEST_BACKEND=aws`) the commands
//! only start, pause, resume and show the run: the `backfill` function does the work.

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Subcommand;
use imgest_flows::Service;
use imgest_flows::backfill::{BackfillStatus, RunState};

use imgest_settings::Backend;

use crate::commands::operator_service;
use crate::progress::Progress;

#[derive(Subcommand)]
pub enum BackfillCommand {
    /// Start a run towards the configured variant set (IMGEST_VARIANTS, IMGEST_JPEG_QUALITY,
    /// the watermark) and work on it until it is done or paused. Example:
    /// `IMGEST_VARIANTS=large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200,xl=fit:2048x2048 imgest backfill start`
    Start,
    /// Pause the run: no new batch starts; what is queued stays queued.
    /// Example: `imgest backfill pause`
    Pause,
    /// Resume a paused run where it stopped, and work on it until it is done or paused.
    /// Example: `imgest backfill resume`
    Resume,
    /// Show the run's progress: done / total, rate, failures by kind.
    /// Example: `IMGEST_BACKEND=aws imgest backfill status`
    Status,
}

/// Tasks re-processed per batch; the state is read again between batches.
const BATCH: usize = 8;

pub async fn run(command: BackfillCommand, json: bool) -> Result<()> {
    let (settings, service) = operator_service().await?;
    let on_aws = matches!(settings.backend, Backend::Aws(_));
    let say = |line: &str| {
        if !json {
            println!("{line}");
        }
    };
    let elapsed = match command {
        BackfillCommand::Start => {
            let run = service.backfill_start().await?;
            say(&format!(
                "backfill towards variant set {} started",
                run.target
            ));
            work(&service, on_aws, json).await?
        }
        BackfillCommand::Pause => {
            service.backfill_pause().await?;
            say("backfill paused");
            None
        }
        BackfillCommand::Resume => {
            service.backfill_resume().await?;
            say("backfill resumed");
            work(&service, on_aws, json).await?
        }
        BackfillCommand::Status => None,
    };
    let status = service.backfill_status().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print_status(&status, elapsed);
    }
    Ok(())
}

/// Works on the run until it is finished or paused, with a progress bar on a terminal (a
/// status line every few seconds otherwise, unless printing JSON); returns how long it worked.
/// On AWS the `backfill` function works on it: this only says so.
async fn work(service: &Service, on_aws: bool, json: bool) -> Result<Option<Duration>> {
    if on_aws {
        if !json {
            println!(
                "the backfill function enumerates it within a minute and re-processes its queue; \
                 `imgest backfill status` shows the progress"
            );
        }
        return Ok(None);
    }
    let started = Instant::now();
    let progress = Progress::new(0, "images");
    let mut last_print = Instant::now();
    loop {
        let step = service.backfill_step(BATCH).await?;
        // The status costs store reads (counts, dead letters): read when the step found
        // nothing to do, and for the progress every 2 s.
        if step.did_work() && last_print.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(step.next_step_in(Duration::ZERO)).await;
            continue;
        }
        let status = service.backfill_status().await?;
        let paused = status
            .run
            .as_ref()
            .is_some_and(|r| r.state == RunState::Paused);
        if let Some(run) = &status.run {
            progress.set(status.done, run.queued);
            let failed: u64 = status.failed.iter().map(|(_, n)| n).sum();
            progress.message(format!("{failed} failed, {} scanned", run.scanned));
        }
        if status.finished || paused {
            progress.finish();
            return Ok(Some(started.elapsed()));
        }
        if progress.is_hidden() && !json && last_print.elapsed() >= Duration::from_secs(2) {
            print_status(&status, Some(started.elapsed()));
        }
        last_print = Instant::now();
        // Live work comes first, or only tasks that wait for a retry (or the rate limit) are
        // left.
        tokio::time::sleep(step.next_step_in(Duration::from_secs(1))).await;
    }
}

fn print_status(status: &BackfillStatus, elapsed: Option<Duration>) {
    let Some(run) = &status.run else {
        println!("no backfill has been started");
        return;
    };
    let state = match (run.state, status.finished) {
        (_, true) => "done",
        (RunState::Paused, _) => "paused",
        (RunState::Running, _) if run.enumerated() => "processing",
        (RunState::Running, _) => "enumerating",
    };
    let failed: u64 = status.failed.iter().map(|(_, n)| n).sum();
    let mut line = format!(
        "backfill {state}: {} of {} queued done, {} pending, {failed} failed, {} records scanned (pass {} of {})",
        status.done,
        run.queued,
        status.pending,
        run.scanned,
        (run.pass + 1).min(imgest_flows::backfill::PASSES.len()),
        imgest_flows::backfill::PASSES.len(),
    );
    // This process's own rate while it works; the run's since it started otherwise.
    let rate = match elapsed.filter(|e| !e.is_zero()) {
        Some(elapsed) => status.done as f64 / elapsed.as_secs_f64(),
        None => status.rate_per_second,
    };
    line.push_str(&format!(", {rate:.1} images/s"));
    if let Some(eta) = status.eta_seconds.filter(|_| !status.finished) {
        line.push_str(&format!(", about {eta} s left"));
    }
    println!("{line}");
    for (kind, n) in &status.failed {
        println!("  {n} failed: {kind}");
    }
}
