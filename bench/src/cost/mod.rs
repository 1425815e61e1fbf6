//! `imgest-bench cost`: the AWS bill per million photos, from measurements. The real
//! functions' handlers run against AWS APIs served by an emulator (moto; `bench/cost.sh`
//! starts it), with a counting proxy in between, on crawls of real photos from partner hosts on
//! 127.0.0.1. Queues are delivered the way Lambda's SQS trigger does (batches received,
//! handled, deleted). Each stage's requests are billed as AWS bills them ([`proxy`],
//! [`capacity`]); each invocation's CPU and wall time price its Lambda duration ([`bill`]).
//!
//! Scenarios, in order, on the same data:
//! 1. new photos: offers of new URLs through intake, fetch, process, the settled crawls back
//!    through the intake function (its settle queue), the results consumer,
//! 2. URL-dedup hits: the same offers re-sent with other known URLs (changed offers: no
//!    download, no decode, no S3 PUT),
//! 3. unchanged offers: the same crawl requests again, then once more past the URL window
//!    (answered the same way, and revalidated behind: conditional requests, 304s),
//! 4. uploads through the API function: new photos, then the same bytes again (dedup hits);
//!    left unlinked, they expire, and a GC job collects them (the clock moved past their
//!    expiry),
//! 5. joins: offers listing one URL whose download is running (a popular URL), then its
//!    download settling them,
//! 6. end of life: every offer deleted, the image records expired by DynamoDB's TTL (free),
//!    and the ttl-cleanup function collecting their files from the stream.
//!
//! The revalidation and stages 4 and 5 feed the capacity model (`--profile-out`), not the bill's scenarios.

mod bill;
mod capacity;
pub mod profile;
pub mod proxy;
mod quota;
pub mod refusals;
mod report;
pub mod validate;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, QueueAttributeName, SendMessageBatchRequestEntry,
};
use imgest_aws::dynamodb;
use imgest_core::domain::{ClientId, OfferId, OfferKey};
use imgest_core::ports::{ManualClock, SystemClock};
use imgest_crawl::messages::CrawlRequest;
use imgest_crawl::{Crawler, Processing};
use imgest_hosts::{Answer, PartnerHost};
use imgest_lambda::{self as handlers, BatchResponse};
use imgest_local::app;
use imgest_settings::{Backend, Settings};
use serde_json::{Value, json};

use crate::capacity::FULL_VCPU_MB;
use crate::photos::{PhotoMix, jpeg_comment};
use proxy::{Run, Tally};
pub use report::{LAST_LINK, STILL_LINKED, Scenario};

/// What the benchmark is asked to do.
pub struct Options {
    pub offers: usize,
    pub photos_per_offer: usize,
    /// How long a partner host takes to answer (a download's wall time, which fetch pays).
    pub host_latency: Duration,
    /// Where to write the measured profile for `imgest-bench capacity`, if anywhere.
    pub profile_out: Option<std::path::PathBuf>,
    /// Crawl and upload [`PhotoMix`]'s photos (0.3 to 24 MP, JPEG, PNG and WebP) rather than
    /// copies of the sample photos (1 to 1.6 MP JPEGs).
    pub realistic_photos: bool,
}

/// Where the photos come from: the sample photos copied, or the realistic mix.
enum Photos {
    Samples,
    Mix(PhotoMix),
}

impl Photos {
    fn of(options: &Options) -> Result<Self> {
        Ok(if options.realistic_photos {
            Self::Mix(PhotoMix::new(&SAMPLES)?)
        } else {
            Self::Samples
        })
    }

    /// The `n`th photo, distinct in its bytes (named by `tag`).
    fn photo(&self, n: usize, tag: &str) -> Result<Vec<u8>> {
        match self {
            Self::Samples => Ok(distinct(SAMPLES[n % SAMPLES.len()], tag)),
            Self::Mix(mix) => Ok(mix.photo(n, tag)?.1),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Samples => "the sample photos (1 to 1.6 MP JPEGs)".to_owned(),
            Self::Mix(mix) => format!("the realistic mix: {}", mix.describe()),
        }
    }
}

/// The photos the crawls carry: the sample photos, each copy made distinct by a comment
/// segment (new content, the same decode work).
const SAMPLES: [&[u8]; 5] = [
    include_bytes!("../../../samples/dune.jpg"),
    include_bytes!("../../../samples/storm.jpg"),
    include_bytes!("../../../samples/ladybird.jpg"),
    include_bytes!("../../../samples/garden-portrait.jpg"),
    include_bytes!("../../../samples/yellow-flower-portrait.jpg"),
];

/// Lambda's SQS trigger batch sizes, as in `template.yaml`.
const INTAKE_BATCH: i32 = 10;
const FETCH_BATCH: i32 = 100;
const PROCESS_BATCH: i32 = 10;
/// The ttl-cleanup function's DynamoDB stream batch size.
const GC_BATCH: usize = 100;

const QUEUES: [&str; 8] = [
    "intake", "fetch-0", "fetch-1", "fetch-2", "results", "process", "settle", "webhooks",
];
/// The webhooks function's trigger batch size (`template.yaml`).
const WEBHOOK_BATCH: i32 = 10;

/// The marketplace's sender of crawl requests (SQS's `SenderId`), which `IMGEST_INTAKE_SENDERS`
/// lets act for any client.
const SENDER: &str = "AIDABENCHSENDER";

/// The AWS emulator a benchmark drives the handlers against (`AWS_ENDPOINT_URL`), with logs at
/// `level` and TLS's provider installed; the error names the script that starts one.
pub fn emulator(level: &str, what: &str, script: &str) -> Result<String> {
    crate::init_logs(level);
    imgest_download::install_default_provider();
    std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .with_context(|| {
            format!(
                "imgest-bench {what} runs against an AWS emulator: run {script}, which starts moto and sets AWS_ENDPOINT_URL"
            )
        })
}

pub async fn run(options: Options) -> Result<()> {
    let upstream = emulator("warn", "cost", "bench/cost.sh")?;
    if options.offers == 0 || options.photos_per_offer == 0 {
        bail!("--offers and --photos must be at least 1");
    }
    let tally = Arc::new(Tally::default());
    let proxy_url = proxy::start(&upstream, Arc::clone(&tally)).await?;

    let source = Photos::of(&options)?;
    println!("Photos: {}.", source.describe());
    let mut answers = Vec::new();
    let mut offers = Vec::new();
    for o in 0..options.offers {
        let mut urls = Vec::new();
        for p in 0..options.photos_per_offer {
            let path = format!("/o{o}/p{p}");
            let photo = source.photo(o * options.photos_per_offer + p, &path)?;
            answers.push((path.clone(), Answer::photo(photo)));
            urls.push(path);
        }
        offers.push(urls);
    }
    // 4's uploads: as many as offers, new bytes (numbered after the crawls' photos, so that
    // none has a crawled photo's bytes).
    let crawled = options.offers * options.photos_per_offer;
    let uploads: Vec<Vec<u8>> = (0..options.offers)
        .map(|i| source.photo(crawled + i, &format!("/upload/{i}")))
        .collect::<Result<_>>()?;
    answers.push((
        POPULAR.to_owned(),
        Answer::photo(distinct(SAMPLES[0], POPULAR)),
    ));
    let host = PartnerHost::builder()
        .serve_all(answers)
        .latency(options.host_latency)
        .start()
        .await?;
    let offers: Vec<Vec<String>> = offers
        .into_iter()
        .map(|paths| paths.iter().map(|p| host.url(p)).collect())
        .collect();
    let popular = host.url(POPULAR);

    let driver_tally = Arc::clone(&tally);
    let photos = options.offers * options.photos_per_offer;
    let host_latency = options.host_latency;
    on_function_thread(move || async move {
        drive(
            &proxy_url,
            &driver_tally,
            offers,
            uploads,
            &popular,
            host_latency,
        )
        .await
    })
    .await?;
    // Every photo once, once more when revalidated (a 304), and the popular URL once; more
    // when a download was tried again (a large photo's body cut at its tier's deadline on a
    // loaded machine), which the stages' counts include.
    let expected = 2 * photos as u64 + 1;
    if host.requests() < expected {
        bail!(
            "the partner host served {} requests for {photos} photos (each revalidated once) and one popular URL",
            host.requests()
        );
    }
    if host.requests() > expected {
        println!(
            "The partner host served {} requests more than one per photo, its revalidation and the popular URL: downloads tried again.",
            host.requests() - expected
        );
    }
    report::print(&tally, photos, &options);
    if let Some(path) = &options.profile_out {
        let source = format!(
            "imgest-bench cost --offers {} --photos {} --host-latency {}ms{} ({} build) at {}",
            options.offers,
            options.photos_per_offer,
            options.host_latency.as_millis(),
            if options.realistic_photos {
                " --realistic-photos"
            } else {
                ""
            },
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            crate::revision()
        );
        let profile = profile::profile(
            &tally,
            source,
            photos,
            options.offers,
            options.host_latency.as_secs_f64() * 1000.0,
        );
        let json = serde_json::to_string_pretty(&profile)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("writing the profile to {}", path.display()))?;
        println!("\nThe measured profile is in {}.", path.display());
    }
    Ok(())
}

/// Runs the functions' side on a thread of its own, with a blocking pool of its own (the
/// pipeline's decodes run there), so that their CPU time can be read per invocation (and held
/// to a quota); the proxy and the partner hosts stay on the caller's runtime.
async fn on_function_thread<F, Fut>(drive: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<()>>,
{
    tokio::task::spawn_blocking(move || -> Result<()> {
        DRIVER.get_or_init(thread_id);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(FUNCTION_THREADS)
            // Its blocking threads live through the run: one that ended between an
            // invocation's start and finish would take its CPU time with it.
            .thread_keep_alive(Duration::from_secs(24 * 3600))
            .build()?;
        runtime.block_on(drive())
    })
    .await?
}

/// The crawl functions' crawlers on one service, as deployed: the intake function hands
/// photos on; the fetch function processes the photos its memory holds (all of these); both
/// fetch and process hand the crawls that settle there back to the intake function.
struct Functions {
    crawler: Crawler,
    fetcher: Crawler,
    processor: Crawler,
}

impl Functions {
    fn on(service: &Arc<imgest_flows::Service>, settings: &Settings) -> Self {
        let crawler =
            |processing| Crawler::new(Arc::clone(service), settings.crawl.clone(), processing);
        Self {
            crawler: crawler(Processing::Handoff),
            fetcher: crawler(Processing::InlineWhenItFits).finishing_elsewhere(),
            processor: crawler(Processing::Handoff).finishing_elsewhere(),
        }
    }
}

/// Every fetch queue, delivered to `fetcher`'s fetch function until it is empty, measured as
/// `stage`.
async fn fetch_all(
    tally: &Tally,
    fetching: &Lambda<'_>,
    names: &Resources,
    fetcher: &Crawler,
    stage: &str,
) -> Result<()> {
    tally.enter(stage);
    measured(tally, async {
        for tier in ["fetch-0", "fetch-1", "fetch-2"] {
            fetching
                .deliver(&names.queues[tier], FETCH_BATCH, |e| {
                    imgest_lambda_crawl::fetch::handle(fetcher, e)
                })
                .await?;
        }
        Ok(())
    })
    .await
}

/// The popular URL's path: every offer of the join stage lists it.
const POPULAR: &str = "/popular/banner.jpg";

/// `bytes` (a JPEG) with a comment segment naming `tag` after its start marker.
fn distinct(bytes: &[u8], tag: &str) -> Vec<u8> {
    jpeg_comment(bytes, &format!("cost {tag}"))
}

/// The AWS side: resources on the emulator, the service and crawler through the proxy, and
/// the scenarios.
/// What a run deploys on the emulator: the bucket, table and queues, the functions' SQS client
/// (through the proxy) and the settings the functions read.
struct Deployed {
    sqs: aws_sdk_sqs::Client,
    direct: Direct,
    names: Resources,
    vars: HashMap<String, String>,
    proxy_url: String,
}

impl Deployed {
    async fn create(proxy_url: &str) -> Result<Self> {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let direct = Direct::new(&sdk);
        let names = Resources::create(&direct).await?;
        let sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&sdk)
                .endpoint_url(proxy_url)
                .build(),
        );
        let queues = [
            "fetch-0", "fetch-1", "fetch-2", "results", "process", "settle", "webhooks",
        ]
        .iter()
        .map(|q| format!("{q}={}", names.queues[*q]))
        .collect::<Vec<_>>()
        .join(",");
        let senders = format!("{SENDER}=*");
        let vars = [
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", names.bucket.as_str()),
            ("IMGEST_TABLE", names.table.as_str()),
            ("IMGEST_S3_FORCE_PATH_STYLE", "true"),
            ("IMGEST_QUEUES", queues.as_str()),
            // The partner host is on 127.0.0.1.
            ("IMGEST_ALLOW_PRIVATE_NETWORKS", "true"),
            ("IMGEST_FETCH_PORTS", "any"),
            // One client sends every offer here; pacing it would only stretch the run.
            ("IMGEST_CLIENT_RPM", "1000000"),
            // As deployed: offers in their client's namespace, crawl requests from a known sender.
            ("IMGEST_AUTH", "gateway"),
            ("IMGEST_JWT_AUDIENCE", "imgest"),
            ("IMGEST_INTAKE_SENDERS", &senders),
            // Every message the bench hands a function carries its one sender: the internal
            // queues take it as the stack's.
            ("IMGEST_STACK_ROLES", SENDER),
            // Revalidations are queued at once rather than minutes later (one fetch task each
            // either way: within SQS's delay, no hop).
            ("IMGEST_REVALIDATION_DELAY", "1ms"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Ok(Self {
            sqs,
            direct,
            names,
            vars,
            proxy_url: proxy_url.to_owned(),
        })
    }

    /// The functions' settings, with `extra` variables over the run's own.
    fn settings(&self, extra: &[(&str, String)]) -> Result<Settings> {
        let mut vars = self.vars.clone();
        for (k, v) in extra {
            vars.insert((*k).to_owned(), v.clone());
        }
        let mut settings = Settings::from_map(&vars)?;
        if let Backend::Aws(aws) = &mut settings.backend {
            aws.endpoint_url = Some(self.proxy_url.clone());
        }
        Ok(settings)
    }

    /// A function's service on `settings`, its clock `clock`.
    async fn service(
        &self,
        settings: &Settings,
        clock: Arc<dyn imgest_core::ports::Clock>,
    ) -> Result<imgest_flows::Service> {
        Ok(app::service(settings, "http://127.0.0.1:9", clock).await?)
    }

    /// The Lambda trigger of a function of `memory_mb`, held to its share of a vCPU when
    /// `quota` is given.
    fn lambda<'a>(
        &'a self,
        tally: &'a Tally,
        quota: Option<&'a quota::CpuQuota>,
        memory_mb: f64,
    ) -> Lambda<'a> {
        Lambda {
            sqs: &self.sqs,
            direct: &self.direct,
            tally,
            external_wait: Duration::ZERO,
            quota: quota.map(|q| (q, memory_mb)),
        }
    }
}

async fn drive(
    proxy_url: &str,
    tally: &Tally,
    offers: Vec<Vec<String>>,
    uploads: Vec<Vec<u8>>,
    popular: &str,
    host_latency: Duration,
) -> Result<()> {
    let deployed = Deployed::create(proxy_url).await?;
    let (direct, names) = (&deployed.direct, &deployed.names);
    let settings = deployed.settings(&[])?;
    let service = Arc::new(deployed.service(&settings, Arc::new(SystemClock)).await?);
    let Functions {
        crawler,
        fetcher,
        processor,
    } = Functions::on(&service, &settings);
    let client = ClientId::parse("bench").context("client id")?;
    // Every result is delivered to the client's webhook endpoint, a host on 127.0.0.1
    // answering 204 after the partner hosts' latency.
    let hooks = imgest_hosts::PartnerHost::builder()
        .serve("/hooks", imgest_hosts::Answer::status(204))
        .start()
        .await?;
    crawler
        .register_webhook(&client, &hooks.url("/hooks"), None)
        .await
        .context("registering the client's webhook endpoint")?;
    let lambda = deployed.lambda(tally, None, 0.0);
    let stages = Stages {
        lambda: &lambda,
        names,
        client: &client,
        crawler: &crawler,
    };
    let listing = |prefix: &str| -> Result<Vec<(OfferId, &Vec<String>)>> {
        offers
            .iter()
            .enumerate()
            .map(|(o, urls)| Ok((OfferId::parse(&format!("{prefix}-{o}"))?, urls)))
            .collect()
    };

    // 1. New photos: intake, fetch, process, settle, results.
    stages.intake(Scenario::New, &listing("offer")?).await?;
    let fetching = Lambda {
        external_wait: host_latency,
        ..lambda
    };
    fetch_all(
        tally,
        &fetching,
        names,
        &fetcher,
        &Scenario::New.stage("fetch"),
    )
    .await?;
    tally.enter(&Scenario::New.stage("process"));
    // What the fetch function's memory could not hold (none of the samples) comes here.
    measured(
        tally,
        lambda.deliver(&names.queues["process"], PROCESS_BATCH, |e| {
            imgest_lambda_crawl::process::handle(&processor, e)
        }),
    )
    .await?;
    stages.settle(&Scenario::New.stage("settle")).await?;
    stages.results(Scenario::New, offers.len()).await?;
    stages
        .webhooks(&Scenario::New.stage("webhooks"), offers.len(), host_latency)
        .await?;

    // 2. URL-dedup hits: other offers (the same sellers' second listings) with the same,
    // already downloaded photos.
    stages
        .intake(Scenario::KnownUrls, &listing("relisted")?)
        .await?;
    stages.results(Scenario::KnownUrls, offers.len()).await?;
    stages
        .webhooks(
            &Scenario::KnownUrls.stage("webhooks"),
            offers.len(),
            host_latency,
        )
        .await?;

    // 3. The first offers again, unchanged.
    stages
        .intake(Scenario::Unchanged, &listing("offer")?)
        .await?;
    stages.results(Scenario::Unchanged, offers.len()).await?;
    // The same results again (the same crawl ids): their webhooks went when they first settled.
    stages
        .webhooks(&Scenario::Unchanged.stage("webhooks"), 0, host_latency)
        .await?;

    // 3b. The same again past the URL window (a clock moved past it): answered from the crawl
    // records all the same, and each offer crawled again behind, with conditional requests.
    let later = ManualClock::starting_now();
    later.advance(settings.crawl.url_ttl + Duration::from_secs(3600));
    let later = Arc::new(deployed.service(&settings, Arc::new(later)).await?);
    let Functions {
        crawler: re_crawler,
        fetcher: re_fetcher,
        ..
    } = Functions::on(&later, &settings);
    let revalidating = Stages {
        crawler: &re_crawler,
        ..stages
    };
    revalidating
        .intake_stage("revalidate: intake", &listing("offer")?)
        .await?;
    fetch_all(tally, &fetching, names, &re_fetcher, "revalidate: fetch").await?;
    revalidating.settle("revalidate: settle").await?;
    tally.enter("revalidate: results");
    lambda
        .consume_results(&names.queues["results"], offers.len())
        .await?;
    // Every photo as it was: nothing new to deliver (the intake's answers were results sent
    // again).
    revalidating
        .webhooks("revalidate: webhooks", 0, host_latency)
        .await?;
    let photos: usize = offers.iter().map(Vec::len).sum();
    let counts = re_crawler.counts();
    let fetched = re_fetcher.counts();
    if counts.offers_revalidated != offers.len() as u64 || fetched.not_modified != photos as u64 {
        bail!(
            "revalidation: {} of {} offers revalidated, {} of {photos} photos not modified",
            counts.offers_revalidated,
            offers.len(),
            fetched.not_modified
        );
    }

    // 4. Uploads through the API function, one per invocation: new bytes, then the same again.
    let uploading = imgest_core::ports::Clock::now(&SystemClock);
    for stage in ["upload: new", "upload: dedup"] {
        tally.enter(stage);
        measured(tally, async {
            for bytes in &uploads {
                let body = bytes::Bytes::from(bytes.clone());
                lambda
                    .invoke(1, async { service.upload_bytes(body).await.map(drop) })
                    .await?;
            }
            Ok(())
        })
        .await?;
    }
    let uploaded = imgest_core::ports::Clock::now(&SystemClock);
    // Left unlinked, they expire: GC jobs collect them, each run's clock a step further past
    // the uploads' expiries, so that each run collects the uploads of one step.
    tally.enter("gc: collect");
    let collected = measured(tally, async {
        collect_in_runs(&lambda, &deployed, &settings, uploading, uploaded).await
    })
    .await?;
    if collected != uploads.len() as u64 {
        bail!(
            "GC collected {collected} of {} expired uploads",
            uploads.len()
        );
    }

    // 5. Joins: offers listing one URL whose download is running, then that download.
    let joiners: Vec<(OfferId, Vec<String>)> = (0..offers.len())
        .map(|o| {
            Ok((
                OfferId::parse(&format!("joiner-{o}"))?,
                vec![popular.to_owned()],
            ))
        })
        .collect::<Result<_>>()?;
    let joiners: Vec<(OfferId, &Vec<String>)> = joiners
        .iter()
        .map(|(id, urls)| (id.clone(), urls))
        .collect();
    stages.intake_stage("join: intake", &joiners).await?;
    fetch_all(tally, &fetching, names, &fetcher, "join: fetch").await?;
    stages.settle("join: settle").await?;
    tally.enter("join: results");
    lambda
        .consume_results(&names.queues["results"], joiners.len())
        .await?;
    stages
        .webhooks("join: webhooks", joiners.len(), host_latency)
        .await?;

    // The sweep over every stored file, as the scheduled maintenance function runs it (a
    // dry run: in a steady state almost no file is garbage; the listing, the records' lookups
    // and the checkpoint per page are the same).
    tally.enter(SWEEP_STAGE);
    measured(tally, sweep(&lambda, &service)).await?;

    // 4. End of life: the offers go (one API call each), TTL expires the orphans (free), the
    // ttl-cleanup function collects their files from the stream.
    let ids = |prefix| -> Result<Vec<OfferId>> {
        Ok(listing(prefix)?.into_iter().map(|(id, _)| id).collect())
    };
    // The relisted offers go first: their photos stay linked to the first offers.
    let relisted = ids("relisted")?;
    stages
        .delete(&Scenario::Deleted.stage(STILL_LINKED), &relisted)
        .await?;
    stages
        .delete(&Scenario::Deleted.stage(LAST_LINK), &ids("offer")?)
        .await?;
    let removed = direct.expire_images(&names.table).await?;
    if removed.is_empty() {
        bail!("no image records to expire after the offers were deleted");
    }
    tally.enter(&Scenario::New.stage("ttl-cleanup"));
    measured(tally, async {
        for (n, chunk) in removed.chunks(GC_BATCH).enumerate() {
            let records: Vec<Value> = chunk
                .iter()
                .enumerate()
                .map(|(i, old)| {
                    json!({"eventName": "REMOVE", "eventSource": "aws:dynamodb",
                        "dynamodb": {"SequenceNumber": format!("{n}-{i}"), "OldImage": old}})
                })
                .collect();
            let event = json!({ "Records": records });
            let response = lambda
                .invoke_batch(
                    chunk.len(),
                    handlers::ttl_cleanup::handle(&service, dynamodb::removed_images(&event)),
                )
                .await?;
            if !response.batch_item_failures.is_empty() {
                bail!(
                    "the ttl-cleanup function failed on {:?}",
                    response.batch_item_failures
                );
            }
        }
        Ok(())
    })
    .await?;
    Ok(())
}

/// Runs of a stage the profile holds at least (GC's, the sweep's).
const RUNS: u32 = 20;

/// GC in [`RUNS`] runs, one invocation each, its clock a step further each run through the
/// expiries of uploads made from `from` to `to`, the last a day past them all; returns the
/// records collected.
async fn collect_in_runs(
    lambda: &Lambda<'_>,
    deployed: &Deployed,
    settings: &Settings,
    from: imgest_core::domain::Timestamp,
    to: imgest_core::domain::Timestamp,
) -> Result<u64> {
    let first = from.plus(settings.orphan_ttl);
    let clock = Arc::new(ManualClock::new(first));
    let collector = deployed.service(settings, Arc::clone(&clock) as _).await?;
    let span_ms = (to.as_millis() - from.as_millis()).max(1);
    let mut collected = 0;
    for run in 1..=RUNS {
        let at = if run == RUNS {
            to.plus(settings.orphan_ttl + Duration::from_secs(86_400))
        } else {
            imgest_core::domain::Timestamp::from_millis(
                first.as_millis() + span_ms * i64::from(run) / i64::from(RUNS),
            )
        };
        clock.advance(Duration::from_millis(
            u64::try_from(
                at.as_millis() - imgest_core::ports::Clock::now(clock.as_ref()).as_millis(),
            )
            .unwrap_or(0),
        ));
        let started = lambda.start()?;
        let report = collector.gc().await;
        let deleted = report.as_ref().map_or(0, |r| r.images_deleted);
        lambda.finish(usize::try_from(deleted).unwrap_or(usize::MAX), started);
        collected += report?.images_deleted;
    }
    Ok(collected)
}

/// The sweep's stage in the profile: its items are files judged.
pub const SWEEP_STAGE: &str = "sweep: judge";

/// The scheduled sweep over every shard (a dry run), in [`RUNS`] runs of a share of the
/// shards each, one invocation of as many items as files it judged.
async fn sweep(lambda: &Lambda<'_>, service: &imgest_flows::Service) -> Result<()> {
    let shards = imgest_core::domain::SHARD_COUNT.div_ceil(RUNS as usize);
    let mut scanned = 0;
    for _ in 0..RUNS {
        let started = lambda.start()?;
        let report = service
            .sweep_batch(imgest_core::domain::JobPart::WHOLE, shards, true, None)
            .await;
        let files = report.as_ref().map_or(0, |r| r.files_scanned);
        lambda.finish(usize::try_from(files).unwrap_or(usize::MAX), started);
        scanned += report?.files_scanned;
    }
    if scanned == 0 {
        bail!("the sweep listed no files");
    }
    Ok(())
}

/// The stages every scenario has.
struct Stages<'a> {
    lambda: &'a Lambda<'a>,
    names: &'a Resources,
    client: &'a ClientId,
    crawler: &'a Crawler,
}

impl Stages<'_> {
    /// The marketplace sends one crawl request per offer; the intake function takes them.
    async fn intake(&self, scenario: Scenario, offers: &[(OfferId, &Vec<String>)]) -> Result<()> {
        self.intake_stage(&scenario.stage("intake"), offers).await
    }

    async fn intake_stage(&self, stage: &str, offers: &[(OfferId, &Vec<String>)]) -> Result<()> {
        let tally = self.lambda.tally;
        tally.enter(stage);
        let queue = &self.names.queues["intake"];
        for batch in offers.chunks(10) {
            send_requests(self.lambda.sqs, queue, self.client, batch).await?;
        }
        measured(
            tally,
            self.lambda.deliver(queue, INTAKE_BATCH, |e| {
                imgest_lambda_crawl::intake::handle(self.crawler, e)
            }),
        )
        .await
    }

    /// The crawls the fetch and process functions settled, finished by the intake function.
    async fn settle(&self, stage: &str) -> Result<()> {
        let tally = self.lambda.tally;
        tally.enter(stage);
        measured(
            tally,
            self.lambda
                .deliver(&self.names.queues["settle"], INTAKE_BATCH, |e| {
                    imgest_lambda_crawl::settle::handle(self.crawler, e)
                }),
        )
        .await
    }

    /// The webhook deliveries of the results just sent, through the webhooks function (its
    /// waits on the endpoint as long as the partner hosts'): every one delivered.
    async fn webhooks(&self, stage: &str, expected: usize, answer: Duration) -> Result<()> {
        let tally = self.lambda.tally;
        tally.enter(stage);
        let before = self.crawler.counts().webhooks_delivered;
        let delivering = Lambda {
            external_wait: answer,
            ..*self.lambda
        };
        measured(
            tally,
            delivering.deliver(&self.names.queues["webhooks"], WEBHOOK_BATCH, |e| {
                imgest_lambda_crawl::webhooks::handle(self.crawler, e)
            }),
        )
        .await?;
        let delivered = self.crawler.counts().webhooks_delivered - before;
        if delivered != expected as u64 {
            bail!("{stage}: {delivered} webhooks delivered for {expected} results");
        }
        Ok(())
    }

    async fn results(&self, scenario: Scenario, expected: usize) -> Result<()> {
        self.lambda.tally.enter(&scenario.stage("results"));
        self.lambda
            .consume_results(&self.names.queues["results"], expected)
            .await
    }

    /// Each offer deleted through the API (one invocation each).
    async fn delete(&self, stage: &str, offers: &[OfferId]) -> Result<()> {
        let tally = self.lambda.tally;
        tally.enter(stage);
        let service = self.crawler.service();
        measured(tally, async {
            for offer in offers {
                let key = OfferKey::new(self.crawler.trusted_tenant(self.client), offer.clone());
                self.lambda
                    .invoke(1, async { service.delete_offer(&key).await.map(|_| ()) })
                    .await?;
            }
            Ok(())
        })
        .await
    }
}

/// The marketplace's crawl requests, one message per offer, sent ten at a time (what the
/// deployment guide recommends: `SendMessageBatch`).
async fn send_requests(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    client: &ClientId,
    offers: &[(OfferId, &Vec<String>)],
) -> Result<()> {
    let mut entries = Vec::new();
    for (i, (offer, urls)) in offers.iter().enumerate() {
        let request = CrawlRequest {
            client_id: client.clone(),
            offer_id: offer.clone(),
            urls: urls.to_vec(),
        };
        entries.push(
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(serde_json::to_string(&request)?)
                .build()?,
        );
    }
    let sent = sqs
        .send_message_batch()
        .queue_url(queue)
        .set_entries(Some(entries))
        .send()
        .await?;
    if !sent.failed.is_empty() {
        bail!("the intake queue refused {:?}", sent.failed);
    }
    Ok(())
}

/// Runs a stage and records the peak memory the process reached meanwhile.
async fn measured<T>(tally: &Tally, stage: impl Future<Output = Result<T>>) -> Result<T> {
    // Linux: writing 5 resets the peak (VmHWM) to the current RSS.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let out = stage.await?;
    if let Some(kb) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
    {
        tally.peak_rss(kb / 1024.0);
    }
    Ok(out)
}

/// The name of the functions' blocking threads (where the pipeline runs).
const FUNCTION_THREADS: &str = "imgest-functions";

/// The thread that drives the functions (its id under `/proc/self/task`).
static DRIVER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// The calling thread's id (Linux: `/proc/thread-self` links to `<pid>/task/<tid>`).
fn thread_id() -> Option<String> {
    std::fs::read_link("/proc/thread-self")
        .ok()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// CPU time of a thread of this process, ms (Linux).
fn task_cpu_ms(tid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e6)
}

/// The functions' side (Linux): the thread that drives them and their blocking threads, where
/// the pipeline's decodes, resizes and encodes run; ids under `/proc/self/task`. A function's
/// invocation is all of it; the proxy and the partner host are not.
fn function_threads() -> Vec<String> {
    let mut threads: Vec<String> = DRIVER.get().cloned().flatten().into_iter().collect();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let tid = task.file_name().to_string_lossy().into_owned();
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            // `comm` holds at most 15 bytes of the name.
            if FUNCTION_THREADS.starts_with(comm.trim()) && !comm.trim().is_empty() {
                threads.push(tid);
            }
        }
    }
    threads
}

/// CPU time of the functions' side, ms.
fn thread_cpu_ms() -> f64 {
    function_threads().iter().map(|tid| task_cpu_ms(tid)).sum()
}

/// Invokes handlers the way Lambda does, timing each invocation.
struct Lambda<'a> {
    sqs: &'a aws_sdk_sqs::Client,
    direct: &'a Direct,
    tally: &'a Tally,
    /// Time an invocation waits outside AWS (the fetch stage: the partner host's answer).
    external_wait: Duration,
    /// The CPU quota its invocations run under, and the function's memory (its share of a
    /// vCPU), when throttled like Lambda (the validation).
    quota: Option<(&'a quota::CpuQuota, f64)>,
}

/// Where an invocation started: CPU, wall clock, modeled latency and the busy clock so far.
struct Started {
    cpu_ms: f64,
    at: Instant,
    latency_ms: f64,
    busy: (f64, u64, f64),
}

impl Lambda<'_> {
    fn start(&self) -> Result<Started> {
        if let Some((quota, memory_mb)) = self.quota {
            quota.limit(memory_mb / FULL_VCPU_MB, &function_threads())?;
        }
        Ok(Started {
            cpu_ms: thread_cpu_ms(),
            at: Instant::now(),
            latency_ms: self.tally.latency_ms(),
            busy: self.tally.busy(),
        })
    }

    /// Records the invocation: the items ran concurrently, so they share its request latency;
    /// a download's wait is the partner host's.
    fn finish(&self, items: usize, started: Started) {
        let cpu_ms = thread_cpu_ms() - started.cpu_ms;
        let latency = (self.tally.latency_ms() - started.latency_ms) / items.max(1) as f64;
        let (busy_ms, requests, waited_ms) = self.tally.busy();
        self.tally.invocation(
            items,
            Run {
                cpu_ms,
                measured_ms: started.at.elapsed().as_secs_f64() * 1000.0,
                modeled_ms: cpu_ms + latency + self.external_wait.as_secs_f64() * 1000.0,
                busy_ms: busy_ms - started.busy.0,
                requests: requests - started.busy.1,
                waited_ms: waited_ms - started.busy.2,
            },
        );
    }
    async fn invoke<E: std::fmt::Display>(
        &self,
        items: usize,
        run: impl Future<Output = Result<(), E>>,
    ) -> Result<()> {
        let started = self.start()?;
        let result = run.await;
        self.finish(items, started);
        result.map_err(|e| anyhow::anyhow!("{e}"))
    }

    async fn invoke_batch(
        &self,
        items: usize,
        run: impl Future<Output = BatchResponse>,
    ) -> Result<BatchResponse> {
        let started = self.start()?;
        let response = run.await;
        self.finish(items, started);
        Ok(response)
    }

    /// Lambda's SQS trigger until the queue is empty: receive up to `batch` messages, invoke,
    /// delete what succeeded.
    async fn deliver<F, Fut>(&self, queue: &str, batch: i32, handle: F) -> Result<()>
    where
        F: Fn(SqsEvent) -> Fut,
        Fut: Future<Output = BatchResponse>,
    {
        loop {
            let messages = self.gather(queue, batch).await?;
            if messages.is_empty() {
                if self.direct.pending(queue).await? == 0 {
                    return Ok(());
                }
                continue;
            }
            let mut event = SqsEvent::default();
            for m in &messages {
                let mut message = SqsMessage::default();
                message.message_id = m.message_id.clone();
                message.body = m.body.clone();
                // Every message here is the bench's own, sent as the marketplace's sender.
                message
                    .attributes
                    .insert("SenderId".to_owned(), SENDER.to_owned());
                event.records.push(message);
            }
            let response = self.invoke_batch(messages.len(), handle(event)).await?;
            // As Lambda's trigger does: failed items stay on the queue and come back once their
            // visibility timeout ends (here at once, through the emulator: that wait is free).
            let failed: Vec<&str> = response
                .batch_item_failures
                .iter()
                .map(|f| f.item_identifier.as_str())
                .collect();
            let (retry, done): (Vec<_>, Vec<_>) = messages
                .into_iter()
                .partition(|m| failed.contains(&m.message_id.as_deref().unwrap_or_default()));
            self.delete(queue, &done).await?;
            for m in retry {
                self.tally.retried();
                self.direct.make_visible(queue, &m).await?;
            }
        }
    }

    /// The marketplace reading its crawl results: batches of 10, deleted once read.
    async fn consume_results(&self, queue: &str, expected: usize) -> Result<()> {
        let mut seen = 0;
        while seen < expected {
            let messages = self.receive(queue, 10).await?;
            if messages.is_empty() && self.direct.pending(queue).await? == 0 {
                bail!("{seen} crawl results for {expected} offers");
            }
            seen += messages.len();
            self.delete(queue, &messages).await?;
        }
        Ok(())
    }

    /// A batch as Lambda's poller gathers one within its batching window: receives of at most
    /// 10 (SQS's limit) until `batch` messages, or the queue has no more now.
    async fn gather(&self, queue: &str, batch: i32) -> Result<Vec<aws_sdk_sqs::types::Message>> {
        let mut messages = Vec::new();
        loop {
            let want = batch - i32::try_from(messages.len()).unwrap_or(batch);
            if want <= 0 {
                return Ok(messages);
            }
            let got = self.receive(queue, want.min(10)).await?;
            if got.is_empty() {
                return Ok(messages);
            }
            messages.extend(got);
        }
    }

    async fn receive(&self, queue: &str, batch: i32) -> Result<Vec<aws_sdk_sqs::types::Message>> {
        Ok(self
            .sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(batch)
            .wait_time_seconds(1)
            .send()
            .await?
            .messages
            .unwrap_or_default())
    }

    async fn delete(&self, queue: &str, messages: &[aws_sdk_sqs::types::Message]) -> Result<()> {
        for chunk in messages.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .set_receipt_handle(m.receipt_handle.clone())
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            if entries.is_empty() {
                continue;
            }
            self.sqs
                .delete_message_batch()
                .queue_url(queue)
                .set_entries(Some(entries))
                .send()
                .await?;
        }
        Ok(())
    }
}

/// The bucket, table and queues of one run.
struct Resources {
    bucket: String,
    table: String,
    queues: HashMap<&'static str, String>,
}

impl Resources {
    async fn create(direct: &Direct) -> Result<Self> {
        let suffix = format!("{:08x}", fastrand::u32(..));
        let bucket = format!("imgest-cost-{suffix}");
        let table = format!("imgest-cost-{suffix}");
        direct.s3.create_bucket().bucket(&bucket).send().await?;
        imgest_aws::dynamodb::create_table(&direct.dynamodb, &table).await?;
        let mut queues = HashMap::new();
        for name in QUEUES {
            let url = direct
                .sqs
                .create_queue()
                .queue_name(format!("imgest-cost-{name}-{suffix}"))
                .send()
                .await?
                .queue_url
                .context("the emulator returned no queue URL")?;
            queues.insert(name, url);
        }
        Ok(Self {
            bucket,
            table,
            queues,
        })
    }
}

/// Clients straight to the emulator, for what is not billed: setting up, looking at queue
/// depths, and what AWS does for free (TTL deletes).
struct Direct {
    s3: aws_sdk_s3::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
}

impl Direct {
    fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self {
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(sdk)
                    .force_path_style(true)
                    .build(),
            ),
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
        }
    }

    /// Messages visible, delayed or in flight.
    async fn pending(&self, queue: &str) -> Result<u64> {
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(queue)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await?
            .attributes
            .unwrap_or_default();
        Ok([
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        ]
        .iter()
        .filter_map(|a| attrs.get(a)?.parse::<u64>().ok())
        .sum())
    }

    async fn make_visible(&self, queue: &str, message: &aws_sdk_sqs::types::Message) -> Result<()> {
        self.sqs
            .change_message_visibility()
            .queue_url(queue)
            .set_receipt_handle(message.receipt_handle.clone())
            .visibility_timeout(0)
            .send()
            .await?;
        Ok(())
    }

    /// Does what DynamoDB's TTL deleter does to orphaned image records (for free): deletes
    /// them; returns their last images in the stream's JSON, for the ttl-cleanup function.
    async fn expire_images(&self, table: &str) -> Result<Vec<Value>> {
        let mut removed = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            for item in page.items.unwrap_or_default() {
                let is_image = matches!(item.get("pk"), Some(AttributeValue::S(pk)) if pk.starts_with("image#"));
                if !is_image || !item.contains_key("ttl") {
                    continue;
                }
                let key = ["pk", "sk"]
                    .iter()
                    .filter_map(|k| Some((k.to_string(), item.get(*k)?.clone())))
                    .collect();
                self.dynamodb
                    .delete_item()
                    .table_name(table)
                    .set_key(Some(key))
                    .send()
                    .await?;
                removed.push(imgest_aws::dynamodb::stream_json(&item).with_context(
                    || "an image record holds an attribute the stream form has no tag for here",
                )?);
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(removed);
            }
        }
    }
}
