//! Typed settings, parsed once at start-up from `IMGEST_*` environment variables. A bad value
//! names its variable; nothing deeper in the code reads the environment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::domain::{VariantName, VariantSet};
use crate::pipeline::WatermarkPosition;

#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?}: {reason}")]
pub struct SettingsError {
    pub var: &'static str,
    pub value: String,
    pub reason: String,
}

/// Where the watermark comes from; the file is read when the pipeline is built.
#[derive(Debug, Clone, PartialEq)]
pub struct WatermarkSettings {
    pub path: PathBuf,
    pub position: WatermarkPosition,
    pub opacity: f32,
    pub variants: Vec<VariantName>,
}

/// Where records and files live (`IMGEST_BACKEND`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendSettings {
    /// SQLite and a directory under `IMGEST_DATA_DIR` (the default).
    Embedded,
    /// S3 (`IMGEST_BUCKET`) and DynamoDB (`IMGEST_TABLE`); credentials, region and endpoint come
    /// from the standard AWS variables.
    Aws {
        bucket: String,
        table: String,
        /// `IMGEST_S3_FORCE_PATH_STYLE`: path-style S3 URLs (emulators need them).
        force_path_style: bool,
        /// `IMGEST_QUEUES` (`name=url,…`): the SQS queue URL of each logical queue the flows
        /// send to (empty: none; sending to a name not listed fails).
        queues: HashMap<String, String>,
        /// `IMGEST_DELAY_STATE_MACHINE_ARN`: the state machine that sends messages delayed
        /// beyond SQS's 15 minutes (unset: such messages are refused).
        delay_state_machine_arn: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `IMGEST_BACKEND`: `embedded` or `aws`.
    pub backend: BackendSettings,
    /// `IMGEST_SWEEP_SHARDS_PER_RUN`: shards one scheduled sweep covers (of 256).
    pub sweep_shards_per_run: usize,
    /// `IMGEST_LISTEN`: the local runner's address.
    pub listen: SocketAddr,
    /// `IMGEST_DATA_DIR`: the embedded store's directory (SQLite file + blob directory).
    pub data_dir: PathBuf,
    /// `IMGEST_PUBLIC_URL`: the base of the file URLs the API returns (default: `http://{listen}`).
    pub public_url: Option<String>,
    /// `IMGEST_VARIANTS`
    pub variants: VariantSet,
    /// `IMGEST_JPEG_QUALITY` (1–100)
    pub jpeg_quality: u8,
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
    /// `IMGEST_GC_INTERVAL`: how often `serve` runs GC.
    pub gc_interval: Duration,
    /// `IMGEST_PROCESS_CONCURRENCY`: photos decoded at once (default: the number of cores).
    pub process_concurrency: usize,
    /// `IMGEST_MAX_PENDING_UPLOADS`: new photos that may wait for a decode slot (each holds its
    /// body in memory); more are refused with 429.
    pub max_pending_uploads: usize,
    /// `IMGEST_UPLOAD_URL_TTL`: how long a presigned upload URL stays valid.
    pub upload_url_ttl: Duration,
    /// `IMGEST_WATERMARK` (a PNG path) with `IMGEST_WATERMARK_POSITION`,
    /// `IMGEST_WATERMARK_OPACITY` and `IMGEST_WATERMARK_VARIANTS`.
    pub watermark: Option<WatermarkSettings>,
    /// The feed downloader's settings.
    pub feed: crate::feed::FeedSettings,
}

impl Settings {
    pub fn from_env() -> Result<Self, SettingsError> {
        let vars: HashMap<String, String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("IMGEST_"))
            .collect();
        Self::from_map(&vars)
    }

    /// Parses settings from a map of variables (tests and `from_env` share this).
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, SettingsError> {
        let get = |var: &'static str| vars.get(var).map(|v| v.trim()).filter(|v| !v.is_empty());
        let bad = |var: &'static str, value: &str, reason: String| SettingsError {
            var,
            value: value.to_owned(),
            reason,
        };
        let duration = |var: &'static str, default: Duration| -> Result<Duration, SettingsError> {
            match get(var) {
                None => Ok(default),
                Some(v) => humantime::parse_duration(v)
                    .map_err(|e| bad(var, v, format!("{e} (expected e.g. 14d, 24h, 90s)"))),
            }
        };
        let parsed = |var: &'static str| -> Option<&str> { get(var) };

        let listen = match parsed("IMGEST_LISTEN") {
            None => SocketAddr::from(([127, 0, 0, 1], 8080)),
            Some(v) => v
                .parse()
                .map_err(|e| bad("IMGEST_LISTEN", v, format!("{e} (expected IP:PORT)")))?,
        };
        let variants = match parsed("IMGEST_VARIANTS") {
            None => VariantSet::default(),
            Some(v) => {
                VariantSet::from_str(v).map_err(|e| bad("IMGEST_VARIANTS", v, e.to_string()))?
            }
        };
        let jpeg_quality = match parsed("IMGEST_JPEG_QUALITY") {
            None => 82,
            Some(v) => match v.parse::<u8>() {
                Ok(q) if (1..=100).contains(&q) => q,
                _ => {
                    return Err(bad(
                        "IMGEST_JPEG_QUALITY",
                        v,
                        "expected a whole number from 1 to 100".into(),
                    ));
                }
            },
        };
        let max_body = match parsed("IMGEST_MAX_BODY") {
            None => 20_000_000,
            Some(v) => parse_size(v)
                .ok_or_else(|| bad("IMGEST_MAX_BODY", v, "expected bytes, e.g. 20MB".into()))?,
        };
        let max_pixels = match parsed("IMGEST_MAX_PIXELS") {
            None => 50_000_000,
            Some(v) => parse_count(v)
                .ok_or_else(|| bad("IMGEST_MAX_PIXELS", v, "expected a count, e.g. 50M".into()))?,
        };
        let max_photos_per_offer = match parsed("IMGEST_MAX_PHOTOS_PER_OFFER") {
            None => 50,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=1000).contains(&n) => n,
                _ => {
                    return Err(bad(
                        "IMGEST_MAX_PHOTOS_PER_OFFER",
                        v,
                        "expected 1 to 1000".into(),
                    ));
                }
            },
        };
        let process_concurrency = match parsed("IMGEST_PROCESS_CONCURRENCY") {
            None => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(bad(
                        "IMGEST_PROCESS_CONCURRENCY",
                        v,
                        "expected a whole number ≥ 1".into(),
                    ));
                }
            },
        };
        let max_pending_uploads = match parsed("IMGEST_MAX_PENDING_UPLOADS") {
            None => 64,
            Some(v) => v.parse::<usize>().map_err(|_| {
                bad(
                    "IMGEST_MAX_PENDING_UPLOADS",
                    v,
                    "expected a whole number".into(),
                )
            })?,
        };
        let watermark = match parsed("IMGEST_WATERMARK") {
            None => None,
            Some(path) => {
                let position = match parsed("IMGEST_WATERMARK_POSITION") {
                    None => WatermarkPosition::BottomRight,
                    Some(v) => WatermarkPosition::from_str(v).map_err(|_| {
                        bad(
                            "IMGEST_WATERMARK_POSITION",
                            v,
                            "expected top-left, top-right, bottom-left, bottom-right or center"
                                .into(),
                        )
                    })?,
                };
                let opacity = match parsed("IMGEST_WATERMARK_OPACITY") {
                    None => 0.5,
                    Some(v) => match v.parse::<f32>() {
                        Ok(o) if (0.0..=1.0).contains(&o) => o,
                        _ => {
                            return Err(bad(
                                "IMGEST_WATERMARK_OPACITY",
                                v,
                                "expected 0.0 to 1.0".into(),
                            ));
                        }
                    },
                };
                let names = parsed("IMGEST_WATERMARK_VARIANTS").unwrap_or("large,medium");
                let mut wm_variants = Vec::new();
                for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let name = VariantName::parse(name)
                        .map_err(|e| bad("IMGEST_WATERMARK_VARIANTS", names, e.to_string()))?;
                    if variants.get(&name).is_none() {
                        return Err(bad(
                            "IMGEST_WATERMARK_VARIANTS",
                            names,
                            format!("{name} is not one of IMGEST_VARIANTS ({variants})"),
                        ));
                    }
                    wm_variants.push(name);
                }
                Some(WatermarkSettings {
                    path: PathBuf::from(path),
                    position,
                    opacity,
                    variants: wm_variants,
                })
            }
        };

        let backend = match parsed("IMGEST_BACKEND").unwrap_or("embedded") {
            "embedded" => BackendSettings::Embedded,
            "aws" => {
                let required = |var: &'static str| {
                    parsed(var)
                        .map(str::to_owned)
                        .ok_or_else(|| bad(var, "", "required when IMGEST_BACKEND=aws".into()))
                };
                let force_path_style = match parsed("IMGEST_S3_FORCE_PATH_STYLE") {
                    None | Some("false") | Some("0") => false,
                    Some("true") | Some("1") => true,
                    Some(v) => {
                        return Err(bad(
                            "IMGEST_S3_FORCE_PATH_STYLE",
                            v,
                            "expected true or false".into(),
                        ));
                    }
                };
                let queues = match parsed("IMGEST_QUEUES") {
                    None => HashMap::new(),
                    Some(v) => parse_queues(v).map_err(|reason| bad("IMGEST_QUEUES", v, reason))?,
                };
                let delay_state_machine_arn = match parsed("IMGEST_DELAY_STATE_MACHINE_ARN") {
                    None => None,
                    Some(v) if v.starts_with("arn:") => Some(v.to_owned()),
                    Some(v) => {
                        return Err(bad(
                            "IMGEST_DELAY_STATE_MACHINE_ARN",
                            v,
                            "expected a state machine ARN (arn:aws:states:…)".into(),
                        ));
                    }
                };
                BackendSettings::Aws {
                    bucket: required("IMGEST_BUCKET")?,
                    table: required("IMGEST_TABLE")?,
                    force_path_style,
                    queues,
                    delay_state_machine_arn,
                }
            }
            other => {
                return Err(bad(
                    "IMGEST_BACKEND",
                    other,
                    "expected embedded or aws".into(),
                ));
            }
        };
        let sweep_shards_per_run = match parsed("IMGEST_SWEEP_SHARDS_PER_RUN") {
            None => 32,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=256).contains(&n) => n,
                _ => {
                    return Err(bad(
                        "IMGEST_SWEEP_SHARDS_PER_RUN",
                        v,
                        "expected 1 to 256".into(),
                    ));
                }
            },
        };

        let orphan_ttl = duration("IMGEST_ORPHAN_TTL", Duration::from_secs(14 * 86_400))?;
        let feed = crate::feed::FeedSettings::from_map(vars)?;

        Ok(Self {
            backend,
            sweep_shards_per_run,
            listen,
            data_dir: PathBuf::from(parsed("IMGEST_DATA_DIR").unwrap_or("./imgest-data")),
            public_url: parsed("IMGEST_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_owned()),
            variants,
            jpeg_quality,
            max_body,
            max_pixels,
            max_photos_per_offer,
            orphan_ttl,
            sweep_grace: duration("IMGEST_SWEEP_GRACE", Duration::from_secs(86_400))?,
            claim_ttl: duration("IMGEST_CLAIM_TTL", Duration::from_secs(120))?,
            gc_interval: duration("IMGEST_GC_INTERVAL", Duration::from_secs(3600))?,
            upload_url_ttl: duration("IMGEST_UPLOAD_URL_TTL", Duration::from_secs(900))?,
            process_concurrency,
            max_pending_uploads,
            watermark,
            feed,
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

    /// Where the service is reached: `IMGEST_PUBLIC_URL`, else the local runner's address, or
    /// on AWS the bucket's regional URL (which serves nothing while the bucket blocks public
    /// access: production sets a CDN here).
    pub fn public_base_url(&self) -> String {
        match (&self.public_url, &self.backend) {
            (Some(url), _) => url.clone(),
            (None, BackendSettings::Aws { bucket, .. }) => {
                format!("https://{bucket}.s3.amazonaws.com")
            }
            (None, BackendSettings::Embedded) => format!("http://{}", self.listen),
        }
    }
}

/// `name=url,name=url` (blank entries ignored): logical queue names and their SQS URLs.
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
        match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            _ => return Err(format!("{url:?} (queue {name}) is not an http(s) URL")),
        }
        if queues.insert(name.to_owned(), url.to_owned()).is_some() {
            return Err(format!("queue {name} is listed twice"));
        }
    }
    Ok(queues)
}

/// `20000000`, `20MB`, `20 MiB`, `512kB`.
fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&b| b > 0)
}

/// `50000000`, `50M`, `500K`.
fn parse_count(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1_000),
        'm' | 'M' => (&v[..v.len() - 1], 1_000_000),
        _ => (v, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()?
        .checked_mul(mult)
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(s.max_body, 20_000_000);
        assert_eq!(s.max_pixels, 50_000_000);
        assert_eq!(s.max_photos_per_offer, 50);
        assert_eq!(s.orphan_ttl, Duration::from_secs(14 * 86_400));
        assert_eq!(s.sweep_grace, Duration::from_secs(86_400));
        assert_eq!(s.variants.to_string(), VariantSet::DEFAULT);
        assert_eq!(s.public_base_url(), "http://127.0.0.1:8080");
    }

    #[test]
    fn values_parse_with_units() {
        let s = with(&[
            ("IMGEST_MAX_BODY", "5MiB"),
            ("IMGEST_MAX_PIXELS", "2M"),
            ("IMGEST_ORPHAN_TTL", "2s"),
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
            ("IMGEST_MAX_BODY", "lots"),
            ("IMGEST_ORPHAN_TTL", "fortnight"),
            ("IMGEST_VARIANTS", "big"),
        ] {
            let err = with(&[(var, value)]).unwrap_err();
            assert_eq!(err.var, var);
            assert!(err.to_string().starts_with(var), "{err}");
        }
    }

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
            BackendSettings::Aws {
                bucket: "b".into(),
                table: "t".into(),
                force_path_style: false,
                queues: HashMap::new(),
                delay_state_machine_arn: None,
            }
        );
        assert_eq!(s.public_base_url(), "https://b.s3.amazonaws.com");
        assert_eq!(
            with(&[("IMGEST_BACKEND", "gcp")]).unwrap_err().var,
            "IMGEST_BACKEND"
        );
    }

    #[test]
    fn queues_map_logical_names_to_sqs_urls() {
        let aws = [
            ("IMGEST_BACKEND", "aws"),
            ("IMGEST_BUCKET", "b"),
            ("IMGEST_TABLE", "t"),
        ];
        let with_aws = |extra: &[(&str, &str)]| {
            let mut vars = aws.to_vec();
            vars.extend_from_slice(extra);
            with(&vars)
        };
        let s = with_aws(&[
            (
                "IMGEST_QUEUES",
                " results=https://sqs.eu-west-1.amazonaws.com/1/results, fetch-0=http://127.0.0.1:5000/1/f0 ,",
            ),
            (
                "IMGEST_DELAY_STATE_MACHINE_ARN",
                "arn:aws:states:eu-west-1:1:stateMachine:delayed-send",
            ),
        ])
        .unwrap();
        let BackendSettings::Aws {
            queues,
            delay_state_machine_arn,
            ..
        } = s.backend
        else {
            panic!("the aws backend");
        };
        assert_eq!(queues.len(), 2);
        assert_eq!(
            queues["results"],
            "https://sqs.eu-west-1.amazonaws.com/1/results"
        );
        assert_eq!(queues["fetch-0"], "http://127.0.0.1:5000/1/f0");
        assert_eq!(
            delay_state_machine_arn.as_deref(),
            Some("arn:aws:states:eu-west-1:1:stateMachine:delayed-send")
        );
        // Absent or empty: no queues and no long delays.
        for extra in [&[][..], &[("IMGEST_QUEUES", " ")][..]] {
            let s = with_aws(extra).unwrap();
            assert!(matches!(
                s.backend,
                BackendSettings::Aws { ref queues, delay_state_machine_arn: None, .. }
                    if queues.is_empty()
            ));
        }
        for (var, value) in [
            ("IMGEST_QUEUES", "results"),
            ("IMGEST_QUEUES", "=https://sqs/1/q"),
            ("IMGEST_QUEUES", "results=sqs/1/q"),
            ("IMGEST_QUEUES", "a=https://x/1/a,a=https://x/1/b"),
            ("IMGEST_DELAY_STATE_MACHINE_ARN", "delayed-send"),
        ] {
            let err = with_aws(&[(var, value)]).unwrap_err();
            assert_eq!(err.var, var, "{value}");
        }
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
}
