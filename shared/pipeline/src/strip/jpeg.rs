//! A JPEG's stored original: its marker segments walked as `jpeg::read` walks them, each kept
//! or dropped by what it is, the entropy-coded data copied as it is.
//!
//! Kept: the tables, frame and scans; `ICC_PROFILE` (APP2) and Adobe's (APP14, which says how
//! a 4-component JPEG stores its inks); JFIF's APP0 without its thumbnail. Dropped: EXIF and
//! XMP (APP1; the EXIF block the original keeps is written in their place, after APP0),
//! Photoshop's IPTC (APP13), the multi-picture index (APP2 `MPF`), every other application
//! segment, comments, stray bytes, and whatever follows the end-of-image marker (the further
//! pictures an MPF file or a phone's trailer appends, each with its own metadata).

use super::super::PipelineError;
use super::super::jpeg::entropy_end;

fn corrupt(why: &str) -> PipelineError {
    PipelineError::CorruptImage(format!("JPEG: {why}"))
}

/// JFIF's APP0 body up to its thumbnail's size: identifier, version, units, densities.
const JFIF_HEAD: usize = 12;

/// `bytes` with only the segments a stored original keeps, and `exif` (a TIFF structure) as
/// its one EXIF block.
pub(crate) fn strip(bytes: &[u8], exif: Option<&[u8]>) -> Result<Vec<u8>, PipelineError> {
    if bytes.get(..2) != Some(&[0xFF, 0xD8]) {
        return Err(corrupt("no start-of-image marker"));
    }
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&[0xFF, 0xD8]);
    let mut exif = exif;
    let mut i = 2;
    loop {
        // Stray bytes before a marker and fill bytes are dropped.
        i += bytes
            .get(i..)
            .and_then(|rest| memchr::memchr(0xFF, rest))
            .ok_or_else(|| corrupt("no end-of-image marker"))?;
        while bytes.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        let marker = *bytes
            .get(i + 1)
            .ok_or_else(|| corrupt("no end-of-image marker"))?;
        // The EXIF block goes after JFIF's APP0 (which must come first), before anything else.
        if marker != 0xE0
            && let Some(block) = exif.take()
        {
            push_exif(&mut out, block)?;
        }
        match marker {
            0xD9 => {
                out.extend_from_slice(&[0xFF, 0xD9]);
                return Ok(out);
            }
            0x01 | 0xD0..=0xD8 => {
                out.extend_from_slice(&[0xFF, marker]);
                i += 2;
                continue;
            }
            0x00 => {
                i += 2;
                continue;
            }
            _ => {}
        }
        let len = match (bytes.get(i + 2), bytes.get(i + 3)) {
            (Some(&hi), Some(&lo)) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => return Err(corrupt("a segment cut short")),
        };
        if len < 2 {
            return Err(corrupt("a segment of length under 2"));
        }
        let whole = bytes
            .get(i..i + 2 + len)
            .ok_or_else(|| corrupt("a segment cut short"))?;
        let body = &whole[4..];
        match marker {
            0xDA => {
                let end = entropy_end(bytes, i + 2 + len)
                    .ok_or_else(|| corrupt("a scan without an end"))?;
                out.extend_from_slice(&bytes[i..end]);
                i = end;
                continue;
            }
            0xE0 if body.starts_with(b"JFIF\0") && body.len() >= JFIF_HEAD => {
                // The header without its thumbnail (sized 0x0).
                let mut segment = vec![0xFF, 0xE0, 0, (2 + JFIF_HEAD + 2) as u8];
                segment.extend_from_slice(&body[..JFIF_HEAD]);
                segment.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&segment);
            }
            0xE2 if body.starts_with(b"ICC_PROFILE\0") => out.extend_from_slice(whole),
            0xEE => out.extend_from_slice(whole),
            // Every other application segment, and comments.
            0xE0..=0xEF | 0xFE => {}
            _ => out.extend_from_slice(whole),
        }
        i += 2 + len;
    }
}

/// An APP1 `Exif\0\0` segment holding `tiff`.
fn push_exif(out: &mut Vec<u8>, tiff: &[u8]) -> Result<(), PipelineError> {
    let len = u16::try_from(2 + 6 + tiff.len())
        .map_err(|_| corrupt("an EXIF block over a segment's size"))?;
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b"Exif\0\0");
    out.extend_from_slice(tiff);
    Ok(())
}
