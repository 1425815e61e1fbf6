//! Typed settings, parsed once at start-up from `IMGEST_*` environment variables. A bad value
//! names its variable; nothing deeper in the code reads the environment.
//!
//! - [`Settings`]: everything, with the [`Backend`] (where records and files live, described
//!   in `imgest_core::backend`) and [`CrawlSettings`] (the crawl flows and their downloads).
//! - [`reference`]: every variable read, declared once with its default and bounds (the
//!   configuration reference is generated from it, and its tests hold it to the parsers).
//! - `parse`: one reader per kind of value, shared by both.

mod crawl;
mod memory;
mod parse;
mod public_url;
pub mod reference;
mod senders;
mod windows;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use imgest_core::backend::MAX_SQS_DELAY;
pub use imgest_core::backend::{AwsBackend, Backend, LongWaits};
use imgest_core::domain::{OriginalMetadata, SimilarMode, VariantName, VariantSet};
use imgest_core::imaging::WatermarkPosition;

pub use self::crawl::CrawlSettings;
use self::parse::Vars;
pub use self::senders::{Clients, QueueSenders, principal_id};

#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?}: {reason}")]
pub struct SettingsError {
    pub var: &'static str,
    pub value: String,
    pub reason: String,
}

/// The watermark: where its PNG is read from (once, when the pipeline is built), where it goes
/// and on which variants.
#[derive(Debug, Clone, PartialEq)]
pub struct WatermarkSettings {
    pub source: WatermarkSource,
    pub position: WatermarkPosition,
    pub opacity: f32,
    pub variants: Vec<VariantName>,
}

/// Where the watermark's PNG is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatermarkSource {
    /// A file (the local runner and the CLI).
    File(PathBuf),
    /// An S3 object, `s3://bucket/key`: how a deployed stack gets one (the template's
    /// `WatermarkKey`); read by the AWS backend's start-up, so only with `IMGEST_BACKEND=aws`.
    S3 { bucket: String, key: String },
}

impl std::fmt::Display for WatermarkSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `IMGEST_BACKEND`: `embedded` (with `IMGEST_DATA_DIR`) or `aws`.
    pub backend: Backend,
    /// `IMGEST_SWEEP_SHARDS_PER_RUN`: shards one scheduled sweep covers (of 256).
    pub sweep_shards_per_run: usize,
    /// `IMGEST_LISTEN`: the local runner's address.
    pub listen: SocketAddr,
    /// `IMGEST_PUBLIC_URL`: the base of the file URLs the API returns (default: `http://{listen}`):
    /// an `http` or `https` URL without credentials, query or fragment.
    pub public_url: Option<String>,
    /// `IMGEST_ALLOW_OPEN_PUBLIC_URL` (false): lets an open local runner (no tokens checked)
    /// answer to a public URL that is not loopback, so that whoever reaches that URL (a proxy
    /// in front of the runner) may do everything. Without it such a runner does not start.
    pub allow_open_public_url: bool,
    /// `IMGEST_VARIANTS`
    pub variants: VariantSet,
    /// `IMGEST_JPEG_QUALITY` (1–100)
    pub jpeg_quality: u8,
    /// `IMGEST_ORIGINAL_METADATA` (`strip-private`, `keep` or `strip-all`): what a stored
    /// original keeps of the photo's metadata (orientation and ICC profile always; GPS, XMP,
    /// maker notes and serial numbers only under `keep`).
    pub original_metadata: OriginalMetadata,
    /// `IMGEST_SIMILAR` (`off`, `index` or `report`): near-duplicate detection.
    pub similar: SimilarMode,
    /// `IMGEST_MAX_BODY` (bytes; suffixes kB, MB, GB, KiB, MiB, GiB accepted)
    pub max_body: u64,
    /// `IMGEST_MAX_PIXELS` (decoded width × height; suffixes K, M accepted)
    pub max_pixels: u64,
    /// `IMGEST_MAX_PHOTOS_PER_OFFER`
    pub max_photos_per_offer: usize,
    /// `IMGEST_ORPHAN_TTL`: how long an unlinked image is kept after its last use.
    pub orphan_ttl: Duration,
    /// `IMGEST_SWEEP_GRACE`: the sweeper deletes unrecorded files only when older than this.
    pub sweep_grace: Duration,
    /// `IMGEST_CLAIM_TTL`: how long a processing claim holds before another worker takes over.
    pub claim_ttl: Duration,
    /// `IMGEST_DEDUP_WAIT` (8s, 1s–25s): how long an API upload of bytes another request is
    /// processing waits for it before answering `503 still_processing` (API Gateway gives up
    /// after 30 s).
    pub dedup_wait: Duration,
    /// `IMGEST_SWEEP_MAX_SHARE` (10%): the share of a shard's files a sweep may delete as
    /// garbage (files of no record, of a variant no record lists, not image files); past it,
    /// the sweep stops and reports instead of deleting.
    pub sweep_max_share: u8,
    /// `IMGEST_GC_INTERVAL`: how often `serve` runs GC.
    pub gc_interval: Duration,
    /// `IMGEST_PROCESS_CONCURRENCY`: photos decoded at once (default: the number of cores).
    pub process_concurrency: usize,
    /// `IMGEST_MAX_PENDING_UPLOADS`: new photos that may wait for a decode slot (each holds its
    /// body in memory); more are refused with 429.
    pub max_pending_uploads: usize,
    /// `IMGEST_UPLOAD_URL_TTL`: how long a presigned upload URL stays valid.
    pub upload_url_ttl: Duration,
    /// `IMGEST_WATERMARK` (a PNG's path, or `s3://bucket/key` on AWS) with
    /// `IMGEST_WATERMARK_POSITION`,
    /// `IMGEST_WATERMARK_OPACITY` and `IMGEST_WATERMARK_VARIANTS`.
    pub watermark: Option<WatermarkSettings>,
    /// The crawl flows' settings.
    pub crawl: CrawlSettings,
    /// `IMGEST_AUTH`, `IMGEST_JWKS_FILE`, `IMGEST_JWT_ISSUER`, `IMGEST_JWT_AUDIENCE`: who
    /// checks callers.
    pub auth: AuthSettings,
    /// `IMGEST_UPLOAD_RPM` (120): uploads per minute per token subject.
    pub upload_rpm: u32,
    /// `IMGEST_MEMORY_BUDGET`: the memory the process should stay within; photos in flight
    /// (bodies and decodes) reserve from it (see `imgest_core::budget`).
    pub memory_budget: u64,
    /// `IMGEST_BACKFILL_RATE` (20): photos a backfill re-processes per second at most, in all
    /// (0: no limit beyond its decode slots).
    pub backfill_rate: u32,
    /// `IMGEST_BACKFILL_SEGMENTS` (4): disjoint parts of the image index a backfill enumerates
    /// side by side.
    pub backfill_segments: u32,
    /// `IMGEST_AUDIT_SEGMENTS` (16): the scheduled audit covers one of this many segments of
    /// the image index a run (AWS); a full cycle takes this many runs.
    pub audit_segments: u32,
    /// `IMGEST_MAX_RECEIVES` (5): the receive limit (`maxReceiveCount`) of the queue an SQS
    /// function consumes; a message still failing on that receive is dead-lettered with its
    /// reason by the function, not moved without one by SQS.
    pub max_receives: u32,
}

/// Who checks the API's callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthSettings {
    /// Nothing set: `serve` runs open on a loopback address only (and says so); on any other
    /// address it refuses to start. The functions refuse to start.
    Unset,
    /// `IMGEST_AUTH=off`: open on any address, every caller may do everything.
    Off,
    /// `IMGEST_JWKS_FILE` (or `IMGEST_AUTH=jwt`): bearer tokens checked against the keys of a
    /// JWKS file, with `IMGEST_JWT_ISSUER` and `IMGEST_JWT_AUDIENCE` (both required).
    Jwt {
        jwks_file: PathBuf,
        issuer: String,
        audience: String,
    },
    /// `IMGEST_AUTH=gateway` (with `IMGEST_JWT_AUDIENCE`): API Gateway's JWT authorizer
    /// checked the token; the API function reads its claims from the request context, and
    /// requires their `aud` to name `audience`.
    Gateway { audience: String },
}

impl AuthSettings {
    /// Whether offers live in their clients' namespaces (identity on) or in one shared one
    /// (open mode). Trusted paths (the intake queue, `imgest crawl`) follow this too.
    pub fn per_client_offers(&self) -> bool {
        matches!(self, Self::Jwt { .. } | Self::Gateway { .. })
    }
}

impl Settings {
    pub fn from_env() -> Result<Self, SettingsError> {
        let vars = read_vars(std::env::vars());
        let settings = Self::from_map(&vars)?;
        // Set by AWS Lambda in every function's environment (not by the project's Runtime API
        // emulator, whose smoke test downloads from hosts on 127.0.0.1).
        settings.refuse_on_lambda(vars.contains_key(windows::LAMBDA_MARKER))?;
        Ok(settings)
    }

    /// Refuses, `on_lambda`, what must never run there: downloads into private networks
    /// (`IMGEST_ALLOW_PRIVATE_NETWORKS`: a crawl request could then reach the VPC's hosts).
    pub fn refuse_on_lambda(&self, on_lambda: bool) -> Result<(), SettingsError> {
        if on_lambda && self.crawl.allow_private_networks {
            return Err(SettingsError {
                var: "IMGEST_ALLOW_PRIVATE_NETWORKS",
                value: "true".into(),
                reason: "refused on AWS Lambda: crawl requests could then reach the VPC's hosts"
                    .into(),
            });
        }
        Ok(())
    }

    /// Parses settings from a map of variables (tests and `from_env` share this).
    pub fn from_map(map: &HashMap<String, String>) -> Result<Self, SettingsError> {
        let vars = Vars::new(map);
        let listen = match vars.get("IMGEST_LISTEN") {
            None => SocketAddr::from(([127, 0, 0, 1], 8080)),
            Some(v) => v
                .parse()
                .map_err(|e| vars.bad("IMGEST_LISTEN", format!("{e} (expected IP:PORT)")))?,
        };
        let variants = match vars.get("IMGEST_VARIANTS") {
            None => VariantSet::default(),
            Some(v) => {
                VariantSet::from_str(v).map_err(|e| vars.bad("IMGEST_VARIANTS", e.to_string()))?
            }
        };
        let process_concurrency = match vars.get("IMGEST_PROCESS_CONCURRENCY") {
            None => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            Some(_) => vars.number("IMGEST_PROCESS_CONCURRENCY", 1, 1, 4096)?,
        };
        let backend = backend(&vars)?;
        let watermark = watermark(&vars, &variants, &backend)?;
        let max_body = vars.size("IMGEST_MAX_BODY", 20_000_000)?;
        let windows = windows::Windows {
            orphan_ttl: vars.duration("IMGEST_ORPHAN_TTL", Duration::from_secs(14 * 86_400))?,
            sweep_grace: vars.duration("IMGEST_SWEEP_GRACE", Duration::from_secs(86_400))?,
            claim_ttl: vars.duration("IMGEST_CLAIM_TTL", Duration::from_secs(120))?,
            upload_url_ttl: vars.duration("IMGEST_UPLOAD_URL_TTL", Duration::from_secs(900))?,
            dedup_wait: dedup_wait(&vars)?,
        };
        windows::check(&vars, &windows)?;
        let crawl = CrawlSettings::parse(&vars, max_body)?;
        Ok(Self {
            backend,
            sweep_shards_per_run: vars.number("IMGEST_SWEEP_SHARDS_PER_RUN", 32, 1, 256)?,
            listen,
            public_url: public_url::parse(&vars)?,
            allow_open_public_url: vars.flag("IMGEST_ALLOW_OPEN_PUBLIC_URL", false)?,
            variants,
            jpeg_quality: vars.number("IMGEST_JPEG_QUALITY", 82, 1, 100)?,
            original_metadata: match vars.get("IMGEST_ORIGINAL_METADATA") {
                None => OriginalMetadata::default(),
                Some(v) => v
                    .parse()
                    .map_err(|e: String| vars.bad("IMGEST_ORIGINAL_METADATA", e))?,
            },
            similar: match vars.get("IMGEST_SIMILAR") {
                None => SimilarMode::default(),
                Some(v) => v
                    .parse()
                    .map_err(|e: String| vars.bad("IMGEST_SIMILAR", e))?,
            },
            max_body,
            max_pixels: vars.count("IMGEST_MAX_PIXELS", 50_000_000)?,
            max_photos_per_offer: vars.number("IMGEST_MAX_PHOTOS_PER_OFFER", 50, 1, 1000)?,
            orphan_ttl: windows.orphan_ttl,
            sweep_grace: windows.sweep_grace,
            claim_ttl: windows.claim_ttl,
            dedup_wait: windows.dedup_wait,
            sweep_max_share: sweep_max_share(&vars)?,
            gc_interval: vars.duration("IMGEST_GC_INTERVAL", Duration::from_secs(3600))?,
            upload_url_ttl: windows.upload_url_ttl,
            process_concurrency,
            max_pending_uploads: vars.number("IMGEST_MAX_PENDING_UPLOADS", 64, 0, 1_000_000)?,
            watermark,
            crawl,
            auth: auth(&vars)?,
            upload_rpm: vars.number("IMGEST_UPLOAD_RPM", 120, 1, 1_000_000)?,
            memory_budget: memory::budget(&vars, max_body)?,
            backfill_rate: vars.number("IMGEST_BACKFILL_RATE", 20, 0, 100_000)?,
            backfill_segments: vars.number("IMGEST_BACKFILL_SEGMENTS", 4, 1, 64)?,
            audit_segments: vars.number("IMGEST_AUDIT_SEGMENTS", 16, 1, 1024)?,
            max_receives: vars.number("IMGEST_MAX_RECEIVES", 5, 1, 1000)?,
        })
    }

    /// The defaults, as if no variable were set.
    pub fn defaults() -> Self {
        match Self::from_map(&HashMap::new()) {
            Ok(s) => s,
            // Every default is a literal that parses; the unit test below pins it.
            Err(e) => unreachable!("defaults must parse: {e}"),
        }
    }

    /// The embedded store's directory, or `None` on AWS.
    pub fn data_dir(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Embedded { data_dir } => Some(data_dir),
            Backend::Aws(_) => None,
        }
    }

    /// Whether the public URL, if one is set, names this machine only (loopback).
    pub fn public_url_is_loopback(&self) -> bool {
        self.public_url
            .as_deref()
            .is_none_or(public_url::is_loopback)
    }

    /// Where the service is reached: `IMGEST_PUBLIC_URL`, else the local runner's address, or
    /// on AWS the bucket's regional URL (which serves nothing while the bucket blocks public
    /// access: production sets a CDN here).
    pub fn public_base_url(&self) -> String {
        match (&self.public_url, &self.backend) {
            (Some(url), _) => url.clone(),
            (None, Backend::Aws(aws)) => format!("https://{}.s3.amazonaws.com", aws.bucket),
            (None, Backend::Embedded { .. }) => format!("http://{}", self.listen),
        }
    }
}

/// `IMGEST_DEDUP_WAIT`: within API Gateway's 30 s, with room for the rest of the request.
fn dedup_wait(vars: &Vars<'_>) -> Result<Duration, SettingsError> {
    let wait = vars.duration("IMGEST_DEDUP_WAIT", Duration::from_secs(8))?;
    if !(Duration::from_secs(1)..=Duration::from_secs(25)).contains(&wait) {
        return Err(vars.bad(
            "IMGEST_DEDUP_WAIT",
            "expected 1s to 25s (API Gateway gives up on a request after 30 s)",
        ));
    }
    Ok(wait)
}

/// `IMGEST_SWEEP_MAX_SHARE`: a percentage, `10%` or `10`.
fn sweep_max_share(vars: &Vars<'_>) -> Result<u8, SettingsError> {
    let Some(v) = vars.get("IMGEST_SWEEP_MAX_SHARE") else {
        return Ok(10);
    };
    v.trim_end_matches('%')
        .trim()
        .parse::<u8>()
        .ok()
        .filter(|n| *n <= 100)
        .ok_or_else(|| {
            vars.bad(
                "IMGEST_SWEEP_MAX_SHARE",
                "expected a percentage, 0% to 100%",
            )
        })
}

/// `IMGEST_SQS_MAX_DELAY`: at most SQS's own limit.
fn sqs_max_delay(vars: &Vars<'_>) -> Result<Duration, SettingsError> {
    let delay = vars.positive_duration("IMGEST_SQS_MAX_DELAY", MAX_SQS_DELAY)?;
    if delay > MAX_SQS_DELAY {
        return Err(vars.bad(
            "IMGEST_SQS_MAX_DELAY",
            "at most 15m (SQS delays a message 15 minutes at most)",
        ));
    }
    Ok(delay)
}

/// `IMGEST_LONG_WAITS` (`step-functions` or `sqs-chain`): the state machine needs its ARN in
/// `IMGEST_DELAY_STATE_MACHINE_ARN`. Unset, the state machine if an ARN is given, else the
/// chain.
fn long_waits(vars: &Vars<'_>) -> Result<LongWaits, SettingsError> {
    let arn = vars.get("IMGEST_DELAY_STATE_MACHINE_ARN");
    let state_machine = |arn: &str| {
        if arn.starts_with("arn:") && arn.contains(":stateMachine:") {
            Ok(LongWaits::StepFunctions {
                state_machine_arn: arn.to_owned(),
            })
        } else {
            Err(vars.bad(
                "IMGEST_DELAY_STATE_MACHINE_ARN",
                "expected a state machine's ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)",
            ))
        }
    };
    match (vars.get("IMGEST_LONG_WAITS"), arn) {
        (Some("step-functions"), Some(arn)) | (None, Some(arn)) => state_machine(arn),
        (Some("step-functions"), None) => Err(vars.bad(
            "IMGEST_LONG_WAITS",
            "step-functions needs the delayed-send state machine's ARN in IMGEST_DELAY_STATE_MACHINE_ARN",
        )),
        // Chosen by name, the chain starts no execution: a state machine named beside it is
        // not read.
        (Some("sqs-chain"), _) | (None, None) => Ok(LongWaits::SqsChain),
        (Some(_), _) => Err(vars.bad(
            "IMGEST_LONG_WAITS",
            "expected step-functions or sqs-chain",
        )),
    }
}

/// `IMGEST_CDN_DISTRIBUTION_ARN` (`arn:aws:cloudfront::ACCOUNT:distribution/ID`, the
/// template's `CdnDistributionArn`): the distribution's id; unset or empty, no CDN.
fn cdn_distribution_id(vars: &Vars<'_>) -> Result<Option<String>, SettingsError> {
    let Some(arn) = vars.get("IMGEST_CDN_DISTRIBUTION_ARN") else {
        return Ok(None);
    };
    let id = arn
        .strip_prefix("arn:")
        .and_then(|rest| rest.split_once(":cloudfront::"))
        .and_then(|(_, rest)| rest.split_once(":distribution/"))
        .map(|(_, id)| id)
        .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()));
    match id {
        Some(id) => Ok(Some(id.to_owned())),
        None => Err(vars.bad(
            "IMGEST_CDN_DISTRIBUTION_ARN",
            "expected a CloudFront distribution's ARN (arn:aws:cloudfront::ACCOUNT:distribution/ID)",
        )),
    }
}

fn backend(vars: &Vars<'_>) -> Result<Backend, SettingsError> {
    match vars.get("IMGEST_BACKEND").unwrap_or("embedded") {
        "embedded" => Ok(Backend::Embedded {
            data_dir: PathBuf::from(vars.get("IMGEST_DATA_DIR").unwrap_or("./imgest-data")),
        }),
        "aws" => {
            let needed_by = "IMGEST_BACKEND=aws";
            let queues = match vars.get("IMGEST_QUEUES") {
                None => HashMap::new(),
                Some(v) => parse_queues(v).map_err(|reason| vars.bad("IMGEST_QUEUES", reason))?,
            };
            Ok(Backend::Aws(AwsBackend {
                bucket: vars.required("IMGEST_BUCKET", needed_by)?.to_owned(),
                table: vars.required("IMGEST_TABLE", needed_by)?.to_owned(),
                force_path_style: vars.flag("IMGEST_S3_FORCE_PATH_STYLE", false)?,
                queues,
                sqs_max_delay: sqs_max_delay(vars)?,
                long_waits: long_waits(vars)?,
                cdn_distribution_id: cdn_distribution_id(vars)?,
                endpoint_url: None,
            }))
        }
        _ => Err(vars.bad("IMGEST_BACKEND", "expected embedded or aws")),
    }
}

fn auth(vars: &Vars<'_>) -> Result<AuthSettings, SettingsError> {
    let jwks = vars.get("IMGEST_JWKS_FILE");
    let jwt = |jwks_file: &str| -> Result<AuthSettings, SettingsError> {
        let needed_by = "IMGEST_JWKS_FILE is set";
        Ok(AuthSettings::Jwt {
            jwks_file: PathBuf::from(jwks_file),
            issuer: vars.required("IMGEST_JWT_ISSUER", needed_by)?.to_owned(),
            audience: vars.required("IMGEST_JWT_AUDIENCE", needed_by)?.to_owned(),
        })
    };
    match (vars.get("IMGEST_AUTH"), jwks) {
        (None, None) => Ok(AuthSettings::Unset),
        (None | Some("jwt"), Some(file)) => jwt(file),
        (Some("jwt"), None) => Err(vars.bad(
            "IMGEST_JWKS_FILE",
            "required when IMGEST_AUTH=jwt (a JWKS file with the token issuer's public keys)",
        )),
        (Some("off"), None) => Ok(AuthSettings::Off),
        (Some("gateway"), None) => Ok(AuthSettings::Gateway {
            audience: vars
                .required("IMGEST_JWT_AUDIENCE", "IMGEST_AUTH=gateway")?
                .to_owned(),
        }),
        (Some("off" | "gateway"), Some(_)) => Err(vars.bad(
            "IMGEST_AUTH",
            "IMGEST_JWKS_FILE is set too: say which (jwt checks tokens against that file)",
        )),
        (Some(_), _) => Err(vars.bad("IMGEST_AUTH", "expected jwt, gateway or off")),
    }
}

fn watermark(
    vars: &Vars<'_>,
    variants: &VariantSet,
    backend: &Backend,
) -> Result<Option<WatermarkSettings>, SettingsError> {
    let Some(value) = vars.get("IMGEST_WATERMARK") else {
        return Ok(None);
    };
    let source = match value.strip_prefix("s3://") {
        None => WatermarkSource::File(PathBuf::from(value)),
        Some(object) => {
            let (bucket, key) = object
                .split_once('/')
                .filter(|(bucket, key)| !bucket.is_empty() && !key.is_empty())
                .ok_or_else(|| vars.bad("IMGEST_WATERMARK", "expected s3://bucket/key"))?;
            if !matches!(backend, Backend::Aws(_)) {
                return Err(vars.bad(
                    "IMGEST_WATERMARK",
                    "an S3 object is read by the AWS backend: with IMGEST_BACKEND=embedded, \
                     name a file",
                ));
            }
            WatermarkSource::S3 {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
            }
        }
    };
    let position = match vars.get("IMGEST_WATERMARK_POSITION") {
        None => WatermarkPosition::BottomRight,
        Some(v) => WatermarkPosition::from_str(v).map_err(|_| {
            vars.bad(
                "IMGEST_WATERMARK_POSITION",
                "expected top-left, top-right, bottom-left, bottom-right or center",
            )
        })?,
    };
    let opacity = match vars.get("IMGEST_WATERMARK_OPACITY") {
        None => 0.5,
        Some(v) => v
            .parse::<f32>()
            .ok()
            .filter(|o| (0.0..=1.0).contains(o))
            .ok_or_else(|| vars.bad("IMGEST_WATERMARK_OPACITY", "expected 0.0 to 1.0"))?,
    };
    let var = "IMGEST_WATERMARK_VARIANTS";
    let mut marked = Vec::new();
    for name in vars
        .get(var)
        .unwrap_or("large,medium")
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let name = VariantName::parse(name).map_err(|e| vars.bad(var, e.to_string()))?;
        if variants.get(&name).is_none() {
            return Err(vars.bad(
                var,
                format!("{name} is not one of IMGEST_VARIANTS ({variants})"),
            ));
        }
        marked.push(name);
    }
    Ok(Some(WatermarkSettings {
        source,
        position,
        opacity,
        variants: marked,
    }))
}

/// `name=url,name=url` (blank entries ignored): logical queue names and their SQS URLs, or an
/// SNS topic's ARN (`results=arn:aws:sns:…`: the results are published to a topic).
fn parse_queues(v: &str) -> Result<HashMap<String, String>, String> {
    let mut queues = HashMap::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, url)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not name=url"));
        };
        let (name, url) = (name.trim(), url.trim());
        if name.is_empty() {
            return Err(format!("{entry:?} has no queue name"));
        }
        let topic = url.starts_with("arn:") && url.split(':').nth(2) == Some("sns");
        match url::Url::parse(url) {
            _ if topic => {}
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            _ => {
                return Err(format!(
                    "{url:?} (queue {name}) is neither an http(s) URL nor an SNS topic's ARN"
                ));
            }
        }
        if queues.insert(name.to_owned(), url.to_owned()).is_some() {
            return Err(format!("queue {name} is listed twice"));
        }
    }
    Ok(queues)
}

/// The variables the settings read: every `IMGEST_*` one, and what Lambda tells a function
/// about itself (that it runs there; its memory, the memory budget's default).
fn read_vars(vars: impl Iterator<Item = (String, String)>) -> HashMap<String, String> {
    vars.filter(|(k, _)| {
        k.starts_with("IMGEST_") || k == windows::LAMBDA_MARKER || k == memory::LAMBDA_MEMORY
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Lambda function's memory budget follows its `MemorySize`, as Lambda tells it (the
    /// variable was once filtered out with the rest of Lambda's, and every function took a
    /// quarter of the host's memory instead).
    #[test]
    fn the_environment_lambda_sets_reaches_the_memory_budget() {
        let env = [
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"),
            ("AWS_LAMBDA_FUNCTION_NAME", "imgest-fetch"),
            ("PATH", "/usr/bin"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let vars = read_vars(env.into_iter());
        assert_eq!(vars.len(), 1, "{vars:?}");
        let settings = Settings::from_map(&vars).unwrap();
        assert_eq!(settings.memory_budget, 448 << 20);
    }

    fn with(pairs: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::from_map(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn defaults_match_the_documentation() {
        let s = Settings::defaults();
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(s.jpeg_quality, 82);
        assert_eq!(s.original_metadata, OriginalMetadata::StripPrivate);
        assert_eq!(s.max_body, 20_000_000);
        assert_eq!(s.max_pixels, 50_000_000);
        assert_eq!(s.max_photos_per_offer, 50);
        assert_eq!(s.orphan_ttl, Duration::from_secs(14 * 86_400));
        assert_eq!(s.sweep_grace, Duration::from_secs(86_400));
        assert_eq!(s.variants.to_string(), VariantSet::DEFAULT);
        assert_eq!(s.public_base_url(), "http://127.0.0.1:8080");
        assert_eq!(s.crawl.fetch_reserve, 1 << 20);
        // A smaller largest body makes a smaller default.
        let small = with(&[("IMGEST_MAX_BODY", "200kB")]).unwrap();
        assert_eq!(small.crawl.fetch_reserve, 200_000);
    }

    #[test]
    fn values_parse_with_units() {
        let s = with(&[
            ("IMGEST_MAX_BODY", "5MiB"),
            ("IMGEST_MAX_PIXELS", "2M"),
            ("IMGEST_ORPHAN_TTL", "2s"),
            ("IMGEST_UNSAFE_SHORT_WINDOWS", "1"),
        ])
        .unwrap();
        assert_eq!(s.max_body, 5 << 20);
        assert_eq!(s.max_pixels, 2_000_000);
        assert_eq!(s.orphan_ttl, Duration::from_secs(2));
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        for (var, value) in [
            ("IMGEST_LISTEN", "nowhere"),
            ("IMGEST_JPEG_QUALITY", "0"),
            ("IMGEST_ORIGINAL_METADATA", "strip"),
            ("IMGEST_MAX_BODY", "lots"),
            ("IMGEST_ORPHAN_TTL", "fortnight"),
            ("IMGEST_VARIANTS", "big"),
            ("IMGEST_FETCH_RESERVE", "lots"),
            // More than a body may be: no download could ever start.
            ("IMGEST_FETCH_RESERVE", "21MB"),
        ] {
            let err = with(&[(var, value)]).unwrap_err();
            assert_eq!(err.var, var);
            assert!(err.to_string().starts_with(var), "{err}");
        }
    }

    #[test]
    fn windows_below_their_bounds_are_refused_with_the_reason() {
        for (vars, var, reason) in [
            (
                vec![("IMGEST_SWEEP_GRACE", "30m")],
                "IMGEST_SWEEP_GRACE",
                "before its record",
            ),
            (
                vec![("IMGEST_ORPHAN_TTL", "10m")],
                "IMGEST_ORPHAN_TTL",
                "form's submission",
            ),
            (
                vec![("IMGEST_ORPHAN_TTL", "1h"), ("IMGEST_UPLOAD_URL_TTL", "1h")],
                "IMGEST_ORPHAN_TTL",
                "IMGEST_UPLOAD_URL_TTL",
            ),
            (
                vec![("IMGEST_CLAIM_TTL", "10s")],
                "IMGEST_CLAIM_TTL",
                "taken over mid-way",
            ),
        ] {
            let err = with(&vars).unwrap_err();
            assert_eq!(err.var, var, "{vars:?}");
            assert!(err.reason.contains("must be at least"), "{err}");
            assert!(err.reason.contains(reason), "{err}");
            // Lifted for tests and demos, except on Lambda.
            let mut unsafe_vars = vars.clone();
            unsafe_vars.push(("IMGEST_UNSAFE_SHORT_WINDOWS", "1"));
            assert!(with(&unsafe_vars).is_ok(), "{vars:?}");
            unsafe_vars.push(("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand"));
            assert_eq!(
                with(&unsafe_vars).unwrap_err().var,
                "IMGEST_UNSAFE_SHORT_WINDOWS"
            );
        }
        let s = with(&[("IMGEST_SWEEP_GRACE", "1h"), ("IMGEST_ORPHAN_TTL", "1h")]).unwrap();
        assert_eq!((s.sweep_grace, s.orphan_ttl), (HOUR, HOUR));
        assert_eq!(s.dedup_wait, Duration::from_secs(8));
        for bad in ["0s", "26s"] {
            assert_eq!(
                with(&[("IMGEST_DEDUP_WAIT", bad)]).unwrap_err().var,
                "IMGEST_DEDUP_WAIT"
            );
        }
        assert_eq!(
            with(&[("IMGEST_SWEEP_MAX_SHARE", "25%")])
                .unwrap()
                .sweep_max_share,
            25
        );
        assert_eq!(
            with(&[("IMGEST_SWEEP_MAX_SHARE", "101%")]).unwrap_err().var,
            "IMGEST_SWEEP_MAX_SHARE"
        );
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_aws_backend_needs_a_bucket_and_a_table() {
        let err = with(&[("IMGEST_BACKEND", "aws"), ("IMGEST_TABLE", "t")]).unwrap_err();
        assert_eq!(err.var, "IMGEST_BUCKET");
        let s = with(&[
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", "b"),
            ("IMGEST_TABLE", "t"),
        ])
        .unwrap();
        assert_eq!(
            s.backend,
            Backend::Aws(AwsBackend {
                bucket: "b".into(),
                table: "t".into(),
                force_path_style: false,
                queues: HashMap::new(),
                sqs_max_delay: MAX_SQS_DELAY,
                long_waits: LongWaits::SqsChain,
                cdn_distribution_id: None,
                endpoint_url: None,
            })
        );
        assert_eq!(s.public_base_url(), "https://b.s3.amazonaws.com");
        assert_eq!(
            with(&[("IMGEST_BACKEND", "gcp")]).unwrap_err().var,
            "IMGEST_BACKEND"
        );
    }

    fn with_aws(extra: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let mut vars = vec![
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", "b"),
            ("IMGEST_TABLE", "t"),
        ];
        vars.extend_from_slice(extra);
        with(&vars)
    }

    #[test]
    fn queues_map_logical_names_to_sqs_urls() {
        let s = with_aws(&[(
            "IMGEST_QUEUES",
            " results=arn:aws:sns:eu-west-1:1:results, fetch-0=http://127.0.0.1:5000/1/f0 ,",
        )])
        .unwrap();
        let Backend::Aws(AwsBackend { queues, .. }) = s.backend else {
            panic!("the aws backend");
        };
        assert_eq!(queues.len(), 2);
        assert_eq!(queues["results"], "arn:aws:sns:eu-west-1:1:results");
        assert_eq!(queues["fetch-0"], "http://127.0.0.1:5000/1/f0");
        // Absent or empty: no queues.
        for extra in [&[][..], &[("IMGEST_QUEUES", " ")][..]] {
            let s = with_aws(extra).unwrap();
            assert!(matches!(
                s.backend,
                Backend::Aws(AwsBackend { ref queues, .. })
                    if queues.is_empty()
            ));
        }
        // The CDN: a distribution's ARN names its id; unset or empty, none.
        let arn = "arn:aws:cloudfront::123456789012:distribution/EDFDVBD6EXAMPLE";
        for (value, expected) in [(arn, Some("EDFDVBD6EXAMPLE")), ("", None), (" ", None)] {
            let s = with_aws(&[("IMGEST_CDN_DISTRIBUTION_ARN", value)]).unwrap();
            let Backend::Aws(aws) = s.backend else {
                panic!("the aws backend");
            };
            assert_eq!(aws.cdn_distribution_id.as_deref(), expected, "{value:?}");
        }
        for (var, value) in [
            ("IMGEST_CDN_DISTRIBUTION_ARN", "EDFDVBD6EXAMPLE"),
            (
                "IMGEST_CDN_DISTRIBUTION_ARN",
                "arn:aws:cloudfront::1:distribution/",
            ),
            ("IMGEST_CDN_DISTRIBUTION_ARN", "arn:aws:s3:::bucket"),
            (
                "IMGEST_CDN_DISTRIBUTION_ARN",
                "arn:aws:cloudfront::1:distribution/a/../b",
            ),
            ("IMGEST_QUEUES", "results"),
            ("IMGEST_QUEUES", "=https://sqs/1/q"),
            ("IMGEST_QUEUES", "results=sqs/1/q"),
            ("IMGEST_QUEUES", "results=arn:aws:sqs:eu-west-1:1:results"),
            ("IMGEST_QUEUES", "a=https://x/1/a,a=https://x/1/b"),
        ] {
            let err = with_aws(&[(var, value)]).unwrap_err();
            assert_eq!(err.var, var, "{value}");
        }
    }

    #[test]
    fn long_waits_go_through_the_state_machine_its_arn_names_or_are_chained() {
        let arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:imgest-delayed-send";
        let machine = LongWaits::StepFunctions {
            state_machine_arn: arn.to_owned(),
        };
        for (vars, expected) in [
            (&[][..], LongWaits::SqsChain),
            (
                &[("IMGEST_DELAY_STATE_MACHINE_ARN", "")][..],
                LongWaits::SqsChain,
            ),
            (
                &[("IMGEST_LONG_WAITS", "sqs-chain")][..],
                LongWaits::SqsChain,
            ),
            (
                &[
                    ("IMGEST_LONG_WAITS", "sqs-chain"),
                    ("IMGEST_DELAY_STATE_MACHINE_ARN", arn),
                ][..],
                LongWaits::SqsChain,
            ),
            (
                &[("IMGEST_DELAY_STATE_MACHINE_ARN", arn)][..],
                machine.clone(),
            ),
            (
                &[
                    ("IMGEST_LONG_WAITS", "step-functions"),
                    ("IMGEST_DELAY_STATE_MACHINE_ARN", arn),
                ][..],
                machine,
            ),
        ] {
            let Backend::Aws(aws) = with_aws(vars).unwrap().backend else {
                panic!("the aws backend");
            };
            assert_eq!(aws.long_waits, expected, "{vars:?}");
        }
        for (vars, var) in [
            (
                &[("IMGEST_LONG_WAITS", "step-functions")][..],
                "IMGEST_LONG_WAITS",
            ),
            (&[("IMGEST_LONG_WAITS", "sfn")][..], "IMGEST_LONG_WAITS"),
            (
                &[("IMGEST_DELAY_STATE_MACHINE_ARN", "imgest-delayed-send")][..],
                "IMGEST_DELAY_STATE_MACHINE_ARN",
            ),
        ] {
            let err = with_aws(vars).unwrap_err();
            assert_eq!(err.var, var, "{vars:?}");
        }
    }

    #[test]
    fn auth_is_unset_off_jwt_or_gateway() {
        assert_eq!(Settings::defaults().auth, AuthSettings::Unset);
        assert_eq!(Settings::defaults().upload_rpm, 120);
        assert_eq!(
            with(&[("IMGEST_AUTH", "off")]).unwrap().auth,
            AuthSettings::Off
        );
        assert_eq!(
            with(&[
                ("IMGEST_AUTH", "gateway"),
                ("IMGEST_JWT_AUDIENCE", "imgest")
            ])
            .unwrap()
            .auth,
            AuthSettings::Gateway {
                audience: "imgest".into()
            }
        );
        let jwt = with(&[
            ("IMGEST_JWKS_FILE", "/etc/imgest/jwks.json"),
            ("IMGEST_JWT_ISSUER", "https://id.example"),
            ("IMGEST_JWT_AUDIENCE", "imgest"),
        ])
        .unwrap();
        assert!(jwt.auth.per_client_offers());
        assert!(!AuthSettings::Off.per_client_offers());
        for (pairs, var) in [
            (&[("IMGEST_JWKS_FILE", "j.json")][..], "IMGEST_JWT_ISSUER"),
            (
                &[("IMGEST_JWKS_FILE", "j.json"), ("IMGEST_JWT_ISSUER", "i")][..],
                "IMGEST_JWT_AUDIENCE",
            ),
            (&[("IMGEST_AUTH", "jwt")][..], "IMGEST_JWKS_FILE"),
            (
                &[("IMGEST_AUTH", "off"), ("IMGEST_JWKS_FILE", "j.json")][..],
                "IMGEST_AUTH",
            ),
            (&[("IMGEST_AUTH", "maybe")][..], "IMGEST_AUTH"),
            (&[("IMGEST_AUTH", "gateway")][..], "IMGEST_JWT_AUDIENCE"),
            (&[("IMGEST_UPLOAD_RPM", "0")][..], "IMGEST_UPLOAD_RPM"),
        ] {
            assert_eq!(with(pairs).unwrap_err().var, var, "{pairs:?}");
        }
    }

    #[test]
    fn the_public_url_is_an_http_base_url_and_nothing_more() {
        for bad in [
            "cdn.example.com",
            "ftp://cdn.example.com",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://",
            "https://user:secret@cdn.example.com",
            "https://user@cdn.example.com",
            "https://cdn.example.com/?token=x",
            "https://cdn.example.com/files?",
            "https://cdn.example.com/#top",
            "https://cdn example.com",
        ] {
            let refused = with(&[("IMGEST_PUBLIC_URL", bad)]).unwrap_err();
            assert_eq!(refused.var, "IMGEST_PUBLIC_URL", "{bad}: {refused}");
        }
        let s = with(&[("IMGEST_PUBLIC_URL", "https://cdn.example.com/photos/")]).unwrap();
        assert_eq!(
            s.public_url.as_deref(),
            Some("https://cdn.example.com/photos")
        );
        assert!(!s.public_url_is_loopback());
        assert!(!s.allow_open_public_url);
        for loopback in [
            "http://localhost:8080",
            "http://imgest.localhost",
            "http://127.0.0.1:8080",
            "http://127.1.2.3",
            "http://[::1]:8080/x",
        ] {
            let s = with(&[("IMGEST_PUBLIC_URL", loopback)]).unwrap();
            assert!(s.public_url_is_loopback(), "{loopback}");
        }
        for public in [
            "http://localhost.example.com",
            "http://10.0.0.1",
            "http://[::2]",
            "https://photos.example",
        ] {
            let s = with(&[("IMGEST_PUBLIC_URL", public)]).unwrap();
            assert!(!s.public_url_is_loopback(), "{public}");
        }
        assert!(Settings::defaults().public_url_is_loopback());
    }

    #[test]
    fn private_networks_are_refused_on_lambda() {
        let open = with(&[("IMGEST_ALLOW_PRIVATE_NETWORKS", "true")]).unwrap();
        assert!(open.refuse_on_lambda(false).is_ok());
        let refused = open.refuse_on_lambda(true).unwrap_err();
        assert_eq!(refused.var, "IMGEST_ALLOW_PRIVATE_NETWORKS");
        assert!(Settings::defaults().refuse_on_lambda(true).is_ok());
    }

    #[test]
    fn watermark_variants_must_exist() {
        let err = with(&[
            ("IMGEST_WATERMARK", "wm.png"),
            ("IMGEST_WATERMARK_VARIANTS", "huge"),
        ])
        .unwrap_err();
        assert_eq!(err.var, "IMGEST_WATERMARK_VARIANTS");
    }

    #[test]
    fn a_watermark_is_a_file_or_on_aws_an_s3_object() {
        let source = |pairs: &[(&str, &str)]| with(pairs).map(|s| s.watermark.unwrap().source);
        assert_eq!(
            source(&[("IMGEST_WATERMARK", "wm.png")]).unwrap(),
            WatermarkSource::File("wm.png".into())
        );
        let aws = [
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", "b"),
            ("IMGEST_TABLE", "t"),
        ];
        let on_s3 = source(&[
            aws[0],
            aws[1],
            aws[2],
            ("IMGEST_WATERMARK", "s3://c/config/wm.png"),
        ]);
        let expected = WatermarkSource::S3 {
            bucket: "c".into(),
            key: "config/wm.png".into(),
        };
        assert_eq!(on_s3.unwrap(), expected);
        assert_eq!(expected.to_string(), "s3://c/config/wm.png");
        // The embedded backend has no S3 to read it from; a URL without a key names nothing.
        let err = source(&[("IMGEST_WATERMARK", "s3://c/wm.png")]).unwrap_err();
        assert_eq!(err.var, "IMGEST_WATERMARK");
        for bad in ["s3://c", "s3://c/", "s3:///wm.png"] {
            let err = source(&[aws[0], aws[1], aws[2], ("IMGEST_WATERMARK", bad)]).unwrap_err();
            assert_eq!(err.var, "IMGEST_WATERMARK", "{bad}");
        }
    }
}
