//! A WebP's chunks (RIFF): what the pipeline needs besides the pixels, the ICC profile
//! (`ICCP`) and the orientation (`EXIF`, else `XMP `), read without decoding. libwebp, which
//! decodes the pixels, does not give them.
//!
//! Only an extended WebP (one that starts with a `VP8X` chunk) carries them; a simple one (a
//! lone `VP8 ` or `VP8L` chunk) has none.

use std::borrow::Cow;

use super::meta::Meta;

/// The ICC profile and the orientation of the WebP `bytes` (see the module's documentation).
/// A truncated or malformed chunk ends the walk: what was found before it counts.
pub(crate) fn metadata(bytes: &[u8]) -> Meta<'_> {
    let (mut icc, mut exif, mut xmp) = (None, None, None);
    // "RIFF", the size, "WEBP", then the chunks.
    let mut at = 12;
    if chunk(bytes, at).is_none_or(|(kind, _)| kind != b"VP8X") {
        return Meta::default();
    }
    while let Some((kind, data)) = chunk(bytes, at) {
        // Chunks are padded to an even length.
        at += 8 + data.len() + data.len() % 2;
        match kind {
            b"ICCP" if icc.is_none() => icc = Some(Cow::Borrowed(data)),
            b"EXIF" if exif.is_none() => exif = Some(data),
            b"XMP " if xmp.is_none() => xmp = Some(data),
            _ => {}
        }
    }
    Meta::from_blocks(icc, exif, xmp)
}

/// The chunk at `at`: its FourCC and data.
pub(crate) fn chunk(bytes: &[u8], at: usize) -> Option<(&[u8; 4], &[u8])> {
    let kind: &[u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    let len = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?);
    let end = (at + 8).checked_add(usize::try_from(len).ok()?)?;
    Some((kind, bytes.get(at + 8..end)?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use image::metadata::Orientation;

    /// A RIFF chunk.
    pub(crate) fn riff_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_vec();
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(0);
        }
        out
    }

    /// A WebP of `chunks` (the caller's `VP8X` first).
    pub(crate) fn webp(chunks: &[Vec<u8>]) -> Vec<u8> {
        let body = chunks.concat();
        let mut out = b"RIFF".to_vec();
        out.extend_from_slice(&(4 + body.len() as u32).to_le_bytes());
        out.extend_from_slice(b"WEBP");
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn the_profile_and_orientation_come_from_their_chunks() {
        use super::super::meta::tests::tiff_with_orientation;
        let exif = [&b"Exif\0\0"[..], &tiff_with_orientation(8)].concat();
        let bytes = webp(&[
            riff_chunk(b"VP8X", &[0x28, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            riff_chunk(b"ICCP", b"odd"),
            riff_chunk(b"VP8 ", b"pixels"),
            riff_chunk(b"EXIF", &exif),
            riff_chunk(b"XMP ", b"tiff:Orientation=\"3\""),
        ]);
        let meta = metadata(&bytes);
        assert_eq!(meta.icc.as_deref(), Some(&b"odd"[..]));
        assert_eq!(meta.orientation, Orientation::Rotate270);
        let xmp_only = webp(&[
            riff_chunk(b"VP8X", &[0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            riff_chunk(b"VP8 ", b"pixels"),
            riff_chunk(b"XMP ", b"tiff:Orientation=\"3\""),
        ]);
        assert_eq!(metadata(&xmp_only).orientation, Orientation::Rotate180);
        // A simple WebP has no metadata, whatever follows its one chunk.
        let simple = webp(&[riff_chunk(b"VP8 ", b"pixels"), riff_chunk(b"EXIF", &exif)]);
        assert_eq!(metadata(&simple), Meta::default());
        // Truncated: what came before counts.
        let cut = &bytes[..bytes.len() - 5];
        assert_eq!(metadata(cut).icc.as_deref(), Some(&b"odd"[..]));
    }
}
