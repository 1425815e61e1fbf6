//! Variant specifications: the sizes (and file formats) every photo is turned into, parsed from
//! `large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200`; a variant may name its format
//! and quality, `large_avif=fit:1280x1280:avif` or `thumb=cover:200x200:webp:70`.

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

/// The file format of a variant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputFormat {
    /// Baseline JPEG, 4:2:0: every browser and app shows it.
    #[default]
    Jpeg,
    /// Lossy WebP (libwebp): about a quarter fewer bytes than JPEG at the same quality.
    Webp,
    /// AVIF (AV1 through rav1e): about half the bytes of JPEG at the same quality, at many
    /// times its encoding CPU (docs/benchmarks.md, docs/cost.md).
    Avif,
}

impl OutputFormat {
    pub const ALL: [Self; 3] = [Self::Jpeg, Self::Webp, Self::Avif];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Webp => "webp",
            Self::Avif => "avif",
        }
    }

    /// The file name's extension (its files' keys end with it).
    pub fn extension(self) -> &'static str {
        match self {
            Self::Jpeg => "jpg",
            Self::Webp => "webp",
            Self::Avif => "avif",
        }
    }

    /// Its files' `Content-Type`.
    pub fn mime(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
            Self::Avif => "image/avif",
        }
    }

    /// The format whose files end with `.{extension}`.
    pub fn from_extension(extension: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.extension() == extension)
    }

    /// Serde's `skip_serializing_if`: JPEG, the default, is not written (records written before
    /// variants had a format read back the same).
    pub fn is_jpeg(&self) -> bool {
        *self == Self::Jpeg
    }
}

impl FromStr for OutputFormat {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|f| f.as_str() == s).ok_or(())
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VariantSpec {
    pub name: VariantName,
    pub mode: FitMode,
    pub width: u32,
    pub height: u32,
    pub format: OutputFormat,
    /// 1..=100; `None`: the format's default (`IMGEST_JPEG_QUALITY` for JPEG).
    pub quality: Option<u8>,
}

impl VariantSpec {
    pub const MAX_SIDE: u32 = 10_000;
}

impl FromStr for VariantSpec {
    type Err = VariantSpecError;

    /// `name=fit:WxH` or `name=cover:WxH`, then optionally `:format` (`jpeg`, `webp`, `avif`)
    /// and `:quality` (1 to 100) after it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| VariantSpecError {
            spec: s.to_owned(),
            reason,
        };
        let (name, rest) = s
            .trim()
            .split_once('=')
            .ok_or(err("expected name=mode:WIDTHxHEIGHT"))?;
        let mut parts = rest.split(':');
        let (Some(mode), Some(size)) = (parts.next(), parts.next()) else {
            return Err(err("expected name=mode:WIDTHxHEIGHT"));
        };
        let format = match parts.next() {
            None => OutputFormat::Jpeg,
            Some(f) => f
                .parse()
                .map_err(|()| err("the format must be jpeg, webp or avif"))?,
        };
        let quality = match parts.next() {
            None => None,
            Some(q) => match q.parse::<u8>() {
                Ok(q) if (1..=100).contains(&q) => Some(q),
                _ => return Err(err("the quality must be a whole number from 1 to 100")),
            },
        };
        if parts.next().is_some() {
            return Err(err("expected name=mode:WIDTHxHEIGHT[:format[:quality]]"));
        }
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
            format,
            quality,
        })
    }
}

impl fmt::Display for VariantSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            FitMode::Fit => "fit",
            FitMode::Cover => "cover",
        };
        write!(f, "{}={}:{}x{}", self.name, mode, self.width, self.height)?;
        // Only what was said: a JPEG set prints (and so versions) as before formats existed.
        if !self.format.is_jpeg() || self.quality.is_some() {
            write!(f, ":{}", self.format)?;
        }
        if let Some(q) = self.quality {
            write!(f, ":{q}")?;
        }
        Ok(())
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
    fn a_variant_may_name_its_format_and_quality() {
        let set = VariantSet::from_str(
            "large=fit:1280x1280,large_avif=fit:1280x1280:avif,t=cover:9x9:jpeg:70",
        )
        .unwrap();
        let formats: Vec<_> = set.specs().iter().map(|s| (s.format, s.quality)).collect();
        assert_eq!(
            formats,
            [
                (OutputFormat::Jpeg, None),
                (OutputFormat::Avif, None),
                (OutputFormat::Jpeg, Some(70))
            ]
        );
        // Printed as said, so a set without formats versions as before they existed.
        assert_eq!(
            set.to_string(),
            "large=fit:1280x1280,large_avif=fit:1280x1280:avif,t=cover:9x9:jpeg:70"
        );
        assert_eq!(
            OutputFormat::from_extension("webp"),
            Some(OutputFormat::Webp)
        );
        assert_eq!(OutputFormat::from_extension("jpeg"), None);
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
            "large=fit:10x10:gif",
            "large=fit:10x10:webp:0",
            "large=fit:10x10:webp:101",
            "large=fit:10x10:webp:80:1",
            "large=fit:10x10:",
        ] {
            assert!(
                VariantSet::from_str(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}
