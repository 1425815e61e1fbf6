//! An AVIF's stored original: its metadata items (`Exif`, XMP in a `mime` item, `uri `) and
//! top-level `uuid` boxes are overwritten where they lie, each keeping its length, so that no
//! offset in the file moves. An `Exif` item gets the EXIF block the original keeps, if it fits
//! (else an empty one), an XMP item an empty packet; the rest zeros. The orientation
//! (`irot`, `imir`) and the colour (`colr`) are item properties, not metadata: untouched.

use super::super::PipelineError;
use super::super::avif::container::metadata_items;

/// An XMP packet with nothing in it.
const EMPTY_XMP: &[u8] = b"<?xpacket begin=\"\xEF\xBB\xBF\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?><x:xmpmeta xmlns:x=\"adobe:ns:meta/\"/><?xpacket end=\"w\"?>";

/// A big-endian TIFF structure with one empty directory.
const EMPTY_TIFF: &[u8] = b"MM\0*\0\0\0\x08\0\0\0\0\0\0";

pub(crate) fn strip(bytes: &[u8], exif: Option<&[u8]>) -> Result<Vec<u8>, PipelineError> {
    let mut out = bytes.to_vec();
    for item in metadata_items(bytes)? {
        let len: usize = item.extents.iter().map(|r| r.len()).sum();
        let mut fill = match &item.kind {
            // An Exif item: the offset of the TIFF header after these 4 bytes, then the TIFF.
            b"Exif" => {
                let tiff = exif.filter(|t| 4 + t.len() <= len).unwrap_or(EMPTY_TIFF);
                [&[0u8, 0, 0, 0][..], tiff].concat()
            }
            b"mime" if EMPTY_XMP.len() <= len => EMPTY_XMP.to_vec(),
            _ => Vec::new(),
        };
        // XMP packets are padded with spaces; anything else with zeros.
        let pad = if item.kind == *b"mime" { b' ' } else { 0 };
        fill.resize(len, pad);
        let mut from = 0;
        for range in item.extents {
            let n = range.len();
            out[range].copy_from_slice(&fill[from..from + n]);
            from += n;
        }
    }
    Ok(out)
}
