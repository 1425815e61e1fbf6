//! `imgest-bench`: measurements, not tests. Each command runs the production code and prints
//! figures; the scripts beside this crate (`bench/*.sh`) install what they compare against and
//! drive them.

mod backfill;
mod burst;
mod capacity;
mod contention;
mod cost;
mod crawl;
mod data_dir;
mod hostile;
mod intake;
mod joins;
mod photos;
mod pipeline;
mod similar;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "imgest-bench", version, about = "imgest's benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The AWS bill per million photos (new, URL-dedup hits, unchanged offers), from the
    /// functions' measured requests, CPU and wall time against an AWS emulator. Run it through
    /// bench/cost.sh, which starts the emulator.
    Cost {
        /// Offers per scenario.
        #[arg(long, default_value_t = 25)]
        offers: usize,
        /// Photos per offer.
        #[arg(long, default_value_t = 8)]
        photos: usize,
        /// How long the partner host takes to answer each download.
        #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
        host_latency: std::time::Duration,
        /// Write the measured profile (what `imgest-bench capacity --profile` reads) here.
        #[arg(long)]
        profile_out: Option<PathBuf>,
        /// Crawl and upload a realistic mix of photos (0.3 to 24 MP, 0.1 to 10 MB; JPEG, PNG
        /// and WebP) instead of copies of the sample photos (what the capacity profile is
        /// measured on; the bill per million is quoted on the samples).
        #[arg(long)]
        realistic_photos: bool,
    },
    /// The capacity model's per-instance rates checked against the real handlers, each
    /// function's invocations held to its share of a vCPU by a CPU quota (cgroup v1's cpu
    /// controller): intake, each fetch tier, process, settle, the API's upload and GC, model
    /// beside measurement; fails when a row is further apart than the tolerance. Run it
    /// through `bench/capacity.sh --validate`, which starts the emulator.
    Validate {
        /// Offers of new photos.
        #[arg(long, default_value_t = 200)]
        offers: usize,
        /// Photos per offer.
        #[arg(long, default_value_t = 10)]
        photos: usize,
        /// How long the partner host takes to answer the first tier's photos.
        #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
        host_latency: std::time::Duration,
        /// The scenario whose deployment the functions run under.
        #[arg(long, default_value = capacity::DEFAULT_SCENARIO)]
        scenario: PathBuf,
        /// Write the table as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// How far apart model and measurement may be, as a share of the measurement.
        #[arg(long, default_value_t = 0.25)]
        tolerance: f64,
    },
    /// The capacity model: a scenario's peak (docs/capacity/default.json: seed 001's) against
    /// the deployment, from the measured profiles (bench/capacity.sh measures them again).
    /// Prints per function, queue, DynamoDB item class, API route, S3 prefix and maintenance
    /// job what the peak needs against its limit, and the bill per hour; fails on any breach.
    Capacity {
        #[arg(long, default_value = capacity::DEFAULT_SCENARIO)]
        scenario: PathBuf,
        /// The cost benchmark's profile (`imgest-bench cost --profile-out`).
        #[arg(long, default_value = capacity::DEFAULT_PROFILE)]
        profile: PathBuf,
        /// The contention benchmark's figures (`imgest-bench contention --profile-out`).
        #[arg(long, default_value = capacity::DEFAULT_CONTENTION)]
        contention: PathBuf,
        /// The rows as JSON.
        #[arg(long)]
        json: bool,
        /// Also print the deployment the model would choose (and the quota raises it
        /// assumes), with the scenario's rows under it.
        #[arg(long)]
        suggest: bool,
        /// With --suggest: write the scenario under its suggested deployment here, for
        /// `--scenario` (it exits non-zero only if that one still breaches).
        #[arg(long, requires = "suggest")]
        out: Option<PathBuf>,
    },
    /// The shared items the seed's peak writes hardest (a client's rate limit, a host's
    /// learning, a popular image's link count, a popular URL's joins), each written by many
    /// concurrent writers through the real adapters, against an AWS emulator with a fixed
    /// latency added per request. Run it through bench/contention.sh, which starts the emulator.
    Contention {
        /// Concurrent writers per target.
        #[arg(long, default_value_t = 64)]
        writers: usize,
        /// How long each target runs.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        duration: std::time::Duration,
        /// Added to every request (the round trip in the region).
        #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
        latency: std::time::Duration,
        /// Targets, in order (ratelimit, host, image, url, emulator).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ratelimit,host,image,url,emulator"
        )]
        targets: Vec<String>,
        /// Write the figures (what `imgest-bench capacity` reads) here.
        #[arg(long)]
        profile_out: Option<PathBuf>,
    },
    /// The crawl simulation: the crawler against simulated partner hosts on 127.0.0.1 (seed
    /// 001's host mix, time scaled down), tiered design and naive design side by side. Build
    /// with --release for meaningful figures.
    Crawl {
        /// A smaller run (about a third of the time) for a quick look.
        #[arg(long)]
        quick: bool,
    },
    /// Crawl intake alone on the embedded store: URLs per minute for unchanged offers, offers
    /// of known URLs and offers of new URLs (queued, never downloaded), against their
    /// targets. Build with --release for meaningful figures.
    Intake {
        /// URLs per case, in offers of 8 (unchanged offers are sent 5 times over).
        #[arg(long, default_value_t = 24_000)]
        urls: usize,
        /// Intake calls in flight at once. 32 on 2 cores: each intake of new URLs waits about
        /// 50 ms for the queue send it shares with others, so with fewer in flight the store
        /// sits idle; more only queue up for the one SQLite connection.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// A short run (4,000 URLs per case) to see it work.
        #[arg(long, conflicts_with = "urls")]
        quick: bool,
    },
    /// A popular URL on the embedded store: crawls joining its one held download through the
    /// API, joins per second and the time until all settle once the host answers. Build with
    /// --release.
    Joins {
        /// Crawls that join the download.
        #[arg(long, default_value_t = 10_000)]
        crawls: usize,
        /// Crawl requests in flight at once.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
    },
    /// A backfill of a new size over a stored corpus, paused and resumed half-way, with live
    /// uploads alone and beside it: their latencies side by side. Build with --release.
    Backfill {
        /// Photos in the corpus.
        #[arg(long, default_value_t = 3000)]
        images: usize,
        /// Live uploads in each phase.
        #[arg(long, default_value_t = 200)]
        live: usize,
        /// The backfill's rate limit, photos/s (IMGEST_BACKFILL_RATE; 0: none, as fast as its
        /// decode slots allow).
        #[arg(long, default_value_t = 0)]
        rate: u32,
    },
    /// A burst of distinct 20-49 MP uploads (JPEG and PNG, 8- and 16-bit) at once against a
    /// running `imgest serve`: how each was answered, and the time. Run it through
    /// bench/burst.sh, which starts the server with a memory budget and reads its peak RSS.
    Burst {
        /// The server's base URL.
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 50)]
        count: usize,
    },
    /// Write the hostile corpus (photos built to cost far more than their size) into a
    /// directory, a file each, with a line per file: name, expected answer, what it is.
    /// bench/process.sh measures what each costs `imgest process`.
    Hostile {
        #[arg(long)]
        out: PathBuf,
    },
    /// Near-duplicate detection measured on the photos bench/similar.py made: recall per
    /// transform, false positives, reads per lookup, the signature's cost. Run it through
    /// bench/similar.sh, which makes the photos.
    Similar {
        /// What bench/similar.py wrote (originals/, queries/, distractors/).
        #[arg(long)]
        dir: PathBuf,
    },
    /// Time the production pipeline (MD5 + process) on local files: one JSON line per file.
    Pipeline {
        /// Timed runs per file, after one warm-up run.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Write the variants here (as <file-stem>.<variant>.jpg).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Write an RGB colour profile (moxcms' `display-p3` or `adobe-rgb`) to a file: the
    /// profiles bench/colour.sh makes its test photos with.
    Icc {
        #[arg(value_parser = ["display-p3", "adobe-rgb"])]
        name: String,
        out: PathBuf,
    },
    /// Measure single-core MB/s of MD5, SHA-256 and both on an in-memory buffer: one JSON line.
    Md5 {
        #[arg(long, default_value_t = 256)]
        mb: usize,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
}

/// The commit being measured (`git rev-parse --short HEAD`), or `unknown` outside a checkout.
/// The commit measured figures come from, marked when the tree had changes to tracked files
/// (a figure should name a commit its readers can check out).
pub(crate) fn revision() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".to_owned();
    };
    let changed = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_none_or(|s| !s.trim().is_empty());
    format!(
        "{}{}",
        head.trim(),
        if changed {
            " with uncommitted changes"
        } else {
            ""
        }
    )
}

pub(crate) fn init_logs(default: &str) {
    imgest_core::telemetry::init(default);
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("imgest-bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Cost {
                offers,
                photos,
                host_latency,
                profile_out,
                realistic_photos,
            } => {
                cost::run(cost::Options {
                    offers,
                    photos_per_offer: photos,
                    host_latency,
                    profile_out,
                    realistic_photos,
                })
                .await
            }
            Command::Validate {
                offers,
                photos,
                host_latency,
                scenario,
                out,
                tolerance,
            } => {
                cost::validate::run(cost::validate::Options {
                    offers,
                    photos_per_offer: photos,
                    host_latency,
                    scenario,
                    out,
                    tolerance,
                })
                .await
            }
            Command::Capacity {
                scenario,
                profile,
                contention,
                json,
                suggest,
                out,
            } => capacity::run(&capacity::Options {
                scenario,
                profile,
                contention,
                json,
                suggest,
                out,
            }),
            Command::Contention {
                writers,
                duration,
                latency,
                targets,
                profile_out,
            } => {
                contention::run(contention::Options {
                    writers,
                    duration,
                    latency,
                    targets,
                    profile_out,
                })
                .await
            }
            Command::Crawl { quick } => crawl::run(quick).await,
            Command::Intake {
                urls,
                concurrency,
                quick,
            } => {
                intake::run(intake::Options {
                    urls: if quick { 4_000 } else { urls },
                    concurrency,
                })
                .await
            }
            Command::Joins {
                crawls,
                concurrency,
            } => {
                joins::run(joins::Options {
                    crawls,
                    concurrency,
                })
                .await
            }
            Command::Backfill { images, live, rate } => {
                backfill::run(backfill::Options { images, live, rate }).await
            }
            Command::Burst { url, count } => burst::run(&url, count).await,
            Command::Hostile { out } => hostile::write(&out),
            Command::Pipeline { rounds, out, files } => pipeline::pipeline(rounds, out, files),
            Command::Similar { dir } => similar::run(dir).await,
            Command::Md5 { mb, rounds } => pipeline::md5(mb, rounds),
            Command::Icc { name, out } => pipeline::icc(&name, &out),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("imgest-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
