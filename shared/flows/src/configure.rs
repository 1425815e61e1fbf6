//! The service the settings describe: its pipeline (with the watermark read once) and its
//! policy, over ports an adapter crate built. The local runner and the Lambda functions both
//! start here. A watermark in a file is read here; one in S3 by the caller, which has the
//! client ([`watermark_on_s3`] says which, [`service_with`] takes its bytes).

use std::path::PathBuf;

use imgest_core::Ports;
use imgest_pipeline::{Pipeline, PipelineConfig, PipelineError, Watermark};
use imgest_settings::{Settings, WatermarkSource};

use crate::{Policy, Service};

/// The settings name a watermark that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    #[error("cannot read the watermark {path}: {source}")]
    WatermarkFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the watermark {0} is read by the AWS backend's start-up, which did not read it")]
    WatermarkNotRead(String),
    #[error("invalid watermark: {0}")]
    Watermark(#[from] PipelineError),
}

/// The largest watermark PNG read (a logo is a few kilobytes; its pixels are bounded again when
/// decoded).
pub const MAX_WATERMARK_BYTES: u64 = 4 << 20;

/// The S3 object (bucket, key) the watermark is read from, if the settings name one there.
pub fn watermark_on_s3(settings: &Settings) -> Option<(&str, &str)> {
    match &settings.watermark.as_ref()?.source {
        WatermarkSource::S3 { bucket, key } => Some((bucket, key)),
        WatermarkSource::File(_) => None,
    }
}

/// The pipeline the settings describe (reads the watermark file, if any).
pub fn pipeline(settings: &Settings) -> Result<Pipeline, ConfigureError> {
    pipeline_with(settings, None)
}

/// The pipeline the settings describe, with the watermark's PNG as `read` by the caller (the
/// one in S3), else from its file.
pub fn pipeline_with(
    settings: &Settings,
    read: Option<Vec<u8>>,
) -> Result<Pipeline, ConfigureError> {
    let watermark = match &settings.watermark {
        None => None,
        Some(w) => {
            let png = match (read, &w.source) {
                (Some(png), _) => png,
                (None, WatermarkSource::File(path)) => {
                    std::fs::read(path).map_err(|source| ConfigureError::WatermarkFile {
                        path: path.clone(),
                        source,
                    })?
                }
                (None, s3) => return Err(ConfigureError::WatermarkNotRead(s3.to_string())),
            };
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
        original_metadata: settings.original_metadata,
    }))
}

/// The service over `ports`, configured by the settings.
pub fn service(ports: Ports, settings: &Settings) -> Result<Service, ConfigureError> {
    service_with(ports, settings, None)
}

/// The service over `ports`, with the watermark's PNG as `read` by the caller
/// ([`pipeline_with`]).
pub fn service_with(
    ports: Ports,
    settings: &Settings,
    read: Option<Vec<u8>>,
) -> Result<Service, ConfigureError> {
    Ok(Service::new(
        ports,
        pipeline_with(settings, read)?,
        Policy::from_settings(settings),
    ))
}
