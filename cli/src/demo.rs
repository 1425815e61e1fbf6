//! `imgest demo`: the main job, step by step, on the sample photos shipped in `samples/`, through
//! the real HTTP API of a runner started in this process on a fresh data directory. Its last
//! part is a crawl: the runner's download workers fetch the sample photos from three
//! partner hosts it starts on 127.0.0.1 (a fast one, a slow one, a failing one).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use imgest_crawl::Crawler;
use imgest_download::AllowedPorts;
use imgest_hosts::{Answer, PartnerHost};
use imgest_http::auth::{LocalIssuer, TokenSpec};
use imgest_local::app;
use imgest_local::runner::{LocalRunner, RunnerOptions};
use imgest_settings::{AuthSettings, Backend};
use serde_json::{Value, json};

use crate::commands::embedded_settings;

/// The tour's own identity provider: the issuer and audience its tokens name.
const DEMO_ISSUER: &str = "https://id.demo.invalid/";
const DEMO_AUDIENCE: &str = "imgest";
/// Written into the demo's data directory so a later run knows it may wipe it.
const MARKER: &str = ".imgest-demo";
const ORPHAN_TTL: Duration = Duration::from_secs(4);
/// The crawl part's timeout tiers (1 s and 30 s in spirit), shortened so the tour stays quick.
const DEMO_TIERS: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(2)];
/// The slow host's latency: past the first tier, well within the second.
const SLOW_HOST_LATENCY: Duration = Duration::from_millis(600);
/// How long the tour waits for the crawl to settle.
const CRAWL_DEADLINE: Duration = Duration::from_secs(20);

/// The sample photos, compiled in so the demo runs from anywhere.
const SAMPLES: [(&str, &[u8]); 6] = [
    ("dune.jpg", include_bytes!("../../samples/dune.jpg")),
    ("storm.jpg", include_bytes!("../../samples/storm.jpg")),
    ("ladybird.jpg", include_bytes!("../../samples/ladybird.jpg")),
    (
        "garden-portrait.jpg",
        include_bytes!("../../samples/garden-portrait.jpg"),
    ),
    (
        "yellow-flower-portrait.jpg",
        include_bytes!("../../samples/yellow-flower-portrait.jpg"),
    ),
    (
        "garden-portrait-exif6.jpg",
        include_bytes!("../../samples/garden-portrait-exif6.jpg"),
    ),
];

struct Tour {
    client: reqwest::Client,
    base: String,
    /// A seller's browser's token (`imgest:upload`).
    seller: String,
    /// The demo partner's backend's token (`imgest:offers`, client `demo-partner`).
    partner: String,
}

impl Tour {
    fn as_seller(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.bearer_auth(&self.seller)
    }

    fn as_partner(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.bearer_auth(&self.partner)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<(u16, Value)> {
        let response = request.send().await.context("calling the API")?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        let json = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok((status, json))
    }

    async fn upload(&self, bytes: &'static [u8]) -> Result<(u16, Value, Duration)> {
        let started = Instant::now();
        let (status, json) = self
            .send(
                self.as_seller(self.client.post(format!("{}/v1/images", self.base)))
                    .body(bytes),
            )
            .await?;
        if status != 200 && status != 201 {
            bail!("upload failed: {status} {json}");
        }
        Ok((status, json, started.elapsed()))
    }

    async fn link(&self, offer: &str, ids: &[&str]) -> Result<Value> {
        let url = format!("{}/v1/offers/{offer}/photos", self.base);
        let (status, json) = self
            .send(
                self.as_partner(self.client.put(url))
                    .json(&json!({ "image_ids": ids })),
            )
            .await?;
        if status != 200 {
            bail!("linking {offer} failed: {status} {json}");
        }
        Ok(json)
    }
}

impl Tour {
    /// Part 8: a crawl of photos on three partner hosts on 127.0.0.1. Returns the summary line.
    async fn crawl(&self, crawler: &Crawler, names: &[(&str, String)]) -> Result<String> {
        let sample = |name: &str| -> &'static [u8] {
            SAMPLES
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(&[][..], |(_, bytes)| bytes)
        };
        let fast = PartnerHost::start([
            ("/dune.jpg", Answer::photo(sample("dune.jpg"))),
            ("/storm.jpg", Answer::photo(sample("storm.jpg"))),
        ])
        .await?;
        let slow = PartnerHost::builder()
            .serve("/ladybird.jpg", Answer::photo(sample("ladybird.jpg")))
            .latency(SLOW_HOST_LATENCY)
            .start()
            .await?;
        let failing = PartnerHost::start([
            ("/gone.jpg", Answer::status(404)),
            (
                "/flaky.jpg",
                Answer::fail_times(1, 500, Answer::photo(sample("garden-portrait.jpg"))),
            ),
        ])
        .await?;
        let hosts = [&fast, &slow, &failing];
        let requests = || hosts.iter().map(|h| h.requests()).sum::<u64>();
        let listed = [
            (&fast, "/dune.jpg"),
            (&slow, "/ladybird.jpg"),
            (&failing, "/flaky.jpg"),
            (&failing, "/gone.jpg"),
            (&fast, "/storm.jpg"),
        ];
        let urls: Vec<String> = listed.iter().map(|(host, path)| host.url(path)).collect();
        let name_of = |id: &str| {
            names
                .iter()
                .find(|(_, known)| known == id)
                .map_or("?", |(name, _)| *name)
        };

        println!(
            "8. A partner's crawl request: POST /v1/crawl with 5 photo URLs of offer car-3, on three hosts on 127.0.0.1"
        );
        println!(
            "   fast {}, slow {} (answers in {} ms; tiers {} ms then {} s), failing {} (404, and 500 then 200)",
            fast.base_url(),
            slow.base_url(),
            SLOW_HOST_LATENCY.as_millis(),
            DEMO_TIERS[0].as_millis(),
            DEMO_TIERS[1].as_secs(),
            failing.base_url()
        );
        let body = json!({"client_id": "demo-partner", "offer_id": "car-3", "urls": urls});
        let started = Instant::now();
        let (status, accepted) = self
            .send(
                self.as_partner(self.client.post(format!("{}/v1/crawl", self.base)))
                    .json(&body),
            )
            .await?;
        if status != 202 {
            bail!("the crawl request was refused: {status} {accepted}");
        }
        let done = self.crawl_done("car-3").await?;
        println!(
            "   {status} accepted; GET /v1/offers/car-3/crawl said done after {} ms",
            started.elapsed().as_millis()
        );
        let results = done["photos"].as_array().cloned().unwrap_or_default();
        for ((host, path), result) in listed.iter().zip(&results) {
            let what = match result["status"].as_str() {
                Some("ok") => {
                    let id = result["image_id"].as_str().unwrap_or_default();
                    format!("ok      {}  {}", short(id), name_of(id))
                }
                _ => {
                    let e = &result["error"];
                    let status = e["http_status"]
                        .as_u64()
                        .map_or(String::new(), |s| format!(" (HTTP {s})"));
                    format!("failed  {}{status}", e["kind"].as_str().unwrap_or("?"))
                }
            };
            let hits = host.hits(path);
            println!(
                "   {path:<14} {what:<38} {hits} request{}",
                if hits == 1 { "" } else { "s" }
            );
        }
        println!(
            "   (the slow photo timed out in the first tier and came in the second; the flaky one was retried after its 500)"
        );

        let (_, photos) = self
            .send(
                self.as_partner(
                    self.client
                        .get(format!("{}/v1/offers/car-3/photos", self.base)),
                ),
            )
            .await?;
        let order: Vec<String> = photos["photos"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(|x| x["image_id"].as_str())
                    .map(|id| format!("{} {}", short(id), name_of(id)))
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "   car-3's photos, in the request's order: {}",
            order.join(", ")
        );

        let before = requests();
        let started = Instant::now();
        let (status, again) = self
            .send(
                self.as_partner(self.client.post(format!("{}/v1/crawl", self.base)))
                    .json(&body),
            )
            .await?;
        println!(
            "   the same crawl request again: {status} state={} in {} ms, {} requests to the hosts (every URL settled from its record)\n",
            again["state"].as_str().unwrap_or("?"),
            started.elapsed().as_millis(),
            requests() - before
        );

        let ok = results.iter().filter(|r| r["status"] == "ok").count();
        let m = crawler.counts();
        Ok(format!(
            "Crawls: {} URLs, {ok} photos ok ({} new, {} already stored), {} failed; {} requests to the partner hosts ({} tier move, {} retry), none when the same request came again.",
            results.len(),
            m.photos_new,
            m.photos_deduplicated,
            results.len() - ok,
            before,
            m.tier_moves,
            m.retries
        ))
    }

    /// Polls `GET /v1/offers/{offer}/crawl` until the crawl is done; returns its body.
    async fn crawl_done(&self, offer: &str) -> Result<Value> {
        let started = Instant::now();
        loop {
            let (status, body) = self
                .send(
                    self.as_partner(
                        self.client
                            .get(format!("{}/v1/offers/{offer}/crawl", self.base)),
                    ),
                )
                .await?;
            if status == 200 && body["state"] == "done" {
                return Ok(body);
            }
            if started.elapsed() > CRAWL_DEADLINE {
                bail!(
                    "the crawl of {offer} did not settle within {CRAWL_DEADLINE:?}: {status} {body}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn size(v: &Value) -> String {
    format!("{}x{}", v["width"], v["height"])
}

fn short(id: &str) -> &str {
    &id[..8.min(id.len())]
}

/// Prepares a fresh data directory, refusing to wipe one the demo did not create.
fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)?.next().is_none();
        if !empty && !dir.join(MARKER).exists() {
            bail!(
                "{} exists and was not made by `imgest demo`; pass --data-dir with a new path",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous tour in {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(MARKER), "made by imgest demo; safe to delete\n")?;
    Ok(())
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        count_files(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

pub async fn run(data_dir: PathBuf) -> Result<()> {
    fresh_dir(&data_dir)?;
    let mut settings = embedded_settings("demo")?;
    settings.backend = Backend::Embedded {
        data_dir: data_dir.clone(),
    };
    settings.public_url = None;
    settings.orphan_ttl = ORPHAN_TTL;
    // The crawl part's partner hosts are on 127.0.0.1, which the downloader refuses unless
    // private networks are allowed; short tiers and retries keep the tour quick.
    let crawl = &mut settings.crawl;
    crawl.allow_private_networks = true;
    crawl.fetch_ports = AllowedPorts::Any;
    crawl.tiers = DEMO_TIERS.to_vec();
    crawl.workers = vec![8, 4];
    crawl.fetch_tier = 0;
    crawl.retry_base = Duration::from_millis(100);
    crawl.retry_cap = Duration::from_millis(300);
    // Identity as deployed: the tour is its own identity provider. It mints a signing key,
    // writes its public half where the runner reads keys from, and signs its callers' tokens.
    let issuer = LocalIssuer::es256(DEMO_ISSUER, DEMO_AUDIENCE)?;
    let jwks_file = data_dir.join("jwks.json");
    issuer.write_jwks(&jwks_file)?;
    settings.auth = AuthSettings::Jwt {
        jwks_file: jwks_file.clone(),
        issuer: DEMO_ISSUER.to_owned(),
        audience: DEMO_AUDIENCE.to_owned(),
    };
    let token = |sub: &str, scope: &str, client_id: Option<&str>| {
        issuer.token(&TokenSpec {
            sub,
            scope,
            client_id,
            valid_for: Duration::from_secs(3600),
        })
    };
    let seller = token("seller-42", "imgest:upload", None)?;
    let partner = token("demo-backend", "imgest:offers", Some("demo-partner"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let runner = LocalRunner::start(&settings, Some(listener), RunnerOptions::default()).await?;
    let service = Arc::clone(runner.service());
    let crawler = Arc::clone(runner.crawler());
    let base = runner.base_url().to_owned();
    let tour = Tour {
        client: {
            imgest_download::install_default_provider();
            reqwest::Client::new()
        },
        base: base.clone(),
        seller,
        partner,
    };
    let files_dir = app::blobs_path(&data_dir);

    println!(
        "imgest demo: the main job on {} sample photos",
        SAMPLES.len()
    );
    println!(
        "  data directory {} (SQLite {}, files {})",
        data_dir.display(),
        app::sqlite_path(&data_dir).display(),
        files_dir.display()
    );
    println!(
        "  API on {base}; orphan TTL shortened to {}s for the tour\n",
        ORPHAN_TTL.as_secs()
    );

    println!(
        "0. Who may do what: every /v1 request carries a bearer token (the tour minted an ES256 key; its public half is {})",
        jwks_file.display()
    );
    println!(
        "   a seller's browser gets imgest:upload (upload photos); the partner's backend imgest:offers with client_id demo-partner (its offers and crawls)"
    );
    let (anonymous, _) = tour
        .send(tour.client.get(format!("{base}/v1/offers/car-1/photos")))
        .await?;
    let (wrong_scope, refused) = tour
        .send(tour.as_seller(tour.client.get(format!("{base}/v1/offers/car-1/photos"))))
        .await?;
    println!(
        "   GET /v1/offers/car-1/photos without a token: {anonymous}; with the seller's token: {wrong_scope} {} ({})\n",
        refused["error"]["kind"].as_str().unwrap_or("?"),
        refused["error"]["message"].as_str().unwrap_or("?")
    );

    println!(
        "1. A seller's form pre-uploads photos: POST /v1/images; the id is the MD5 of the bytes"
    );
    let mut ids = Vec::new();
    let mut sizes = Vec::new();
    for (name, bytes) in SAMPLES {
        let (status, image, took) = tour.upload(bytes).await?;
        let id = image["image_id"].as_str().unwrap_or_default().to_owned();
        let v = &image["variants"];
        println!(
            "   {status} {name:<28} {}  {:>9} {}  large {} medium {} thumb {}  {:>4} ms",
            short(&id),
            size(&image),
            image["format"].as_str().unwrap_or("?"),
            size(&v["large"]),
            size(&v["medium"]),
            size(&v["thumb"]),
            took.as_millis()
        );
        sizes.push(size(&image));
        ids.push((name, id));
    }
    println!(
        "   garden-portrait-exif6.jpg has its pixels stored sideways with EXIF orientation 6: it came out {} like garden-portrait.jpg ({})\n",
        sizes[5], sizes[3]
    );

    println!("2. The seller comes back and uploads the dune photo again");
    let before = service.counts().pipeline_runs;
    let (status, again, took) = tour.upload(SAMPLES[0].1).await?;
    let after = service.counts().pipeline_runs;
    println!(
        "   {status} deduplicated={} same id {}  {} ms; photos decoded so far: {before} before, {after} after (nothing decoded or written)\n",
        again["deduplicated"],
        short(again["image_id"].as_str().unwrap_or_default()),
        took.as_millis()
    );

    let id = |i: usize| ids[i].1.as_str();
    println!("3. Two offers share the ladybird photo: PUT /v1/offers/{{id}}/photos");
    tour.link("car-1", &[id(0), id(1), id(2)]).await?;
    tour.link("car-2", &[id(2), id(3)]).await?;
    println!("   car-1: dune, storm, ladybird");
    println!("   car-2: ladybird, garden-portrait\n");

    println!("4. Reorder car-1 (a few record writes; no file is touched)");
    let reordered = tour.link("car-1", &[id(2), id(0), id(1)]).await?;
    let order: Vec<&str> = reordered["photos"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|x| x["image_id"].as_str())
                .map(short)
                .collect()
        })
        .unwrap_or_default();
    println!("   car-1 is now {order:?} (ladybird, dune, storm)\n");

    println!("5. Delete car-1: DELETE /v1/offers/car-1");
    let files_before = count_files(&files_dir);
    let (status, _) = tour
        .send(tour.as_partner(tour.client.delete(format!("{base}/v1/offers/car-1"))))
        .await?;
    println!(
        "   {status}; files before {files_before}, after {}",
        count_files(&files_dir)
    );
    let (_, ladybird) = tour
        .send(tour.as_seller(tour.client.get(format!("{base}/v1/images/{}", id(2)))))
        .await?;
    println!(
        "   ladybird is still linked by {} offer(s); dune and storm are now orphans, like the photos never linked\n",
        ladybird["offers"]
    );

    println!(
        "6. Orphans expire {}s after their last use; then GC deletes records first, files second",
        ORPHAN_TTL.as_secs()
    );
    tokio::time::sleep(ORPHAN_TTL + Duration::from_millis(200)).await;
    let gc = service.gc().await?;
    println!(
        "   gc: {} images deleted ({} files); files left {}",
        gc.images_deleted,
        gc.files_deleted,
        count_files(&files_dir)
    );
    for (name, image_id) in &ids {
        let (status, _) = tour
            .send(tour.as_seller(tour.client.get(format!("{base}/v1/images/{image_id}"))))
            .await?;
        println!(
            "   {name:<28} {}",
            if status == 200 {
                "kept (linked by car-2)"
            } else {
                "collected"
            }
        );
    }
    let (_, car2) = tour
        .send(tour.as_partner(tour.client.get(format!("{base}/v1/offers/car-2/photos"))))
        .await?;
    let thumb = car2["photos"][0]["variants"]["thumb"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let thumb = tour.client.get(&thumb).send().await?;
    println!(
        "   car-2's photos are intact: GET {} answers {}\n",
        thumb.url().path(),
        thumb.status()
    );

    println!("7. The sweep lists files shard by shard and deletes those that no record owns");
    let sweep = service.sweep(false).await?;
    println!(
        "   {} files scanned, {} without a record, {} deleted\n",
        sweep.files_scanned,
        sweep.garbage_files + sweep.young_unowned_files,
        sweep.files_deleted
    );

    // The summary counts the upload steps; the crawl's downloads are summed up on their own.
    let m = service.counts();
    let names: Vec<(&str, String)> = ids.iter().map(|(n, id)| (*n, id.clone())).collect();
    let crawl = tour.crawl(&crawler, &names).await?;
    runner.stop().await;

    println!(
        "Summary: {} uploads, {} decoded, {} deduplicated; {} images collected.",
        m.uploads_new + m.uploads_deduplicated,
        m.pipeline_runs,
        m.uploads_deduplicated,
        m.gc_images_deleted
    );
    println!("{crawl}");
    println!(
        "The files live under {dir}/public/<shard>/<image_id>/<generation>/ (large.jpg, medium.jpg, thumb.jpg: served) and {dir}/originals/… (never served).",
        dir = files_dir.display()
    );
    println!(
        "Next: `cargo run --release -- serve` (open on 127.0.0.1 without IMGEST_JWKS_FILE) and POST your own photos to http://127.0.0.1:8080/v1/images"
    );
    Ok(())
}
