//! The strong hash of an image's original bytes (SHA-256), stored with its record. The image
//! id is the MD5 of the bytes, and MD5 collisions between two different photos are cheap to
//! make: a dedup hit is trusted only when the strong hashes agree too.

use std::fmt;

use serde::{Deserialize, Serialize};

/// SHA-256 of an image's original bytes; lowercase hex in JSON and storage.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ContentHash([u8; 32]);

/// Not 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a SHA-256 must be 64 lowercase hex characters, got {0:?}")]
pub struct ContentHashError(String);

impl ContentHash {
    pub fn parse(s: &str) -> Result<Self, ContentHashError> {
        let mut out = [0u8; 32];
        let ok = s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && hex::decode_to_slice(s, &mut out).is_ok();
        if ok {
            Ok(Self(out))
        } else {
            Err(ContentHashError(s.chars().take(80).collect()))
        }
    }

    /// The hash of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self::of_chunks([bytes])
    }

    /// The hash of the concatenation of `chunks` (a body as it arrived).
    pub fn of_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut context = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        for chunk in chunks {
            context.update(chunk);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(context.finish().as_ref());
        Self(out)
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.to_hex())
    }
}

impl TryFrom<String> for ContentHash {
    type Error = ContentHashError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<ContentHash> for String {
    fn from(h: ContentHash) -> Self {
        h.to_hex()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_bytes_round_trips_through_hex() {
        // FIPS 180-2's "abc".
        let h = ContentHash::of_bytes(b"abc");
        assert_eq!(
            h.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(ContentHash::of_chunks([&b"a"[..], b"bc"]), h);
        assert_eq!(ContentHash::parse(&h.to_string()), Ok(h));
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<ContentHash>(&json).unwrap(), h);
        for bad in [
            "",
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "xyz",
        ] {
            assert!(ContentHash::parse(bad).is_err(), "{bad}");
        }
    }
}
