//! `imgest crawl FILE` and `imgest results`: crawls on the local runner, with the same crawl
//! flows and download pools as `imgest serve`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use imgest_core::domain::{ClientId, OfferKey};
use imgest_core::ports::SystemClock;
use imgest_crawl::feed::{self, FeedCursor};
use imgest_crawl::messages::{CrawlRequest, CrawlState, PhotoStatus};
use imgest_crawl::{Crawler, Processing, RESULTS_QUEUE, tier_queue};
use imgest_local::app;
use imgest_local::runner::LocalRunner;

use crate::commands::{embedded_settings, init_logs, operator_service, runner_without_api};
use crate::progress::Progress;

/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How often completion is checked.
const CHECK_EVERY: Duration = Duration::from_millis(100);
/// How long a result message stays leased while `imgest results` prints it.
const RESULT_LEASE: Duration = Duration::from_secs(30);

pub async fn crawl_file(file: PathBuf, json: bool) -> Result<()> {
    init_logs("warn");
    let settings = embedded_settings("crawl")?;
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let runner = runner_without_api(&settings).await?;
    let crawler = Arc::clone(runner.crawler());
    let started = Instant::now();

    let mut offers = Vec::new();
    let mut seen = HashSet::new();
    let mut refused = 0usize;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let request: CrawlRequest = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{}:{}: not a crawl request: {e}", file.display(), n + 1);
                refused += 1;
                continue;
            }
        };
        // A file the operator hands over is trusted: its client ids are believed.
        let offer = OfferKey::new(
            crawler.trusted_tenant(&request.client_id),
            request.offer_id.clone(),
        );
        match crawler.intake_trusted(request).await {
            Ok(_) => {
                if seen.insert(offer.clone()) {
                    offers.push(offer);
                }
            }
            Err(e) => {
                eprintln!("{}:{}: offer {offer} refused: {e}", file.display(), n + 1);
                refused += 1;
            }
        }
    }
    eprintln!(
        "crawl: {} offers accepted, {refused} lines refused; downloading…",
        offers.len()
    );

    let progress = Progress::new(offers.len() as u64, "offers");
    let mut last_progress = Instant::now();
    loop {
        let idle = queues_idle(&runner).await?;
        let m = crawler.counts();
        let settled = m.offers_settled + m.offers_unchanged;
        if idle && all_done(&crawler, &offers).await? {
            break;
        }
        let counts = format!(
            "{} downloads ({} ok), {} retries, {} deferred",
            m.download_attempts, m.downloads_ok, m.retries, m.deferrals
        );
        progress.set(settled, offers.len() as u64);
        progress.message(counts.clone());
        // Without a terminal, a line now and then says the same.
        if progress.is_hidden() && last_progress.elapsed() >= PROGRESS_EVERY {
            eprintln!("crawl: {settled}/{} offers settled, {counts}", offers.len());
            last_progress = Instant::now();
        }
        if idle {
            // Nothing is queued or running, yet some crawl is not done: it can never finish.
            bail!("downloads stopped with offers unsettled (see the logs)");
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
    progress.finish();
    runner.stop().await;

    let mut ok = 0usize;
    let mut failed: BTreeMap<String, usize> = BTreeMap::new();
    for offer in &offers {
        if let Some(result) = crawler.crawl_status(offer).await? {
            for photo in result.photos {
                match photo.status {
                    PhotoStatus::Ok { .. } => ok += 1,
                    PhotoStatus::Failed { error } => {
                        *failed.entry(error.kind.to_string()).or_default() += 1;
                    }
                    PhotoStatus::Pending => {}
                }
            }
        }
    }
    let m = crawler.counts();
    if json {
        let summary = serde_json::json!({
            "offers": offers.len(),
            "refused_lines": refused,
            "seconds": started.elapsed().as_secs_f64(),
            "photos_ok": ok,
            "photos_failed": failed,
            "downloads": m.download_attempts,
            "photos_new": m.photos_new,
            "photos_already_stored": m.photos_deduplicated,
            "urls_from_earlier_crawls": m.urls_from_cache,
            "urls_joined": m.urls_joined,
            "offers_unchanged": m.offers_unchanged,
            "retries": m.retries,
            "tier_moves": m.tier_moves,
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    println!(
        "crawl: {} offers in {:.1} s: {ok} photos ok, {} failed{}",
        offers.len(),
        started.elapsed().as_secs_f64(),
        failed.values().sum::<usize>(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                failed
                    .iter()
                    .map(|(k, n)| format!("{k}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    println!(
        "crawl: {} downloads ({} new photos, {} already stored), {} URLs from earlier crawls, {} joined running downloads, {} unchanged offers, {} retries, {} tier moves",
        m.download_attempts,
        m.photos_new,
        m.photos_deduplicated,
        m.urls_from_cache,
        m.urls_joined,
        m.offers_unchanged,
        m.retries,
        m.tier_moves,
    );
    println!("crawl: results are queued; `imgest results` prints them");
    Ok(())
}

/// Whether no fetch task is queued or running.
async fn queues_idle(runner: &LocalRunner) -> Result<bool> {
    let queue = runner
        .queue()
        .context("the embedded store has no task queue")?;
    let now = runner.service().ports().clock.now();
    for tier in 0..runner.crawler().settings().tiers.len() {
        let c = queue.counts(&tier_queue(tier), now).await?;
        if c.ready + c.delayed + c.in_flight > 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn all_done(crawler: &Crawler, offers: &[OfferKey]) -> Result<bool> {
    for offer in offers {
        let done = crawler
            .crawl_status(offer)
            .await?
            .is_some_and(|r| r.state == CrawlState::Done);
        if !done {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Prints (and removes) up to `max` result messages, one JSON object per line.
pub async fn results(max: usize) -> Result<()> {
    init_logs("warn");
    let settings = embedded_settings("results")?;
    let service = app::service(
        &settings,
        &settings.public_base_url(),
        Arc::new(SystemClock),
    )
    .await
    .context("opening the data directory")?;
    let queue = service
        .ports()
        .queue
        .clone()
        .context("the embedded store has no task queue")?;
    let mut printed = 0;
    while printed < max {
        let now = service.ports().clock.now();
        let batch = queue
            .receive(RESULTS_QUEUE, now, (max - printed).min(100), RESULT_LEASE)
            .await?;
        if batch.is_empty() {
            break;
        }
        for delivery in batch {
            println!("{}", delivery.payload);
            queue.ack(&delivery).await?;
            printed += 1;
        }
    }
    eprintln!("results: {printed} printed");
    Ok(())
}

/// Prints `client`'s results from its feed after `after`, at most `max`, one JSON object per
/// line, then the cursor to go on from (on stderr, `next: CURSOR`).
pub async fn feed(client: &str, after: Option<&str>, max: usize) -> Result<()> {
    let client = ClientId::parse(client)?;
    let mut after = after.map(FeedCursor::parse).transpose()?;
    let (settings, service) = operator_service().await?;
    let crawler = Crawler::new(
        Arc::new(service),
        settings.crawl.clone(),
        Processing::Inline,
    );
    let mut printed = 0;
    while printed < max {
        let limit = (max - printed).min(feed::MAX_PAGE);
        let page = crawler.feed_page(&client, after.as_ref(), limit).await?;
        for result in &page.results {
            println!("{}", serde_json::to_string(result)?);
        }
        printed += page.results.len();
        eprintln!("next: {}", page.next);
        after = Some(FeedCursor::parse(&page.next)?);
        if !page.more {
            break;
        }
    }
    eprintln!("results: {printed} printed");
    Ok(())
}
