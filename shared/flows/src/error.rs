//! The flows' error: every failure a caller can see, with a stable kind and a retry class.

use imgest_core::domain::{IdError, ImageId, OfferId, UploadId, VariantName};
use imgest_core::imaging::PipelineError;
use imgest_core::ports::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("the body is empty")]
    EmptyBody,
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error(transparent)]
    Image(#[from] PipelineError),
    #[error("image {0} does not exist (never uploaded, or expired)")]
    ImageNotFound(ImageId),
    #[error("offer {0} has no photos set")]
    OfferNotFound(OfferId),
    #[error("image {0} is unknown: upload it first")]
    UnknownImage(ImageId),
    #[error("image {0} is listed more than once")]
    DuplicateImage(ImageId),
    #[error("{count} photos is more than the limit of {limit} per offer")]
    TooManyPhotos { count: usize, limit: usize },
    #[error("too many new photos are being processed; try again shortly")]
    Overloaded,
    #[error("too many uploads from this caller; try again in {}s", retry_after.as_secs().max(1))]
    RateLimited { retry_after: std::time::Duration },
    #[error(
        "image {0}: these bytes have the MD5 of a stored image but not its SHA-256 (an MD5 collision); refused"
    )]
    HashCollision(ImageId),
    #[error("the same photo is still being processed by another request; try again in {}s", retry_after.as_secs().max(1))]
    StillProcessing {
        id: ImageId,
        retry_after: std::time::Duration,
    },
    #[error("upload {0} does not exist (or expired)")]
    UploadNotFound(UploadId),
    /// The caller has no upload of this image (within the orphan window) to erase.
    #[error("image {0}: the caller has no upload of it to erase")]
    NotUploaded(ImageId),
    /// The content was erased by an operator and may not be stored again.
    #[error("image {0} was erased and may not be uploaded or crawled again")]
    Erased(ImageId),
    #[error("upload {0}'s URL has expired; create a new upload")]
    UploadExpired(UploadId),
    #[error("upload {0} already received its body")]
    UploadAlreadyReceived(UploadId),
    #[error("the upload declared {declared} bytes but {received} arrived")]
    SizeMismatch { declared: u64, received: u64 },
    /// The caller (a queue message's sender) may not ask for this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error(
        "the configuration drops the confirmed variant(s) {}: confirm the drop with `imgest variants confirm{}`",
        names(.0), .0.iter().map(|n| format!(" --drop {}", n.as_str())).collect::<String>()
    )]
    VariantDropUnconfirmed(Vec<VariantName>),
    #[error("the configured variant set is not the confirmed one: {0} (`imgest variants status`)")]
    VariantSetUnconfirmed(String),
    #[error("{0}")]
    SweepStopped(String),
    /// A message's body (under `incoming/` or `fetched/`) expired before it was processed.
    #[error("{0}")]
    BodyGone(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A flow that decodes photos ran in a process started without the pipeline (a
    /// collector): a wiring error, not the photo's.
    #[error("this process was started without the photo pipeline and cannot decode photos")]
    NoPipeline,
    #[error("internal error: {0}")]
    Internal(String),
}

impl FlowError {
    /// The stable, machine-readable kind (the API's `error.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::EmptyBody => "empty_body",
            Self::InvalidId(IdError::ImageId(_)) => "invalid_image_id",
            Self::InvalidId(IdError::OfferId(_)) => "invalid_offer_id",
            Self::InvalidId(IdError::UploadId(_)) => "invalid_upload_id",
            Self::InvalidId(IdError::ClientId(_)) => "invalid_client_id",
            Self::InvalidId(IdError::Generation(_)) => "invalid_id",
            Self::UploadNotFound(_) => "upload_not_found",
            Self::NotUploaded(_) => "not_uploaded",
            Self::Erased(_) => "erased",
            Self::UploadExpired(_) => "upload_expired",
            Self::UploadAlreadyReceived(_) => "upload_already_received",
            Self::SizeMismatch { .. } => "size_mismatch",
            Self::Image(e) => e.kind(),
            Self::ImageNotFound(_) => "image_not_found",
            Self::OfferNotFound(_) => "offer_not_found",
            Self::UnknownImage(_) => "unknown_image",
            Self::DuplicateImage(_) => "duplicate_image",
            Self::TooManyPhotos { .. } => "too_many_photos",
            Self::Overloaded | Self::RateLimited { .. } => "too_many_requests",
            Self::Forbidden(_) => "forbidden",
            Self::StillProcessing { .. } => "still_processing",
            Self::HashCollision(_) => "hash_collision",
            Self::VariantDropUnconfirmed(_) => "variant_drop_unconfirmed",
            Self::VariantSetUnconfirmed(_) => "variant_set_unconfirmed",
            Self::SweepStopped(_) => "sweep_stopped",
            Self::BodyGone(_) => "body_gone",
            Self::Store(e) => e.kind(),
            Self::NoPipeline | Self::Internal(_) => "internal",
        }
    }

    /// Whether the same request may succeed later. Bad input never does.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::StillProcessing { .. } | Self::Overloaded | Self::RateLimited { .. } => true,
            Self::Store(e) => e.is_retryable(),
            Self::Image(e) => e.is_retryable(),
            _ => false,
        }
    }
}

impl From<imgest_core::ports::LinkError> for FlowError {
    fn from(e: imgest_core::ports::LinkError) -> Self {
        match e {
            imgest_core::ports::LinkError::UnknownImage(id) => Self::UnknownImage(id),
            imgest_core::ports::LinkError::Store(e) => Self::Store(e),
        }
    }
}

/// `large, thumb`
fn names(names: &[VariantName]) -> String {
    names
        .iter()
        .map(VariantName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
