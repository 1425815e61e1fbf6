//! Composition: builds the ports for a backend, once, and the service over them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::adapters::fs::FsBlobStore;
use crate::adapters::local_upload_urls::LocalUploadUrls;
use crate::adapters::sqlite::{QueueSender, SqliteStore};
use crate::adapters::{DynamoStore, S3BlobStore, SqsSender, StepFunctionsDelay};
use crate::flows::{Policy, Ports, Service};
use crate::pipeline::{Pipeline, PipelineConfig, PipelineError, Watermark};
use crate::ports::{Clock, StoreError};
use crate::settings::{AwsBackend, Backend, Settings};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot read the watermark {path}: {source}")]
    WatermarkFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid watermark: {0}")]
    Watermark(#[from] PipelineError),
    #[error("cannot open the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("start-up failed: {0}")]
    Startup(String),
}

/// The ports of the backend the settings name, built once. `public_url` is where the local
/// runner is reached (its presigned-upload URLs point there; unused on AWS).
pub async fn ports(
    settings: &Settings,
    public_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Ports, AppError> {
    match &settings.backend {
        Backend::Embedded { data_dir } => {
            embedded_ports(data_dir, public_url.trim_end_matches('/'), clock).await
        }
        Backend::Aws(aws) => Ok(aws_ports(aws, clock).await),
    }
}

/// The AWS clients, configured from the standard AWS environment (region, credentials,
/// `AWS_ENDPOINT_URL` for emulators).
async fn aws_ports(aws: &AwsBackend, clock: Arc<dyn Clock>) -> Ports {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(url) = &aws.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    let config = loader.load().await;
    let s3_config = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(aws.force_path_style)
        .build();
    let blobs = Arc::new(S3BlobStore::new(
        aws_sdk_s3::Client::from_conf(s3_config),
        &aws.bucket,
    ));
    let records = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        &aws.table,
    ));
    let delay = aws
        .delay_state_machine_arn
        .as_deref()
        .map(|arn| StepFunctionsDelay::new(aws_sdk_sfn::Client::new(&config), arn));
    let messages = Arc::new(
        SqsSender::new(aws_sdk_sqs::Client::new(&config), aws.queues.clone(), delay)
            .with_max_sqs_delay(aws.sqs_max_delay),
    );
    Ports {
        blobs: blobs.clone(),
        images: records.clone(),
        offers: records.clone(),
        uploads: records.clone(),
        upload_urls: blobs,
        checkpoints: records.clone(),
        records: records.clone(),
        rate_limits: records,
        messages,
        // Lambda's SQS triggers receive on AWS; nothing here polls a queue.
        queue: None,
        clock,
    }
}

/// What every Lambda function starts with: settings from the environment and the service on
/// the backend they name (AWS in production), with the system clock.
pub async fn service_from_env()
-> Result<(Settings, Service), Box<dyn std::error::Error + Send + Sync>> {
    let settings = Settings::from_env()?;
    let service = service(
        &settings,
        &settings.public_base_url(),
        Arc::new(crate::ports::SystemClock),
    )
    .await?;
    Ok((settings, service))
}

/// The SQLite file inside a data directory.
pub fn sqlite_path(data_dir: &Path) -> PathBuf {
    data_dir.join("imgest.sqlite3")
}

/// The blob directory inside a data directory.
pub fn blobs_path(data_dir: &Path) -> PathBuf {
    data_dir.join("files")
}

async fn embedded_ports(
    data_dir: &Path,
    public_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Ports, AppError> {
    let blobs_dir = blobs_path(data_dir);
    tokio::fs::create_dir_all(&blobs_dir)
        .await
        .map_err(|source| AppError::DataDir {
            path: blobs_dir.clone(),
            source,
        })?;
    // Opening creates the schema: blocking file IO, kept off the async workers.
    let db = sqlite_path(data_dir);
    let store = tokio::task::spawn_blocking(move || SqliteStore::open(&db))
        .await
        .map_err(|e| AppError::Startup(e.to_string()))??;
    let store = Arc::new(store);
    let moving = blobs_dir.clone();
    let moved = tokio::task::spawn_blocking(move || crate::adapters::fs::move_to_areas(&moving))
        .await
        .map_err(|e| AppError::Startup(e.to_string()))??;
    if moved > 0 {
        tracing::info!(
            moved,
            "moved image files of an earlier layout to public/ and originals/"
        );
    }
    Ok(Ports {
        blobs: Arc::new(FsBlobStore::new(blobs_dir)),
        images: store.clone(),
        offers: store.clone(),
        uploads: store.clone(),
        upload_urls: Arc::new(LocalUploadUrls::new(public_url)),
        checkpoints: store.clone(),
        records: store.clone(),
        rate_limits: store.clone(),
        // Messages become tasks of the same file's queue, which the local workers receive.
        messages: Arc::new(QueueSender::new(store.clone(), clock.clone())),
        queue: Some(store),
        clock,
    })
}

/// The pipeline the settings describe (reads the watermark file, if any).
pub fn pipeline(settings: &Settings) -> Result<Pipeline, AppError> {
    let watermark = match &settings.watermark {
        None => None,
        Some(w) => {
            let png = std::fs::read(&w.path).map_err(|source| AppError::WatermarkFile {
                path: w.path.clone(),
                source,
            })?;
            Some(Watermark::from_png(
                &png,
                w.position,
                w.opacity,
                w.variants.clone(),
            )?)
        }
    };
    Ok(Pipeline::new(PipelineConfig {
        variants: settings.variants.clone(),
        jpeg_quality: settings.jpeg_quality,
        max_body: settings.max_body,
        max_pixels: settings.max_pixels,
        watermark,
    }))
}

/// The service over the ports of the settings' backend, configured by the settings.
pub async fn service(
    settings: &Settings,
    public_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Service, AppError> {
    let ports = ports(settings, public_url, clock).await?;
    Ok(Service::new(
        ports,
        pipeline(settings)?,
        Policy::from_settings(settings),
    ))
}

/// What the crawl functions (intake, fetch, process) start with: the service from the
/// environment and the crawler over it, processing new photos as `processing` says.
pub async fn crawler_from_env(
    processing: crate::flows::crawl::Processing,
) -> Result<crate::flows::crawl::Crawler, Box<dyn std::error::Error + Send + Sync>> {
    let (settings, service) = service_from_env().await?;
    Ok(crate::flows::crawl::Crawler::new(
        Arc::new(service),
        settings.crawl,
        processing,
    ))
}
