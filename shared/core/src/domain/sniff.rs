//! A body's format from its first bytes (never from a Content-Type or a file name): the one
//! table the pipeline and the downloader both read.

use super::SourceFormat;

/// A body that is not one of the formats imgest decodes: what it looks like instead
/// (`"bmp"`, `"tiff"`, `"heic"`, …), `"empty"`, or `"not a recognised image"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSupported(pub &'static str);

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

/// ISO-BMFF brands (the `ftyp` box at offset 4) of image formats imgest does not decode.
const BRANDS: &[(&[u8; 4], &str)] = &[
    (b"avif", "avif"),
    (b"avis", "avif"),
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
        if bytes.len() >= 12
            && &bytes[4..8] == b"ftyp"
            && let Some((_, name)) = BRANDS.iter().find(|(brand, _)| &bytes[8..12] == *brand)
        {
            return Err(NotSupported(name));
        }
        match OTHERS.iter().find(|(magic, _)| bytes.starts_with(magic)) {
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
    fn other_formats_are_named_and_the_rest_is_not_recognised() {
        for (bytes, what) in [
            (&b""[..], "empty"),
            (b"BM\x00\x00\x00\x00", "bmp"),
            (b"II*\x00\x08\x00\x00\x00", "tiff"),
            (b"\0\0\0\x18ftypheic\0\0\0\0", "heic"),
            (b"\0\0\0\x1cftypavif\0\0\0\0", "avif"),
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
