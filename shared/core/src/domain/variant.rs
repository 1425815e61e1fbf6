//! Variant specifications: the sizes every photo is turned into, parsed from
//! `large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid variant spec {spec:?}: {reason}")]
pub struct VariantSpecError {
    pub spec: String,
    pub reason: &'static str,
}

/// A variant's name: 1–32 of `[a-z0-9_-]`; it is part of the file key and the API's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct VariantName(String);

impl VariantName {
    pub fn parse(s: &str) -> Result<Self, VariantSpecError> {
        let ok = !s.is_empty()
            && s.len() <= 32
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            && s != "original";
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(VariantSpecError {
                spec: s.to_owned(),
                reason: "a name is 1-32 of [a-z0-9_-] and not \"original\"",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for VariantName {
    type Error = VariantSpecError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<VariantName> for String {
    fn from(n: VariantName) -> String {
        n.0
    }
}

impl fmt::Display for VariantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a photo is fitted into a variant's box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitMode {
    /// Scale down to fit inside the box, keeping the aspect ratio; never upscale.
    Fit,
    /// Scale to cover the box and crop the centre: exactly the box's size (never upscaled:
    /// a source smaller than the box gives the largest centre crop of the box's aspect ratio).
    Cover,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VariantSpec {
    pub name: VariantName,
    pub mode: FitMode,
    pub width: u32,
    pub height: u32,
}

impl VariantSpec {
    pub const MAX_SIDE: u32 = 10_000;
}

impl FromStr for VariantSpec {
    type Err = VariantSpecError;

    /// `name=fit:WxH` or `name=cover:WxH`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| VariantSpecError {
            spec: s.to_owned(),
            reason,
        };
        let (name, rest) = s
            .trim()
            .split_once('=')
            .ok_or(err("expected name=mode:WIDTHxHEIGHT"))?;
        let (mode, size) = rest
            .split_once(':')
            .ok_or(err("expected name=mode:WIDTHxHEIGHT"))?;
        let mode = match mode {
            "fit" => FitMode::Fit,
            "cover" => FitMode::Cover,
            _ => return Err(err("mode must be fit or cover")),
        };
        let (w, h) = size
            .split_once('x')
            .ok_or(err("size must be WIDTHxHEIGHT"))?;
        let side = |v: &str| -> Result<u32, VariantSpecError> {
            match v.parse::<u32>() {
                Ok(n) if (1..=Self::MAX_SIDE).contains(&n) => Ok(n),
                _ => Err(err(
                    "width and height must be whole numbers from 1 to 10000",
                )),
            }
        };
        Ok(Self {
            name: VariantName::parse(name.trim()).map_err(|e| err(e.reason))?,
            mode,
            width: side(w)?,
            height: side(h)?,
        })
    }
}

impl fmt::Display for VariantSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            FitMode::Fit => "fit",
            FitMode::Cover => "cover",
        };
        write!(f, "{}={}:{}x{}", self.name, mode, self.width, self.height)
    }
}

/// The configured variants: at least one, names unique, in configuration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantSet(Vec<VariantSpec>);

impl VariantSet {
    pub const DEFAULT: &'static str = "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200";

    pub fn new(specs: Vec<VariantSpec>) -> Result<Self, VariantSpecError> {
        if specs.is_empty() {
            return Err(VariantSpecError {
                spec: String::new(),
                reason: "at least one variant is needed",
            });
        }
        for (i, s) in specs.iter().enumerate() {
            if specs[..i].iter().any(|p| p.name == s.name) {
                return Err(VariantSpecError {
                    spec: s.to_string(),
                    reason: "variant names must be unique",
                });
            }
        }
        Ok(Self(specs))
    }

    pub fn specs(&self) -> &[VariantSpec] {
        &self.0
    }

    pub fn get(&self, name: &VariantName) -> Option<&VariantSpec> {
        self.0.iter().find(|s| &s.name == name)
    }
}

impl Default for VariantSet {
    fn default() -> Self {
        // The constant is known to parse; a test below checks it.
        Self::from_str(Self::DEFAULT).unwrap_or_else(|_| Self(Vec::new()))
    }
}

impl FromStr for VariantSet {
    type Err = VariantSpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let specs = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(VariantSpec::from_str)
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(specs)
    }
}

impl fmt::Display for VariantSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Which variant set a ready image's files were made with: a digest of the variant specs, the
/// JPEG quality and the watermark (16 hex digits). A record of another version (or of none:
/// written before versions were recorded) is what a backfill re-processes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct VariantSetVersion(String);

impl VariantSetVersion {
    /// The version of everything that shapes the files: `parts` in order (the set as
    /// printed, the quality, the watermark's own digest...), each length-prefixed.
    pub fn of(parts: &[&[u8]]) -> Self {
        use md5::{Digest, Md5};
        let mut md5 = Md5::new();
        for part in parts {
            md5.update((part.len() as u64).to_le_bytes());
            md5.update(part);
        }
        Self(hex::encode(&md5.finalize()[..8]))
    }

    /// The version of files whose variant set was not recorded (written before versions were,
    /// then some of their variants retired): never the version of a configuration.
    pub fn unknown() -> Self {
        Self::of(&[b"unknown"])
    }

    pub fn parse(s: &str) -> Result<Self, VariantSpecError> {
        if s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Self(s.to_owned()))
        } else {
            Err(VariantSpecError {
                spec: s.to_owned(),
                reason: "a variant set version is 16 lowercase hex digits",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for VariantSetVersion {
    type Error = VariantSpecError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<VariantSetVersion> for String {
    fn from(v: VariantSetVersion) -> String {
        v.0
    }
}

impl fmt::Display for VariantSetVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_set_parses_and_prints_back() {
        let set = VariantSet::default();
        assert_eq!(set.specs().len(), 3);
        assert_eq!(set.to_string(), VariantSet::DEFAULT);
        assert_eq!(set.specs()[2].mode, FitMode::Cover);
    }

    #[test]
    fn a_version_names_every_part_and_parses_back() {
        let a = VariantSetVersion::of(&[b"large=fit:10x10", b"82"]);
        assert_eq!(a, VariantSetVersion::of(&[b"large=fit:10x10", b"82"]));
        assert_ne!(a, VariantSetVersion::of(&[b"large=fit:10x10", b"83"]));
        // Length prefixes: moving a byte between parts is another version.
        assert_ne!(a, VariantSetVersion::of(&[b"large=fit:10x108", b"2"]));
        assert_eq!(VariantSetVersion::parse(a.as_str()), Ok(a));
        for bad in ["", "0123", "0123456789ABCDEF", "0123456789abcdeg"] {
            assert!(VariantSetVersion::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_specs_are_rejected_with_the_offending_part() {
        for bad in [
            "",
            "large",
            "large=fit",
            "large=crop:10x10",
            "large=fit:0x10",
            "large=fit:10x99999",
            "Large=fit:10x10",
            "original=fit:10x10",
            "a=fit:10x10,a=cover:5x5",
        ] {
            assert!(
                VariantSet::from_str(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}
