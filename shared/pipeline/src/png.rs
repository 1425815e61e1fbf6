//! PNG through the `png` crate, reduced as it decodes.
//!
//! The `image` crate holds a PNG at its stored depth (8 bytes a pixel for 16-bit RGBA: 392 MB
//! for a 49 MP photo of 0.6 MB on the wire) and converts it into a new buffer, twice on the way
//! to 8-bit RGB. Here the decoder strips 16-bit samples to 8 and expands palettes, low bit
//! depths and transparency as it goes (`STRIP_16 | EXPAND`), and the pixels become RGB over
//! white in the buffer they were decoded into: one full-size buffer of at most 4 bytes a pixel.
//! Text and ICC profile chunks are skipped unread, so a chunk that inflates to gigabytes is
//! never inflated.

use std::io::Cursor;

use image::RgbImage;
use image::metadata::Orientation;
use png::{ColorType, Decoder, Transformations};

use super::PipelineError;
use super::decode::over_white;

fn corrupt(e: png::DecodingError) -> PipelineError {
    match e {
        png::DecodingError::LimitsExceeded => {
            PipelineError::CorruptImage("the PNG needs more memory than its size allows".into())
        }
        other => PipelineError::CorruptImage(other.to_string()),
    }
}

/// The bytes a decode of a `width`x`height` PNG holds at its peak: the one output buffer, at
/// most 4 bytes a pixel (at least 3: it becomes RGB in place), and the decoder's rows.
pub(crate) fn peak_bytes(width: u32, height: u32) -> u64 {
    let (w, h) = (u64::from(width), u64::from(height));
    w * h * 4 + w * 8 * 4
}

/// The allocation cap while the header is read: what comes before the pixels, with text and
/// ICC chunks skipped, is the chunk bytes themselves (an eXIf block) and a few tables.
const HEADER_ALLOC: usize = 16 << 20;

/// The stored size and the eXIf chunk's orientation (none if absent or unreadable), from the
/// header, reading (and inflating) nothing else.
pub(crate) fn header(bytes: &[u8]) -> Result<(u32, u32, Orientation), PipelineError> {
    let reader = decoder(bytes, HEADER_ALLOC).read_info().map_err(corrupt)?;
    let (width, height) = reader.info().size();
    Ok((width, height, exif_orientation(reader.info())))
}

fn exif_orientation(info: &png::Info<'_>) -> Orientation {
    info.exif_metadata
        .as_deref()
        .and_then(Orientation::from_exif_chunk)
        .unwrap_or(Orientation::NoTransforms)
}

fn decoder(bytes: &[u8], max_alloc: usize) -> Decoder<Cursor<&[u8]>> {
    let mut decoder =
        Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: max_alloc });
    decoder.set_transformations(Transformations::STRIP_16 | Transformations::EXPAND);
    decoder.set_ignore_text_chunk(true);
    decoder.set_ignore_iccp_chunk(true);
    decoder
}

/// Decodes `bytes` (already checked by `detect::inspect`) to 8-bit RGB, as stored (no orientation
/// applied), and reads the orientation from its eXIf chunk. `max_alloc` bounds the decoder's
/// own allocations.
pub(crate) fn decode(
    bytes: &[u8],
    max_alloc: u64,
) -> Result<(RgbImage, Orientation), PipelineError> {
    let max_alloc = usize::try_from(max_alloc).unwrap_or(usize::MAX);
    let mut reader = decoder(bytes, max_alloc).read_info().map_err(corrupt)?;
    let (width, height) = reader.info().size();
    let orientation = exif_orientation(reader.info());
    let (color, _) = reader.output_color_type();
    let samples = color.samples();
    let pixels = usize::try_from(u64::from(width) * u64::from(height))
        .map_err(|_| PipelineError::CorruptImage("the PNG is too large".into()))?;
    let decoded_len = reader
        .output_buffer_size()
        .ok_or_else(|| PipelineError::CorruptImage("the PNG is too large".into()))?;
    if decoded_len != pixels * samples {
        return Err(PipelineError::CorruptImage(format!(
            "unexpected PNG layout: {decoded_len} bytes for {width}x{height} {color:?}"
        )));
    }
    let mut buf = vec![0u8; decoded_len.max(pixels * 3)];
    reader
        .next_frame(&mut buf[..decoded_len])
        .map_err(corrupt)?;
    to_rgb_in_place(&mut buf, pixels, color);
    buf.truncate(pixels * 3);
    let image = RgbImage::from_raw(width, height, buf)
        .ok_or_else(|| PipelineError::CorruptImage("unexpected PNG layout".into()))?;
    Ok((image, orientation))
}

/// Rewrites `pixels` pixels of 8-bit `color` at the start of `buf` (at least `3 * pixels`
/// long) as RGB over white. Wider sources are packed front to back, narrower ones spread back
/// to front, so no pixel is overwritten before it is read.
pub(crate) fn to_rgb_in_place(buf: &mut [u8], pixels: usize, color: ColorType) {
    match color {
        ColorType::Rgb | ColorType::Indexed => {}
        ColorType::Rgba => {
            for i in 0..pixels {
                let [r, g, b, a] = [buf[4 * i], buf[4 * i + 1], buf[4 * i + 2], buf[4 * i + 3]];
                buf[3 * i] = over_white(r, a);
                buf[3 * i + 1] = over_white(g, a);
                buf[3 * i + 2] = over_white(b, a);
            }
        }
        ColorType::GrayscaleAlpha => {
            for i in (0..pixels).rev() {
                let v = over_white(buf[2 * i], buf[2 * i + 1]);
                buf[3 * i..3 * i + 3].fill(v);
            }
        }
        ColorType::Grayscale => {
            for i in (0..pixels).rev() {
                let v = buf[i];
                buf[3 * i..3 * i + 3].fill(v);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn encode(
        width: u32,
        height: u32,
        color: ColorType,
        depth: png::BitDepth,
        data: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, width, height);
        e.set_color(color);
        e.set_depth(depth);
        let mut w = e.write_header().unwrap();
        w.write_image_data(data).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn every_colour_type_becomes_rgb_over_white() {
        use png::BitDepth::{Eight, Sixteen};
        let cases: Vec<(ColorType, png::BitDepth, Vec<u8>, [u8; 6])> = vec![
            (
                ColorType::Grayscale,
                Eight,
                vec![10, 200],
                [10, 10, 10, 200, 200, 200],
            ),
            (
                ColorType::GrayscaleAlpha,
                Eight,
                vec![0, 0, 0, 255],
                [255, 255, 255, 0, 0, 0],
            ),
            (
                ColorType::Rgb,
                Eight,
                vec![1, 2, 3, 4, 5, 6],
                [1, 2, 3, 4, 5, 6],
            ),
            (
                ColorType::Rgba,
                Eight,
                vec![255, 0, 0, 255, 0, 0, 255, 128],
                [255, 0, 0, 127, 127, 255],
            ),
            (
                ColorType::Rgba,
                Sixteen,
                vec![255, 255, 0, 0, 0, 0, 255, 255, 0, 0, 0, 0, 255, 255, 0, 0],
                [255, 0, 0, 255, 255, 255],
            ),
        ];
        for (color, depth, data, want) in cases {
            let (img, orientation) = decode(&encode(2, 1, color, depth, &data), 1 << 20).unwrap();
            assert_eq!(img.as_raw(), &want, "{color:?} {depth:?}");
            assert_eq!(orientation, Orientation::NoTransforms);
        }
    }

    #[test]
    fn a_decode_over_the_allocation_limit_is_refused() {
        let data = vec![0u8; 64 * 64 * 8];
        let bytes = encode(64, 64, ColorType::Rgba, png::BitDepth::Sixteen, &data);
        assert!(decode(&bytes, 1 << 20).is_ok());
        assert_eq!(decode(&bytes, 100).unwrap_err().kind(), "corrupt_image");
    }
}
