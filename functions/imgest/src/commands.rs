//! The operator commands: each parses settings, builds the embedded service and calls a flow.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use imgest_shared::api::{ApiState, router};
use imgest_shared::app::{self, Backend};
use imgest_shared::flows::Service;
use imgest_shared::ports::SystemClock;
use imgest_shared::settings::Settings;
use tracing::{error, info};

use crate::feeds::LocalCrawl;

pub(crate) fn init_logs(default: &str) {
    imgest_shared::telemetry::init(default);
}

pub(crate) async fn embedded_service(settings: &Settings, public_url: &str) -> Result<Service> {
    let backend = Backend::embedded(&settings.data_dir, public_url);
    app::service(settings, &backend, Arc::new(SystemClock))
        .await
        .with_context(|| format!("opening the data directory {}", settings.data_dir.display()))
}

pub async fn serve() -> Result<()> {
    init_logs("info");
    let settings = Settings::from_env()?;
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("binding {}", settings.listen))?;
    let addr = listener.local_addr()?;
    let base = settings
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let service = Arc::new(embedded_service(&settings, &base).await?);
    let downloads = LocalCrawl::start(Arc::clone(&service), settings.feed.clone())?;
    let app = router(
        ApiState::new(Arc::clone(&service), &format!("{base}/files"))
            .with_crawler(Arc::clone(&downloads.crawler)),
        true,
    );

    let gc_service = Arc::clone(&service);
    let gc_interval = settings.gc_interval;
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(gc_interval);
        loop {
            ticker.tick().await;
            if let Err(e) = gc_service.gc().await {
                error!(error = %e, "periodic gc failed");
            }
        }
    });

    info!(%addr, data_dir = %settings.data_dir.display(), "imgest serving");
    println!(
        "imgest serving on http://{addr} (data in {})",
        settings.data_dir.display()
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving")?;
    downloads.stop().await;
    Ok(())
}

pub async fn process(out: Option<PathBuf>, files: Vec<PathBuf>) -> Result<()> {
    init_logs("warn");
    let settings = Settings::from_env()?;
    let pipeline = Arc::new(app::pipeline(&settings)?);
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut failures = 0;
    let mut times = Vec::new();
    for file in &files {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let p = Arc::clone(&pipeline);
        let started = Instant::now();
        let (bytes, result) = tokio::task::spawn_blocking(move || {
            let r = p.process(&bytes);
            (bytes, r)
        })
        .await?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(processed) => {
                times.push(ms);
                let sizes: Vec<String> = processed
                    .variants
                    .iter()
                    .map(|v| {
                        format!(
                            "{}={}x{} {}kB",
                            v.name,
                            v.width,
                            v.height,
                            v.jpeg.len() / 1000
                        )
                    })
                    .collect();
                println!(
                    "{}  {}  {}x{} {}  {:.1} ms  {}",
                    file.display(),
                    imgest_shared::domain::ImageId::of_bytes(&bytes),
                    processed.width,
                    processed.height,
                    processed.format.as_str(),
                    ms,
                    sizes.join(" ")
                );
                if let Some(dir) = &out {
                    let stem = file
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    for v in &processed.variants {
                        let path = dir.join(format!("{stem}.{}.jpg", v.name));
                        std::fs::write(&path, &v.jpeg)
                            .with_context(|| format!("writing {}", path.display()))?;
                    }
                }
            }
            Err(e) => {
                failures += 1;
                println!("{}  error {}: {e}  {:.1} ms", file.display(), e.kind(), ms);
            }
        }
    }
    if !times.is_empty() {
        times.sort_by(f64::total_cmp);
        println!(
            "{} processed, {} failed, median {:.1} ms",
            times.len(),
            failures,
            times[times.len() / 2]
        );
    }
    if failures > 0 {
        anyhow::bail!("{failures} of {} files failed", files.len());
    }
    Ok(())
}

pub async fn gc() -> Result<()> {
    init_logs("warn");
    let settings = Settings::from_env()?;
    let service = embedded_service(&settings, &settings.public_base_url()).await?;
    let report = service.gc().await?;
    println!(
        "gc: {} expired records examined, {} images deleted ({} files), {} kept (re-used meanwhile)",
        report.examined, report.images_deleted, report.files_deleted, report.kept
    );
    Ok(())
}

pub async fn sweep(dry_run: bool) -> Result<()> {
    init_logs("warn");
    let settings = Settings::from_env()?;
    let service = embedded_service(&settings, &settings.public_base_url()).await?;
    let r = service.sweep(dry_run).await?;
    println!(
        "sweep{}: {} shards, {} files scanned, {} garbage ({} bytes), {} deleted, {} unowned but younger than {}, {} unrecognised",
        if dry_run { " (dry run)" } else { "" },
        r.shards,
        r.files_scanned,
        r.garbage_files,
        r.garbage_bytes,
        r.files_deleted,
        r.young_unowned_files,
        humantime::format_duration(settings.sweep_grace),
        r.unrecognised_files
    );
    Ok(())
}
