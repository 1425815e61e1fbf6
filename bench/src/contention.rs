//! `imgest-bench contention`: the shared DynamoDB items the seed's peak writes hardest, each
//! written by N concurrent writers through the real adapters and flows, against the emulator
//! behind the counting proxy with a fixed latency per request (5 ms: a request's round trip in
//! the region). Per target it prints successful updates per second, the write requests the
//! shared partition took per successful update (a read-then-conditional-write loop takes more
//! than one, and the round trip caps its commits), the reads beside them, condition failures,
//! errors, and what was lost.
//!
//! Targets (each writer loops its operation for the run's duration):
//! - `ratelimit`: one permit of one client's rate limit (limit far above the demand);
//! - `host`: a fetch's outcomes of one CDN host shared (`observe` then a flush), the host's
//!   health and the (client, host) tier statistics;
//! - `image`: an offer linking a popular image (already linked 100,000 times), then deleted;
//! - `url`: a crawl of a new offer listing one popular URL whose download (started by one
//!   crawl before the run) has not answered; after the run the download answers and every
//!   crawl must settle, each told once.
//!
//! A last target, `emulator`, writes distinct items with the same writers: the emulator's
//! own ceiling, which bounds every absolute rate here (moto serialises DynamoDB requests).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use aws_sdk_dynamodb::types::AttributeValue;
use imgest_core::domain::{
    ClientId, Generation, ImageId, NormalizedUrl, OfferId, OfferKey, Tenant,
};
use imgest_core::ports::{Claim, SystemClock};
use imgest_crawl::messages::{CrawlRequest, CrawlState, FetchTask};
use imgest_crawl::{Crawler, Processing};
use imgest_flows::Service;
use imgest_hosts::{Answer, PartnerHost};
use imgest_local::app;
use imgest_settings::{Backend, Settings};

use crate::cost::proxy::{self, ProxyOptions, Tally};
use crate::cost::refusals::Refusals;

/// What the benchmark is asked to do.
pub struct Options {
    pub writers: usize,
    pub duration: Duration,
    pub latency: Duration,
    pub targets: Vec<String>,
    /// Where to write the figures for `imgest-bench capacity`, if anywhere.
    pub profile_out: Option<std::path::PathBuf>,
}

/// The figures `imgest-bench capacity` reads (`--profile-out`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentionProfile {
    pub source: String,
    pub writers: u64,
    pub latency_ms: f64,
    pub targets: BTreeMap<String, ContentionTarget>,
}

/// One target's figures.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentionTarget {
    pub updates: u64,
    pub updates_per_s: f64,
    pub write_requests_per_update: f64,
    pub reads_per_update: f64,
    pub errors: u64,
    pub lost: i64,
    /// The same writers again, the hottest key's partition giving half the write units they
    /// asked of it above, and transactions on one item conflicting
    /// ([`refusals`](crate::cost::refusals)). Optional (profiles measured before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<UnderRefusals>,
}

/// A target's figures with its partition refusing writes as DynamoDB would.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnderRefusals {
    /// Write units a second each key of the hottest key's class was given.
    pub partition_wcu: f64,
    /// That class (the partition key up to its first `#`; absent in profiles measured when
    /// every key was given that rate).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub class: String,
    pub updates: u64,
    pub updates_per_s: f64,
    /// Write requests the shared partition took per successful update, refused ones included.
    pub write_requests_per_update: f64,
    /// Writes refused (throttled or in conflict) per successful update.
    pub refused_per_update: f64,
    pub errors: u64,
    pub lost: i64,
}

pub const TARGETS: [&str; 5] = ["ratelimit", "host", "image", "url", "emulator"];

/// The client every target acts for.
const CLIENT: &str = "big";
/// The popular image's links before the run.
const LOGO_LINKS: i64 = 100_000;

/// One target's figures.
#[derive(Debug, Default)]
struct Figures {
    updates: u64,
    errors: u64,
    /// Updates lost: granted but not stored, outcomes dropped, links miscounted, crawls not
    /// told (or told twice).
    lost: i64,
    seconds: f64,
    writes: u64,
    reads: u64,
    condition_failed: u64,
    note: String,
}

pub async fn run(options: Options) -> Result<()> {
    let upstream = crate::cost::emulator("error", "contention", "bench/contention.sh")?;
    for t in &options.targets {
        if !TARGETS.contains(&t.as_str()) {
            bail!("unknown target {t:?} (one of {TARGETS:?})");
        }
    }
    let tally = Arc::new(Tally::default());
    let refusals = Arc::new(Refusals::default());
    let proxy_url = proxy::start_with(
        &upstream,
        Arc::clone(&tally),
        ProxyOptions {
            latency: options.latency,
            sizes: false,
            refusals: Some(Arc::clone(&refusals)),
        },
    )
    .await?;
    let setup = Setup::create(&proxy_url).await?;

    println!(
        "\n{} writers, {:.0} s per target, {} ms added to every request (revision {}).\n",
        options.writers,
        options.duration.as_secs_f64(),
        options.latency.as_millis(),
        crate::revision()
    );
    println!(
        "| target | updates | updates/s | write requests per update | reads per update | condition failures | errors | lost | note |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut profile = ContentionProfile {
        source: format!(
            "imgest-bench contention --writers {} --duration {}s --latency {}ms at {}",
            options.writers,
            options.duration.as_secs(),
            options.latency.as_millis(),
            crate::revision()
        ),
        writers: options.writers as u64,
        latency_ms: options.latency.as_secs_f64() * 1000.0,
        targets: BTreeMap::new(),
    };
    let mut refused_rows = Vec::new();
    for target in &options.targets {
        tally.enter(target);
        refusals.take_admitted();
        let figures = run_target(target, &setup, &options, &tally, "").await?;
        let (hottest, admitted) = refusals.take_admitted().unwrap_or_default();
        let asked = admitted / figures.seconds.max(1e-9);
        let per = |n: u64| {
            if figures.updates == 0 {
                "-".to_owned()
            } else {
                format!("{:.3}", n as f64 / figures.updates as f64)
            }
        };
        println!(
            "| {target} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
            figures.updates,
            figures.updates as f64 / figures.seconds.max(1e-9),
            per(figures.writes),
            per(figures.reads),
            figures.condition_failed,
            figures.errors,
            figures.lost,
            figures.note,
        );
        let ratio = |n: u64| n as f64 / figures.updates.max(1) as f64;
        // The same writers, the hottest key given half of what they asked of it.
        let refused = if target == "emulator" {
            None
        } else {
            let partition_wcu = (asked / 2.0).max(1.0);
            tally.enter(&format!("{target} (refused)"));
            refusals.limit(Some((hottest.clone(), partition_wcu)));
            let before = refusals.refused();
            let under = run_target(target, &setup, &options, &tally, "-refused").await;
            refusals.limit(None);
            let under = under?;
            let per = |n: u64| n as f64 / under.updates.max(1) as f64;
            let row = UnderRefusals {
                partition_wcu,
                class: hottest,
                updates: under.updates,
                updates_per_s: under.updates as f64 / under.seconds.max(1e-9),
                write_requests_per_update: per(under.writes),
                refused_per_update: per(refusals.refused() - before),
                errors: under.errors,
                lost: under.lost,
            };
            refused_rows.push((target.clone(), row.clone(), under.note));
            Some(row)
        };
        profile.targets.insert(
            target.clone(),
            ContentionTarget {
                updates: figures.updates,
                updates_per_s: figures.updates as f64 / figures.seconds.max(1e-9),
                write_requests_per_update: ratio(figures.writes),
                reads_per_update: ratio(figures.reads),
                errors: figures.errors,
                lost: figures.lost,
                refused,
            },
        );
    }
    println!(
        "\nThe same writers, each key of the class of each target's hottest key given half the write units a second they asked of that key above (throttled past them; other keys a whole partition's {} WCU/s) and transactions on one item conflicting, as a DynamoDB partition would:\n",
        crate::cost::refusals::PARTITION_WCU
    );
    println!(
        "| target | limited class | partition WCU/s | updates | updates/s | write requests per update | refused per update | errors | lost | note |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (target, r, note) in &refused_rows {
        println!(
            "| {target} | {} | {:.0} | {} | {:.1} | {:.3} | {:.3} | {} | {} | {note} |",
            r.class,
            r.partition_wcu,
            r.updates,
            r.updates_per_s,
            r.write_requests_per_update,
            r.refused_per_update,
            r.errors,
            r.lost
        );
    }
    if let Some(path) = &options.profile_out {
        std::fs::write(path, serde_json::to_string_pretty(&profile)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("\nThe figures are in {}.", path.display());
    }
    Ok(())
}

/// One target's run; `run` names it apart from the target's other runs (its keys and offers
/// its own).
async fn run_target(
    target: &str,
    setup: &Setup,
    o: &Options,
    tally: &Tally,
    run: &str,
) -> Result<Figures> {
    match target {
        "ratelimit" => ratelimit(setup, o, tally, run).await,
        "host" => host(setup, o, tally).await,
        "image" => image(setup, o, tally).await,
        "url" => url(setup, o, tally, run).await,
        _ => emulator(setup, o, tally).await,
    }
}

/// The emulator's resources and the service and crawler on them, through the proxy.
struct Setup {
    service: Arc<Service>,
    crawler: Crawler,
    direct_dynamodb: aws_sdk_dynamodb::Client,
    direct_sqs: aws_sdk_sqs::Client,
    table: String,
    queues: BTreeMap<&'static str, String>,
    host: PartnerHost,
    proxy_url: String,
}

/// Every queue the flows may send to.
const QUEUES: [&str; 7] = [
    "fetch-0",
    "fetch-1",
    "fetch-2",
    "results",
    "process",
    "settle",
    "revalidate",
];

impl Setup {
    async fn create(proxy_url: &str) -> Result<Self> {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk)
                .force_path_style(true)
                .build(),
        );
        let suffix = format!("{:08x}", fastrand::u32(..));
        let table = format!("imgest-contention-{suffix}");
        let bucket = table.clone();
        s3.create_bucket().bucket(&bucket).send().await?;
        imgest_aws::dynamodb::create_table(&dynamodb, &table).await?;
        let mut queues = BTreeMap::new();
        for name in QUEUES {
            let url = sqs
                .create_queue()
                .queue_name(format!("imgest-contention-{name}-{suffix}"))
                .send()
                .await?
                .queue_url
                .context("the emulator returned no queue URL")?;
            queues.insert(name, url);
        }
        let host = PartnerHost::builder()
            .serve_all(["/banner.jpg", "/banner-refused.jpg"].map(|path| {
                (
                    path,
                    Answer::photo(include_bytes!("../../samples/dune.jpg").to_vec()),
                )
            }))
            .start()
            .await?;
        let queue_map = queues
            .iter()
            .map(|(q, url)| format!("{q}={url}"))
            .collect::<Vec<_>>()
            .join(",");
        let map: std::collections::HashMap<String, String> = [
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", bucket.as_str()),
            ("IMGEST_TABLE", table.as_str()),
            ("IMGEST_S3_FORCE_PATH_STYLE", "true"),
            ("IMGEST_QUEUES", queue_map.as_str()),
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true"),
            ("IMGEST_FETCH_PORTS", "any"),
            ("IMGEST_CLIENT_RPM", "1000000"),
            ("IMGEST_AUTH", "gateway"),
            ("IMGEST_JWT_AUDIENCE", "imgest"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut settings = Settings::from_map(&map)?;
        if let Backend::Aws(aws) = &mut settings.backend {
            aws.endpoint_url = Some(proxy_url.to_owned());
        }
        let service =
            Arc::new(app::service(&settings, "http://127.0.0.1:9", Arc::new(SystemClock)).await?);
        let crawler = Crawler::new(
            Arc::clone(&service),
            settings.crawl.clone(),
            Processing::InlineWhenItFits,
        );
        Ok(Self {
            service,
            crawler,
            direct_dynamodb: dynamodb,
            direct_sqs: sqs,
            table,
            queues,
            host,
            proxy_url: proxy_url.to_owned(),
        })
    }

    fn client(&self) -> Result<ClientId> {
        Ok(ClientId::parse(CLIENT)?)
    }

    /// Every item whose `pk` starts with `prefix` (a scan: the table is the run's own).
    async fn items(
        &self,
        prefix: &str,
    ) -> Result<Vec<std::collections::HashMap<String, AttributeValue>>> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .direct_dynamodb
                .scan()
                .table_name(&self.table)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            out.extend(page.items.unwrap_or_default().into_iter().filter(
                |i| matches!(i.get("pk"), Some(AttributeValue::S(pk)) if pk.starts_with(prefix)),
            ));
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }
}

/// Runs `op` in `writers` concurrent loops for `duration`; `op(writer, round)` returns the
/// updates it made, or an error. Returns (updates, errors, seconds).
async fn drive<F, Fut>(writers: usize, duration: Duration, op: F) -> (u64, u64, f64)
where
    F: Fn(usize, u64) -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let updates = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let started = Instant::now();
    let loops = (0..writers).map(|w| {
        let (updates, errors, op) = (&updates, &errors, &op);
        async move {
            let mut round = 0;
            while started.elapsed() < duration {
                match op(w, round).await {
                    Ok(n) => {
                        updates.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("writer {w}: {e:#}");
                        }
                    }
                }
                round += 1;
            }
        }
    });
    futures_util::future::join_all(loops).await;
    (
        updates.into_inner(),
        errors.into_inner(),
        started.elapsed().as_secs_f64(),
    )
}

/// The requests the partitions whose key contains `needle` took in the current target.
fn requests(tally: &Tally, needle: &str, figures: &mut Figures) {
    let stage = tally.current_stage();
    for ((op, _), k) in &stage.keys {
        for (pk, n) in &k.by_key {
            if !pk.contains(needle) {
                continue;
            }
            if proxy::is_write_op(op) {
                figures.writes += n;
            } else {
                figures.reads += n;
            }
        }
    }
    figures.condition_failed = stage
        .keys
        .values()
        .map(|k| k.condition_failed + k.tx_conflict)
        .sum();
}

fn number(item: &std::collections::HashMap<String, AttributeValue>, attr: &str) -> i64 {
    item.get(attr)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn ratelimit(setup: &Setup, o: &Options, tally: &Tally, run: &str) -> Result<Figures> {
    let client = format!("{CLIENT}{run}");
    let client = client.as_str();
    let limiter = Arc::clone(&setup.service.ports().rate_limits);
    let window = Duration::from_secs(60);
    let granted = AtomicU64::new(0);
    let (limiter, granted) = (&limiter, &granted);
    let (updates, errors, seconds) = drive(o.writers, o.duration, move |_, _| async move {
        let now = imgest_core::ports::Clock::now(&SystemClock);
        let grant = limiter
            .acquire(client, 1, 1_000_000_000, window, now)
            .await?;
        granted.fetch_add(u64::from(grant.granted), Ordering::Relaxed);
        Ok(u64::from(grant.granted))
    })
    .await;
    // What the items hold: a map of bucket counts on one item, or one count per bucket item.
    let stored: i64 = setup
        .items(&format!("ratelimit#{client}"))
        .await?
        .iter()
        .map(|item| match item.get("buckets") {
            Some(AttributeValue::M(m)) => m
                .values()
                .filter_map(|v| v.as_n().ok()?.parse::<i64>().ok())
                .sum(),
            _ => number(item, "g"),
        })
        .sum();
    let mut f = Figures {
        updates,
        errors,
        seconds,
        lost: i64::try_from(granted.load(Ordering::Relaxed)).unwrap_or(i64::MAX) - stored,
        note: format!("{stored} permits stored"),
        ..Figures::default()
    };
    requests(tally, &format!("ratelimit#{client}"), &mut f);
    Ok(f)
}

async fn host(setup: &Setup, o: &Options, tally: &Tally) -> Result<Figures> {
    let client = setup.client()?;
    let host = "cdn.contention.example";
    let observed = AtomicU64::new(0);
    let dropped = AtomicU64::new(0);
    let (client_ref, observed_ref, dropped_ref) = (&client, &observed, &dropped);
    let (updates, errors, seconds) = drive(o.writers, o.duration, move |_, _| {
        let (client, observed, dropped) = (client_ref, observed_ref, dropped_ref);
        async move {
            // One fetch invocation's outcomes of the host, then its flush.
            setup
                .crawler
                .observe_answers(client, host, Duration::from_millis(200), 10);
            let shared = setup.crawler.share_learning().await;
            observed.fetch_add(20, Ordering::Relaxed);
            dropped.fetch_add(shared.dropped as u64, Ordering::Relaxed);
            // Two shared series per flush: the host's health and the (client, host) tiers.
            Ok(if shared.dropped == 0 && shared.kept == 0 {
                2
            } else {
                0
            })
        }
    })
    .await;
    let mut f = Figures {
        updates,
        errors,
        seconds,
        lost: i64::try_from(dropped.into_inner()).unwrap_or(i64::MAX),
        note: format!("{} outcomes observed", observed.into_inner()),
        ..Figures::default()
    };
    requests(tally, host, &mut f);
    Ok(f)
}

async fn image(setup: &Setup, o: &Options, tally: &Tally) -> Result<Figures> {
    let ports = setup.service.ports();
    // The logo is made, linked 100,000 times and turned hot before the writers start: the
    // target is a popular image's changes, not the moment it turns hot (once in its life).
    let stage = tally.current_stage_name();
    tally.enter(&format!("{stage}: start"));
    let logo = ImageId::of_bytes(format!("logo {}", fastrand::u64(..)).as_bytes());
    let now = imgest_core::ports::Clock::now(&SystemClock);
    let ttl = Duration::from_secs(3600);
    let Claim::New { generation } = ports
        .images
        .claim(&logo, &Generation::random(), now, ttl, ttl)
        .await?
    else {
        bail!("the logo's id was taken");
    };
    ports
        .images
        .complete(&logo, &generation, sample_ready(), now, ttl)
        .await?;
    let client = setup.client()?;
    let tenant = Tenant::Client(client);
    let first = OfferKey::new(tenant.clone(), OfferId::parse("logo-holder")?);
    ports
        .offers
        .set_photos(&first, std::slice::from_ref(&logo), now, ttl)
        .await?;
    // As if 100,000 offers linked it.
    setup
        .direct_dynamodb
        .update_item()
        .table_name(&setup.table)
        .key("pk", AttributeValue::S(format!("image#{logo}")))
        .key("sk", AttributeValue::S("image".into()))
        .update_expression("SET link_count = :n")
        .expression_attribute_values(":n", AttributeValue::N(LOGO_LINKS.to_string()))
        .send()
        .await?;
    // One change reads it past the threshold and turns it hot.
    let second = OfferKey::new(tenant.clone(), OfferId::parse("logo-holder-2")?);
    ports
        .offers
        .set_photos(&second, std::slice::from_ref(&logo), now, ttl)
        .await?;
    ports.offers.delete_offer(&second, now, ttl).await?;
    tally.enter(&stage);
    // Offers whose link went through and whose deletion then failed: still linked.
    let left = AtomicU64::new(0);
    let (logo_ref, tenant_ref, left_ref) = (&logo, &tenant, &left);
    let (updates, errors, seconds) = drive(o.writers, o.duration, move |w, round| {
        let (logo, tenant, left) = (logo_ref, tenant_ref, left_ref);
        async move {
            let offer = OfferKey::new(tenant.clone(), OfferId::parse(&format!("w{w}-{round}"))?);
            let now = imgest_core::ports::Clock::now(&SystemClock);
            ports
                .offers
                .set_photos_keyed(
                    &offer,
                    std::slice::from_ref(logo),
                    &format!("k{round}"),
                    now,
                    ttl,
                )
                .await?;
            if let Err(e) = ports.offers.delete_offer(&offer, now, ttl).await {
                left.fetch_add(1, Ordering::Relaxed);
                return Err(e.into());
            }
            Ok(2)
        }
    })
    .await;
    let count = ports
        .images
        .get(&logo)
        .await?
        .map_or(-1, |r| i64::from(r.link_count));
    let mut f = Figures {
        updates,
        errors,
        seconds,
        // Every writer's link was undone by its deletion, but those whose deletion failed.
        lost: LOGO_LINKS + i64::try_from(left.into_inner()).unwrap_or(i64::MAX) - count,
        note: format!("link count {count} (was {LOGO_LINKS})"),
        ..Figures::default()
    };
    // Its item's requests; a hot image's link shards' are its own keys beside it.
    requests(tally, &format!("image#{logo}"), &mut f);
    let mut shards = Figures::default();
    requests(tally, &format!("linkdelta#{logo}"), &mut shards);
    f.note = format!(
        "{}, {} write requests and {} reads on its link shards",
        f.note, shards.writes, shards.reads
    );
    Ok(f)
}

fn sample_ready() -> imgest_core::ports::ReadyImage {
    use imgest_core::domain::{SourceFormat, StoredVariant, VariantName, VariantSetVersion};
    imgest_core::ports::ReadyImage {
        format: SourceFormat::Jpeg,
        width: 1600,
        height: 1200,
        original_bytes: 100_000,
        sha256: None,
        original_metadata: None,
        thumbhash: None,
        signature: None,
        variants: VariantName::parse("thumb")
            .map(|name| {
                vec![StoredVariant {
                    name,
                    width: 200,
                    height: 200,
                    bytes: 4_000,
                    format: imgest_core::domain::OutputFormat::Jpeg,
                }]
            })
            .unwrap_or_default(),
        variant_set: VariantSetVersion::of(&[b"thumb=cover:200x200"]),
    }
}

async fn url(setup: &Setup, o: &Options, tally: &Tally, run: &str) -> Result<Figures> {
    let client = setup.client()?;
    let tenant = Tenant::Client(client.clone());
    let banner = setup.host.url(&format!("/banner{run}.jpg"));
    let stage = tally.current_stage_name();
    let hash = NormalizedUrl::parse(&banner, &setup.crawler.settings().normalization)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .hash();
    // The download runs before the joins are measured (its first crawl started it): the
    // target is the joins of a running download, not the race to start one.
    tally.enter(&format!("{stage}: start"));
    let first = CrawlRequest {
        client_id: client.clone(),
        offer_id: OfferId::parse(&format!("u{run}-first"))?,
        urls: vec![banner.clone()],
    };
    setup.crawler.intake(&tenant, first).await?;
    tally.enter(&stage);
    let joined = AtomicU64::new(1);
    let refs = (&client, &tenant, &banner, &joined);
    let (updates, errors, seconds) = drive(o.writers, o.duration, move |w, round| {
        let (client, tenant, banner, joined) = refs;
        async move {
            let request = CrawlRequest {
                client_id: client.clone(),
                offer_id: OfferId::parse(&format!("u{run}{w}-{round}"))?,
                urls: vec![banner.clone()],
            };
            let state = setup.crawler.intake(tenant, request).await?;
            joined.fetch_add(1, Ordering::Relaxed);
            Ok(u64::from(state == CrawlState::Pending))
        }
    })
    .await;
    let mut f = Figures {
        updates,
        errors,
        seconds,
        ..Figures::default()
    };
    requests(tally, hash.as_str(), &mut f);
    // Now the download answers: every crawl must settle, each told once.
    tally.enter(&format!("{stage}: settling"));
    let started = Instant::now();
    let told = settle_all(setup, joined.load(Ordering::Relaxed)).await?;
    // Every join, and the crawl that started the download.
    let expected = updates + 1;
    f.lost = i64::try_from(expected).unwrap_or(i64::MAX) - i64::try_from(told).unwrap_or(0);
    f.note = format!(
        "{told} of {expected} crawls told in {:.1} s after the download (host requests: {})",
        started.elapsed().as_secs_f64(),
        setup.host.requests()
    );
    Ok(f)
}

/// Runs the queued work the way Lambda's triggers would (the fetch task, then any settle
/// pages), and counts the distinct crawls whose result arrived.
async fn settle_all(setup: &Setup, crawls: u64) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut told = HashSet::new();
    let mut twice = 0_u64;
    while (told.len() as u64) < crawls && Instant::now() < deadline {
        let mut idle = true;
        for queue in ["fetch-0", "fetch-1", "fetch-2", "settle"] {
            for m in receive(setup, queue).await? {
                idle = false;
                let body = m.body.clone().unwrap_or_default();
                if queue == "settle" {
                    let event = sqs_event(&m);
                    let response = imgest_lambda_crawl::settle::handle(&setup.crawler, event).await;
                    if !response.batch_item_failures.is_empty() {
                        continue;
                    }
                } else {
                    let task: FetchTask = serde_json::from_str(&body)?;
                    if setup.crawler.run_fetch(task).await.is_err() {
                        continue;
                    }
                }
                delete(setup, queue, &m).await?;
            }
        }
        for m in receive(setup, "results").await? {
            idle = false;
            let result: serde_json::Value =
                serde_json::from_str(m.body.as_deref().unwrap_or("{}"))?;
            let offer = result["offer_id"].as_str().unwrap_or_default().to_owned();
            if !told.insert(offer) {
                twice += 1;
            }
            delete(setup, "results", &m).await?;
        }
        if idle {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if twice > 0 {
        eprintln!("{twice} crawls were told twice");
    }
    Ok(told.len() as u64)
}

fn sqs_event(m: &aws_sdk_sqs::types::Message) -> aws_lambda_events::event::sqs::SqsEvent {
    let mut message = aws_lambda_events::event::sqs::SqsMessage::default();
    message.message_id = m.message_id.clone();
    message.body = m.body.clone();
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    event.records.push(message);
    event
}

async fn receive(setup: &Setup, queue: &str) -> Result<Vec<aws_sdk_sqs::types::Message>> {
    Ok(setup
        .direct_sqs
        .receive_message()
        .queue_url(&setup.queues[queue])
        .max_number_of_messages(10)
        .send()
        .await?
        .messages
        .unwrap_or_default())
}

async fn delete(setup: &Setup, queue: &str, m: &aws_sdk_sqs::types::Message) -> Result<()> {
    setup
        .direct_sqs
        .delete_message()
        .queue_url(&setup.queues[queue])
        .set_receipt_handle(m.receipt_handle.clone())
        .send()
        .await?;
    Ok(())
}

async fn emulator(setup: &Setup, o: &Options, tally: &Tally) -> Result<Figures> {
    // Distinct items, plain puts: nothing contends but the emulator itself.
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let proxied = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .endpoint_url(&setup.proxy_url)
            .build(),
    );
    let proxied = &proxied;
    let (updates, errors, seconds) = drive(o.writers, o.duration, move |w, round| async move {
        proxied
            .put_item()
            .table_name(&setup.table)
            .item("pk", AttributeValue::S(format!("free#{w}-{round}")))
            .item("sk", AttributeValue::S("free".into()))
            .send()
            .await?;
        Ok(1)
    })
    .await;
    let mut f = Figures {
        updates,
        errors,
        seconds,
        note: "distinct items: the emulator's own ceiling".into(),
        ..Figures::default()
    };
    requests(tally, "free#", &mut f);
    Ok(f)
}
