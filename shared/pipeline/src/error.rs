//! Why a photo was refused: one typed error per cause, each with a stable `kind` string.

/// Why the pipeline refused a photo (or a watermark). None is worth retrying: the same bytes
/// fail the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    /// The body is over `max_body` bytes (checked before anything looks at the bytes).
    #[error("the image is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
    /// The header declares more than `max_pixels` pixels (checked before decoding).
    #[error("the image is {width}x{height} pixels, over the limit of {limit} pixels")]
    TooManyPixels { width: u32, height: u32, limit: u64 },
    /// Decoding it would need more memory than the process has for one photo
    /// (`IMGEST_MEMORY_BUDGET`), however long it waited.
    #[error(
        "the image is {width}x{height} pixels and needs {needed} bytes to process, over the {budget} bytes this server has for one photo (IMGEST_MEMORY_BUDGET)"
    )]
    OverBudget {
        width: u32,
        height: u32,
        needed: u64,
        budget: u64,
    },
    /// Not JPEG, PNG, WebP, GIF or AVIF (empty bodies, text, BMP, TIFF, HEIC, ...), or a
    /// feature of one of them that the decoder does not support.
    #[error("unsupported image format: {0} (accepted: JPEG, PNG, WebP, GIF, AVIF)")]
    UnsupportedFormat(String),
    /// A supported format whose data is truncated or invalid.
    #[error("corrupt image: {0}")]
    CorruptImage(String),
    /// The configured watermark is unusable (a configuration error, not the photo's fault).
    #[error("invalid watermark: {0}")]
    Watermark(String),
}

impl PipelineError {
    /// A stable machine-readable name (the API puts it in error bodies).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::TooManyPixels { .. } | Self::OverBudget { .. } => "too_many_pixels",
            Self::UnsupportedFormat(_) => "unsupported_format",
            Self::CorruptImage(_) => "corrupt_image",
            Self::Watermark(_) => "invalid_watermark",
        }
    }

    /// Always `false`: every cause lies in the bytes or the configuration.
    pub fn is_retryable(&self) -> bool {
        false
    }

    /// Maps a decoder error: unsupported features stay unsupported, the rest is corruption.
    pub(crate) fn from_decoder(err: image::ImageError) -> Self {
        match err {
            image::ImageError::Unsupported(e) => Self::UnsupportedFormat(e.to_string()),
            other => Self::CorruptImage(other.to_string()),
        }
    }
}
