//! Logs as JSON lines (one object per event, with the current span's fields such as the request
//! or message id), filtered by `IMGEST_LOG` (an `EnvFilter` directive).

/// Installs the JSON subscriber on stderr; `default` applies when `IMGEST_LOG` is unset.
pub fn init(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("IMGEST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // A second call (tests, or a binary that already set one up) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
