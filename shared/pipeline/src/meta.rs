//! What a photo says about itself besides its pixels: its colour profile and its orientation,
//! from whichever container carries them (JPEG segments in `jpeg.rs`, PNG chunks in `png.rs`,
//! WebP chunks in `riff.rs`, AVIF boxes in `avif/`), read the same way for every format.
//!
//! The orientation comes from an EXIF block (a TIFF structure, with or without the `Exif\0\0`
//! prefix some writers leave in front of it), else from an XMP packet's `tiff:Orientation`
//! (attribute or element, as Adobe's tools and exiftool write it). Anything unreadable means
//! "no orientation", never a failure: a photo is not refused for its metadata.

use std::borrow::Cow;

use image::metadata::Orientation;

/// A photo's metadata, as far as the pipeline uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta<'a> {
    /// The embedded ICC profile, if any (not parsed yet: see `colour.rs`).
    pub icc: Option<Cow<'a, [u8]>>,
    /// How the stored pixels are turned to be upright.
    pub orientation: Orientation,
    /// The EXIF block read (a stored original keeps some of its fields: `strip/`).
    pub exif: Option<Vec<u8>>,
}

impl Default for Meta<'_> {
    fn default() -> Self {
        Self {
            icc: None,
            orientation: Orientation::NoTransforms,
            exif: None,
        }
    }
}

impl<'a> Meta<'a> {
    /// From the blocks a container holds: an EXIF block wins over an XMP packet.
    pub(crate) fn from_blocks(
        icc: Option<Cow<'a, [u8]>>,
        exif: Option<&[u8]>,
        xmp: Option<&[u8]>,
    ) -> Self {
        let orientation = exif
            .and_then(exif_orientation)
            .or_else(|| xmp.and_then(xmp_orientation))
            .unwrap_or(Orientation::NoTransforms);
        Self {
            icc,
            orientation,
            exif: exif.map(<[u8]>::to_vec),
        }
    }
}

/// The orientation an EXIF block holds: a TIFF structure, or one after `Exif\0\0` (WebP's
/// `EXIF` chunk as most writers fill it, ImageMagick's raw profiles).
pub(crate) fn exif_orientation(exif: &[u8]) -> Option<Orientation> {
    let tiff = exif.strip_prefix(b"Exif\0\0").unwrap_or(exif);
    Orientation::from_exif_chunk(tiff)
}

/// The most of an XMP packet searched for the orientation.
const MAX_XMP: usize = 1 << 20;

/// The orientation an XMP packet holds: `tiff:Orientation="6"` or
/// `<tiff:Orientation>6</tiff:Orientation>`.
pub(crate) fn xmp_orientation(xmp: &[u8]) -> Option<Orientation> {
    const NAME: &[u8] = b"tiff:Orientation";
    let xmp = &xmp[..xmp.len().min(MAX_XMP)];
    let at = memchr::memmem::find(xmp, NAME)?;
    let rest = &xmp[at + NAME.len()..];
    // `="6"`, `='6'`, `>6<`, with any spaces around.
    let value = rest
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .skip_while(|&&b| b == b'=' || b == b'>')
        .skip_while(|&&b| b.is_ascii_whitespace() || b == b'"' || b == b'\'')
        .take_while(|b| b.is_ascii_digit())
        .try_fold(0u8, |n, &d| n.checked_mul(10)?.checked_add(d - b'0'))?;
    Orientation::from_exif(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// A big-endian TIFF block with one entry: the orientation.
    pub(crate) fn tiff_with_orientation(value: u16) -> Vec<u8> {
        let mut tiff = b"MM\0*\0\0\0\x08\0\x01".to_vec();
        tiff.extend_from_slice(&[0x01, 0x12, 0, 3, 0, 0, 0, 1]);
        tiff.extend_from_slice(&value.to_be_bytes());
        tiff.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        tiff
    }

    #[test]
    fn exif_blocks_are_read_with_or_without_their_prefix() {
        let tiff = tiff_with_orientation(6);
        assert_eq!(exif_orientation(&tiff), Some(Orientation::Rotate90));
        let prefixed = [&b"Exif\0\0"[..], &tiff].concat();
        assert_eq!(exif_orientation(&prefixed), Some(Orientation::Rotate90));
        assert_eq!(exif_orientation(b"Exif\0\0garbage"), None);
        assert_eq!(exif_orientation(b""), None);
    }

    #[test]
    fn xmp_orientation_is_read_as_attribute_or_element() {
        let cases: [(&[u8], Option<Orientation>); 6] = [
            (
                b"<rdf:Description tiff:Orientation=\"3\"/>",
                Some(Orientation::Rotate180),
            ),
            (
                b"<x tiff:Orientation = '8' />",
                Some(Orientation::Rotate270),
            ),
            (
                b"<tiff:Orientation>6</tiff:Orientation>",
                Some(Orientation::Rotate90),
            ),
            (b"<tiff:Orientation>9</tiff:Orientation>", None),
            (b"<tiff:Orientation>300000</tiff:Orientation>", None),
            (b"<x exif:PixelXDimension=\"3\"/>", None),
        ];
        for (xmp, want) in cases {
            assert_eq!(
                xmp_orientation(xmp),
                want,
                "{}",
                String::from_utf8_lossy(xmp)
            );
        }
    }

    #[test]
    fn exif_wins_over_xmp() {
        let tiff = tiff_with_orientation(2);
        let meta = Meta::from_blocks(None, Some(&tiff), Some(b"tiff:Orientation=\"3\""));
        assert_eq!(meta.orientation, Orientation::FlipHorizontal);
        let meta = Meta::from_blocks(None, Some(b"junk"), Some(b"tiff:Orientation=\"3\""));
        assert_eq!(meta.orientation, Orientation::Rotate180);
    }
}
