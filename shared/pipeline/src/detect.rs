//! Format sniffing, header dimensions and the size limits, all before any pixel is decoded.

use std::io::Cursor;

use image::{ImageDecoder, ImageFormat, ImageReader};

use super::{PipelineError, SourceInfo};
use imgest_core::domain::SourceFormat;

/// The limits every body is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_body: u64,
    pub max_pixels: u64,
}

impl Limits {
    /// The most bytes a decoder may allocate: the largest decoded buffer allowed (8 bytes per
    /// pixel, 16-bit RGBA) plus room for the decoders' own working buffers.
    pub fn max_alloc(&self) -> u64 {
        self.max_pixels.saturating_mul(8).saturating_add(64 << 20)
    }

    /// The limits handed to the `image` decoders once the header has passed our checks, so that
    /// a header that lies about its size cannot make them allocate without bound.
    fn for_decoder(&self) -> image::Limits {
        let side = u32::try_from(self.max_pixels).unwrap_or(u32::MAX);
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(side);
        limits.max_image_height = Some(side);
        limits.max_alloc = Some(self.max_alloc());
        limits
    }

    /// While the header is read: only the allocation cap (a dimension limit would fail before
    /// we know the dimensions to report).
    fn for_header(&self) -> image::Limits {
        let mut limits = image::Limits::no_limits();
        limits.max_alloc = Some(self.max_alloc());
        limits
    }
}

/// Refuses a body over `max_body` bytes.
pub(crate) fn check_size(bytes: &[u8], limits: &Limits) -> Result<(), PipelineError> {
    check_len(bytes.len(), limits)
}

/// Refuses a body length over `max_body` bytes.
pub(crate) fn check_len(len: usize, limits: &Limits) -> Result<(), PipelineError> {
    let size = u64::try_from(len).unwrap_or(u64::MAX);
    if size > limits.max_body {
        return Err(PipelineError::TooLarge {
            size,
            limit: limits.max_body,
        });
    }
    Ok(())
}

/// The format, from the magic bytes only.
pub(crate) fn sniff(bytes: &[u8]) -> Result<SourceFormat, PipelineError> {
    SourceFormat::sniff(bytes).map_err(|other| PipelineError::UnsupportedFormat(other.describe()))
}

/// The `image` crate's decoder of `format`: every format but AVIF (read by `avif/`).
fn image_format(format: SourceFormat) -> Option<ImageFormat> {
    match format {
        SourceFormat::Jpeg => Some(ImageFormat::Jpeg),
        SourceFormat::Png => Some(ImageFormat::Png),
        SourceFormat::Webp => Some(ImageFormat::WebP),
        SourceFormat::Gif => Some(ImageFormat::Gif),
        SourceFormat::Avif => None,
    }
}

/// Checks the body size, sniffs the format, reads the header and checks the declared pixel
/// count; returns the header's facts and a decoder ready to decode (with allocation limits set).
pub(crate) fn open<'a>(
    bytes: &'a [u8],
    limits: &Limits,
) -> Result<(SourceInfo, impl ImageDecoder + 'a), PipelineError> {
    check_size(bytes, limits)?;
    let format = sniff(bytes)?;
    let decoder = image_format(format)
        .ok_or_else(|| PipelineError::UnsupportedFormat(format!("{} here", format.as_str())))?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), decoder);
    reader.limits(limits.for_header());
    let mut decoder = reader.into_decoder().map_err(super::error::from_decoder)?;
    let (width, height) = decoder.dimensions();
    let info = checked(format, width, height, limits)?;
    let too_many = || PipelineError::TooManyPixels {
        width,
        height,
        limit: limits.max_pixels,
    };
    decoder
        .set_limits(limits.for_decoder())
        .map_err(|e| match e {
            image::ImageError::Limits(_) => too_many(),
            other => super::error::from_decoder(other),
        })?;
    Ok((info, decoder))
}

/// Header facts only: what [`open`] checks, without keeping a decoder. A JPEG's header is
/// read by walking its markers up to the frame header (`jpeg.rs`), a PNG's by the `png` crate
/// with its text and ICC chunks skipped (see `png.rs`).
pub(crate) fn inspect(bytes: &[u8], limits: &Limits) -> Result<SourceInfo, PipelineError> {
    check_size(bytes, limits)?;
    match sniff(bytes)? {
        SourceFormat::Jpeg => {
            let frame = super::jpeg::frame(bytes)?;
            let (width, height) = (u32::from(frame.width), u32::from(frame.height));
            checked(SourceFormat::Jpeg, width, height, limits)
        }
        SourceFormat::Png => {
            let (width, height) = super::png::header(bytes)?;
            checked(SourceFormat::Png, width, height, limits)
        }
        SourceFormat::Avif => {
            let avif = super::avif::container::parse(bytes)?;
            checked(SourceFormat::Avif, avif.width, avif.height, limits)
        }
        SourceFormat::Webp | SourceFormat::Gif => open(bytes, limits).map(|(info, _)| info),
    }
}

/// Refuses an empty image, or one over the pixel limit.
pub(crate) fn checked(
    format: SourceFormat,
    width: u32,
    height: u32,
    limits: &Limits,
) -> Result<SourceInfo, PipelineError> {
    if width == 0 || height == 0 {
        return Err(PipelineError::CorruptImage(format!(
            "the header declares an empty {width}x{height} image"
        )));
    }
    if u64::from(width) * u64::from(height) > limits.max_pixels {
        return Err(PipelineError::TooManyPixels {
            width,
            height,
            limit: limits.max_pixels,
        });
    }
    Ok(SourceInfo {
        format,
        width,
        height,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_body: 20_000_000,
        max_pixels: 50_000_000,
    };

    #[test]
    fn sniffing_ignores_names_and_refuses_other_formats() {
        assert_eq!(sniff(b"\xff\xd8\xff\xe0rest").unwrap(), SourceFormat::Jpeg);
        assert_eq!(sniff(b"GIF89a....").unwrap(), SourceFormat::Gif);
        for bad in [
            &b""[..],
            b"hello",
            b"BM\x00\x00\x00\x00",
            b"II*\x00\x08\x00\x00\x00",
        ] {
            assert_eq!(
                sniff(bad).unwrap_err().kind(),
                "unsupported_format",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_body_size_is_checked_first() {
        let limits = Limits {
            max_body: 3,
            ..LIMITS
        };
        assert_eq!(
            inspect(b"text", &limits).unwrap_err(),
            PipelineError::TooLarge { size: 4, limit: 3 }
        );
    }
}
