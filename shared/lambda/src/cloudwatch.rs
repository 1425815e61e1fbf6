//! The Lambda functions' metrics exporter: CloudWatch's embedded metric format, one JSON line
//! per label set on stdout after each invocation ([`flush`]), which CloudWatch turns into
//! metrics without an API call.

use std::io::Write;
use std::sync::OnceLock;

use imgest_core::telemetry::metrics::{self, MetricsError, MetricsLevel};

static COLLECTOR: OnceLock<&'static metrics_cloudwatch_embedded::Collector> = OnceLock::new();

/// Reads `IMGEST_METRICS` and, unless it is `off`, installs the CloudWatch exporter as the
/// process's recorder. The namespace is `IMGEST_METRICS_NAMESPACE` (default `imgest`).
pub fn install() -> Result<MetricsLevel, MetricsError> {
    install_at(MetricsLevel::from_env()?)
}

/// [`install`] at `level`, whatever `IMGEST_METRICS` says. Once per process: a second call
/// keeps the first and returns its level.
pub fn install_at(level: MetricsLevel) -> Result<MetricsLevel, MetricsError> {
    metrics::install_exporter(level, || {
        let namespace =
            std::env::var("IMGEST_METRICS_NAMESPACE").unwrap_or_else(|_| "imgest".into());
        let collector = metrics_cloudwatch_embedded::Builder::new()
            .cloudwatch_namespace(namespace)
            .init()
            .map_err(|e| MetricsError::Install(e.to_string()))?;
        let _ = COLLECTOR.set(collector);
        metrics::set_flush(flush);
        Ok(())
    })
}

/// Writes what was recorded since the last flush as embedded-metric-format lines to stdout,
/// when the exporter is installed; otherwise does nothing. Registered as the process's
/// [`metrics::flush`], which the functions (and the API's router) call at the end of each
/// invocation, so an invocation's metrics leave with its logs.
fn flush() {
    if let Some(collector) = COLLECTOR.get() {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if let Err(e) = collector.flush(&mut out).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "cannot write metrics");
        }
    }
}

/// [`flush`] into `writer` instead of stdout (for tests). Returns false when the exporter is not
/// installed.
pub fn flush_to(writer: &mut impl Write) -> std::io::Result<bool> {
    match COLLECTOR.get() {
        Some(collector) => collector.flush(writer).map(|()| true),
        None => Ok(false),
    }
}

/// Awaits `work`, then flushes the metrics: one Lambda invocation.
pub async fn flushed<T>(work: impl Future<Output = T>) -> T {
    let out = work.await;
    metrics::flush();
    out
}
