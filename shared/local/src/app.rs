//! Composition: the ports of the backend the settings name, built once (the one place that
//! matches on [`Backend`]), and the service over them.

use std::sync::Arc;

use imgest_core::Ports;
use imgest_core::backend::Backend;
use imgest_core::ports::Clock;
use imgest_flows::Service;
use imgest_flows::configure;
use imgest_pipeline::configure::ConfigureError;
use imgest_settings::Settings;

pub use imgest_embedded::{blobs_path, sqlite_path};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Configure(#[from] ConfigureError),
    #[error(transparent)]
    Open(#[from] imgest_embedded::OpenError),
    #[error("start-up failed: {0}")]
    Startup(String),
}

/// The ports of the backend the settings name. `public_url` is where the local runner is
/// reached (its presigned-upload URLs point there; unused on AWS).
pub async fn ports(
    settings: &Settings,
    public_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Ports, AppError> {
    match &settings.backend {
        Backend::Embedded { data_dir } => {
            Ok(imgest_embedded::ports(data_dir, public_url, clock).await?)
        }
        Backend::Aws(aws) => Ok(imgest_aws::ports(aws, clock).await),
    }
}

/// The service over the ports of the settings' backend, configured by the settings, with the
/// pipeline (the local runner and the CLI decode photos).
pub async fn service(
    settings: &Settings,
    public_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Service, AppError> {
    let ports = ports(settings, public_url, clock).await?;
    // A watermark in S3 (settings allow one only on AWS) is read here, once.
    let watermark = match (&settings.backend, configure::watermark_on_s3(settings)) {
        (Backend::Aws(aws), Some((bucket, key))) => Some(
            imgest_aws::read_object(aws, bucket, key, configure::MAX_WATERMARK_BYTES)
                .await
                .map_err(|e| AppError::Startup(format!("reading the watermark: {e}")))?,
        ),
        _ => None,
    };
    // The CDN erasures tell (`IMGEST_CDN_DISTRIBUTION_ARN`, AWS only: locally nothing caches).
    let cdn = match &settings.backend {
        Backend::Aws(aws) => imgest_aws::cdn(aws).await,
        Backend::Embedded { .. } => None,
    };
    let pipeline = imgest_pipeline::configure::imaging(settings, watermark)?;
    Ok(configure::service(ports, settings)
        .with_imaging(pipeline)
        .with_cdn(cdn))
}
