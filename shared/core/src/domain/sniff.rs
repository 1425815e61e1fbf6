//! A body's format from its first bytes (never from a Content-Type or a file name): the one
//! table the pipeline and the downloader both read.

use super::SourceFormat;

/// A body that is not one of the formats imgest decodes: what it looks like instead
/// (`"bmp"`, `"tiff"`, `"heic"`, …), `"empty"`, or `"not a recognised image"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSupported(pub &'static str);

/// How many bytes [`SourceFormat::sniff`] needs to tell every format apart (an AVIF whose
/// brand is among the compatible ones of its `ftyp` box, after the major one).
pub const SNIFF_LEN: usize = 32;

/// What to tell a sender of HEIC/HEIF, which imgest does not decode (docs/api.md says why).
pub const HEIC_HINT: &str = "HEIC/HEIF is not decoded here: send the photo as JPEG (on an iPhone: \
    Settings > Camera > Formats > Most Compatible, or share it as JPEG)";

impl NotSupported {
    /// The refusal in words: what the body is, and for HEIC what to send instead.
    pub fn describe(self) -> String {
        match self.0 {
            "heic" | "heif" => HEIC_HINT.to_owned(),
            "empty" => "empty body".to_owned(),
            what => what.to_owned(),
        }
    }
}

/// Other formats' signatures, so a refusal can say what the body is.
const OTHERS: &[(&[u8], &str)] = &[
    (b"BM", "bmp"),
    (b"II*\0", "tiff"),
    (b"MM\0*", "tiff"),
    (b"\0\0\x01\0", "ico"),
    (b"qoif", "qoi"),
    (b"\xff\x0a", "jpeg xl"),
    (b"\0\0\0\x0cJXL \r\n\x87\n", "jpeg xl"),
    (b"%PDF", "pdf"),
    (b"<?xml", "svg or other xml"),
    (b"<svg", "svg"),
    (b"8BPS", "psd"),
];

/// ISO-BMFF brands (in the `ftyp` box at offset 4) of HEIF images imgest does not decode.
const BRANDS: &[(&[u8; 4], &str)] = &[
    (b"heic", "heic"),
    (b"heix", "heic"),
    (b"heim", "heic"),
    (b"heis", "heic"),
    (b"hevc", "heic"),
    (b"hevx", "heic"),
    (b"mif1", "heif"),
    (b"msf1", "heif"),
];

impl SourceFormat {
    /// The format the magic bytes at the start of `bytes` name.
    pub fn sniff(bytes: &[u8]) -> Result<Self, NotSupported> {
        if bytes.is_empty() {
            return Err(NotSupported("empty"));
        }
        if bytes.starts_with(b"\xff\xd8\xff") {
            return Ok(Self::Jpeg);
        }
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            return Ok(Self::Png);
        }
        if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            return Ok(Self::Gif);
        }
        if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            return Ok(Self::Webp);
        }
        if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
            return Self::sniff_heif(bytes);
        }
        match OTHERS.iter().find(|(magic, _)| bytes.starts_with(magic)) {
            Some((_, name)) => Err(NotSupported(name)),
            None => Err(NotSupported("not a recognised image")),
        }
    }
}

impl SourceFormat {
    /// An ISO-BMFF file: AVIF when its `ftyp` box names `avif` (or `avis`) as its major or a
    /// compatible brand; another HEIF (HEIC) otherwise. When the compatible brands are cut off
    /// (a short head) and the major brand is the generic `mif1` or `msf1`, it may still be an
    /// AVIF: taken as one, for the container to tell (it refuses HEIC then).
    fn sniff_heif(bytes: &[u8]) -> Result<Self, NotSupported> {
        let size = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        let end = size.clamp(12, bytes.len().max(12)).min(bytes.len());
        let major = &bytes[8..12];
        let compatible = bytes.get(16..end).unwrap_or(&[]).chunks_exact(4);
        let mut brands = std::iter::once(major).chain(compatible);
        if brands.any(|b| b == b"avif" || b == b"avis") {
            return Ok(Self::Avif);
        }
        let generic = major == b"mif1" || major == b"msf1";
        if generic && size > bytes.len() {
            return Ok(Self::Avif);
        }
        match BRANDS.iter().find(|(brand, _)| major == *brand) {
            Some((_, name)) => Err(NotSupported(name)),
            None => Err(NotSupported("not a recognised image")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_formats_are_told_by_their_magic_bytes() {
        assert_eq!(
            SourceFormat::sniff(b"\xff\xd8\xff\xe0rest"),
            Ok(SourceFormat::Jpeg)
        );
        assert_eq!(
            SourceFormat::sniff(b"\x89PNG\r\n\x1a\n...."),
            Ok(SourceFormat::Png)
        );
        assert_eq!(SourceFormat::sniff(b"GIF89a...."), Ok(SourceFormat::Gif));
        assert_eq!(
            SourceFormat::sniff(b"RIFF\0\0\0\0WEBPVP8 "),
            Ok(SourceFormat::Webp)
        );
    }

    #[test]
    fn avif_is_told_by_its_major_or_a_compatible_brand() {
        for bytes in [
            &b"\0\0\0\x10ftypavif\0\0\0\0"[..],
            b"\0\0\0\x1cftypmif1\0\0\0\0mif1miafavif",
            // The compatible brands beyond the bytes at hand: taken as AVIF for now.
            b"\0\0\0\x40ftypmif1\0\0\0\0",
        ] {
            assert_eq!(
                SourceFormat::sniff(bytes),
                Ok(SourceFormat::Avif),
                "{bytes:?}"
            );
        }
        assert!(
            NotSupported("heic")
                .describe()
                .contains("send the photo as JPEG")
        );
    }

    #[test]
    fn other_formats_are_named_and_the_rest_is_not_recognised() {
        for (bytes, what) in [
            (&b""[..], "empty"),
            (b"BM\x00\x00\x00\x00", "bmp"),
            (b"II*\x00\x08\x00\x00\x00", "tiff"),
            (b"\0\0\0\x10ftypheic\0\0\0\0", "heic"),
            (b"\0\0\0\x18ftypmif1\0\0\0\0mif1heic", "heif"),
            (b"RIFF\0\0\0\0WAVEfmt ", "not a recognised image"),
            (b"\xff\xd8", "not a recognised image"),
            (b"hello", "not a recognised image"),
        ] {
            assert_eq!(
                SourceFormat::sniff(bytes),
                Err(NotSupported(what)),
                "{bytes:?}"
            );
        }
    }
}
