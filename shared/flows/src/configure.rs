//! The service the settings describe: its policy over ports an adapter crate built. The local
//! runner and the Lambda functions both start here; a process that decodes photos then gives
//! it the pipeline (`imgest_pipeline::configure`, with the watermark read once:
//! [`watermark_on_s3`] says when the caller reads it from S3).

use imgest_core::Ports;
use imgest_settings::{Settings, WatermarkSource};

use crate::{Policy, Service};

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

/// The service over `ports`, configured by the settings, without the pipeline
/// ([`Service::with_imaging`] gives it).
pub fn service(ports: Ports, settings: &Settings) -> Service {
    Service::new(ports, Policy::from_settings(settings))
}
