//! A photo's placeholder: its ThumbHash (a few bytes a page decodes into a blurred preview, with
//! the photo's aspect ratio, to paint before the photo arrives). Written in base64, as pages and
//! the reference decoders take it.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A ThumbHash: at most [`ThumbHash::MAX_LEN`] bytes (the format's own bound is 25).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ThumbHash(Vec<u8>);

/// Not a ThumbHash: bad base64, or a length no ThumbHash has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ThumbHash: {0}")]
pub struct ThumbHashError(String);

impl ThumbHash {
    /// The header alone is 5 bytes; a photo's hash is 23 to 25.
    pub const MIN_LEN: usize = 5;
    pub const MAX_LEN: usize = 32;

    /// The hash an encoder made.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, ThumbHashError> {
        if (Self::MIN_LEN..=Self::MAX_LEN).contains(&bytes.len()) {
            Ok(Self(bytes))
        } else {
            Err(ThumbHashError(format!("{} bytes", bytes.len())))
        }
    }

    /// Read back from its base64 form (a stored record's).
    pub fn parse(s: &str) -> Result<Self, ThumbHashError> {
        if s.len() > Self::MAX_LEN * 2 {
            return Err(ThumbHashError(format!("{} characters", s.len())));
        }
        let bytes = STANDARD
            .decode(s)
            .map_err(|e| ThumbHashError(e.to_string()))?;
        Self::from_bytes(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Standard base64, padded (what `atob` and the reference decoders read).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(&self.0)
    }
}

impl fmt::Display for ThumbHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl fmt::Debug for ThumbHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ThumbHash({self})")
    }
}

impl Serialize for ThumbHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for ThumbHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_base64_and_refuses_what_no_hash_is() {
        let hash = ThumbHash::from_bytes(vec![7; 24]).unwrap();
        assert_eq!(ThumbHash::parse(&hash.to_base64()).unwrap(), hash);
        let json = serde_json::to_string(&hash).unwrap();
        assert_eq!(serde_json::from_str::<ThumbHash>(&json).unwrap(), hash);
        assert!(ThumbHash::from_bytes(vec![1; 4]).is_err());
        assert!(ThumbHash::from_bytes(vec![1; 33]).is_err());
        assert!(ThumbHash::parse("not base64!").is_err());
        assert!(ThumbHash::parse(&"A".repeat(10_000)).is_err());
    }
}
