//! The stored original (`IMGEST_ORIGINAL_METADATA`): the bytes the client sent with their
//! metadata stripped, per container, and nothing else changed. The pixels' data is copied as
//! it is; what rendering needs stays (the orientation, the ICC profile, the colour signalling);
//! location and identity go (GPS, XMP, maker notes, serial numbers, comments, thumbnails, a
//! vendor's private chunks, trailing data). What `strip-private` and `strip-all` keep of an
//! EXIF block: `exif.rs`; of each container: its module.
//!
//! The orientation is the one the pipeline applies, whichever block it came from (EXIF, XMP, a
//! PNG's text): the stripped original carries it in its one EXIF block. Before a stripped
//! original is handed back, its metadata is read again the way decoding reads it, and a
//! different orientation or profile refuses the photo: a stored original never renders
//! otherwise than the photo sent.

mod avif;
mod exif;
mod gif;
mod jpeg;
mod png;
#[cfg(test)]
mod tests;
mod webp;

use image::metadata::Orientation;

use super::PipelineError;
use super::meta::Meta;
use imgest_core::domain::{OriginalMetadata, SourceFormat};

/// What a photo's rendering depends on besides its pixels.
#[derive(Debug, PartialEq, Eq)]
struct Rendering {
    icc: Option<Vec<u8>>,
    orientation: Orientation,
    /// A JPEG's Adobe segment (how 4-component data is stored); AVIF's coding points.
    other: Option<String>,
}

/// The original to store in place of `bytes` (a photo of `format` that decoded), or `None` to
/// store `bytes` as they are (`keep`).
pub(crate) fn original(
    bytes: &[u8],
    format: SourceFormat,
    policy: OriginalMetadata,
) -> Result<Option<Vec<u8>>, PipelineError> {
    if policy == OriginalMetadata::Keep {
        return Ok(None);
    }
    let (before, meta) = rendering(bytes, format)?;
    let exif = exif::rewritten(meta.exif.as_deref(), meta.orientation, policy);
    let stripped = match format {
        SourceFormat::Jpeg => jpeg::strip(bytes, exif.as_deref())?,
        SourceFormat::Png => png::strip(bytes, exif.as_deref())?,
        SourceFormat::Webp => webp::strip(bytes, exif.as_deref())?,
        // The orientation is in `irot`/`imir`: an Exif item keeps the capture fields at most.
        SourceFormat::Avif => {
            let capture = exif::rewritten(meta.exif.as_deref(), Orientation::NoTransforms, policy);
            avif::strip(bytes, capture.as_deref())?
        }
        SourceFormat::Gif => gif::strip(bytes)?,
    };
    let (after, _) = rendering(&stripped, format)?;
    if after != before {
        return Err(PipelineError::CorruptImage(format!(
            "its metadata could not be removed without changing how it renders ({before:?} became {after:?})"
        )));
    }
    Ok(Some(stripped))
}

/// How `bytes` render besides their pixels, read as decoding reads it, and the metadata read.
fn rendering(bytes: &[u8], format: SourceFormat) -> Result<(Rendering, Meta<'_>), PipelineError> {
    let (meta, other) = match format {
        SourceFormat::Jpeg => {
            let structure = super::jpeg::read(bytes)?;
            let adobe = structure.metadata.adobe.then(|| "adobe".to_owned());
            (structure.metadata.meta(bytes), adobe)
        }
        SourceFormat::Png => (super::png::metadata(bytes), None),
        SourceFormat::Webp => (super::riff::metadata(bytes), None),
        SourceFormat::Gif => (Meta::default(), None),
        SourceFormat::Avif => {
            let avif = super::avif::container::parse(bytes)?;
            let meta = Meta {
                icc: avif.icc.map(|icc| std::borrow::Cow::Owned(icc.to_vec())),
                orientation: Orientation::from_exif(avif.orientation)
                    .unwrap_or(Orientation::NoTransforms),
                exif: avif_exif(bytes),
            };
            (meta, avif.nclx.map(|n| format!("{n:?}")))
        }
    };
    let rendering = Rendering {
        icc: meta.icc.as_deref().map(<[u8]>::to_vec),
        orientation: meta.orientation,
        other,
    };
    Ok((rendering, meta))
}

/// An AVIF's first `Exif` item's TIFF structure (after its 4-byte header offset).
fn avif_exif(bytes: &[u8]) -> Option<Vec<u8>> {
    let items = super::avif::container::metadata_items(bytes).ok()?;
    let item = items.into_iter().find(|i| &i.kind == b"Exif")?;
    let data: Vec<u8> = item
        .extents
        .into_iter()
        .flat_map(|r| bytes.get(r).unwrap_or_default().iter().copied())
        .collect();
    let offset = usize::try_from(u32::from_be_bytes(data.get(..4)?.try_into().ok()?)).ok()?;
    data.get(4usize.checked_add(offset)?..).map(<[u8]>::to_vec)
}
