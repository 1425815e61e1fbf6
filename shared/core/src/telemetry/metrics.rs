//! Counts and timings of every stage, through the `metrics` facade, at a level an operator
//! switches without a rebuild (`IMGEST_METRICS=off|counts|timings`).
//!
//! The exporters live with the binaries that use them: Prometheus text, which the local runner
//! serves at `/metrics` (`imgest_local::prometheus`), and CloudWatch's embedded metric format
//! on AWS (`imgest_lambda::cloudwatch`). An exporter is installed through
//! [`install_exporter`], which sets the level; until then nothing records.
//!
//! Observation must stay cheap and be switchable (timing a stage can cost more than the
//! stage, for a fast one): with `off` a stage records nothing and reads no clock; with `counts`
//! it increments a counter; only `timings` reads the clock twice and records a histogram.

use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};
use thiserror::Error;

/// Runs of a stage, by `stage`, `outcome` (`ok`, `error`) and, for `fetch`, `tier`.
pub const STAGE_TOTAL: &str = "imgest_stage_total";
/// How long runs of a stage took, in seconds, with the same labels.
pub const STAGE_SECONDS: &str = "imgest_stage_seconds";

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

/// No stage records anything until an exporter is installed: tests and the CLI's one-shot
/// commands (which print their own summaries) pay nothing.
static LEVEL: AtomicU8 = AtomicU8::new(0);
/// The installed exporter's text, for `GET /metrics` (the local runner's Prometheus exporter).
static EXPOSITION: OnceLock<Box<dyn Fn() -> String + Send + Sync>> = OnceLock::new();
/// How the installed exporter writes out what was recorded (the Lambda functions' CloudWatch
/// exporter, after each invocation).
static FLUSH: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Installs an exporter at `level` and starts recording, once per process: `install` (which
/// makes the exporter's recorder the process's) runs unless `level` is off or an exporter is
/// installed already (the level in effect is then returned).
pub fn install_exporter(
    level: MetricsLevel,
    install: impl FnOnce() -> Result<(), MetricsError>,
) -> Result<MetricsLevel, MetricsError> {
    if current() != MetricsLevel::Off {
        return Ok(current());
    }
    if level == MetricsLevel::Off {
        return Ok(level);
    }
    install()?;
    enable(level);
    Ok(level)
}

/// Starts recording at `level`, describing the stages' metrics to the process's recorder.
fn enable(level: MetricsLevel) {
    describe_counter!(STAGE_TOTAL, Unit::Count, "Runs of each stage, by outcome.");
    describe_histogram!(
        STAGE_SECONDS,
        Unit::Seconds,
        "How long each stage's runs took."
    );
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Registers how the installed exporter renders what was recorded as text (once per process).
pub fn set_exposition(render: impl Fn() -> String + Send + Sync + 'static) {
    let _ = EXPOSITION.set(Box::new(render));
}

/// The installed exporter's text of everything recorded so far, when it has one (the local
/// runner with metrics on: Prometheus text).
pub fn exposition() -> Option<String> {
    EXPOSITION.get().map(|render| render())
}

/// Registers how the installed exporter writes out what was recorded (once per process).
pub fn set_flush(flush: impl Fn() + Send + Sync + 'static) {
    let _ = FLUSH.set(Box::new(flush));
}

/// Writes out what was recorded since the last flush, when the installed exporter does that
/// (on AWS: embedded-metric-format lines on stdout); otherwise does nothing. Called at the end
/// of each Lambda invocation, so an invocation's metrics leave with its logs.
pub fn flush() {
    if let Some(flush) = FLUSH.get() {
        flush();
    }
}

/// The level in effect: [`Off`](MetricsLevel::Off) until an exporter was installed at another.
pub fn current() -> MetricsLevel {
    match level() {
        1 => MetricsLevel::Counts,
        2 => MetricsLevel::Timings,
        _ => MetricsLevel::Off,
    }
}

/// A stage of the work, as its metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A crawl request taken in (the intake queue, `POST /v1/crawl`, a feed file's line).
    Intake,
    /// A URL's first download tier chosen from its (client, host)'s tier statistics.
    ChooseTier,
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
    /// Every stage (`fetch` once, whatever its tier), in the order of the work.
    pub const ALL: [Stage; 11] = [
        Self::Intake,
        Self::ChooseTier,
        Self::Fetch(0),
        Self::Decode,
        Self::Resize,
        Self::Encode,
        Self::Store,
        Self::Link,
        Self::Gc,
        Self::Sweep,
        Self::Backfill,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Intake => "intake",
            Self::ChooseTier => "choose_tier",
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
