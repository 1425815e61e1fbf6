//! The pipeline the settings describe, with the watermark read once: what every process that
//! decodes photos starts with (the local runner and CLI, the fetch, process, backfill and API
//! functions). A watermark in a file is read here; one in S3 by the caller, which has the
//! client, and passed in as `read`.

use std::path::PathBuf;
use std::sync::Arc;

use imgest_settings::{Settings, WatermarkSource};

use super::{Imaging, Pipeline, PipelineConfig, PipelineError, Watermark, supports};

/// The settings name a pipeline this build cannot make.
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
    #[error("IMGEST_VARIANTS: {0}: this build has no {1} encoder (built without its feature)")]
    NoEncoder(String, String),
}

/// The pipeline the settings describe, with the watermark's PNG as `read` by the caller (the
/// one in S3), else from its file.
pub fn from_settings(
    settings: &Settings,
    read: Option<Vec<u8>>,
) -> Result<Pipeline, ConfigureError> {
    if let Some(spec) = settings
        .variants
        .specs()
        .iter()
        .find(|s| !supports(s.format))
    {
        return Err(ConfigureError::NoEncoder(
            spec.to_string(),
            spec.format.to_string(),
        ));
    }
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

/// [`from_settings`], as the port the flows take (`Service::with_imaging`).
pub fn imaging(
    settings: &Settings,
    read: Option<Vec<u8>>,
) -> Result<Arc<dyn Imaging>, ConfigureError> {
    Ok(Arc::new(from_settings(settings, read)?))
}
