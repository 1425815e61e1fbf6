//! PNG through the `png` crate, reduced as it decodes.
//!
//! The `image` crate holds a PNG at its stored depth (8 bytes a pixel for 16-bit RGBA: 392 MB
//! for a 49 MP photo of 0.6 MB on the wire) and converts it into a new buffer, twice on the way
//! to 8-bit RGB. Here the decoder strips 16-bit samples to 8 and expands palettes, low bit
//! depths and transparency as it goes (`STRIP_16 | EXPAND`), and the pixels become RGB over
//! white in the buffer they were decoded into: one full-size buffer of at most 4 bytes a pixel.
//!
//! The decoder skips text and ICC profile chunks unread. What the pipeline needs of them is read
//! by [`metadata`], a walk over the chunks by their lengths (the image data is not inflated):
//! the ICC profile (`iCCP`) and the orientation, from an `eXIf` chunk before or after the image
//! data, else from the EXIF block ImageMagick and Pillow write as text (`Raw profile type
//! exif`, hex; `exif`), else from an XMP packet (`iTXt` `XML:com.adobe.xmp`). A compressed
//! chunk is inflated only if it is one of those, and only up to a bound, so one that inflates
//! to gigabytes costs nothing.

use std::borrow::Cow;
use std::io::{Cursor, Read};

use image::RgbImage;
use png::{ColorType, Decoder, Transformations};

use super::PipelineError;
use super::decode::over_white;
use super::jpeg::MAX_ICC;
use super::meta::Meta;

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
/// ICC chunks skipped, is a few tables.
const HEADER_ALLOC: usize = 16 << 20;

/// The stored size, from the header, reading (and inflating) nothing else.
pub(crate) fn header(bytes: &[u8]) -> Result<(u32, u32), PipelineError> {
    let reader = decoder(bytes, HEADER_ALLOC).read_info().map_err(corrupt)?;
    Ok(reader.info().size())
}

/// The most bytes an EXIF block or an XMP packet stored as text is inflated or decoded to.
const MAX_TEXT: usize = 1 << 20;

/// The ICC profile and the orientation (see the module's documentation). Chunks are walked
/// until `IEND` or the end of the bytes; a truncated or malformed chunk ends the walk (the
/// decoder words the error, if it is one).
pub(crate) fn metadata(bytes: &[u8]) -> Meta<'static> {
    let (mut icc, mut exif, mut text_exif, mut xmp) = (None, None, None, None);
    let (mut icc_read, mut exif_read, mut xmp_read) = (false, false, false);
    let mut at = 8;
    while let Some((kind, data)) = chunk(bytes, at) {
        at += 12 + data.len();
        match kind {
            b"IEND" => break,
            b"iCCP" if !icc_read => {
                icc_read = true;
                icc = iccp(data);
            }
            b"eXIf" if exif.is_none() => exif = Some(data),
            // Only the first chunk of each kind is read (and inflated): a file of many
            // compressed text chunks costs one inflation of each kind, not one per chunk.
            b"tEXt" | b"zTXt" | b"iTXt" => match keyword(data) {
                Some(Keyword::Exif) if !exif_read => {
                    exif_read = true;
                    text_exif = text(kind, data).and_then(Text::exif);
                }
                Some(Keyword::Xmp) if !xmp_read => {
                    xmp_read = true;
                    xmp = text(kind, data).and_then(Text::xmp);
                }
                _ => {}
            },
            _ => {}
        }
    }
    let exif: Option<&[u8]> = exif.or(text_exif.as_deref());
    Meta::from_blocks(icc.map(Cow::Owned), exif, xmp.as_deref())
}

/// The chunk at `at`: its type and data.
pub(crate) fn chunk(bytes: &[u8], at: usize) -> Option<(&[u8; 4], &[u8])> {
    let len = u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
    let kind: &[u8; 4] = bytes.get(at + 4..at + 8)?.try_into().ok()?;
    let end = (at + 8).checked_add(usize::try_from(len).ok()?)?;
    Some((kind, bytes.get(at + 8..end)?))
}

/// zlib data inflated, if it inflates to at most `limit` bytes.
fn inflate(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(data)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() <= limit).then_some(out)
}

/// An `iCCP` chunk's profile: a name, a NUL, the compression method (0: zlib), the data.
fn iccp(data: &[u8]) -> Option<Vec<u8>> {
    let nul = data.iter().position(|&b| b == 0)?;
    match data.get(nul + 1..)? {
        [0, compressed @ ..] => inflate(compressed, MAX_ICC),
        _ => None,
    }
}

/// What a text chunk holds that matters here.
enum Text {
    Exif(Vec<u8>),
    Xmp(Vec<u8>),
}

impl Text {
    fn exif(self) -> Option<Vec<u8>> {
        match self {
            Self::Exif(block) => Some(block),
            Self::Xmp(_) => None,
        }
    }

    fn xmp(self) -> Option<Vec<u8>> {
        match self {
            Self::Xmp(packet) => Some(packet),
            Self::Exif(_) => None,
        }
    }
}

/// The kinds of text chunk read here, by keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyword {
    Exif,
    Xmp,
}

/// The kind of a text chunk (`tEXt`, `zTXt`, `iTXt`: all start with a keyword and a NUL), if
/// it is one read here, from its keyword alone (nothing inflated).
fn keyword(data: &[u8]) -> Option<Keyword> {
    let nul = data.iter().take(80).position(|&b| b == 0)?;
    match &data[..nul] {
        b"Raw profile type exif" | b"Raw profile type APP1" | b"exif" => Some(Keyword::Exif),
        b"XML:com.adobe.xmp" => Some(Keyword::Xmp),
        _ => None,
    }
}

/// A text chunk's EXIF block or XMP packet, by its keyword: `Raw profile type exif` (or
/// `APP1`: ImageMagick's, hex), `exif` (the block itself), `XML:com.adobe.xmp`.
fn text(kind: &[u8; 4], data: &[u8]) -> Option<Text> {
    let nul = data.iter().position(|&b| b == 0)?;
    let keyword = &data[..nul];
    let raw_profile = matches!(keyword, b"Raw profile type exif" | b"Raw profile type APP1");
    if !(raw_profile || keyword == b"exif" || keyword == b"XML:com.adobe.xmp") {
        return None;
    }
    let rest = &data[nul + 1..];
    let value: Cow<'_, [u8]> = match kind {
        b"tEXt" => Cow::Borrowed(rest),
        // Compression method (0: zlib), then the compressed text.
        b"zTXt" => Cow::Owned(inflate(rest.strip_prefix(&[0])?, MAX_TEXT)?),
        // Compressed or not, the method, a language tag and a translated keyword, each
        // ended by a NUL, then the text.
        _ => {
            let (&compressed, rest) = rest.split_first()?;
            let rest = rest.get(1..)?;
            let language = rest.iter().position(|&b| b == 0)?;
            let rest = rest.get(language + 1..)?;
            let translated = rest.iter().position(|&b| b == 0)?;
            let text = rest.get(translated + 1..)?;
            match compressed {
                0 => Cow::Borrowed(text),
                _ => Cow::Owned(inflate(text, MAX_TEXT)?),
            }
        }
    };
    if raw_profile {
        raw_profile_hex(&value).map(Text::Exif)
    } else if keyword == b"exif" {
        Some(Text::Exif(value.get(..MAX_TEXT.min(value.len()))?.to_vec()))
    } else {
        Some(Text::Xmp(value.get(..MAX_TEXT.min(value.len()))?.to_vec()))
    }
}

/// ImageMagick's raw profile text: a newline, the profile's name, its length in bytes (both on
/// lines of their own, padded with spaces), then the bytes in hex over many lines.
fn raw_profile_hex(text: &[u8]) -> Option<Vec<u8>> {
    let mut lines = text.splitn(4, |&b| b == b'\n');
    let (_, _name, len, hex) = (lines.next()?, lines.next()?, lines.next()?, lines.next()?);
    let len: usize = std::str::from_utf8(len).ok()?.trim().parse().ok()?;
    if len > MAX_TEXT {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut digits = hex.iter().filter(|b| !b.is_ascii_whitespace());
    while out.len() < len {
        let (hi, lo) = (digits.next()?, digits.next()?);
        let nibble = |d: &u8| char::from(*d).to_digit(16);
        out.push(u8::try_from(nibble(hi)? * 16 + nibble(lo)?).ok()?);
    }
    Some(out)
}

fn decoder(bytes: &[u8], max_alloc: usize) -> Decoder<Cursor<&[u8]>> {
    let mut decoder =
        Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: max_alloc });
    decoder.set_transformations(Transformations::STRIP_16 | Transformations::EXPAND);
    decoder.set_ignore_text_chunk(true);
    decoder.set_ignore_iccp_chunk(true);
    decoder
}

/// A decoded PNG: 8-bit RGB as stored (no orientation applied), and whether it was grey.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub image: RgbImage,
    pub grey: bool,
}

/// Decodes `bytes` (already checked by `detect::inspect`) to 8-bit RGB. `max_alloc` bounds
/// the decoder's own allocations.
pub(crate) fn decode(bytes: &[u8], max_alloc: u64) -> Result<Decoded, PipelineError> {
    let max_alloc = usize::try_from(max_alloc).unwrap_or(usize::MAX);
    let mut reader = decoder(bytes, max_alloc).read_info().map_err(corrupt)?;
    let (width, height) = reader.info().size();
    let grey = matches!(
        reader.info().color_type,
        ColorType::Grayscale | ColorType::GrayscaleAlpha
    );
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
    Ok(Decoded { image, grey })
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
pub(crate) mod tests {
    use super::*;
    use image::metadata::Orientation;

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
            let decoded = decode(&encode(2, 1, color, depth, &data), 1 << 20).unwrap();
            assert_eq!(decoded.image.as_raw(), &want, "{color:?} {depth:?}");
            let grey = matches!(color, ColorType::Grayscale | ColorType::GrayscaleAlpha);
            assert_eq!(decoded.grey, grey);
        }
    }

    /// A chunk of `kind` with `data`.
    pub(crate) fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32fast::hash(&[&kind[..], data].concat());
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// `png` with `chunks` inserted before the image data and `late` after it.
    pub(crate) fn with_chunks(png: &[u8], chunks: &[Vec<u8>], late: &[Vec<u8>]) -> Vec<u8> {
        let idat = memchr::memmem::find(png, b"IDAT").unwrap() - 4;
        let iend = memchr::memmem::find(png, b"IEND").unwrap() - 4;
        [
            &png[..idat],
            &chunks.concat(),
            &png[idat..iend],
            &late.concat(),
            &png[iend..],
        ]
        .concat()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn the_orientation_is_read_from_every_place_a_png_keeps_it() {
        use super::super::meta::tests::tiff_with_orientation;
        let png = encode(2, 1, ColorType::Rgb, png::BitDepth::Eight, &[0; 6]);
        let tiff = tiff_with_orientation(6);
        let prefixed = [&b"Exif\0\0"[..], &tiff].concat();
        let hex: String = prefixed.iter().map(|b| format!("{b:02x}")).collect();
        let raw_profile = format!("\nexif\n    {}\n{}\n", prefixed.len(), hex);
        let itxt = |text: &[u8]| [&b"XML:com.adobe.xmp\0\0\0\0\0"[..], text].concat();
        // What, the chunks before the image data, the chunks after it.
        type Case = (&'static str, Vec<Vec<u8>>, Vec<Vec<u8>>);
        let cases: Vec<Case> = vec![
            ("eXIf", vec![png_chunk(b"eXIf", &tiff)], vec![]),
            (
                "eXIf after the image data",
                vec![],
                vec![png_chunk(b"eXIf", &tiff)],
            ),
            (
                "raw profile as tEXt",
                vec![png_chunk(
                    b"tEXt",
                    &[&b"Raw profile type exif\0"[..], raw_profile.as_bytes()].concat(),
                )],
                vec![],
            ),
            (
                "raw profile as zTXt",
                vec![png_chunk(
                    b"zTXt",
                    &[
                        &b"Raw profile type exif\0\0"[..],
                        &zlib(raw_profile.as_bytes()),
                    ]
                    .concat(),
                )],
                vec![],
            ),
            (
                "exif as tEXt",
                vec![png_chunk(b"tEXt", &[&b"exif\0"[..], &prefixed].concat())],
                vec![],
            ),
            (
                "XMP",
                vec![png_chunk(
                    b"iTXt",
                    &itxt(b"<x:xmpmeta><rdf:Description tiff:Orientation=\"6\"/></x:xmpmeta>"),
                )],
                vec![],
            ),
            (
                "compressed XMP",
                vec![png_chunk(
                    b"iTXt",
                    &[
                        &b"XML:com.adobe.xmp\0\x01\0\0\0"[..],
                        &zlib(b"<tiff:Orientation>6</tiff:Orientation>"),
                    ]
                    .concat(),
                )],
                vec![],
            ),
        ];
        for (what, early, late) in cases {
            let bytes = with_chunks(&png, &early, &late);
            assert_eq!(
                metadata(&bytes).orientation,
                Orientation::Rotate90,
                "{what}"
            );
            assert!(decode(&bytes, 1 << 20).is_ok(), "{what}");
        }
        assert_eq!(metadata(&png).orientation, Orientation::NoTransforms);
    }

    #[test]
    fn the_icc_profile_is_inflated_within_its_bound() {
        let png = encode(2, 1, ColorType::Rgb, png::BitDepth::Eight, &[0; 6]);
        let profile = b"pretend this is a profile".to_vec();
        let iccp = |data: &[u8]| png_chunk(b"iCCP", &[&b"P3\0\0"[..], &zlib(data)].concat());
        let bytes = with_chunks(&png, &[iccp(&profile)], &[]);
        assert_eq!(metadata(&bytes).icc.as_deref(), Some(&profile[..]));
        // A bomb: 64 MB of zeros in a small chunk is not inflated past the bound.
        let bomb = with_chunks(&png, &[iccp(&vec![0; 64 << 20])], &[]);
        assert!(bomb.len() < 200_000);
        assert_eq!(metadata(&bomb).icc, None);
        assert!(decode(&bomb, 1 << 20).is_ok());
    }

    #[test]
    fn a_decode_over_the_allocation_limit_is_refused() {
        let data = vec![0u8; 64 * 64 * 8];
        let bytes = encode(64, 64, ColorType::Rgba, png::BitDepth::Sixteen, &data);
        assert!(decode(&bytes, 1 << 20).is_ok());
        assert_eq!(decode(&bytes, 100).unwrap_err().kind(), "corrupt_image");
    }
}
