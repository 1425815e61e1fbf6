//! A WebP's stored original: an extended WebP (`VP8X`) keeps its image, alpha, animation and
//! `ICCP` chunks, loses `EXIF`, `XMP ` and every unknown chunk, and gets the EXIF block the
//! original keeps (after the image data, where the format puts it); the `VP8X` flags say so. A
//! simple WebP (one `VP8 ` or `VP8L` chunk) carries no metadata. Whatever follows the RIFF
//! chunk is dropped.

use super::super::PipelineError;
use super::super::riff::chunk;

/// `VP8X` flags: an `EXIF` chunk, an `XMP ` chunk.
const EXIF_FLAG: u8 = 0x08;
const XMP_FLAG: u8 = 0x04;

const KEPT: [&[u8; 4]; 7] = [
    b"VP8X", b"ICCP", b"ANIM", b"ANMF", b"ALPH", b"VP8 ", b"VP8L",
];

fn corrupt(why: &str) -> PipelineError {
    PipelineError::CorruptImage(format!("WebP: {why}"))
}

pub(crate) fn strip(bytes: &[u8], exif: Option<&[u8]>) -> Result<Vec<u8>, PipelineError> {
    let riff_len = bytes
        .get(4..8)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| corrupt("no RIFF header"))?;
    let end = usize::try_from(riff_len)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&end| end <= bytes.len())
        .unwrap_or(bytes.len());
    let bytes = &bytes[..end];
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&bytes[..12.min(bytes.len())]);
    let extended = chunk(bytes, 12).is_some_and(|(kind, _)| kind == b"VP8X");
    let mut at = 12;
    let mut vp8x_at = None;
    while let Some((kind, data)) = chunk(bytes, at) {
        let padded = data.len() + data.len() % 2;
        let whole = bytes
            .get(at..at + 8 + padded)
            .ok_or_else(|| corrupt("a chunk cut short"))?;
        at += whole.len();
        if !extended || KEPT.contains(&kind) {
            if kind == b"VP8X" {
                vp8x_at = Some(out.len());
            }
            out.extend_from_slice(whole);
        }
    }
    if let Some(vp8x) = vp8x_at {
        let flags = out
            .get_mut(vp8x + 8)
            .ok_or_else(|| corrupt("a VP8X chunk without flags"))?;
        *flags &= !(EXIF_FLAG | XMP_FLAG);
        if let Some(block) = exif {
            *flags |= EXIF_FLAG;
            let len = u32::try_from(block.len()).map_err(|_| corrupt("an EXIF block over 4 GB"))?;
            out.extend_from_slice(b"EXIF");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(block);
            if block.len() % 2 == 1 {
                out.push(0);
            }
        }
    }
    let size = u32::try_from(out.len() - 8).map_err(|_| corrupt("a file over 4 GB"))?;
    out[4..8].copy_from_slice(&size.to_le_bytes());
    Ok(out)
}
