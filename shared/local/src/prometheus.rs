//! The local runner's metrics exporter: what the stages record, kept in memory and served as
//! Prometheus text at `GET /metrics` (through [`exposition`](imgest_core::telemetry::metrics::exposition)).

use std::time::Duration;

use imgest_core::telemetry::metrics::{self, MetricsError, MetricsLevel};
use metrics_exporter_prometheus::PrometheusBuilder;

/// Histogram buckets, in seconds: from a dedup hit (a millisecond) to a photo that hit the
/// slowest tier's deadline.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Reads `IMGEST_METRICS` and, unless it is `off`, installs the Prometheus exporter as the
/// process's recorder. Once per process: a second call keeps the first and returns its level.
pub fn install() -> Result<MetricsLevel, MetricsError> {
    install_at(MetricsLevel::from_env()?)
}

/// [`install`] at `level`, whatever `IMGEST_METRICS` says.
pub fn install_at(level: MetricsLevel) -> Result<MetricsLevel, MetricsError> {
    metrics::install_exporter(level, || {
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
        metrics::set_exposition(move || handle.render());
        Ok(())
    })
}
