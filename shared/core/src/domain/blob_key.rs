//! Object-storage keys. The first segment says who may read a file: `public/` holds the
//! variants (the only files a CDN or the local runner serves), `originals/` the original
//! bytes (kept for re-processing, metadata included: never served), `incoming/` and
//! `fetched/` bodies waiting for processing. Image files live under
//! `{area}/{shard}/{image_id}/{generation}/{file}` where the shard is the id's first two hex
//! digits, so the sweep walks storage one shard at a time.

use std::fmt;

use super::{Generation, ImageId, OutputFormat, UploadId, VariantName};

/// Number of shard prefixes (`00` … `ff`).
pub const SHARD_COUNT: usize = 256;

/// Where the variants live: the only prefix that is ever served.
pub const PUBLIC_PREFIX: &str = "public/";

/// Where the originals live: never served.
pub const ORIGINALS_PREFIX: &str = "originals/";

/// The two areas of image files, each sharded the same way.
pub const IMAGE_AREAS: [&str; 2] = [PUBLIC_PREFIX, ORIGINALS_PREFIX];

/// Where presigned uploads land.
pub const INCOMING_PREFIX: &str = "incoming/";

/// Where downloaded bodies wait for the process function.
pub const FETCHED_PREFIX: &str = "fetched/";

/// Where a dead letter too large for its queue keeps its body (never served, never swept).
pub const DEAD_LETTERS_PREFIX: &str = "dead-letters/";

/// Every shard prefix, in order.
pub fn shard_prefixes() -> impl Iterator<Item = String> {
    (0..SHARD_COUNT).map(|i| format!("{i:02x}"))
}

/// A key in the blob store: a relative, `/`-separated path of safe characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobKey(String);

impl BlobKey {
    /// Accepts keys of `[A-Za-z0-9._-]` segments separated by `/`; no empty, `.` or `..` segment.
    pub fn parse(s: &str) -> Option<Self> {
        let ok = !s.is_empty()
            && s.len() <= 512
            && s.split('/').all(|seg| {
                !seg.is_empty()
                    && seg != "."
                    && seg != ".."
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            });
        ok.then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of an image's original bytes (private).
    pub fn original(id: &ImageId, generation: &Generation) -> Self {
        Self(format!(
            "{ORIGINALS_PREFIX}{}/{}/{}/original",
            id.shard(),
            id,
            generation
        ))
    }

    /// The key of one variant (public): `{name}.jpg`, `.webp` or `.avif`.
    pub fn variant(
        id: &ImageId,
        generation: &Generation,
        name: &VariantName,
        format: OutputFormat,
    ) -> Self {
        Self(format!(
            "{PUBLIC_PREFIX}{}/{}/{}/{}.{}",
            id.shard(),
            id,
            generation,
            name,
            format.extension()
        ))
    }

    /// Whether the file is written once and never overwritten: an original, the one copy of a
    /// photo. A second write of its key keeps the first body (on AWS the bucket's policy
    /// refuses any write under `originals/` that does not say so).
    pub fn is_write_once(&self) -> bool {
        self.0.starts_with(ORIGINALS_PREFIX)
    }

    /// Whether the file may be served to anyone: a variant (an image file under `public/`).
    pub fn is_public(&self) -> bool {
        self.0.starts_with(PUBLIC_PREFIX) && self.image_part().is_some()
    }

    /// Where a presigned upload's body lands before processing (outside the image shards, so
    /// the sweeper never sees it; on AWS a lifecycle rule removes abandoned ones).
    pub fn incoming(upload: &UploadId) -> Self {
        Self(format!("{INCOMING_PREFIX}{upload}"))
    }

    /// The upload an `incoming/` key belongs to.
    pub fn incoming_upload(&self) -> Option<UploadId> {
        self.0
            .strip_prefix(INCOMING_PREFIX)
            .and_then(|id| UploadId::parse(id).ok())
    }

    /// Where a body a fetch function downloaded waits for the process function:
    /// `fetched/{url_hash}` (one download of a URL runs at a time, so its URL names it; outside
    /// `incoming/`, whose objects the storage notifies the process function of). `None` if the
    /// hash has characters a key may not.
    pub fn fetched(url_hash: &str) -> Option<Self> {
        Self::parse(&format!("{FETCHED_PREFIX}{url_hash}"))
    }

    /// Where a dead letter of `queue` too large for its dead-letter queue keeps its body:
    /// `dead-letters/{queue}/{message_id}` (on AWS a lifecycle rule removes it with the
    /// letters' retention). `None` if either part has characters a key may not.
    pub fn dead_letter(queue: &str, message_id: &str) -> Option<Self> {
        (!queue.contains('/') && !message_id.contains('/'))
            .then(|| Self::parse(&format!("{DEAD_LETTERS_PREFIX}{queue}/{message_id}")))
            .flatten()
    }

    /// The prefixes under which all files of one generation of an image live, one per area
    /// (each ends with `/`).
    pub fn generation_prefixes(id: &ImageId, generation: &Generation) -> [String; 2] {
        IMAGE_AREAS.map(|area| format!("{area}{}/{}/{}/", id.shard(), id, generation))
    }

    /// Which image generation this key belongs to, if it is an image file key.
    pub fn image_part(&self) -> Option<ImageBlobKey> {
        let rest = IMAGE_AREAS
            .iter()
            .find_map(|area| self.0.strip_prefix(area))?;
        let mut parts = rest.split('/');
        let (shard, id, generation, file) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let id = ImageId::parse(id).ok()?;
        if id.shard() != shard || file.is_empty() {
            return None;
        }
        Some(ImageBlobKey {
            id,
            generation: Generation::parse(generation).ok()?,
        })
    }
}

impl fmt::Display for BlobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The image and generation an image file key belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageBlobKey {
    pub id: ImageId,
    pub generation: Generation,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_keys_are_sharded_and_parse_back() {
        let id = ImageId::of_bytes(b"a");
        let g = Generation::parse("0badcafe").unwrap();
        let name = VariantName::parse("large").unwrap();
        let key = BlobKey::variant(&id, &g, &name, OutputFormat::Jpeg);
        assert_eq!(
            key.as_str(),
            "public/0c/0cc175b9c0f1b6a831c399e269772661/0badcafe/large.jpg"
        );
        assert!(key.is_public());
        let original = BlobKey::original(&id, &g);
        assert_eq!(
            original.as_str(),
            "originals/0c/0cc175b9c0f1b6a831c399e269772661/0badcafe/original"
        );
        assert!(!original.is_public());
        assert_eq!(original.image_part(), key.image_part());
        assert_eq!(
            key.image_part(),
            Some(ImageBlobKey {
                id: id.clone(),
                generation: g.clone()
            })
        );
        let [public, originals] = BlobKey::generation_prefixes(&id, &g);
        assert!(key.as_str().starts_with(&public));
        assert!(BlobKey::original(&id, &g).as_str().starts_with(&originals));
        assert_eq!(shard_prefixes().count(), SHARD_COUNT);
    }

    #[test]
    fn unsafe_or_foreign_keys_are_refused_or_not_image_keys() {
        assert!(BlobKey::parse("../etc/passwd").is_none());
        assert!(BlobKey::parse("a//b").is_none());
        assert!(BlobKey::parse("/abs").is_none());
        assert!(BlobKey::parse("a/b c").is_none());
        let foreign = BlobKey::parse("public/0c/not-an-id/0badcafe/x").unwrap();
        assert_eq!(foreign.image_part(), None);
        assert!(!foreign.is_public());
        let wrong_shard =
            BlobKey::parse("public/ff/0cc175b9c0f1b6a831c399e269772661/0badcafe/x").unwrap();
        assert_eq!(wrong_shard.image_part(), None);
        // The layout before areas: not an image file of this one.
        let old = BlobKey::parse("0c/0cc175b9c0f1b6a831c399e269772661/0badcafe/large.jpg").unwrap();
        assert_eq!(old.image_part(), None);
        assert!(!old.is_public());
        assert!(!BlobKey::incoming(&UploadId::random()).is_public());
    }

    #[test]
    fn downloads_wait_outside_incoming_and_the_shards() {
        let hash = "0cc175b9c0f1b6a831c399e269772661";
        let download = BlobKey::fetched(hash).unwrap();
        assert_eq!(download.as_str(), format!("fetched/{hash}"));
        assert_eq!(download.incoming_upload(), None);
        assert_eq!(download.image_part(), None);
        assert_eq!(BlobKey::fetched("a b"), None);
    }
}
