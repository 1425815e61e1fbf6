//! The photo pipeline: bytes in, JPEG, WebP or AVIF variants out (sniff, limit, decode once,
//! orient, resize, convert to sRGB, watermark, encode), and the photo's placeholder (a
//! ThumbHash of its smallest variant).
//!
//! Pixels are RGB, except for a YCbCr JPEG when nothing needs RGB (no watermark on its
//! variants, every variant JPEG) and libjpeg-turbo is built in: then they stay YCbCr planes
//! throughout (`planar.rs`).
//!
//! [`Pipeline::process`] is synchronous and CPU-bound: async callers run it in
//! `spawn_blocking`. Everything that can be wrong with the bytes comes back as a
//! [`PipelineError`]; nothing panics on bad input.

mod avif;
mod colour;
pub mod configure;
mod decode;
mod detect;
mod encode;
mod error;
mod footprint;
mod gif;
mod jpeg;
mod meta;
pub mod pdq;
mod placeholder;
#[cfg(feature = "turbojpeg")]
mod planar;
mod png;
mod points;
mod resize;
mod riff;
mod scratch;
mod signature;
mod strip;
#[cfg(test)]
mod tests;
#[cfg(feature = "turbojpeg")]
mod turbo;
mod watermark;
#[cfg(feature = "libwebp")]
mod webp;
mod weigh;

use std::borrow::Cow;
use std::sync::Arc;

pub use encode::{DEFAULT_AVIF_QUALITY, DEFAULT_WEBP_QUALITY, supports};
pub use imgest_core::imaging::{
    Colour, EncodedVariant, Footprint, Imaging, PipelineError, Processed, SourceInfo,
    WatermarkPosition,
};
pub use watermark::Watermark;

use imgest_core::domain::{
    OriginalMetadata, OutputFormat, QueryPoints, Signature, SourceFormat, ThumbHash, VariantSet,
    VariantSetVersion, VariantSpec,
};
use imgest_core::telemetry::metrics::Stage;
use resize::Raster;
use scratch::Scratch;

/// What the pipeline makes and what it accepts.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub variants: VariantSet,
    /// JPEG quality, 1..=100 (values outside are clamped), of the JPEG variants that name none.
    pub jpeg_quality: u8,
    /// Largest accepted body, in bytes.
    pub max_body: u64,
    /// Largest accepted decoded image, in pixels (width × height, from the header).
    pub max_pixels: u64,
    pub watermark: Option<Watermark>,
    /// What a stored original keeps of the photo's metadata ([`Processed::original`]).
    pub original_metadata: OriginalMetadata,
}

impl PipelineConfig {
    pub const DEFAULT_JPEG_QUALITY: u8 = 82;
    pub const DEFAULT_MAX_BODY: u64 = 20_000_000;
    pub const DEFAULT_MAX_PIXELS: u64 = 50_000_000;
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            variants: VariantSet::default(),
            jpeg_quality: Self::DEFAULT_JPEG_QUALITY,
            max_body: Self::DEFAULT_MAX_BODY,
            max_pixels: Self::DEFAULT_MAX_PIXELS,
            watermark: None,
            original_metadata: OriginalMetadata::default(),
        }
    }
}

/// The placeholder of upright sRGB pixels, made as [`Pipeline::process`] makes it of a variant's
/// (the pipeline benchmark times it alone, beside the whole pipeline).
pub fn placeholder_of(pixels: &image::RgbImage) -> Option<ThumbHash> {
    placeholder::of_rgb(pixels)
}

/// Which of a photo's variants (their sizes, upright; the photo `full`) its placeholder is made
/// of: the smallest of the photo's shape, else the smallest of all.
pub fn placeholder_source(
    sizes: impl Iterator<Item = (u32, u32)>,
    full: (u32, u32),
) -> Option<usize> {
    placeholder::source(sizes, full)
}

/// A stored variant's pixels (JPEG or WebP: upright sRGB, as the pipeline wrote them), for
/// what a record made before placeholders or signatures lacks; `None` for another format (an
/// AVIF variant: the record is then re-processed whole) or a file that does not decode.
fn variant_pixels(file: &[u8]) -> Option<image::RgbImage> {
    let format = image::guess_format(file).ok()?;
    if !matches!(format, image::ImageFormat::Jpeg | image::ImageFormat::WebP) {
        return None;
    }
    let pixels = image::load_from_memory_with_format(file, format).ok()?;
    Some(pixels.to_rgb8())
}

/// The perceptual signature of upright sRGB pixels, made as [`Pipeline::process`] makes it of a
/// variant's (the near-duplicate benchmark hashes its photos with it).
pub fn signature_of(pixels: &image::RgbImage) -> Option<Signature> {
    signature::of_rgb(pixels)
}

/// A lookup's points of upright sRGB pixels, as [`Imaging::query_points`] finds them in a
/// stored variant (the near-duplicate benchmark looks its photos up with them).
pub fn query_points_of(pixels: &image::RgbImage) -> QueryPoints {
    signature::query_points(pixels)
}

/// The configured pipeline; `Send + Sync`, cheap to share in an `Arc`. Keeps working memory
/// between photos (bounded, shared by its clones: see `scratch.rs`).
#[derive(Debug, Clone)]
pub struct Pipeline {
    config: PipelineConfig,
    version: VariantSetVersion,
    scratch: Arc<Scratch>,
}

impl Pipeline {
    pub fn new(mut config: PipelineConfig) -> Self {
        config.jpeg_quality = config.jpeg_quality.clamp(1, 100);
        let watermark = config
            .watermark
            .as_ref()
            .map_or_else(|| "none".to_owned(), Watermark::fingerprint);
        let mut parts: Vec<Vec<u8>> = vec![
            config.variants.to_string().into_bytes(),
            vec![config.jpeg_quality],
            watermark.into_bytes(),
        ];
        // The other formats' defaults and encoder settings, only where a variant uses them (a
        // JPEG set versions as before they existed).
        if config.variants.specs().iter().any(|s| !s.format.is_jpeg()) {
            parts.push(encode::settings().into_bytes());
        }
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let version = VariantSetVersion::of(&parts);
        Self {
            config,
            version,
            scratch: Arc::default(),
        }
    }

    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The version of the files this pipeline makes: what a ready record says it was made
    /// with, and what a backfill brings every record to.
    pub fn version(&self) -> &VariantSetVersion {
        &self.version
    }

    /// The quality `spec`'s variant is encoded at: its own, else its format's default.
    fn quality(&self, spec: &VariantSpec) -> u8 {
        spec.quality.unwrap_or(match spec.format {
            OutputFormat::Jpeg => self.config.jpeg_quality,
            OutputFormat::Webp => DEFAULT_WEBP_QUALITY,
            OutputFormat::Avif => DEFAULT_AVIF_QUALITY,
        })
    }

    fn limits(&self) -> detect::Limits {
        detect::Limits {
            max_body: self.config.max_body,
            max_pixels: self.config.max_pixels,
        }
    }

    /// The cheap checks only: a body of `len` bytes within the size limit, whose first bytes
    /// (`head`, [`SNIFF_LEN`](imgest_core::domain::SNIFF_LEN) are enough) are the magic bytes of an accepted format.
    pub fn check_format(&self, len: usize, head: &[u8]) -> Result<SourceFormat, PipelineError> {
        detect::check_len(len, &self.limits())?;
        detect::sniff(head)
    }

    /// Sniffs the format from the bytes (never from a name or Content-Type), checks the body
    /// size and the declared pixel count from the header, before any decoding.
    pub fn inspect(&self, bytes: &[u8]) -> Result<SourceInfo, PipelineError> {
        detect::inspect(bytes, &self.limits())
    }

    /// The most memory processing `bytes` will hold at once, estimated from the header (after
    /// the checks of [`inspect`](Self::inspect)): what to reserve before [`process`](Self::process).
    pub fn footprint(&self, bytes: &[u8]) -> Result<Footprint, PipelineError> {
        footprint::estimate(bytes, &self.limits(), self.config.variants.specs())
    }

    /// [`inspect`](Self::inspect), then decodes once, applies the orientation, and makes and
    /// encodes every variant from the one decoded image, converted to sRGB.
    pub fn process(&self, bytes: &[u8]) -> Result<Processed, PipelineError> {
        let specs = self.config.variants.specs();
        // The watermark is blended in RGB, and only the JPEG encoder takes YCbCr planes: with
        // either, every variant is made in RGB.
        let planar = specs.iter().all(|s| s.format.is_jpeg())
            && self
                .config
                .watermark
                .as_ref()
                .is_none_or(|w| !specs.iter().any(|s| w.applies_to(&s.name)));
        let scratch = &*self.scratch;
        let decoded =
            Stage::Decode.time(|| decode::decode(bytes, &self.limits(), specs, planar, scratch))?;
        let full = (decoded.width, decoded.height);
        let mut variants = Vec::with_capacity(specs.len());
        let mut thumbhash = None;
        let mut perceptual = None;
        // Every pixel buffer goes back to the scratch once encoded (on an error, it is freed).
        match decoded.pixels {
            decode::Pixels::Rgb(image) => {
                let rendered =
                    Stage::Resize.time(|| resize::render_all(&image, full, specs, scratch))?;
                let source = placeholder::source(rendered.iter().map(|p| p.dimensions()), full);
                let hashed = signature::source(rendered.iter().map(|p| p.dimensions()), full);
                for (i, (spec, mut pixels)) in specs.iter().zip(rendered).enumerate() {
                    if let Some(transform) = &decoded.transform {
                        transform.apply(pixels.to_mut(), &scratch.buffers)?;
                    }
                    if Some(i) == source {
                        thumbhash = placeholder::of_rgb(&pixels);
                    }
                    if Some(i) == hashed {
                        let mut work = scratch.signatures.take().unwrap_or_default();
                        perceptual = signature::of_rgb_with(&pixels, &mut work);
                        scratch.signatures.put(work);
                    }
                    if let Some(watermark) = &self.config.watermark
                        && watermark.applies_to(&spec.name)
                    {
                        watermark.apply(pixels.to_mut())?;
                    }
                    let quality = self.quality(spec);
                    variants.push(EncodedVariant {
                        name: spec.name.clone(),
                        width: pixels.width(),
                        height: pixels.height(),
                        format: spec.format,
                        bytes: Stage::Encode
                            .time(|| encode::encode(&pixels, spec.format, quality, scratch))?,
                    });
                    if let Cow::Owned(pixels) = pixels {
                        pixels.recycle(&scratch.buffers);
                    }
                }
                // Not kept: the general decoders allocate their own, so the scratch would only
                // fill up with buffers nothing takes.
                drop(image);
            }
            #[cfg(feature = "turbojpeg")]
            decode::Pixels::Yuv(planes) => {
                let rendered =
                    Stage::Resize.time(|| resize::render_all(&planes, full, specs, scratch))?;
                let source =
                    placeholder::source(rendered.iter().map(|p| (p.y.width, p.y.height)), full);
                let hashed =
                    signature::source(rendered.iter().map(|p| (p.y.width, p.y.height)), full);
                for (i, (spec, rendered)) in specs.iter().zip(rendered).enumerate() {
                    if Some(i) == source {
                        thumbhash = placeholder::of_yuv(&rendered);
                    }
                    if Some(i) == hashed {
                        let mut work = scratch.signatures.take().unwrap_or_default();
                        perceptual = signature::of_yuv(&rendered, &mut work);
                        scratch.signatures.put(work);
                    }
                    let quality = self.quality(spec);
                    variants.push(EncodedVariant {
                        name: spec.name.clone(),
                        width: rendered.y.width,
                        height: rendered.y.height,
                        format: OutputFormat::Jpeg,
                        bytes: Stage::Encode
                            .time(|| turbo::encode_yuv(&rendered, quality, scratch))?,
                    });
                    if let Cow::Owned(rendered) = rendered {
                        rendered.recycle(&scratch.buffers);
                    }
                }
                planes.recycle(&scratch.buffers);
            }
        }
        let policy = self.config.original_metadata;
        let original = strip::original(bytes, decoded.format, policy)?;
        Ok(Processed {
            format: decoded.format,
            width: decoded.width,
            height: decoded.height,
            colour: decoded.colour,
            variants,
            original,
            original_metadata: policy,
            thumbhash,
            signature: perceptual,
        })
    }
}

impl Imaging for Pipeline {
    fn variants(&self) -> &VariantSet {
        &self.config.variants
    }

    fn version(&self) -> &VariantSetVersion {
        Pipeline::version(self)
    }

    fn max_body(&self) -> u64 {
        self.config.max_body
    }

    fn original_metadata(&self) -> OriginalMetadata {
        self.config.original_metadata
    }

    fn check_format(&self, len: usize, head: &[u8]) -> Result<SourceFormat, PipelineError> {
        Pipeline::check_format(self, len, head)
    }

    fn inspect(&self, bytes: &[u8]) -> Result<SourceInfo, PipelineError> {
        Pipeline::inspect(self, bytes)
    }

    fn footprint(&self, bytes: &[u8]) -> Result<Footprint, PipelineError> {
        Pipeline::footprint(self, bytes)
    }

    fn process(&self, bytes: &[u8]) -> Result<Processed, PipelineError> {
        Pipeline::process(self, bytes)
    }

    fn placeholder_source(
        &self,
        sizes: &mut dyn Iterator<Item = (u32, u32)>,
        full: (u32, u32),
    ) -> Option<usize> {
        placeholder::source(sizes, full)
    }

    fn derive_from_variant(
        &self,
        file: &[u8],
        placeholder: bool,
        signature: bool,
    ) -> (Option<ThumbHash>, Option<Signature>) {
        let Some(pixels) = variant_pixels(file) else {
            return (None, None);
        };
        (
            placeholder.then(|| placeholder::of_rgb(&pixels)).flatten(),
            signature.then(|| signature::of_rgb(&pixels)).flatten(),
        )
    }

    fn signature_source(
        &self,
        sizes: &mut dyn Iterator<Item = (u32, u32)>,
        full: (u32, u32),
    ) -> Option<usize> {
        signature::source(sizes, full)
    }

    fn query_points(&self, file: &[u8]) -> Option<QueryPoints> {
        variant_pixels(file).map(|pixels| signature::query_points(&pixels))
    }
}
