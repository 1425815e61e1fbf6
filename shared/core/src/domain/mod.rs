//! Domain types: parsed once at the edge, so nothing past it handles raw strings.

mod blob_key;
mod content_hash;
mod ids;
mod image;
mod job_part;
mod original;
mod placeholder;
mod points;
pub mod random;
mod similarity;
mod sniff;
mod tenancy;
mod time;
mod url;
mod variant;

pub use blob_key::{
    BlobKey, DEAD_LETTERS_PREFIX, IMAGE_AREAS, INCOMING_PREFIX, ImageBlobKey, ORIGINALS_PREFIX,
    PUBLIC_PREFIX, SHARD_COUNT, shard_prefixes,
};
pub use content_hash::{ContentHash, ContentHashError};
pub use ids::{ClientId, Generation, IdError, ImageId, OfferId, UploadId};
pub use image::{
    ImageRecord, ImageState, PreviousFiles, SourceFormat, StoredVariant, refresh_granularity,
};
pub use job_part::{JobPart, JobPartError, MAX_JOB_PARTS};
pub use original::OriginalMetadata;
pub use placeholder::{ThumbHash, ThumbHashError};
pub use points::{
    Agreement, KEY_BITS as POINT_KEY_BITS, MIN_AGREEING, POINT_SIDE, Point, QUERY_POINTS,
    QUERY_SCALES, QueryLevel, QueryPoints, STORED_POINTS, agreeing, key_text,
};
pub use similarity::{
    BYTES_WITHOUT_POINTS, Bucket, HashPair, INNER_BAND, MATCH_DISTANCE, MIN_QUALITY,
    MIN_QUERY_QUALITY, PROBES_PER_SLICE, PdqHash, SLICES, Signal, Signature, SignatureError,
    SimilarMode, WeakBits,
};
pub use sniff::{HEIC_HINT, NotSupported, SNIFF_LEN};
pub use tenancy::{OfferKey, Owner, Tenant};
pub use time::Timestamp;
pub use url::{NormalizationRules, NormalizedUrl, UrlError, UrlHash, loggable, redacted};
pub use variant::{
    FitMode, OutputFormat, VariantName, VariantSet, VariantSetVersion, VariantSpec,
    VariantSpecError,
};
