//! Why a photo was refused ([`PipelineError`], a type of `imgest_core::imaging`, where the
//! flows see it without linking the codecs), and the decoders' errors mapped onto it.

pub use imgest_core::imaging::PipelineError;

/// Maps a decoder error: unsupported features stay unsupported, the rest is corruption.
pub(crate) fn from_decoder(err: image::ImageError) -> PipelineError {
    match err {
        image::ImageError::Unsupported(e) => PipelineError::UnsupportedFormat(e.to_string()),
        other => PipelineError::CorruptImage(other.to_string()),
    }
}
