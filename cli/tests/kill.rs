//! The local runner killed mid-work: `imgest serve` is killed with SIGKILL while uploads, offer
//! writes and crawls (of photos on a partner host on 127.0.0.1) are in flight, and started
//! again on the same data directory, several times. Then every acknowledged upload is readable
//! with its files, every offer holds its last acknowledged photo list (or one whose write was
//! still unanswered when the runner died), every accepted crawl settles, and `imgest audit`
//! finds nothing to mend.
//!
//! When each kill lands is random, from a seed printed first (`IMGEST_KILL_SEED=N` runs that
//! one again); what is checked holds whatever the timing: only answers the clients received are
//! expected to last.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use imgest_hosts::{Answer, PartnerHost};
use serde_json::{Value, json};
use tokio::sync::watch;

/// How many times the runner is killed; it is started once more for the checks.
const KILLS: usize = 4;
/// How long a runner works before it is killed: a random point in this range.
const WORK_MS: std::ops::Range<u64> = 300..1500;
/// Waits on a condition (the runner answering, crawls settling) give up after this: a bound
/// that says "never", not a speed (on a quiet machine every crawl settles within seconds; on a
/// loaded one a retry's backoff has taken longer than 40 s).
const DEADLINE: Duration = Duration::from_secs(120);
const OFFERS: usize = 3;
const UPLOADERS: usize = 2;
const CRAWLERS: usize = 2;

/// An offer's photo lists: the last one acknowledged, and those written since without an
/// answer (any of which may have been applied before the kill).
#[derive(Debug, Clone, Default)]
struct OfferLists {
    acked: Option<Vec<String>>,
    unanswered: Vec<Vec<String>>,
}

/// What the clients were told, and what they asked without an answer.
#[derive(Default)]
struct Ledger {
    /// Image ids of acknowledged uploads.
    uploads: Vec<String>,
    offers: HashMap<String, OfferLists>,
    /// Offers of accepted crawls, with the number of URLs each asked for.
    crawls: Vec<(String, usize)>,
}

/// A running `imgest serve`.
struct Runner {
    child: Child,
    base: String,
}

impl Runner {
    fn start(data: &Path, log: &Path) -> Self {
        // A free port: bound, read and released (the runner binds it a moment later).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_imgest"))
            .arg("serve")
            .env("IMGEST_DATA_DIR", data)
            .env("IMGEST_LISTEN", format!("127.0.0.1:{port}"))
            .env("IMGEST_ALLOW_PRIVATE_NETWORKS", "true")
            .env("IMGEST_FETCH_PORTS", "any")
            .env("IMGEST_FETCH_TIERS", "2s,4s,8s")
            .env("IMGEST_RETRY_BASE", "20ms")
            .env("IMGEST_RETRY_CAP", "200ms")
            .env("IMGEST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Waits until it answers.
    async fn ready(&mut self, http: &reqwest::Client) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the runner exited on start: {status}");
            }
            let health = http.get(format!("{}/healthz", self.base)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(started.elapsed() < DEADLINE, "the runner never answered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL: no shutdown of any kind.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

fn samples() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    [
        "storm.jpg",
        "garden-portrait.jpg",
        "yellow-flower-portrait.jpg",
    ]
    .iter()
    .map(|name| std::fs::read(dir.join(name)).unwrap())
    .collect()
}

/// A photo no one uploaded before: a sample with bytes of its own after the image's end (which
/// decoders ignore), so that each upload is new content, processed and stored.
fn new_photo(samples: &[Vec<u8>], n: u64) -> Vec<u8> {
    let mut bytes = samples[(n as usize) % samples.len()].clone();
    bytes.extend_from_slice(format!("imgest-kill-test-{n:016}").as_bytes());
    bytes
}

fn imgest_cli(data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_imgest"))
        .args(args)
        .env("IMGEST_DATA_DIR", data)
        .output()
        .unwrap()
}

/// The answer to `request`, or `None` if the runner died first (the connection broke) or the
/// round ended.
async fn answered(
    request: reqwest::RequestBuilder,
    stop: &mut watch::Receiver<bool>,
) -> Option<reqwest::Response> {
    tokio::select! {
        r = request.send() => r.ok(),
        _ = stop.changed() => None,
    }
}

/// Uploads new photos one after another until told to stop; records each acknowledged one.
async fn uploader(
    base: String,
    http: reqwest::Client,
    ledger: Arc<Mutex<Ledger>>,
    samples: Arc<Vec<Vec<u8>>>,
    mut next: u64,
    mut stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let body = new_photo(&samples, next);
        next += 1_000;
        let sent = http
            .post(format!("{base}/v1/images"))
            .header("content-type", "image/jpeg")
            .body(body);
        let Some(response) = answered(sent, &mut stop).await else {
            return;
        };
        let status = response.status().as_u16();
        let Ok(json) = response.json::<Value>().await else {
            return;
        };
        if status == 201 || status == 200 {
            let id = json["image_id"].as_str().unwrap().to_owned();
            ledger.lock().unwrap().uploads.push(id);
        }
    }
}

/// Sets offers' photo lists to random picks of the acknowledged uploads.
async fn offer_writer(
    base: String,
    http: reqwest::Client,
    ledger: Arc<Mutex<Ledger>>,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !*stop.borrow() {
        let offer = format!("offer-{}", rng.usize(..OFFERS));
        let list: Vec<String> = {
            let mut ledger = ledger.lock().unwrap();
            let uploads = &ledger.uploads;
            let mut list = Vec::new();
            if !uploads.is_empty() {
                for _ in 0..rng.usize(1..=3) {
                    let id = uploads[rng.usize(..uploads.len())].clone();
                    if !list.contains(&id) {
                        list.push(id);
                    }
                }
            }
            ledger
                .offers
                .entry(offer.clone())
                .or_default()
                .unanswered
                .push(list.clone());
            list
        };
        let sent = http
            .put(format!("{base}/v1/offers/{offer}/photos"))
            .json(&json!({ "image_ids": list }));
        let Some(response) = answered(sent, &mut stop).await else {
            return;
        };
        let status = response.status().as_u16();
        {
            let mut ledger = ledger.lock().unwrap();
            let entry = ledger.offers.get_mut(&offer).unwrap();
            match status {
                200 => {
                    *entry = OfferLists {
                        acked: Some(list),
                        unanswered: Vec::new(),
                    }
                }
                // Refused: not applied.
                400..=499 => {
                    entry.unanswered.pop();
                }
                // Whether a 5xx was applied is not known: it stays possible.
                _ => {}
            }
        }
        // Without new uploads the lists repeat: a pause between writes, not a wait on anything.
        tokio::time::sleep(Duration::from_millis(rng.u64(5..40))).await;
    }
}

/// Asks for crawls of photos on `host`, each offer once.
async fn crawler(
    base: String,
    http: reqwest::Client,
    ledger: Arc<Mutex<Ledger>>,
    host: Arc<PartnerHost>,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut n = 0;
    while !*stop.borrow() {
        n += 1;
        let offer = format!("crawl-{seed}-{n}");
        let urls: Vec<String> = (0..rng.usize(1..=3))
            .map(|_| host.url(&format!("/p{}.jpg", rng.usize(..6))))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let sent = http
            .post(format!("{base}/v1/crawl"))
            .json(&json!({"client_id": "acme", "offer_id": offer, "urls": urls}));
        let Some(response) = answered(sent, &mut stop).await else {
            return;
        };
        if response.status().as_u16() == 202 {
            ledger.lock().unwrap().crawls.push((offer, urls.len()));
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(20..120))).await;
    }
}

async fn get(http: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = http.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_runners_lose_nothing_they_acknowledged() {
    let seed = std::env::var("IMGEST_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..1_000_000));
    eprintln!("kill test seed {seed} (IMGEST_KILL_SEED={seed} runs it again)");
    let mut rng = fastrand::Rng::with_seed(seed);
    imgest_download::install_default_provider();

    let dir = tempfile::tempdir().unwrap();
    let data: PathBuf = dir.path().join("data");
    let log = dir.path().join("runner.log");
    let samples = Arc::new(samples());
    // The partner's photos: new content, some of them slow to come, so crawls are in flight
    // when a kill lands.
    let answers: Vec<(String, Answer)> = (0..6u64)
        .map(|i| {
            let bytes = new_photo(&samples, 1_000_000 + i);
            let answer = if i % 2 == 0 {
                Answer::photo(bytes)
            } else {
                Answer::delay(Duration::from_millis(150 * i), Answer::photo(bytes))
            };
            (format!("/p{i}.jpg"), answer)
        })
        .collect();
    let host = Arc::new(PartnerHost::start(answers).await.unwrap());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));

    let mut next_photo = 0u64;
    for round in 0..KILLS {
        let mut runner = Runner::start(&data, &log);
        runner.ready(&http).await;
        let (stop, stopped) = watch::channel(false);
        let mut clients = Vec::new();
        for _ in 0..UPLOADERS {
            next_photo += 1;
            clients.push(tokio::spawn(uploader(
                runner.base.clone(),
                http.clone(),
                Arc::clone(&ledger),
                Arc::clone(&samples),
                next_photo + 10 * round as u64,
                stopped.clone(),
            )));
        }
        clients.push(tokio::spawn(offer_writer(
            runner.base.clone(),
            http.clone(),
            Arc::clone(&ledger),
            rng.u64(..),
            stopped.clone(),
        )));
        for c in 0..CRAWLERS {
            clients.push(tokio::spawn(crawler(
                runner.base.clone(),
                http.clone(),
                Arc::clone(&ledger),
                Arc::clone(&host),
                seed * 100 + (round * CRAWLERS + c) as u64,
                stopped.clone(),
            )));
        }
        // The point of the test: the kill lands at a random moment of the work.
        let work = Duration::from_millis(rng.u64(WORK_MS));
        tokio::time::sleep(work).await;
        runner.kill();
        stop.send(true).unwrap();
        for client in clients {
            client.await.unwrap();
        }
        let l = ledger.lock().unwrap();
        eprintln!(
            "round {round}: killed after {work:?}; {} uploads, {} offers, {} crawls acknowledged so far",
            l.uploads.len(),
            l.offers.values().filter(|o| o.acked.is_some()).count(),
            l.crawls.len()
        );
    }

    // Once more, to finish what was accepted and to be read.
    let mut runner = Runner::start(&data, &log);
    runner.ready(&http).await;
    let base = runner.base.clone();
    let (uploads, offers, crawls) = {
        let l = ledger.lock().unwrap();
        (l.uploads.clone(), l.offers.clone(), l.crawls.clone())
    };
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !uploads.is_empty() && !crawls.is_empty(),
        "the clients got nothing done (seed {seed}): {}",
        log_text()
    );

    // Every accepted crawl settles.
    for (offer, urls) in &crawls {
        let started = Instant::now();
        loop {
            let (status, body) = get(&http, &format!("{base}/v1/offers/{offer}/crawl")).await;
            if status == 200 && body["state"] == "done" {
                let photos = body["photos"].as_array().unwrap();
                assert_eq!(photos.len(), *urls, "{offer}: {body}");
                assert!(
                    photos.iter().all(|p| p["status"] == "ok"),
                    "{offer} (seed {seed}): {body}"
                );
                break;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "the crawl of {offer} never settled (seed {seed}): {status} {body}\n{}",
                log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // Every acknowledged upload is readable, with every file it names.
    for id in &uploads {
        let (status, image) = get(&http, &format!("{base}/v1/images/{id}")).await;
        assert_eq!(status, 200, "{id} (seed {seed}): {image}");
        let variants = image["variants"].as_object().unwrap();
        assert!(!variants.is_empty(), "{image}");
        for variant in variants.values() {
            let url = variant["url"].as_str().unwrap();
            let file = http.get(url).send().await.unwrap();
            assert_eq!(file.status().as_u16(), 200, "{url} (seed {seed})");
            assert!(!file.bytes().await.unwrap().is_empty(), "{url}");
        }
    }

    // Every offer holds its last acknowledged list, or one written after it without an
    // answer.
    for (offer, OfferLists { acked, unanswered }) in &offers {
        let (status, body) = get(&http, &format!("{base}/v1/offers/{offer}/photos")).await;
        let held: Option<Vec<String>> = (status == 200).then(|| {
            body["photos"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["image_id"].as_str().unwrap().to_owned())
                .collect()
        });
        let possible: Vec<Option<Vec<String>>> = std::iter::once(acked.clone())
            .chain(unanswered.iter().cloned().map(Some))
            .collect();
        assert!(
            possible.contains(&held) || (held.as_deref() == Some(&[]) && possible.contains(&None)),
            "{offer} (seed {seed}) holds {held:?}, acknowledged {acked:?}, unanswered {unanswered:?}"
        );
    }
    runner.kill();

    // Nothing for the audit to mend.
    let audit = imgest_cli(&data, &["audit", "--dry-run", "--json"]);
    let report: Value = serde_json::from_slice(&audit.stdout).unwrap_or_else(|_| {
        panic!(
            "audit: {}{}",
            String::from_utf8_lossy(&audit.stdout),
            String::from_utf8_lossy(&audit.stderr)
        )
    });
    assert!(audit.status.success(), "{report}");
    for damage in [
        "images_missing_files",
        "images_broken",
        "links_to_missing_images",
        "link_counts_too_high",
        "link_counts_too_low",
    ] {
        assert_eq!(report[damage], 0, "{damage} (seed {seed}): {report}");
    }
    assert!(
        report["images_checked"].as_u64().unwrap() >= uploads.len() as u64,
        "{report}"
    );
}
