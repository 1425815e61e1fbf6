//! `imgest-bench joins`: a popular URL on the embedded default. One crawl starts the URL's
//! download, which the partner host holds; `--crawls` more crawls of other offers listing it
//! are sent through the HTTP API (`--concurrency` at once) and join it; then the host answers,
//! and the benchmark waits until every crawl has settled. It prints the joins per second (from
//! the first join sent to the last answered), the time from the host's answer to the last
//! crawl settled, and the size of the URL's record, and checks what must hold: every join
//! accepted, one request to the host, every crawl settled with the photo, the record not
//! grown with the joins. Targets: 1,000 joins/s, all settled within 30 s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures_util::StreamExt;
use imgest_hosts::{Answer, Gate, PartnerHost};
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::Settings;

use crate::data_dir::TempDir;
use crate::init_logs;
use crate::photos::tiny_jpeg;

const TARGET_JOINS_PER_S: f64 = 1_000.0;
const TARGET_SETTLED: Duration = Duration::from_secs(30);
/// How long the benchmark waits for anything before it gives up.
const DEADLINE: Duration = Duration::from_secs(300);
/// How often progress is checked (polled, never slept on as a guess).
const CHECK: Duration = Duration::from_millis(10);
/// The URL record's size limit the check holds it to: a lease and one crawl.
const RECORD_BYTES: usize = 512;

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub crawls: usize,
    pub concurrency: usize,
}

pub async fn run(options: Options) -> Result<()> {
    init_logs("warn");
    imgest_download::install_default_provider();
    ensure!(options.crawls > 0, "--crawls must be at least 1");
    ensure!(options.concurrency > 0, "--concurrency must be at least 1");
    if cfg!(debug_assertions) {
        eprintln!("bench joins: a debug build; build with --release for meaningful figures");
    }
    let data_dir = TempDir::new("joins", "run")?;
    let gate = Gate::new();
    let host = PartnerHost::builder()
        .serve(
            "/banner.jpg",
            Answer::held(&gate, Answer::photo(tiny_jpeg(7)?)),
        )
        .start()
        .await
        .context("starting the partner host")?;
    let vars: HashMap<String, String> = [
        ("IMGEST_DATA_DIR", data_dir.0.display().to_string()),
        ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true".into()),
        ("IMGEST_FETCH_PORTS", "any".into()),
        // Deadlines longer than the run: the download is held at the host, not cut.
        ("IMGEST_FETCH_TIERS", "600s,610s,620s".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let settings = Settings::from_map(&vars)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let runner = LocalRunner::start(&settings, Some(listener), RunnerOptions::default()).await?;
    let api = format!("{}/v1/crawl", runner.base_url());
    let crawler = runner.crawler();
    let client = reqwest::Client::new();
    let banner = host.url("/banner.jpg");
    let crawl = |offer: String| {
        let (client, api, banner) = (&client, &api, &banner);
        async move {
            let body =
                serde_json::json!({"client_id": "dealer", "offer_id": offer, "urls": [banner]});
            let r = client.post(api).json(&body).send().await?;
            Ok::<_, reqwest::Error>(r.status().as_u16())
        }
    };
    println!(
        "bench joins: embedded store (SQLite), {} crawls join one held download, {} in flight",
        options.crawls, options.concurrency
    );
    ensure!(
        crawl("first".into()).await? == 202,
        "the first crawl was refused"
    );
    until("the download reaches the host", || host.requests() == 1).await?;

    let started = Instant::now();
    let statuses: Vec<Result<u16, reqwest::Error>> =
        futures_util::stream::iter((0..options.crawls).map(|i| crawl(format!("offer-{i}"))))
            .buffer_unordered(options.concurrency)
            .collect()
            .await;
    let joining = started.elapsed();
    let refused: Vec<String> = statuses
        .iter()
        .filter(|s| !matches!(s, Ok(202)))
        .map(|s| format!("{s:?}"))
        .take(5)
        .collect();
    ensure!(refused.is_empty(), "joins not accepted, e.g. {refused:?}");
    let joined = crawler.counts().urls_joined;
    ensure!(
        joined == options.crawls as u64,
        "{joined} of {} crawls joined",
        options.crawls
    );
    let documents = &crawler.service().ports().documents;
    let now = crawler.service().ports().clock.now();
    let page = documents.scan_documents("url", None, 10, now).await?;
    let [(_, record)] = page.documents.as_slice() else {
        bail!("{} URL records, not one", page.documents.len());
    };
    let record_bytes = record.body.len();

    gate.open();
    let opened = Instant::now();
    let total = options.crawls as u64 + 1;
    until("every crawl settles", || {
        crawler.counts().offers_settled == total
    })
    .await?;
    let settling = opened.elapsed();
    ensure!(
        host.requests() == 1,
        "{} requests to the host",
        host.requests()
    );
    drop(runner);

    let per_s = options.crawls as f64 / joining.as_secs_f64().max(1e-9);
    println!("| figure | measured | target |");
    println!("|---|---|---|");
    println!(
        "| joins accepted | {} of {} | all |",
        options.crawls, options.crawls
    );
    println!("| joins per second | {per_s:.0} | ≥ {TARGET_JOINS_PER_S:.0} |");
    println!(
        "| host answer to last crawl settled | {:.2} s | ≤ {} s |",
        settling.as_secs_f64(),
        TARGET_SETTLED.as_secs()
    );
    println!("| URL record | {record_bytes} bytes | < {RECORD_BYTES} |");
    println!("| requests to the host | 1 | 1 |");
    ensure!(
        record_bytes < RECORD_BYTES,
        "the URL record grew to {record_bytes} bytes"
    );
    if per_s < TARGET_JOINS_PER_S || settling > TARGET_SETTLED {
        bail!("a target was missed");
    }
    Ok(())
}

async fn until(what: &str, done: impl Fn() -> bool) -> Result<()> {
    let started = Instant::now();
    while !done() {
        ensure!(
            started.elapsed() < DEADLINE,
            "{what}: not within {DEADLINE:?}"
        );
        tokio::time::sleep(CHECK).await;
    }
    Ok(())
}
