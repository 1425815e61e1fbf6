//! `imgest`: the operator CLI. `serve` runs the local runner (the whole service in one process
//! on embedded storage: SQLite and a directory); the other commands run one flow each. Wiring
//! only: every behaviour lives in the library crates under `shared/`.

mod backfill;
mod commands;
mod crawl;
mod demo;
mod dlq;
mod erase;
mod progress;
#[cfg(test)]
mod reference;
mod restore;
mod similar;
mod variants;
mod webhook;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use imgest_http::auth::TokenSpec;

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
    /// Run the local runner: the HTTP API on IMGEST_LISTEN, storing under IMGEST_DATA_DIR,
    /// with the download workers and a running backfill's; runs GC every IMGEST_GC_INTERVAL.
    /// Its page at `/` uploads and orders an offer's photos, and lists every stored image (or
    /// only the orphans) for an `imgest:operator` token.
    /// Example: `IMGEST_DATA_DIR=./data IMGEST_LISTEN=127.0.0.1:8080 imgest serve`
    Serve,
    /// Run the production pipeline on local files and print one line per file.
    /// Example: `imgest process --out variants/ photo.jpg scan.png`
    Process {
        /// Write the variants here (as <file-stem>.<variant>.jpg).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print one JSON object per file instead of lines and a summary.
        #[arg(long)]
        json: bool,
        /// The photos.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Delete expired orphan images (records first, then files). Example: `imgest gc --json`
    Gc {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete files that no record needs and that are older than IMGEST_SWEEP_GRACE: files of
    /// no record, variants of a size whose drop was confirmed (`imgest variants confirm`), a
    /// re-processed image's previous files, keys that are not image files. A sweep that would
    /// delete more than IMGEST_SWEEP_MAX_SHARE of a shard's files stops there and exits with
    /// status 2; `--shard SHARD --go-on` deletes them once checked.
    /// Example: `imgest sweep --dry-run`
    Sweep {
        /// Only report what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Sweep only this shard (two hex digits, e.g. `3f`).
        #[arg(long)]
        shard: Option<String>,
        /// Delete past IMGEST_SWEEP_MAX_SHARE (once the shard's files were checked).
        #[arg(long)]
        go_on: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The variant set an operator confirmed: the sweep deletes a size's files only once its
    /// drop is confirmed. Example: `imgest variants status`
    Variants {
        #[command(subcommand)]
        command: variants::VariantsCommand,
        /// Print the result as JSON.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Check every image record against its files (repairing missing ones from the original)
    /// and its link count against the offers (correcting it), and report what was found.
    /// At scale, check what an inventory comparison found (`--findings`) against the live
    /// store, and with `--apply` mend what the store confirms.
    /// Example: `imgest audit --dry-run`
    Audit {
        /// Only report what would be repaired or corrected (with `--findings`, the default).
        #[arg(long, conflicts_with = "apply")]
        dry_run: bool,
        /// Print the report as JSON (the exit status still says whether damage was left).
        #[arg(long)]
        json: bool,
        /// Lines of `image_id` or `image_id,offers,last_update_ms` from the comparison of an S3
        /// Inventory with a table export (docs/operations.md, "The audit at scale"): only these
        /// images are checked and mended.
        #[arg(long, requires = "as_of")]
        findings: Option<PathBuf>,
        /// The table export's time (RFC 3339, e.g. 2026-11-27T06:00:00Z): a count is corrected
        /// only if its record was settled then and has not changed since.
        #[arg(long, requires = "findings")]
        as_of: Option<humantime::Timestamp>,
        /// Mend what the findings name and the live store confirms (without it, `--findings`
        /// only reports).
        #[arg(long, requires = "findings")]
        apply: bool,
        /// The most link counts the run may lower; a run that would lower more changes
        /// nothing and exits with status 2.
        #[arg(long, requires = "findings", default_value_t = imgest_flows::audit::FindingsOptions::DEFAULT_MAX_LOWERED)]
        max_lowered: u64,
    },
    /// Restore a collected photo from the versioned bucket: its most recently deleted original
    /// (S3 keeps deleted versions for the template's DeletedOriginalsRetentionDays), checked to
    /// be the image's bytes, is stored again with its variants under a new record, an orphan
    /// until an offer links it again. Does nothing to an image with a live record; the
    /// embedded store keeps no deleted files. See docs/operations.md, "Restoring a collected
    /// photo". Example: `IMGEST_BACKEND=aws imgest restore 0cc175b9c0f1b6a831c399e269772661`
    Restore {
        /// The image's id: the MD5 of its original bytes, in hex.
        image_id: String,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A stored photo's near-duplicates among every stored image: the same picture
    /// re-encoded, resized, watermarked, mirrored or padded (PDQ hashes within 31 bits) or
    /// cropped (their points agree), from the index IMGEST_SIMILAR=index or report fills
    /// (docs/api.md, "Near-duplicates").
    /// Example: `imgest similar 0cc175b9c0f1b6a831c399e269772661`
    Similar {
        /// The image's id: the MD5 of its original bytes, in hex.
        image_id: String,
        /// Print the matches as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the local task queue: each queue's tasks by state, priority (live, results,
    /// backfill: a backfill task starts only while no live task is due) and tier, and the
    /// newest dead letters with their reasons. Example: `imgest queue --dead-letters 20`
    Queue {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// How many of the newest dead letters to show.
        #[arg(long, default_value_t = 10)]
        dead_letters: usize,
    },
    /// What is stored, what is waiting and what fails: images, orphans, links, files and bytes,
    /// each queue's messages by state, dead letters by kind, and the offers' latest crawls:
    /// failed photos by kind and the hosts with the most failures (both backends; reads
    /// everything once). Example: `imgest stats --json`
    Stats {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// List the messages a queue gave up on, or move them back onto it (both backends).
    /// Example: `imgest dlq list --queue process`
    Dlq {
        #[command(subcommand)]
        command: dlq::DlqCommand,
    },
    /// A client's webhook endpoint: each result of its crawls POSTed there, signed as the
    /// Standard Webhooks specification says, retried for 3 days (then in `imgest dlq list
    /// --queue webhooks`).
    Webhook {
        #[command(subcommand)]
        command: webhook::WebhookCommand,
    },
    /// Erase an image everywhere: from every offer of every client (each told, on its results
    /// queue), every seller's upload, its record, its files and every stored version; the CDN
    /// is told and a receipt kept. `--block` refuses the same bytes from then on (`410
    /// erased`); `--status` shows the image's receipts instead; `--pending` works through the
    /// erasures under way (the files of records sellers' erasures deleted on AWS, sellers'
    /// erasures whose last offer dropped the image).
    /// Example: `imgest erase 3b5d5c3712955042212316173ccf37be --block --reason "court order"`
    Erase {
        #[arg(required_unless_present = "pending")]
        image_id: Option<String>,
        /// Refuse the same bytes from now on, uploaded or crawled.
        #[arg(long, conflicts_with = "status")]
        block: bool,
        /// Why (kept in the receipt and told to the clients whose offers lose the photo).
        #[arg(long, conflicts_with = "status")]
        reason: Option<String>,
        /// Show the image's erasure receipts (what went, when) instead of erasing.
        #[arg(long)]
        status: bool,
        /// Work through the erasures under way instead.
        #[arg(long, conflicts_with_all = ["image_id", "block", "reason", "status"])]
        pending: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Re-process every stored photo under the configured variant set, hottest first, at most
    /// IMGEST_BACKFILL_RATE photos a second. With IMGEST_BACKEND=aws the commands only start,
    /// pause, resume and show the run (the backfill function works on it).
    /// Example: `imgest backfill status`
    Backfill {
        #[command(subcommand)]
        command: backfill::BackfillCommand,
        /// Print the run's status as JSON (after the command, e.g. `backfill status --json`).
        #[arg(long, global = true)]
        json: bool,
    },
    /// Crawl a JSON-lines file of crawl requests (one `{"client_id", "offer_id", "urls"}` per
    /// line) with the download workers, show progress, and print a summary.
    /// Example: `imgest crawl feed.jsonl`
    Crawl {
        file: PathBuf,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print (and remove) queued crawl results, one JSON object per line; with --client, read
    /// that client's feed instead (either backend; nothing removed), from --after, and print on
    /// stderr the cursor to go on from. Example: `imgest results --client acme --after CURSOR`
    Results {
        /// At most this many.
        #[arg(long, default_value_t = 1000)]
        max: usize,
        /// Read this client's feed (what `GET /v1/crawls` answers it) rather than the queue.
        #[arg(long)]
        client: Option<String>,
        /// The cursor to go on from (the `next:` an earlier run printed); absent: the oldest
        /// result kept.
        #[arg(long, requires = "client")]
        after: Option<String>,
    },
    /// Mint a bearer token for local testing: writes a fresh ES256 key's public JWKS to
    /// --jwks-file (what IMGEST_JWKS_FILE names) and prints a token it signed. Each run makes
    /// a new key, so earlier tokens stop verifying. In production the marketplace's identity
    /// provider signs tokens. Example: `imgest token --jwks-file jwks.json --client-id acme`
    Token {
        /// Where to write the JWKS (overwritten).
        #[arg(long)]
        jwks_file: PathBuf,
        /// The `iss` claim (IMGEST_JWT_ISSUER).
        #[arg(long, default_value = "imgest-local")]
        issuer: String,
        /// The `aud` claim (IMGEST_JWT_AUDIENCE).
        #[arg(long, default_value = "imgest")]
        audience: String,
        #[arg(long, default_value = "local-user")]
        sub: String,
        /// Space-separated scopes.
        #[arg(long, default_value = "imgest:upload imgest:offers")]
        scope: String,
        /// The `imgest_client_id` claim: the partner's client (offers and crawls need one).
        #[arg(long)]
        client_id: Option<String>,
        /// How long the token is valid, e.g. `1h`.
        #[arg(long, default_value = "1h")]
        valid_for: humantime::Duration,
    },
    /// A guided tour of the main job on sample photos, in a fresh data directory.
    /// Example: `imgest demo --data-dir /tmp/imgest-tour`
    Demo {
        /// Where the tour stores its data (re-created if it holds an earlier tour).
        #[arg(long, default_value = "imgest-demo")]
        data_dir: PathBuf,
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
            Command::Process { out, json, files } => commands::process(out, json, files).await,
            Command::Gc { json } => commands::gc(json).await,
            Command::Sweep {
                dry_run,
                shard,
                go_on,
                json,
            } => commands::sweep(dry_run, shard, go_on, json).await,
            Command::Variants { command, json } => variants::run(command, json).await,
            Command::Queue { json, dead_letters } => commands::queue(json, dead_letters).await,
            Command::Audit {
                json,
                findings: Some(file),
                as_of: Some(as_of),
                apply,
                max_lowered,
                ..
            } => {
                let options = imgest_flows::audit::FindingsOptions { apply, max_lowered };
                commands::audit_findings(&file, as_of.into(), options, json).await
            }
            Command::Audit { dry_run, json, .. } => commands::audit(dry_run, json).await,
            Command::Backfill { command, json } => backfill::run(command, json).await,
            Command::Restore { image_id, json } => restore::run(&image_id, json).await,
            Command::Similar { image_id, json } => similar::run(&image_id, json).await,
            Command::Erase {
                image_id,
                block,
                reason,
                status,
                pending,
                json,
            } => match image_id {
                Some(image_id) if !pending => {
                    erase::run(image_id, block, reason, status, json).await
                }
                _ => erase::pending(json).await,
            },
            Command::Dlq { command } => dlq::run(command).await,
            Command::Webhook { command } => webhook::run(command).await,
            Command::Stats { json } => commands::stats(json).await,
            Command::Crawl { file, json } => crawl::crawl_file(file, json).await,
            Command::Results {
                max, client: None, ..
            } => crawl::results(max).await,
            Command::Results {
                max,
                client: Some(client),
                after,
            } => crawl::feed(&client, after.as_deref(), max).await,
            Command::Token {
                jwks_file,
                issuer,
                audience,
                sub,
                scope,
                client_id,
                valid_for,
            } => commands::token(
                &jwks_file,
                &issuer,
                &audience,
                &TokenSpec {
                    sub: &sub,
                    scope: &scope,
                    client_id: client_id.as_deref(),
                    valid_for: valid_for.into(),
                },
            ),
            Command::Demo { data_dir } => demo::run(data_dir).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<commands::Stopped>().is_some() => {
            eprintln!("imgest: {e:#}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("imgest: {e:#}");
            ExitCode::FAILURE
        }
    }
}
