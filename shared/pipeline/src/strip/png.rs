//! A PNG's stored original: its chunks kept or dropped by kind. Kept: the critical chunks,
//! what rendering reads (transparency, gamma, chromaticities, sRGB, the ICC profile, coding
//! points, mastering and light levels, significant bits, background, pixel size) and an
//! animation's chunks. Dropped: `eXIf` (the EXIF block the original keeps is written before
//! the image data instead), every text chunk (comments, XMP, the EXIF ImageMagick writes as
//! hex text), `tIME`, every other ancillary chunk (a vendor's private ones), and whatever
//! follows `IEND`.

use super::super::PipelineError;
use super::super::png::chunk;

/// The ancillary chunks a stored original keeps.
const RENDERING: [&[u8; 4]; 14] = [
    b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"cICP", b"mDCV", b"cLLI", b"sBIT", b"bKGD",
    b"pHYs", b"acTL", b"fcTL", b"fdAT",
];

const SIGNATURE: usize = 8;

pub(crate) fn strip(bytes: &[u8], exif: Option<&[u8]>) -> Result<Vec<u8>, PipelineError> {
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(
        bytes
            .get(..SIGNATURE)
            .ok_or_else(|| PipelineError::CorruptImage("PNG: no signature".into()))?,
    );
    let mut exif = exif;
    let mut at = SIGNATURE;
    while let Some((kind, data)) = chunk(bytes, at) {
        let Some(whole) = bytes.get(at..at + 12 + data.len()) else {
            break;
        };
        at += whole.len();
        if kind == b"IDAT"
            && let Some(block) = exif.take()
        {
            push_chunk(&mut out, b"eXIf", block)?;
        }
        // Critical chunks (an upper-case first letter) are the image's: all kept.
        if kind[0].is_ascii_uppercase() || RENDERING.contains(&kind) {
            out.extend_from_slice(whole);
        }
        if kind == b"IEND" {
            return Ok(out);
        }
    }
    Err(PipelineError::CorruptImage(
        "PNG: a chunk cut short before IEND".into(),
    ))
}

fn push_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) -> Result<(), PipelineError> {
    let len = u32::try_from(data.len())
        .map_err(|_| PipelineError::CorruptImage("PNG: a chunk over 4 GB".into()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
    Ok(())
}
