//! `imgest-bench intake`: how many URLs a minute crawl intake takes on the embedded default
//! (SQLite and a data directory, a fresh temporary one per run): the
//! [`Crawler::intake_trusted`] path that the intake function and `imgest crawl` run for every
//! crawl request, measured alone, for three kinds of offer:
//!
//! - (a) unchanged offers: the same offer id with the same URLs, sent again after its first
//!   crawl settled (one read, and the result sent again); every offer is sent
//!   [`UNCHANGED_ROUNDS`] times, one round after another, as this case is by far the fastest
//!   and would otherwise be over too soon to time well;
//! - (b) offers whose URLs are all known (settled URL records): measured twice, as new offer
//!   ids (the first crawl of the offers that (a) re-sends, which must run anyway) and as those
//!   same offers changed, each with a fresh choice of URLs from the pool (so the previous
//!   crawl is replaced and all of the offer's photo links change, the costlier change);
//! - (c) offers of new URLs, which intake records and queues as fetch tasks.
//!
//! Setup (not measured): one local runner on the temporary data directory and one simulated
//! partner host on 127.0.0.1 serving [`POOL_URLS`] URLs, URL `n` the tiny JPEG `n` modulo
//! [`POOL_PHOTOS`] (16×16, a colour and a number each: processing one costs next to nothing,
//! and content dedup makes the other URLs of the same photo cheaper still). The pool is
//! crawled for real through the runner's download pools, and the benchmark waits until every
//! pool offer's crawl is done with every photo stored. Every offer's URLs are distinct photos:
//! with one shared JPEG every URL would be the same image after dedup, and each offer would
//! link one photo instead of eight, which would make case (b) look cheaper than it is. Not a
//! photo per URL either: a thousand photos are thousands of files, which can take many
//! seconds to delete when the run ends.
//!
//! The fetch pools must not take the tasks that case (c) queues: nothing may be downloaded
//! while intake is measured. [`RunnerOptions`] has no switch for the pools (only the clock
//! and GC) and `IMGEST_FETCH_WORKERS` refuses 0, so once the pool has settled the benchmark
//! stops the runner, which ends its pools (and serves no API here), and keeps calling intake
//! on the runner's crawler, which outlives it: the shape of the intake function on AWS,
//! where no download pool shares the process. All three cases are measured this way, so the
//! idle pools' queue polling does not weigh on some cases and not others. Case (c) checks
//! that the partner host saw no request and that the tier queues hold exactly its tasks.
//!
//! Each case's crawl requests are built before its clock starts; `--concurrency` workers
//! then take them one at a time and call intake, so that many intakes are in flight at once
//! (as concurrent intake messages or API calls are). A case's time runs from the first
//! intake call to the last one's answer. The crawler's counters are checked after each case
//! (e.g. every URL of (b) settled from its record, every offer of (a) found unchanged), so a
//! case that took another path than the one it names fails instead of printing a figure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use imgest_core::domain::{ClientId, OfferId, OfferKey};
use imgest_crawl::messages::{CrawlRequest, CrawlState, PhotoStatus};
use imgest_crawl::{Crawler, tier_queue};
use imgest_flows::CrawlCounts;
use imgest_hosts::{Answer, PartnerHost};
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::Settings;

use crate::data_dir::TempDir;
use crate::init_logs;
use crate::photos::tiny_jpeg;

/// Known URLs: the pool that cases (a) and (b) draw their offers from.
const POOL_URLS: usize = 1024;
/// Distinct photos behind the pool's URLs.
const POOL_PHOTOS: usize = 64;
/// URLs per offer, in every case and in the pool's own crawl.
const URLS_PER_OFFER: usize = 8;
// An offer's URLs are distinct photos, and a pool offer's URLs are consecutive ones.
const _: () = assert!(POOL_PHOTOS >= URLS_PER_OFFER && POOL_PHOTOS.is_multiple_of(URLS_PER_OFFER));
/// The one client every offer belongs to.
const CLIENT: &str = "bench-shop";
/// How long the pool's real crawl may take before the benchmark gives up.
const POOL_DEADLINE: Duration = Duration::from_secs(300);
/// How often the pool's crawls are checked while they settle.
const POOL_CHECK: Duration = Duration::from_millis(20);
/// Rounds of case (a): each re-sends every offer once more.
const UNCHANGED_ROUNDS: usize = 5;
/// Seed of the offers' URL choices: every run sends the same offers.
const SEED: u64 = 0x1a7a_4e5e;

/// Targets, URLs per minute.
const TARGET_UNCHANGED: f64 = 270_000.0;
const TARGET_KNOWN: f64 = 200_000.0;
const TARGET_NEW: f64 = 100_000.0;

/// What the command line chose.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// URLs per measured case (rounded up to whole offers).
    pub urls: usize,
    /// Intake calls in flight at once.
    pub concurrency: usize,
}

/// One measured case.
struct Figures {
    case: &'static str,
    offers: usize,
    urls: usize,
    elapsed: Duration,
    target: f64,
}

impl Figures {
    fn per_minute(&self) -> f64 {
        self.urls as f64 * 60.0 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// What a case's intakes answered.
#[derive(Debug, Default)]
struct Answers {
    done: usize,
    pending: usize,
}

pub async fn run(options: Options) -> Result<()> {
    // As `imgest crawl`: warnings and errors only (the intake function logs at info, one
    // line per settled crawl; IMGEST_LOG=info measures that too).
    init_logs("warn");
    imgest_download::install_default_provider();
    ensure!(options.urls > 0, "--urls must be at least 1");
    ensure!(options.concurrency > 0, "--concurrency must be at least 1");
    let offers = options.urls.div_ceil(URLS_PER_OFFER);
    if cfg!(debug_assertions) {
        eprintln!("bench intake: a debug build; build with --release for meaningful figures");
    }
    println!(
        "bench intake: embedded store (SQLite), {offers} offers of {URLS_PER_OFFER} URLs per case, {} intakes in flight, {POOL_URLS} known URLs",
        options.concurrency
    );

    let data_dir = TempDir::new("intake", "run")?;
    let client = ClientId::parse(CLIENT)?;
    let jpegs: Vec<Vec<u8>> = (0..POOL_PHOTOS as u64)
        .map(tiny_jpeg)
        .collect::<Result<_>>()?;
    let photos =
        (0..POOL_URLS).map(|n| (pool_path(n), Answer::photo(jpegs[n % POOL_PHOTOS].clone())));
    let host = PartnerHost::start(photos)
        .await
        .context("starting the partner host")?;
    let pool: Vec<String> = (0..POOL_URLS).map(|n| host.url(&pool_path(n))).collect();

    let crawler = crawl_pool(&data_dir, &client, &pool).await?;
    let host_requests = host.requests();

    let mut rng = fastrand::Rng::with_seed(SEED);
    let first: Vec<CrawlRequest> = (0..offers)
        .map(|n| request(&client, &format!("offer-{n}"), pick(&mut rng, &pool)))
        .collect::<Result<_>>()?;
    let again: Vec<CrawlRequest> = (0..UNCHANGED_ROUNDS)
        .flat_map(|_| first.iter().cloned())
        .collect();
    let changed: Vec<CrawlRequest> = first
        .iter()
        .map(|r| {
            let mut urls = pick(&mut rng, &pool);
            // A draw equal to the offer's URLs would be an unchanged offer; rotate it.
            if urls == r.urls {
                urls.rotate_left(1);
            }
            CrawlRequest { urls, ..r.clone() }
        })
        .collect();
    let new: Vec<CrawlRequest> = (0..offers)
        .map(|n| {
            let urls = (0..URLS_PER_OFFER)
                .map(|i| host.url(&format!("/new/{n}/{i}.jpg")))
                .collect();
            request(&client, &format!("new-offer-{n}"), urls)
        })
        .collect::<Result<_>>()?;

    eprintln!("bench intake: measuring");
    let mut results = Vec::new();
    let measure =
        |case, target, requests| measure(&crawler, case, target, requests, options.concurrency);

    // (b) as new offer ids; this is also the first crawl that makes (a)'s offers unchanged.
    let (figures, answers, delta) =
        measure("(b) known URLs, new offer ids", TARGET_KNOWN, first).await?;
    check_known(&figures, &answers, &delta)?;
    results.push(figures);

    let (figures, answers, delta) =
        measure("(a) unchanged offers re-sent", TARGET_UNCHANGED, again).await?;
    ensure!(
        answers.done == figures.offers && delta.offers_unchanged == figures.offers as u64,
        "(a): {} of {} offers done at intake, {} found unchanged",
        answers.done,
        figures.offers,
        delta.offers_unchanged
    );
    // First in the table: the cases print as (a), (b), (c).
    results.insert(0, figures);

    let (figures, answers, delta) =
        measure("(b) known URLs, changed offers", TARGET_KNOWN, changed).await?;
    check_known(&figures, &answers, &delta)?;
    results.push(figures);

    let (figures, answers, delta) = measure("(c) new URLs, queued", TARGET_NEW, new).await?;
    ensure!(
        answers.pending == figures.offers && delta.downloads_queued == figures.urls as u64,
        "(c): {} of {} offers pending after intake, {} of {} URLs queued",
        answers.pending,
        figures.offers,
        delta.downloads_queued,
        figures.urls
    );
    let queued = queued_tasks(&crawler).await?;
    ensure!(
        queued == figures.urls as u64,
        "(c): the tier queues hold {queued} tasks, not the {} queued",
        figures.urls
    );
    ensure!(
        host.requests() == host_requests,
        "(c): the partner host got {} requests while intake was measured",
        host.requests() - host_requests
    );
    results.push(figures);

    print_table(&results);
    println!(
        "  (c) checked: {queued} fetch tasks waiting in the tier queues, 0 requests to the partner host"
    );
    // The store is closed before its directory is removed.
    drop(crawler);
    drop(data_dir);
    Ok(())
}

/// Starts a runner on `data_dir`, crawls the pool for real (offers of [`URLS_PER_OFFER`]
/// URLs), waits until every pool crawl is done with every photo stored, then stops the
/// runner's download pools and returns its crawler (see the module doc).
async fn crawl_pool(
    data_dir: &TempDir,
    client: &ClientId,
    pool: &[String],
) -> Result<Arc<Crawler>> {
    let vars: HashMap<String, String> = [
        ("IMGEST_DATA_DIR", data_dir.0.display().to_string()),
        ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true".into()),
        ("IMGEST_FETCH_PORTS", "any".into()),
        // The pool is downloaded at once, not at the default 600 a minute.
        ("IMGEST_CLIENT_RPM_OVERRIDES", format!("{CLIENT}=1000000")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let settings = Settings::from_map(&vars)?;
    let runner = LocalRunner::start(&settings, None, RunnerOptions::default()).await?;
    let crawler = Arc::clone(runner.crawler());

    eprintln!("bench intake: crawling {} known URLs for real", pool.len());
    let started = Instant::now();
    let mut offers = Vec::new();
    for (n, urls) in pool.chunks(URLS_PER_OFFER).enumerate() {
        let request = request(client, &format!("pool-{n}"), urls.to_vec())?;
        offers.push(OfferKey::new(
            crawler.trusted_tenant(client),
            request.offer_id.clone(),
        ));
        crawler.intake_trusted(request).await?;
    }
    // Polled, never slept on: the pool is ready when every crawl record says done.
    let mut waiting = offers.as_slice();
    while let Some(offer) = waiting.first() {
        let done = crawler
            .crawl_status(offer)
            .await?
            .is_some_and(|r| r.state == CrawlState::Done);
        if done {
            waiting = &waiting[1..];
            continue;
        }
        if started.elapsed() > POOL_DEADLINE {
            bail!(
                "{} of {} pool offers unsettled after {POOL_DEADLINE:?}; crawler: {:?}",
                waiting.len(),
                offers.len(),
                crawler.counts()
            );
        }
        tokio::time::sleep(POOL_CHECK).await;
    }
    let mut failed = 0;
    for offer in &offers {
        let result = crawler
            .crawl_status(offer)
            .await?
            .with_context(|| format!("pool offer {offer} has no crawl"))?;
        failed += result
            .photos
            .iter()
            .filter(|p| !matches!(p.status, PhotoStatus::Ok { .. }))
            .count();
    }
    ensure!(
        failed == 0,
        "{failed} of the pool's URLs did not download; crawler: {:?}",
        crawler.counts()
    );
    eprintln!(
        "bench intake: pool crawled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Ends the download pools; the crawler and its store stay usable (see the module doc).
    runner.stop().await;
    Ok(crawler)
}

/// Runs `requests` through intake with `concurrency` workers and times them.
async fn measure(
    crawler: &Arc<Crawler>,
    case: &'static str,
    target: f64,
    requests: Vec<CrawlRequest>,
    concurrency: usize,
) -> Result<(Figures, Answers, CrawlCounts)> {
    let offers = requests.len();
    let urls = requests.iter().map(|r| r.urls.len()).sum();
    let before = crawler.counts();
    let next = Arc::new(Mutex::new(requests.into_iter()));
    let started = Instant::now();
    // Tasks, not one task's futures: the intakes' own CPU work (parsing, hashing, JSON)
    // spreads over the runtime's threads, as concurrent requests' work does in the server.
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let crawler = Arc::clone(crawler);
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                let mut answers = Answers::default();
                loop {
                    let request = next.lock().unwrap_or_else(PoisonError::into_inner).next();
                    let Some(request) = request else {
                        return Ok::<_, anyhow::Error>(answers);
                    };
                    let offer = request.offer_id.clone();
                    let state = crawler
                        .intake_trusted(request)
                        .await
                        .with_context(|| format!("intake of offer {offer}"))?;
                    match state {
                        CrawlState::Done => answers.done += 1,
                        CrawlState::Pending => answers.pending += 1,
                    }
                }
            })
        })
        .collect();
    let mut answers = Answers::default();
    for worker in workers {
        let a = worker.await.context("an intake worker panicked")??;
        answers.done += a.done;
        answers.pending += a.pending;
    }
    let elapsed = started.elapsed();
    eprintln!(
        "bench intake: {case}: {urls} URLs in {:.2} s",
        elapsed.as_secs_f64()
    );
    Ok((
        Figures {
            case,
            offers,
            urls,
            elapsed,
            target,
        },
        answers,
        moved(&before, &crawler.counts()),
    ))
}

/// Case (b)'s check: every offer done at intake, every URL settled from its record.
fn check_known(figures: &Figures, answers: &Answers, delta: &CrawlCounts) -> Result<()> {
    ensure!(
        answers.done == figures.offers
            && delta.offers_unchanged == 0
            && delta.urls_from_cache == figures.urls as u64
            && delta.downloads_queued == 0,
        "{}: {} of {} offers done at intake ({} unchanged), {} of {} URLs settled from their records, {} downloads queued",
        figures.case,
        answers.done,
        figures.offers,
        delta.offers_unchanged,
        delta.urls_from_cache,
        figures.urls,
        delta.downloads_queued
    );
    Ok(())
}

/// The counters a case moved.
fn moved(before: &CrawlCounts, after: &CrawlCounts) -> CrawlCounts {
    CrawlCounts {
        offers_unchanged: after.offers_unchanged - before.offers_unchanged,
        urls_from_cache: after.urls_from_cache - before.urls_from_cache,
        downloads_queued: after.downloads_queued - before.downloads_queued,
        ..CrawlCounts::default()
    }
}

/// Fetch tasks waiting or leased in every tier's queue.
async fn queued_tasks(crawler: &Crawler) -> Result<u64> {
    let queue = crawler
        .service()
        .ports()
        .queue
        .clone()
        .context("the embedded store has a task queue")?;
    let now = crawler.service().ports().clock.now();
    let mut total = 0;
    for tier in 0..crawler.settings().tiers.len() {
        let c = queue.counts(&tier_queue(tier), now).await?;
        total += c.ready + c.delayed + c.in_flight;
    }
    Ok(total)
}

fn print_table(results: &[Figures]) {
    println!();
    println!(
        "{:<32} | {:>7} | {:>7} | {:>7} | {:>10} | {:>10} | met",
        "case", "offers", "URLs", "seconds", "URLs/min", "target"
    );
    println!("{}", "-".repeat(92));
    for f in results {
        let per_minute = f.per_minute();
        println!(
            "{:<32} | {:>7} | {:>7} | {:>7.2} | {:>10} | {:>10} | {}",
            f.case,
            f.offers,
            f.urls,
            f.elapsed.as_secs_f64(),
            thousands(per_minute),
            thousands(f.target),
            if per_minute >= f.target {
                "met"
            } else {
                "not met"
            }
        );
    }
}

/// `1234567.8` as `1,234,568`.
fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn request(client: &ClientId, offer: &str, urls: Vec<String>) -> Result<CrawlRequest> {
    Ok(CrawlRequest {
        client_id: client.clone(),
        offer_id: OfferId::parse(offer)?,
        urls,
    })
}

/// [`URLS_PER_OFFER`] URLs of the pool, in random order, each of a different photo.
fn pick(rng: &mut fastrand::Rng, pool: &[String]) -> Vec<String> {
    let mut picked: Vec<usize> = Vec::with_capacity(URLS_PER_OFFER);
    while picked.len() < URLS_PER_OFFER {
        let n = rng.usize(..pool.len());
        if picked.iter().all(|p| p % POOL_PHOTOS != n % POOL_PHOTOS) {
            picked.push(n);
        }
    }
    picked.into_iter().map(|n| pool[n].clone()).collect()
}

fn pool_path(n: usize) -> String {
    format!("/pool/{n}.jpg")
}
