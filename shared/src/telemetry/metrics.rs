//! Counts and timings of every stage, through the `metrics` facade, at a level an operator
//! switches without a rebuild (`IMGEST_METRICS=off|counts|timings`).
//!
//! Two exporters: Prometheus text, which the local runner serves at `/metrics`, and
//! CloudWatch's embedded metric format on AWS: one JSON line per label set on stdout after each
//! invocation ([`flush`]), which CloudWatch turns into metrics without an API call.
//!
//! Observation must stay cheap and be switchable (timing a stage can cost more than the
//! stage, for a fast one): with `off` a stage records nothing and reads no clock; with `counts`
//! it increments a counter; only `timings` reads the clock twice and records a histogram.

use std::io::Write;
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use thiserror::Error;

/// Runs of a stage, by `stage`, `outcome` (`ok`, `error`) and, for `fetch`, `tier`.
pub const STAGE_TOTAL: &str = "imgest_stage_total";
/// How long runs of a stage took, in seconds, with the same labels.
pub const STAGE_SECONDS: &str = "imgest_stage_seconds";

/// Histogram buckets for the Prometheus text, in seconds: from a dedup hit (a millisecond) to a
/// photo that hit the slowest tier's deadline.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// How much the stages record (`IMGEST_METRICS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum MetricsLevel {
    /// Nothing: no counter, no clock read, no exporter.
    Off,
    /// A counter per run of a stage, by outcome.
    #[default]
    Counts,
    /// Counters, and each run's duration in a histogram.
    Timings,
}

impl MetricsLevel {
    pub const VARIABLE: &str = "IMGEST_METRICS";

    /// The level `IMGEST_METRICS` sets ([`Counts`](Self::Counts) when unset).
    pub fn from_env() -> Result<Self, MetricsError> {
        match std::env::var(Self::VARIABLE) {
            Ok(value) => value.parse(),
            Err(std::env::VarError::NotPresent) => Ok(Self::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(MetricsError::Level("not UTF-8".into())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Counts => "counts",
            Self::Timings => "timings",
        }
    }
}

impl FromStr for MetricsLevel {
    type Err = MetricsError;

    fn from_str(s: &str) -> Result<Self, MetricsError> {
        match s.trim() {
            "off" => Ok(Self::Off),
            "counts" => Ok(Self::Counts),
            "timings" => Ok(Self::Timings),
            other => Err(MetricsError::Level(format!("{other:?}"))),
        }
    }
}

#[derive(Debug, Error)]
pub enum MetricsError {
    #[error("IMGEST_METRICS must be off, counts or timings, not {0}")]
    Level(String),
    #[error("cannot install the metrics exporter: {0}")]
    Install(String),
}

/// Where the recorded metrics go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exporter {
    /// Kept in memory and rendered as Prometheus text ([`prometheus_text`]): the local runner.
    Prometheus,
    /// Embedded-metric-format lines on stdout at each [`flush`]: the Lambda functions. The
    /// namespace is `IMGEST_METRICS_NAMESPACE` (default `imgest`).
    CloudWatch,
}

/// No stage records anything until [`install`] sets a level: tests and the CLI's one-shot
/// commands (which print their own summaries) pay nothing.
static LEVEL: AtomicU8 = AtomicU8::new(0);
static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();
static CLOUDWATCH: OnceLock<&'static metrics_cloudwatch_embedded::Collector> = OnceLock::new();

fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Reads `IMGEST_METRICS` and, unless it is `off`, installs `exporter` as the process's
/// recorder. Once per process: a second call keeps the first exporter and returns its level.
pub fn install(exporter: Exporter) -> Result<MetricsLevel, MetricsError> {
    install_at(exporter, MetricsLevel::from_env()?)
}

/// [`install`] at `level`, whatever `IMGEST_METRICS` says.
pub fn install_at(exporter: Exporter, level: MetricsLevel) -> Result<MetricsLevel, MetricsError> {
    if PROMETHEUS.get().is_some() || CLOUDWATCH.get().is_some() {
        return Ok(current());
    }
    if level == MetricsLevel::Off {
        return Ok(level);
    }
    match exporter {
        Exporter::Prometheus => {
            let handle = PrometheusBuilder::new()
                .set_buckets(BUCKETS)
                .and_then(PrometheusBuilder::install_recorder)
                .map_err(|e| MetricsError::Install(e.to_string()))?;
            // Histograms keep their samples until drained: drain them now and then even when
            // nobody scrapes.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let upkeep = handle.clone();
                runtime.spawn(async move {
                    let mut every = tokio::time::interval(Duration::from_secs(5));
                    loop {
                        every.tick().await;
                        upkeep.run_upkeep();
                    }
                });
            }
            let _ = PROMETHEUS.set(handle);
        }
        Exporter::CloudWatch => {
            let namespace =
                std::env::var("IMGEST_METRICS_NAMESPACE").unwrap_or_else(|_| "imgest".into());
            let collector = metrics_cloudwatch_embedded::Builder::new()
                .cloudwatch_namespace(namespace)
                .init()
                .map_err(|e| MetricsError::Install(e.to_string()))?;
            let _ = CLOUDWATCH.set(collector);
        }
    }
    describe_counter!(STAGE_TOTAL, Unit::Count, "Runs of each stage, by outcome.");
    describe_histogram!(
        STAGE_SECONDS,
        Unit::Seconds,
        "How long each stage's runs took."
    );
    LEVEL.store(level as u8, Ordering::Relaxed);
    Ok(level)
}

/// The level in effect: [`Off`](MetricsLevel::Off) until [`install`] set another.
pub fn current() -> MetricsLevel {
    match level() {
        1 => MetricsLevel::Counts,
        2 => MetricsLevel::Timings,
        _ => MetricsLevel::Off,
    }
}

/// The Prometheus text of everything recorded so far, when the Prometheus exporter is
/// installed (the local runner with metrics on).
pub fn prometheus_text() -> Option<String> {
    PROMETHEUS.get().map(PrometheusHandle::render)
}

/// Writes what was recorded since the last flush as embedded-metric-format lines to stdout,
/// when the CloudWatch exporter is installed; otherwise does nothing. The Lambda functions call
/// it at the end of each invocation, so an invocation's metrics leave with its logs.
pub fn flush() {
    if let Some(collector) = CLOUDWATCH.get() {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if let Err(e) = collector.flush(&mut out).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "cannot write metrics");
        }
    }
}

/// [`flush`] into `writer` instead of stdout (for tests). Returns false when the CloudWatch
/// exporter is not installed.
pub fn flush_to(writer: &mut impl Write) -> std::io::Result<bool> {
    match CLOUDWATCH.get() {
        Some(collector) => collector.flush(writer).map(|()| true),
        None => Ok(false),
    }
}

/// Awaits `work`, then [`flush`]es: one Lambda invocation.
pub async fn flushed<T>(work: impl Future<Output = T>) -> T {
    let out = work.await;
    flush();
    out
}

/// A stage of the work, as its metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A crawl request taken in (the intake queue, `POST /v1/crawl`, a feed file's line).
    Intake,
    /// A URL looked up and routed to a download tier (or answered from what is known).
    Route,
    /// A download, by tier.
    Fetch(u8),
    /// A photo decoded (once, whatever its variants).
    Decode,
    /// Every variant of a photo resized from the decoded image.
    Resize,
    /// One variant encoded.
    Encode,
    /// A processed photo's files written and its record made ready.
    Store,
    /// An offer's photo list written.
    Link,
    /// One image collected by the garbage collector.
    Gc,
    /// One sweep of the stored files.
    Sweep,
    /// One image re-processed by a backfill.
    Backfill,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Intake => "intake",
            Self::Route => "route",
            Self::Fetch(_) => "fetch",
            Self::Decode => "decode",
            Self::Resize => "resize",
            Self::Encode => "encode",
            Self::Store => "store",
            Self::Link => "link",
            Self::Gc => "gc",
            Self::Sweep => "sweep",
            Self::Backfill => "backfill",
        }
    }

    fn tier(self) -> Option<&'static str> {
        match self {
            Self::Fetch(0) => Some("0"),
            Self::Fetch(1) => Some("1"),
            Self::Fetch(2) => Some("2"),
            Self::Fetch(_) => Some("other"),
            _ => None,
        }
    }

    /// Starts timing one run of this stage: reads the clock only at the `timings` level.
    pub fn start(self) -> StageRun {
        StageRun {
            stage: self,
            started: (level() >= MetricsLevel::Timings as u8).then(Instant::now),
        }
    }

    /// Runs `work` as one run of this stage, its outcome from its result.
    pub fn time<T, E>(self, work: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let run = self.start();
        let out = work();
        run.finish(out.is_ok());
        out
    }

    /// [`time`](Self::time) for async work.
    pub async fn time_async<T, E>(self, work: impl Future<Output = Result<T, E>>) -> Result<T, E> {
        let run = self.start();
        let out = work.await;
        run.finish(out.is_ok());
        out
    }
}

/// One run of a stage, recorded by [`finish`](Self::finish) (a run dropped unfinished, as
/// when its future is cancelled, records nothing).
#[must_use = "a stage run records nothing until finished"]
#[derive(Debug)]
pub struct StageRun {
    stage: Stage,
    started: Option<Instant>,
}

impl StageRun {
    pub fn finish(self, ok: bool) {
        if level() == MetricsLevel::Off as u8 {
            return;
        }
        let stage = self.stage.as_str();
        let outcome = if ok { "ok" } else { "error" };
        match self.stage.tier() {
            Some(tier) => {
                counter!(STAGE_TOTAL, "stage" => stage, "outcome" => outcome, "tier" => tier)
                    .increment(1);
                if let Some(started) = self.started {
                    histogram!(STAGE_SECONDS, "stage" => stage, "outcome" => outcome, "tier" => tier)
                        .record(started.elapsed().as_secs_f64());
                }
            }
            None => {
                counter!(STAGE_TOTAL, "stage" => stage, "outcome" => outcome).increment(1);
                if let Some(started) = self.started {
                    histogram!(STAGE_SECONDS, "stage" => stage, "outcome" => outcome)
                        .record(started.elapsed().as_secs_f64());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_from_their_names_and_nothing_else() {
        assert_eq!("off".parse::<MetricsLevel>().unwrap(), MetricsLevel::Off);
        assert_eq!(
            " counts ".parse::<MetricsLevel>().unwrap(),
            MetricsLevel::Counts
        );
        assert_eq!(
            "timings".parse::<MetricsLevel>().unwrap(),
            MetricsLevel::Timings
        );
        let e = "on".parse::<MetricsLevel>().unwrap_err().to_string();
        assert!(e.contains("IMGEST_METRICS") && e.contains("\"on\""), "{e}");
        assert!("Timings".parse::<MetricsLevel>().is_err());
    }

    #[test]
    fn without_an_exporter_a_stage_reads_no_clock() {
        // No test in this binary installs an exporter.
        assert_eq!(current(), MetricsLevel::Off);
        assert!(Stage::Decode.start().started.is_none());
        assert_eq!(Stage::Fetch(1).tier(), Some("1"));
        assert_eq!(Stage::Decode.tier(), None);
    }
}
