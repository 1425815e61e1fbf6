//! `imgest`: the local runner. The whole service in one process on embedded storage (SQLite and
//! a directory), plus the operator's commands. Wiring only: every behaviour lives in
//! `imgest-shared`.

mod bench;
mod commands;
mod cost;
mod demo;
mod feed_bench;
mod feeds;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "imgest",
    version,
    about = "Photo ingest for classifieds: dedup, resize once, link, garbage-collect"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API on IMGEST_LISTEN, storing under IMGEST_DATA_DIR, with the feed
    /// download workers; runs GC periodically.
    Serve,
    /// Run the production pipeline on local files and print one line per file.
    Process {
        /// Write the variants here (as <file-stem>.<variant>.jpg).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Delete expired orphan images (records first, then files).
    Gc,
    /// Delete files that no record owns and that are older than IMGEST_SWEEP_GRACE.
    Sweep {
        /// Only report what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
    /// Crawl a JSON-lines feed (one `{"client_id", "offer_id", "urls"}` per line) with the
    /// download workers, show progress, and print a summary.
    Ingest { file: PathBuf },
    /// Print (and remove) queued crawl results, one JSON object per line.
    Results {
        /// At most this many.
        #[arg(long, default_value_t = 1000)]
        max: usize,
    },
    /// Time the production pipeline (MD5 + process) on local files: one JSON line per file.
    BenchPipeline {
        /// Timed runs per file, after one warm-up run.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Write the variants here (as <file-stem>.<variant>.jpg).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Measure the md-5 crate's single-core MB/s on an in-memory buffer: one JSON line.
    BenchMd5 {
        #[arg(long, default_value_t = 256)]
        mb: usize,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// A guided tour of the main job on sample photos, in a fresh data directory.
    Demo {
        /// Where the tour stores its data (re-created if it holds an earlier tour).
        #[arg(long, default_value = "imgest-demo")]
        data_dir: PathBuf,
    },
    /// The feed simulation benchmark: the crawler against simulated partner hosts on
    /// 127.0.0.1 (seed 001's host mix, time scaled down), tiered design and naive design
    /// side by side. Build with --release for meaningful figures.
    BenchFeed {
        /// A smaller run (about a third of the time) for a quick look.
        #[arg(long)]
        quick: bool,
    },
    /// The AWS bill per million photos (new, URL-dedup hits, unchanged offers), from the
    /// functions' measured requests, CPU and wall time against an AWS emulator. Run it through
    /// infra/bench-cost.sh, which starts the emulator.
    BenchCost {
        /// Offers per scenario.
        #[arg(long, default_value_t = 25)]
        offers: usize,
        /// Photos per offer.
        #[arg(long, default_value_t = 8)]
        photos: usize,
        /// How long the partner host takes to answer each download.
        #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
        host_latency: std::time::Duration,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("imgest: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve => commands::serve().await,
            Command::Process { out, files } => commands::process(out, files).await,
            Command::Gc => commands::gc().await,
            Command::Sweep { dry_run } => commands::sweep(dry_run).await,
            Command::Ingest { file } => feeds::ingest(file).await,
            Command::Results { max } => feeds::results(max).await,
            Command::BenchPipeline { rounds, out, files } => bench::pipeline(rounds, out, files),
            Command::BenchMd5 { mb, rounds } => bench::md5(mb, rounds),
            Command::Demo { data_dir } => demo::run(data_dir).await,
            Command::BenchFeed { quick } => feed_bench::run(quick).await,
            Command::BenchCost {
                offers,
                photos,
                host_latency,
            } => {
                cost::run(cost::Options {
                    offers,
                    photos_per_offer: photos,
                    host_latency,
                })
                .await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("imgest: {e:#}");
            ExitCode::FAILURE
        }
    }
}
