//! Identifier newtypes: image ids (content hashes), offer and client ids, storage generations
//! and upload ids.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a string is not a valid identifier; the API returns it as a 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error(
        "image id must be 32 lowercase hex characters (the MD5 of the original bytes), got {0:?}"
    )]
    ImageId(String),
    #[error("offer id must be 1 to 128 characters of [A-Za-z0-9._:-], got {0:?}")]
    OfferId(String),
    #[error("client id must be 1 to 64 characters of [A-Za-z0-9._:-], got {0:?}")]
    ClientId(String),
    #[error("generation must be 8 lowercase hex characters, got {0:?}")]
    Generation(String),
    #[error("upload id must be 32 lowercase hex characters, got {0:?}")]
    UploadId(String),
}

/// The marketplace's own names (offers, clients): 1 to `max` characters of `[A-Za-z0-9._:-]`.
fn is_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Lowercase hex MD5 of an image's original bytes: the same bytes always get the same id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ImageId(String);

impl ImageId {
    pub fn parse(s: &str) -> Result<Self, IdError> {
        if is_lower_hex(s, 32) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::ImageId(truncate(s)))
        }
    }

    /// The id of content whose MD5 digest is `digest`.
    pub fn from_md5(digest: [u8; 16]) -> Self {
        Self(hex::encode(digest))
    }

    /// The id of `bytes` (one pass of MD5).
    pub fn of_bytes(bytes: &[u8]) -> Self {
        use md5::{Digest, Md5};
        Self::from_md5(Md5::digest(bytes).into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The storage shard: the first two hex digits, so storage splits into 256 even shards.
    pub fn shard(&self) -> &str {
        &self.0[..2]
    }
}

/// A marketplace listing's id, as the marketplace names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OfferId(String);

impl OfferId {
    pub const MAX_LEN: usize = 128;

    pub fn parse(s: &str) -> Result<Self, IdError> {
        if is_name(s, Self::MAX_LEN) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::OfferId(truncate(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A marketplace partner that sends crawl requests: rate limits and statistics are per client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClientId(String);

impl ClientId {
    pub const MAX_LEN: usize = 64;

    pub fn parse(s: &str) -> Result<Self, IdError> {
        if is_name(s, Self::MAX_LEN) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::ClientId(truncate(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Fixed when an image record is created and part of every file key of that record.
///
/// GC deletes only the files of the generation whose record it removed, so an upload of the
/// same bytes that races with GC writes a new generation that GC never touches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Generation(String);

impl Generation {
    pub fn random() -> Self {
        Self(super::random::secure_hex::<4>())
    }

    /// A random generation other than `old`: a takeover or a re-processing must never reuse
    /// the keys of the generation it replaces.
    pub fn random_other_than(old: &Generation) -> Self {
        loop {
            let g = Self::random();
            if &g != old {
                return g;
            }
        }
    }

    pub fn parse(s: &str) -> Result<Self, IdError> {
        if is_lower_hex(s, 8) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::Generation(truncate(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A presigned upload's id: 128 random bits, which also make the upload URL unguessable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UploadId(String);

impl UploadId {
    pub fn random() -> Self {
        Self(super::random::secure_hex::<16>())
    }

    pub fn parse(s: &str) -> Result<Self, IdError> {
        if is_lower_hex(s, 32) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::UploadId(truncate(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The conversions every string newtype here shares: serde through `parse`, `Display` as is.
macro_rules! string_newtype {
    ($t:ident) => {
        impl TryFrom<String> for $t {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(&s)
            }
        }

        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.0
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_newtype!(ImageId);
string_newtype!(OfferId);
string_newtype!(ClientId);
string_newtype!(Generation);
string_newtype!(UploadId);

/// Error messages quote the bad input, but never more than a screenful of it.
fn truncate(s: &str) -> String {
    s.chars().take(140).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_ids_are_32_lowercase_hex() {
        assert!(ImageId::parse("0cc175b9c0f1b6a831c399e269772661").is_ok());
        assert!(ImageId::parse("0CC175B9C0F1B6A831C399E269772661").is_err());
        assert!(ImageId::parse("0cc175b9c0f1b6a831c399e26977266").is_err());
        assert!(ImageId::parse("0cc175b9c0f1b6a831c399e26977266g").is_err());
        assert!(ImageId::parse("").is_err());
    }

    #[test]
    fn image_id_of_bytes_is_the_md5_hex() {
        assert_eq!(
            ImageId::of_bytes(b"a").as_str(),
            "0cc175b9c0f1b6a831c399e269772661"
        );
        assert_eq!(ImageId::of_bytes(b"a").shard(), "0c");
    }

    #[test]
    fn offer_ids_allow_a_small_alphabet_up_to_128_chars() {
        assert!(OfferId::parse("cars:12345-a.b_c").is_ok());
        assert!(OfferId::parse(&"x".repeat(128)).is_ok());
        assert!(OfferId::parse(&"x".repeat(129)).is_err());
        assert!(OfferId::parse("").is_err());
        assert!(OfferId::parse("a/b").is_err());
        assert!(OfferId::parse("a b").is_err());
        assert!(OfferId::parse("é").is_err());
    }

    #[test]
    fn generations_round_trip() {
        let g = Generation::random();
        assert_eq!(Generation::parse(g.as_str()), Ok(g));
        assert!(Generation::parse("xyz").is_err());
    }
}
