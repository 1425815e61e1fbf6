//! `imgest-bench crawl`: the crawl simulation benchmark. It runs the real
//! crawler (inline processing, SQLite, the local download pools) against simulated partner
//! hosts on 127.0.0.1, with time scaled down, once with timeout tiers and tier routing and
//! once as the naive design (a short tier, then one long retry pool), and prints the targets'
//! figures side by side.
//!
//! The host mix is seed 001's: 40 % of hosts answer within the first tier, 40 % within the
//! second, 20 % within the third. Time runs [`TIME_SCALE`] times faster than in production
//! (tiers 100 ms, 500 ms, 3 s stand for 1 s, 5 s, 30 s), and the rate window is
//! [`RATE_WINDOW`] instead of a minute. Each design runs on its own data directory, hosts and
//! crawler, in three steps:
//!
//! 1. warm-up: a few photos per host teach the tier statistics (not measured);
//! 2. fast-only, then mixed: offers arrive at a steady pace below the clients' limits; the
//!    settle times of fast-host offers are compared, and the mixed step's new URLs on the
//!    same hosts give the attempts per photo and the wasted worker-seconds;
//! 3. saturation: other clients send far more fast URLs than their limits allow; the photos
//!    downloaded per window, after the first window, against the sum of the limits.
//!
//! Rate-limit violations are counted from what the hosts saw: every client's request arrival
//! times, checked with a sliding window of the rate window's length.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use imgest_core::domain::{ClientId, OfferId};
use imgest_core::ports::TaskQueue;
use imgest_crawl::messages::CrawlRequest;
use imgest_crawl::{Crawler, RESULTS_QUEUE};
use imgest_flows::CrawlCounts;
use imgest_hosts::{Answer, PartnerHost};
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::Settings;

use crate::data_dir::TempDir;
use crate::init_logs;
use crate::photos::tiny_jpeg;

/// Production time / benchmark time for download latencies and tiers.
const TIME_SCALE: f64 = 10.0;
/// The rate window (a minute in production).
const RATE_WINDOW: Duration = Duration::from_secs(2);
/// How often finished crawls are collected from the results queue (the settle-time
/// resolution).
const RESULT_POLL: Duration = Duration::from_millis(5);
/// Photos per host in each step: every offer is one host's photos. Kept below the 5
/// timeouts that make the crawler back a host off (see [`HOST_MIX`]).
const PHOTOS_PER_HOST: usize = 2;
/// One fast and one medium offer per client per tick; a slow one every other tick.
const TICK: Duration = Duration::from_millis(100);
/// How long the benchmark waits for a step's offers to settle.
const SETTLE_DEADLINE: Duration = Duration::from_secs(60);

/// The clients of the paced steps and their limits per rate window (well above what they
/// send, so pacing and limits do not blur the tier comparison).
const PACED_CLIENTS: [(&str, u32); 4] = [
    ("shop-a", 300),
    ("shop-b", 400),
    ("shop-c", 500),
    ("shop-d", 600),
];
/// The clients of the saturation step and their limits per rate window.
const BULK_CLIENTS: [(&str, u32); 4] = [
    ("bulk-a", 20),
    ("bulk-b", 30),
    ("bulk-c", 40),
    ("bulk-d", 50),
];
/// Hosts per paced client and tick: seed 001's 40 / 40 / 20 mix, a new host per offer.
///
/// Many hosts with few photos each, rather than a few hosts with many: the crawler counts
/// every timeout, also one below the last tier, as a host failure, and backs a host off
/// (for minutes, decaying over 10) after 5; a slow host with more photos than that would
/// measure the backoff, not the tiers.
const HOST_MIX: [(Class, f64); 3] = [(Class::Fast, 1.0), (Class::Medium, 1.0), (Class::Slow, 0.5)];
/// Fast hosts per bulk client.
const BULK_HOSTS: usize = 2;

/// How fast a host answers, as bands of its total latency (host latency plus a per-photo
/// jitter), scaled: within the first tier (100 ms), the second (500 ms), the third (3 s),
/// with margins either side of the deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Class {
    Fast,
    Medium,
    Slow,
}

impl Class {
    /// (host latency range, per-photo jitter) in milliseconds.
    fn band(self) -> ((u64, u64), u64) {
        match self {
            Self::Fast => ((5, 20), 20),
            Self::Medium => ((150, 250), 100),
            Self::Slow => ((700, 1500), 500),
        }
    }
}

/// One design under test: its tiers, pools and routing.
struct Design {
    name: &'static str,
    tiers: &'static str,
    workers: &'static str,
    routing: bool,
}

const DESIGNS: [Design; 2] = [
    Design {
        name: "tiers 1s,5s,30s + routing",
        tiers: "100ms,500ms,3s",
        workers: "32,48,96",
        routing: true,
    },
    Design {
        name: "naive 1s then 30s pool",
        tiers: "100ms,3s",
        workers: "32,144",
        routing: false,
    },
];

/// How long each step runs.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Ticks of the fast-only and of the mixed step.
    ticks: usize,
    /// Rate windows of the saturation step that are measured (after the first two).
    measured_windows: u32,
}

/// A simulated host and what the benchmark knows of it.
struct Host {
    host: PartnerHost,
    class: Class,
    /// Each path's total latency (host latency plus its own delay).
    latency: HashMap<String, Duration>,
}

impl Host {
    async fn start(class: Class, paths: &[String], photos: &mut Photos) -> Result<Self> {
        let ((lo, hi), jitter) = class.band();
        let base = Duration::from_millis(fastrand::u64(lo..=hi));
        let mut builder = PartnerHost::builder().latency(base);
        let mut latency = HashMap::new();
        for path in paths {
            let extra = Duration::from_millis(fastrand::u64(0..=jitter));
            builder = builder.serve(path.clone(), Answer::delay(extra, photos.next()?));
            latency.insert(path.clone(), base + extra);
        }
        let host = builder.start().await.context("starting a simulated host")?;
        Ok(Self {
            host,
            class,
            latency,
        })
    }
}

/// Tiny distinct JPEGs (`photos::tiny_jpeg`), numbered in order: every body is a new image.
struct Photos {
    next: u64,
}

impl Photos {
    fn next(&mut self) -> Result<Answer> {
        let n = self.next;
        self.next += 1;
        Ok(Answer::photo(tiny_jpeg(n)?))
    }
}

/// When each offer was sent and when its result arrived.
#[derive(Default)]
struct Timings {
    sent: HashMap<String, Instant>,
    settled: HashMap<String, Instant>,
}

/// A design's crawler and hosts, with a task that collects finished crawls.
struct Bench {
    runner: LocalRunner,
    data_dir: TempDir,
    timings: Arc<Mutex<Timings>>,
    collector: tokio::task::JoinHandle<()>,
}

impl Bench {
    async fn start(design: &Design, tag: &str) -> Result<Self> {
        let data_dir = TempDir::new("crawl", tag)?;
        let overrides: Vec<String> = PACED_CLIENTS
            .iter()
            .chain(&BULK_CLIENTS)
            .map(|(c, rpm)| format!("{c}={rpm}"))
            .collect();
        let vars: HashMap<String, String> = [
            ("IMGEST_DATA_DIR", data_dir.0.display().to_string()),
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true".into()),
            ("IMGEST_FETCH_PORTS", "any".into()),
            ("IMGEST_FETCH_TIERS", design.tiers.into()),
            ("IMGEST_FETCH_WORKERS", design.workers.into()),
            ("IMGEST_TIER_ROUTING", design.routing.to_string()),
            (
                "IMGEST_RATE_WINDOW",
                format!("{}ms", RATE_WINDOW.as_millis()),
            ),
            ("IMGEST_CLIENT_RPM_OVERRIDES", overrides.join(",")),
            ("IMGEST_RETRY_BASE", "50ms".into()),
            ("IMGEST_RETRY_CAP", "500ms".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let settings = Settings::from_map(&vars)?;
        let runner = LocalRunner::start(&settings, None, RunnerOptions::default()).await?;
        let queue = runner
            .queue()
            .cloned()
            .context("the embedded store has a task queue")?;
        let timings = Arc::new(Mutex::new(Timings::default()));
        let collector = tokio::spawn(collect_results(
            Arc::clone(runner.crawler()),
            queue,
            timings.clone(),
        ));
        Ok(Self {
            runner,
            data_dir,
            timings,
            collector,
        })
    }

    fn crawler(&self) -> &Crawler {
        self.runner.crawler()
    }

    async fn send(&self, client: &str, offer: String, urls: Vec<String>) -> Result<()> {
        let request = CrawlRequest {
            client_id: ClientId::parse(client)?,
            offer_id: OfferId::parse(&offer)?,
            urls,
        };
        lock(&self.timings).sent.insert(offer, Instant::now());
        self.crawler().intake_trusted(request).await?;
        Ok(())
    }

    /// Waits until every offer sent so far has a result.
    async fn settled(&self) -> Result<()> {
        let started = Instant::now();
        loop {
            {
                let t = lock(&self.timings);
                if t.sent.keys().all(|o| t.settled.contains_key(o)) {
                    return Ok(());
                }
            }
            if started.elapsed() > SETTLE_DEADLINE {
                let t = lock(&self.timings);
                bail!(
                    "{} of {} offers still unsettled after {SETTLE_DEADLINE:?}; crawler: {:?}",
                    t.sent.len() - t.settled.len(),
                    t.sent.len(),
                    self.crawler().counts()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Settle times of the offers whose id starts with `prefix`, sorted.
    fn settle_times(&self, prefix: &str) -> Vec<Duration> {
        let t = lock(&self.timings);
        let mut times: Vec<Duration> = t
            .sent
            .iter()
            .filter(|(offer, _)| offer.starts_with(prefix))
            .filter_map(|(offer, sent)| t.settled.get(offer).map(|at| at.duration_since(*sent)))
            .collect();
        times.sort();
        times
    }

    async fn stop(self) {
        self.collector.abort();
        self.runner.stop().await;
        drop(self.data_dir);
    }
}

/// Takes result messages as they come: each one is an offer whose crawl just settled.
async fn collect_results(
    crawler: Arc<Crawler>,
    queue: Arc<dyn TaskQueue>,
    timings: Arc<Mutex<Timings>>,
) {
    loop {
        let now = crawler.service().ports().clock.now();
        let batch = queue
            .receive(RESULTS_QUEUE, now, 500, Duration::from_secs(60))
            .await
            .unwrap_or_default();
        let at = Instant::now();
        for delivery in &batch {
            if let Ok(result) = serde_json::from_str::<serde_json::Value>(&delivery.payload)
                && let Some(offer) = result["offer_id"].as_str()
            {
                lock(&timings).settled.entry(offer.to_owned()).or_insert(at);
            }
            let _ = queue.ack(delivery).await;
        }
        if batch.is_empty() {
            tokio::time::sleep(RESULT_POLL).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One design's figures.
struct Figures {
    attempts_per_photo: f64,
    measured_photos: u64,
    /// Scaled seconds.
    wasted_worker_s: f64,
    fast_only: (Duration, Duration),
    fast_mixed: (Duration, Duration),
    violations: usize,
    throughput: f64,
    warmup_attempts_per_photo: f64,
    /// Per client: the most requests in one window / the limit.
    busiest: Vec<String>,
    /// The deepest a violation reached inside its window.
    deepest: Duration,
    /// Tasks put back by the host backoff or the rate limit in the measured mixed step.
    deferrals: u64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn tiers_of(design: &Design) -> Result<Vec<Duration>> {
    design
        .tiers
        .split(',')
        .map(|t| humantime::parse_duration(t).context("a design's tiers"))
        .collect()
}

/// The worker time a path's timed-out attempts took: its `hits` attempts climbed the tiers
/// one by one and the last one, in the first tier that fits its latency, succeeded.
fn wasted_on(latency: Duration, hits: u64, tiers: &[Duration]) -> Duration {
    let fits = tiers
        .iter()
        .position(|d| *d > latency)
        .unwrap_or(tiers.len().saturating_sub(1));
    (1..hits)
        .map(|k| tiers[fits.saturating_sub(k as usize)])
        .sum()
}

/// What the hosts saw of one client's rate.
#[derive(Debug, Default)]
struct Violations {
    /// Windows (one starting at each request) with more requests than the limit.
    windows: usize,
    /// The most requests any window saw.
    most: usize,
    /// How far inside a window the request over the limit came, at most: the window minus
    /// the time from a request to the one `limit` requests later.
    deepest: Duration,
}

fn violations(times: &mut [Instant], limit: u32) -> Violations {
    times.sort();
    let limit = limit as usize;
    let mut v = Violations::default();
    let mut end = 0;
    for (i, start) in times.iter().enumerate() {
        while end < times.len() && times[end].duration_since(*start) < RATE_WINDOW {
            end += 1;
        }
        v.most = v.most.max(end - i);
        if end - i > limit {
            v.windows += 1;
            let span = times[i + limit].duration_since(*start);
            v.deepest = v.deepest.max(RATE_WINDOW.saturating_sub(span));
        }
    }
    v
}

fn attempts_ratio(before: &CrawlCounts, after: &CrawlCounts) -> f64 {
    let attempts = after.download_attempts - before.download_attempts;
    let ok = after.downloads_ok - before.downloads_ok;
    attempts as f64 / ok.max(1) as f64
}

async fn run_design(design: &Design, index: usize, sizes: Sizes) -> Result<Figures> {
    let tiers = tiers_of(design)?;
    let bench = Bench::start(design, &index.to_string()).await?;
    let mut photos = Photos {
        next: index as u64 * 1_000_000,
    };
    let steps = |class: Class| {
        let mut steps = vec!["w", "m"];
        if class == Class::Fast {
            steps.push("f");
        }
        steps
            .into_iter()
            .flat_map(|step| (0..PHOTOS_PER_HOST).map(move |i| format!("/{step}/{i}.jpg")))
            .collect::<Vec<_>>()
    };

    // Hosts: every paced client's own, with paths for every step.
    let mut paced: Vec<Vec<Host>> = Vec::new();
    for _ in PACED_CLIENTS {
        let mut hosts = Vec::new();
        for (class, per_tick) in HOST_MIX {
            for _ in 0..(sizes.ticks as f64 * per_tick).ceil() as usize {
                hosts.push(Host::start(class, &steps(class), &mut photos).await?);
            }
        }
        paced.push(hosts);
    }

    eprintln!("bench crawl: {}: warm-up", design.name);
    let before = bench.crawler().counts();
    for ((client, _), hosts) in PACED_CLIENTS.iter().zip(&paced) {
        for (h, host) in hosts.iter().enumerate() {
            let urls = (0..PHOTOS_PER_HOST)
                .map(|i| host.host.url(&format!("/w/{i}.jpg")))
                .collect();
            bench.send(client, format!("w-{client}-{h}"), urls).await?;
        }
    }
    bench.settled().await?;
    let warmup_attempts_per_photo = attempts_ratio(&before, &bench.crawler().counts());

    eprintln!("bench crawl: {}: fast hosts only", design.name);
    paced_step(&bench, &paced, sizes.ticks, "f", &[Class::Fast]).await?;
    let fast_only = bench.settle_times("f-fast");

    eprintln!("bench crawl: {}: fast, medium and slow hosts", design.name);
    let before = bench.crawler().counts();
    paced_step(
        &bench,
        &paced,
        sizes.ticks,
        "m",
        &[Class::Fast, Class::Medium, Class::Slow],
    )
    .await?;
    let after = bench.crawler().counts();
    let fast_mixed = bench.settle_times("m-fast");
    let wasted: Duration = paced
        .iter()
        .flatten()
        .flat_map(|h| {
            h.latency
                .iter()
                .filter(|(path, _)| path.starts_with("/m/"))
                .map(|(path, latency)| wasted_on(*latency, h.host.hits(path), &tiers))
        })
        .sum();

    eprintln!("bench crawl: {}: saturated clients", design.name);
    let (throughput, bulk) = saturation(&bench, &mut photos, sizes.measured_windows).await?;

    // Every client's requests as its hosts saw them.
    let mut per_client: Vec<(u32, Vec<Instant>)> = PACED_CLIENTS
        .iter()
        .zip(&paced)
        .map(|((_, limit), hosts)| {
            let times = hosts.iter().flat_map(|h| h.host.request_times()).collect();
            (*limit, times)
        })
        .collect();
    per_client.extend(BULK_CLIENTS.iter().zip(&bulk).map(|((_, limit), hosts)| {
        let times = hosts.iter().flat_map(PartnerHost::request_times).collect();
        (*limit, times)
    }));
    let mut violation_count = 0;
    let mut deepest = Duration::ZERO;
    let mut busiest = Vec::new();
    for (limit, times) in &mut per_client {
        let v = violations(times, *limit);
        violation_count += v.windows;
        deepest = deepest.max(v.deepest);
        busiest.push(format!("{}/{limit}", v.most));
    }
    bench.stop().await;
    Ok(Figures {
        attempts_per_photo: attempts_ratio(&before, &after),
        measured_photos: after.downloads_ok - before.downloads_ok,
        wasted_worker_s: wasted.as_secs_f64(),
        fast_only: (percentile(&fast_only, 50.0), percentile(&fast_only, 99.0)),
        fast_mixed: (percentile(&fast_mixed, 50.0), percentile(&fast_mixed, 99.0)),
        violations: violation_count,
        throughput,
        warmup_attempts_per_photo,
        deferrals: after.deferrals - before.deferrals,
        busiest,
        deepest,
    })
}

/// Offers at a steady pace for `ticks` ticks: per client and tick, one offer of each class
/// in `classes` (slow ones every other tick, for the 40 / 40 / 20 mix), each the
/// [`PHOTOS_PER_HOST`] photos of this step on the client's next host of that class.
async fn paced_step(
    bench: &Bench,
    paced: &[Vec<Host>],
    ticks: usize,
    step: &str,
    classes: &[Class],
) -> Result<()> {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut used: HashMap<(usize, Class), usize> = HashMap::new();
    for tick in 0..ticks {
        ticker.tick().await;
        for (c, ((client, _), hosts)) in PACED_CLIENTS.iter().zip(paced).enumerate() {
            for class in classes {
                if *class == Class::Slow && tick % 2 == 1 {
                    continue;
                }
                let n = used.entry((c, *class)).or_default();
                let Some(host) = hosts.iter().filter(|h| h.class == *class).nth(*n) else {
                    bail!("no {class:?} host left for tick {tick}");
                };
                *n += 1;
                let urls = (0..PHOTOS_PER_HOST)
                    .map(|i| host.host.url(&format!("/{step}/{i}.jpg")))
                    .collect();
                let label = format!("{class:?}").to_lowercase();
                bench
                    .send(client, format!("{step}-{label}-{client}-{tick}"), urls)
                    .await?;
            }
        }
    }
    bench.settled().await
}

/// Saturated clients: far more fast URLs than their limits allow, sent at once; returns the
/// photos downloaded over the measured windows as a share of the sum of the limits, and the
/// clients' hosts.
async fn saturation(
    bench: &Bench,
    photos: &mut Photos,
    measured: u32,
) -> Result<(f64, Vec<Vec<PartnerHost>>)> {
    // Measured from a window after intake ends (a fresh client may use its whole limit in
    // its first window, so that one is start-up), with backlog to spare beyond.
    let total_windows = measured + 6;
    let mut hosts = Vec::new();
    let mut requests = Vec::new();
    for (client, limit) in BULK_CLIENTS {
        let per_host = (limit * total_windows) as usize / BULK_HOSTS + 1;
        let mut own = Vec::new();
        let mut urls = Vec::new();
        for _ in 0..BULK_HOSTS {
            let paths: Vec<String> = (0..per_host).map(|i| format!("/s/{i}.jpg")).collect();
            let host = Host::start(Class::Fast, &paths, photos).await?;
            urls.push(paths.iter().map(|p| host.host.url(p)).collect::<Vec<_>>());
            own.push(host.host);
        }
        // Interleave the hosts, in offers of 10.
        let mixed: Vec<String> = (0..per_host)
            .flat_map(|i| urls.iter().filter_map(move |u| u.get(i).cloned()))
            .collect();
        requests.push((client, mixed));
        hosts.push(own);
    }
    let started = Instant::now();
    for (client, urls) in &requests {
        for (n, chunk) in urls.chunks(10).enumerate() {
            bench
                .send(client, format!("s-{client}-{n}"), chunk.to_vec())
                .await?;
        }
    }
    let intake = started.elapsed();
    if intake > RATE_WINDOW {
        eprintln!(
            "bench crawl: intake of the saturation backlog took {intake:?}, over a rate window"
        );
    }
    // Every client's backlog is queued, paced, once intake is over.
    let from = (started + RATE_WINDOW).max(Instant::now()) + RATE_WINDOW;
    let to = from + RATE_WINDOW * measured;
    tokio::time::sleep_until((to + Duration::from_millis(100)).into()).await;
    let downloaded: usize = hosts
        .iter()
        .flatten()
        .flat_map(|h| h.request_times())
        .filter(|t| *t >= from && *t < to)
        .count();
    let max: u32 = BULK_CLIENTS.iter().map(|(_, l)| l * measured).sum();
    Ok((downloaded as f64 / f64::from(max), hosts))
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

pub async fn run(quick: bool) -> Result<()> {
    init_logs("error");
    imgest_download::install_default_provider();
    let sizes = if quick {
        Sizes {
            ticks: 20,
            measured_windows: 2,
        }
    } else {
        Sizes {
            ticks: 50,
            measured_windows: 5,
        }
    };
    let started = Instant::now();
    println!(
        "bench crawl: time scaled 1/{TIME_SCALE} (tiers 1s,5s,30s -> 100ms,500ms,3s), rate window {:?} for a minute",
        RATE_WINDOW
    );
    println!(
        "  {} paced clients: every {:?} an offer of {PHOTOS_PER_HOST} photos from a fast host (<100ms) and one from a medium host (150-350ms), every other tick one from a slow host (0.7-2s); {} saturated clients",
        PACED_CLIENTS.len(),
        TICK,
        BULK_CLIENTS.len()
    );
    let mut results = Vec::new();
    for (i, design) in DESIGNS.iter().enumerate() {
        results.push((design, run_design(design, i, sizes).await?));
    }

    println!();
    println!(
        "{:<27} | {:>13} | {:>22} | {:>8} | {:>8} | {:>15} | {:>10} | {:>10}",
        "design",
        "attempts/photo",
        "wasted worker-s",
        "fast p50",
        "fast p99",
        "p99 with/without",
        "violations",
        "throughput"
    );
    println!("{}", "-".repeat(140));
    for (design, f) in &results {
        let wasted = format!(
            "{:.1} s ({:.0} s unscaled)",
            f.wasted_worker_s,
            f.wasted_worker_s * TIME_SCALE
        );
        let ratio = f.fast_mixed.1.as_secs_f64() / f.fast_only.1.as_secs_f64().max(1e-9);
        println!(
            "{:<27} | {:>14.2} | {:>22} | {:>8} | {:>8} | {:>16} | {:>10} | {:>9.1}%",
            design.name,
            f.attempts_per_photo,
            wasted,
            ms(f.fast_mixed.0),
            ms(f.fast_mixed.1),
            format!(
                "{:.2}x ({} / {})",
                ratio,
                ms(f.fast_mixed.1),
                ms(f.fast_only.1)
            ),
            f.violations,
            f.throughput * 100.0
        );
    }
    println!();
    for (design, f) in &results {
        println!(
            "  {}: {} photos measured after warm-up, {} tasks deferred meanwhile ({:.2} attempts/photo during warm-up); fast-only p50 {} p99 {}",
            design.name,
            f.measured_photos,
            f.deferrals,
            f.warmup_attempts_per_photo,
            ms(f.fast_only.0),
            ms(f.fast_only.1)
        );
        println!(
            "    most requests in one rate window / limit, per client: {}; violations at most {:.1} ms inside the window",
            f.busiest.join(" "),
            f.deepest.as_secs_f64() * 1000.0
        );
    }
    println!(
        "  targets: <= 1.1 attempts/photo after warm-up; fast p99 with slow hosts <= 1.2x without; 0 violations; >= 98% throughput"
    );
    println!(
        "bench crawl: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
