//! What imgest tells its operators while it runs: JSON-lines logs ([`logs`]) and the stages'
//! counts and timings ([`metrics`]).

pub mod logs;
pub mod metrics;

pub use logs::init;

/// A Lambda function's telemetry: the JSON logs ([`init`]) and, unless `IMGEST_METRICS=off`,
/// the stages' metrics as CloudWatch embedded-metric-format lines, which the function writes
/// after each invocation ([`metrics::flushed`]).
pub fn init_lambda(default_log: &str) -> Result<metrics::MetricsLevel, metrics::MetricsError> {
    init(default_log);
    metrics::install(metrics::Exporter::CloudWatch)
}
