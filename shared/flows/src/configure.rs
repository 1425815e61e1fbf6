//! The service the settings describe: its pipeline (with the watermark file read once) and its
//! policy, over ports an adapter crate built. The local runner and the Lambda functions both
//! start here.

use std::path::PathBuf;

use imgest_core::Ports;
use imgest_pipeline::{Pipeline, PipelineConfig, PipelineError, Watermark};
use imgest_settings::Settings;

use crate::{Policy, Service};

/// The settings name a watermark that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    #[error("cannot read the watermark {path}: {source}")]
    WatermarkFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid watermark: {0}")]
    Watermark(#[from] PipelineError),
}

/// The pipeline the settings describe (reads the watermark file, if any).
pub fn pipeline(settings: &Settings) -> Result<Pipeline, ConfigureError> {
    let watermark = match &settings.watermark {
        None => None,
        Some(w) => {
            let png = std::fs::read(&w.path).map_err(|source| ConfigureError::WatermarkFile {
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

/// The service over `ports`, configured by the settings.
pub fn service(ports: Ports, settings: &Settings) -> Result<Service, ConfigureError> {
    Ok(Service::new(
        ports,
        pipeline(settings)?,
        Policy::from_settings(settings),
    ))
}
