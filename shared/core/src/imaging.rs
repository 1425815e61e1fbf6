//! What the photo pipeline takes and gives, and the port the flows call it through
//! ([`Imaging`]): the flows, and every function that links them, see the pipeline's results and
//! refusals without linking its codecs (`imgest-pipeline` implements the port; a function that
//! never decodes, such as the collectors, runs without one).

use std::fmt;
use std::str::FromStr;

use crate::domain::{
    OriginalMetadata, OutputFormat, QueryPoints, Signature, SourceFormat, ThumbHash, VariantName,
    VariantSet, VariantSetVersion,
};

/// The photo pipeline, as the flows use it. `Send + Sync`: one is shared by every flow of a
/// process. [`process`](Self::process) is synchronous and CPU-bound: async callers run it in
/// `spawn_blocking`.
pub trait Imaging: Send + Sync + fmt::Debug {
    /// The variants it makes, in their order.
    fn variants(&self) -> &VariantSet;
    /// The version of the files it makes: what a ready record says it was made with, and what
    /// a backfill brings every record to.
    fn version(&self) -> &VariantSetVersion;
    /// The largest body it accepts, in bytes.
    fn max_body(&self) -> u64;
    /// What a stored original keeps of the photo's metadata.
    fn original_metadata(&self) -> OriginalMetadata;
    /// The cheap checks only: a body of `len` bytes within the size limit, whose first bytes
    /// (`head`, [`SNIFF_LEN`](crate::domain::SNIFF_LEN) are enough) are the magic bytes of an
    /// accepted format.
    fn check_format(&self, len: usize, head: &[u8]) -> Result<SourceFormat, PipelineError>;
    /// The format (sniffed from the bytes), the body's size and the header's pixel count
    /// checked, before any decoding.
    fn inspect(&self, bytes: &[u8]) -> Result<SourceInfo, PipelineError>;
    /// The most memory processing `bytes` will hold at once, estimated from the header: what to
    /// reserve before [`process`](Self::process).
    fn footprint(&self, bytes: &[u8]) -> Result<Footprint, PipelineError>;
    /// The photo decoded once, oriented, converted to sRGB and made into every variant.
    fn process(&self, bytes: &[u8]) -> Result<Processed, PipelineError>;
    /// Which of a photo's variants (their sizes, upright; the photo `full`) its placeholder is
    /// made of.
    fn placeholder_source(
        &self,
        sizes: &mut dyn Iterator<Item = (u32, u32)>,
        full: (u32, u32),
    ) -> Option<usize>;
    /// What a stored variant's file gives a record made before placeholders or signatures
    /// were: its placeholder when `placeholder`, its perceptual signature when `signature`,
    /// from one decode (`None` for what it cannot make, all of it for a file it cannot read).
    fn derive_from_variant(
        &self,
        file: &[u8],
        placeholder: bool,
        signature: bool,
    ) -> (Option<ThumbHash>, Option<Signature>);
    /// Which of a photo's variants its perceptual signature is made of (`None`: none has the
    /// photo's shape).
    fn signature_source(
        &self,
        sizes: &mut dyn Iterator<Item = (u32, u32)>,
        full: (u32, u32),
    ) -> Option<usize>;
    /// A lookup's points in a stored variant's file (the one the signature is made of), at
    /// each of the scales a lookup looks at: what finds a crop of the photo, or the photo it
    /// is a crop of. `None` for a file it cannot read.
    fn query_points(&self, file: &[u8]) -> Option<QueryPoints>;
}

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
}

/// What was done about a photo's colour profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Colour {
    /// No profile: the pixels are taken as sRGB (as browsers take them).
    Untagged,
    /// An sRGB profile (or one equivalent to it): nothing to convert.
    Srgb,
    /// Converted to sRGB from the photo's own profile.
    Converted,
    /// A CMYK photo without a profile: converted through the default CMYK profile.
    DefaultCmyk,
    /// The photo's profile could not be used and was ignored (why, in words): its pixels are
    /// taken as sRGB, or for a CMYK photo converted through the default CMYK profile.
    Ignored(String),
}

impl Colour {
    /// A short name for logs and summaries (`untagged`, `srgb`, `converted`, `default_cmyk`,
    /// `ignored`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Untagged => "untagged",
            Self::Srgb => "srgb",
            Self::Converted => "converted",
            Self::DefaultCmyk => "default_cmyk",
            Self::Ignored(_) => "ignored",
        }
    }
}

/// Where the overlay goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatermarkPosition {
    TopLeft,
    TopRight,
    BottomLeft,
    BottomRight,
    Center,
}

impl WatermarkPosition {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TopLeft => "top-left",
            Self::TopRight => "top-right",
            Self::BottomLeft => "bottom-left",
            Self::BottomRight => "bottom-right",
            Self::Center => "center",
        }
    }
}

impl FromStr for WatermarkPosition {
    type Err = PipelineError;

    /// `top-left`, `top-right`, `bottom-left`, `bottom-right` or `center`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "top-left" => Ok(Self::TopLeft),
            "top-right" => Ok(Self::TopRight),
            "bottom-left" => Ok(Self::BottomLeft),
            "bottom-right" => Ok(Self::BottomRight),
            "center" => Ok(Self::Center),
            _ => Err(PipelineError::Watermark(format!(
                "position must be top-left, top-right, bottom-left, bottom-right or center, got {:?}",
                s.chars().take(40).collect::<String>()
            ))),
        }
    }
}

impl fmt::Display for WatermarkPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Format and stored dimensions read from the header only (no pixel decoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceInfo {
    pub format: SourceFormat,
    pub width: u32,
    pub height: u32,
}

/// One variant, encoded in its format.
#[derive(Clone, PartialEq, Eq)]
pub struct EncodedVariant {
    pub name: VariantName,
    pub width: u32,
    pub height: u32,
    pub format: OutputFormat,
    /// The file.
    pub bytes: Vec<u8>,
}

impl fmt::Debug for EncodedVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncodedVariant")
            .field("name", &self.name)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("format", &self.format)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// A processed photo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Processed {
    pub format: SourceFormat,
    /// Width and height after EXIF orientation.
    pub width: u32,
    pub height: u32,
    /// What was done about its colour profile (the variants are sRGB).
    pub colour: Colour,
    /// In the [`VariantSet`]'s order.
    pub variants: Vec<EncodedVariant>,
    /// The original to store in place of the bytes processed: them with their metadata
    /// stripped as the pipeline's configuration says (`None` under `keep`: them as
    /// they are).
    pub original: Option<Vec<u8>>,
    /// The policy `original` was made under.
    pub original_metadata: OriginalMetadata,
    /// The photo's placeholder, from its smallest variant (`None`: no variant to make it of).
    pub thumbhash: Option<ThumbHash>,
    /// The photo's perceptual signature, from a variant of its shape (`None`: no such variant,
    /// or one too small to hash).
    pub signature: Option<Signature>,
}

impl Processed {
    /// Writes each variant to `{dir}/{stem}.{variant}.{jpg,webp,avif}` (the CLI's `process
    /// --out`, the pipeline benchmark), naming the file that could not be written.
    pub fn write_variants(
        &self,
        dir: &std::path::Path,
        stem: &str,
    ) -> Result<(), (std::path::PathBuf, std::io::Error)> {
        for v in &self.variants {
            let path = dir.join(format!("{stem}.{}.{}", v.name, v.format.extension()));
            std::fs::write(&path, &v.bytes).map_err(|e| (path, e))?;
        }
        Ok(())
    }
}

/// What one photo needs: its header's facts and the bytes to reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    pub info: SourceInfo,
    /// The most bytes its processing holds at once, the body itself not included.
    pub bytes: u64,
}
