//! What a stored original keeps of the metadata the photo came with
//! (`IMGEST_ORIGINAL_METADATA`). The image id and the strong hash are always those of the bytes
//! the client sent; the stored original may differ from them by its metadata only, never by a
//! pixel, its orientation or its colour profile.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How much of a photo's metadata its stored original keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OriginalMetadata {
    /// Everything, as sent.
    Keep,
    /// What rendering needs (orientation, ICC profile) and the EXIF fields that describe the
    /// capture (camera and lens model, dates, exposure); no location (GPS, XMP), identity
    /// (serial numbers, owner, artist, unique ids), maker notes, comments, thumbnails or
    /// private chunks.
    #[default]
    StripPrivate,
    /// What rendering needs only: the orientation and the ICC profile.
    StripAll,
}

impl OriginalMetadata {
    pub const ALL: [Self; 3] = [Self::Keep, Self::StripPrivate, Self::StripAll];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::StripPrivate => "strip-private",
            Self::StripAll => "strip-all",
        }
    }

    /// Whether an original stored under `stored` (`None`: stored as sent, before originals
    /// were stripped) already keeps no more than this policy allows: a backfill leaves it.
    pub fn is_met_by(self, stored: Option<Self>) -> bool {
        match (self, stored.unwrap_or(Self::Keep)) {
            (Self::Keep, _) => true,
            (Self::StripPrivate, stored) => stored != Self::Keep,
            (Self::StripAll, stored) => stored == Self::StripAll,
        }
    }
}

impl fmt::Display for OriginalMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OriginalMetadata {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| "expected keep, strip-private or strip-all".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_back_and_say_which_stored_originals_meet_them() {
        for p in OriginalMetadata::ALL {
            assert_eq!(p.as_str().parse::<OriginalMetadata>(), Ok(p));
        }
        assert!("strip".parse::<OriginalMetadata>().is_err());
        use OriginalMetadata::{Keep, StripAll, StripPrivate};
        assert!(Keep.is_met_by(None));
        assert!(!StripPrivate.is_met_by(None));
        assert!(!StripPrivate.is_met_by(Some(Keep)));
        assert!(StripPrivate.is_met_by(Some(StripAll)));
        assert!(!StripAll.is_met_by(Some(StripPrivate)));
        assert!(StripAll.is_met_by(Some(StripAll)));
    }
}
