//! [`S3BlobStore`]: the blob store port on one S3 bucket, and presigned upload URLs
//! ([`UploadUrls`]) into the same bucket.
//!
//! S3 already has the semantics the port asks for: a `PutObject` is atomic (readers see the old
//! object or the whole new one), `DeleteObject(s)` ignore missing keys and `ListObjectsV2` lists
//! in UTF-8 byte order, which is key order for the ASCII keys a [`BlobKey`] allows. Objects
//! whose key is not a valid [`BlobKey`] (put there by something else) are never listed, as the
//! directory store skips foreign files.
//!
//! SDK errors are translated here, at the boundary, by [`sdk_error`] (shared by the other AWS
//! adapters): a missing key is `NotFound`, throttling, server errors, timeouts and connection
//! failures are `Unavailable` (retryable), anything else is `Backend`; the SDK error is kept as
//! the source.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use bytes::Bytes;

use crate::sdk_error::{is_retryable_code, sdk_error};
use imgest_core::domain::{BlobKey, Timestamp};
use imgest_core::ports::{
    BlobMeta, BlobPage, BlobStore, DeletedBlob, Erased, KeepCurrent, StoreError, UploadUrls,
};

/// Whether S3 refused a read with 403 `AccessDenied`. S3 answers a read of a missing key so
/// to a caller without `s3:ListBucket` on the whole bucket, and the functions that read have
/// none (least privilege: they may list only the prefixes they walk), so a denied read is a
/// missing key. That holds only while every function may read what it reads: the template's
/// policies are generated from one table and held to it by a test (`tests/e2e/template`).
fn is_denied<E: aws_sdk_s3::error::ProvideErrorMetadata>(
    e: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> bool {
    match e {
        aws_sdk_s3::error::SdkError::ServiceError(service) => {
            service.raw().status().as_u16() == 403
                && aws_sdk_s3::error::ProvideErrorMetadata::code(service.err())
                    == Some("AccessDenied")
        }
        _ => false,
    }
}

/// The HTTP status S3 answered with, if it answered.
fn status_of<E>(
    e: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> Option<u16> {
    match e {
        aws_sdk_s3::error::SdkError::ServiceError(service) => Some(service.raw().status().as_u16()),
        _ => None,
    }
}

/// `DeleteObjects` takes at most this many keys per call.
const DELETE_BATCH: usize = 1000;
/// Up to this many keys are deleted one `DeleteObject` each, concurrently: S3 bills `DELETE`
/// requests at nothing, while a `DeleteObjects` is a `POST`. An image's files (an original and
/// a few variants), an upload's `incoming/` body and a process batch's downloaded bodies (10)
/// go this way; sweeps use batches.
const SINGLE_DELETES: usize = 16;
/// `ListObjectsV2` returns at most this many keys per call.
const MAX_LIST_KEYS: usize = 1000;
/// Pages of `ListObjectVersions` read for one [`BlobStore::deleted`] at most: it is asked of
/// one image's prefix (a few keys, a version or two each), so more is not a prefix it serves.
const MAX_VERSION_PAGES: usize = 10;

/// A blob store on an S3 bucket (the bucket must exist). Cheap to clone.
#[derive(Debug, Clone)]
pub struct S3BlobStore {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3BlobStore {
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    /// One `DeleteObjects` call (at most [`DELETE_BATCH`] keys), checking its per-key errors.
    async fn delete_batch(&self, keys: &[BlobKey]) -> Result<(), StoreError> {
        let objects = keys
            .iter()
            .map(|k| ObjectIdentifier::builder().key(k.as_str()).build());
        self.delete_objects(objects, "deleting blobs").await
    }

    /// One `DeleteObjects` call of `objects` (keys, or keys' versions), quiet, its per-object
    /// errors classified: a missing key is not one (S3 does not report it; be sure anyway).
    async fn delete_objects<E>(
        &self,
        objects: impl Iterator<Item = Result<ObjectIdentifier, E>>,
        what: &str,
    ) -> Result<(), StoreError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let objects = objects
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StoreError::backend("building a DeleteObjects request", e))?;
        let count = objects.len();
        let delete = Delete::builder()
            .set_objects(Some(objects))
            // Quiet: the answer lists only the objects that failed.
            .quiet(true)
            .build()
            .map_err(|e| StoreError::backend("building a DeleteObjects request", e))?;
        let out = self
            .client
            .delete_objects()
            .bucket(&self.bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| sdk_error(format!("{what}: {count} objects"), e))?;
        let failed: Vec<_> = out
            .errors()
            .iter()
            .filter(|e| e.code() != Some("NoSuchKey"))
            .collect();
        let Some(first) = failed.first() else {
            return Ok(());
        };
        let code = first.code().unwrap_or("unknown");
        let message = format!(
            "{what}: {} of {count} failed, the first {:?} with {code}: {}",
            failed.len(),
            first.key().unwrap_or(""),
            first.message().unwrap_or(""),
        );
        Err(if is_retryable_code(code) {
            StoreError::Unavailable {
                message,
                source: None,
            }
        } else {
            StoreError::Backend {
                message,
                source: None,
            }
        })
    }
}

impl S3BlobStore {
    /// `GetObject` of `key`, its headers answered (the body streams after): a missing key is
    /// [`StoreError::NotFound`], and so is a denied read (`is_denied`). `context` names the read
    /// in errors.
    async fn get_object(
        &self,
        key: &str,
        context: String,
    ) -> Result<aws_sdk_s3::operation::get_object::GetObjectOutput, StoreError> {
        self.client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| {
                if is_denied(&e) {
                    return StoreError::NotFound(format!(
                        "{context}: S3 answered 403, which is how it answers a missing key to a caller that may not list the bucket"
                    ));
                }
                sdk_error(context, e)
            })
    }

    /// The object `key` whole, refused over `limit` bytes (by its length before its body is
    /// read, and again as the body streams in).
    pub async fn read_whole(&self, key: &str, limit: u64) -> Result<Vec<u8>, StoreError> {
        let out = self
            .get_object(key, format!("reading s3://{}/{key}", self.bucket))
            .await?;
        let too_big =
            || StoreError::corrupt(format!("s3://{}/{key} is over {limit} bytes", self.bucket));
        if out
            .content_length()
            .is_some_and(|n| n.unsigned_abs() > limit)
        {
            return Err(too_big());
        }
        let mut body = out.body;
        let mut bytes = Vec::new();
        while let Some(chunk) = body.try_next().await.map_err(|e| {
            StoreError::unavailable(format!("reading the body of s3://{}/{key}", self.bucket), e)
        })? {
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Err(too_big());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// One version (or deletion marker) of a key, as `ListObjectVersions` gives it.
struct Version {
    key: String,
    id: Option<String>,
    /// The current object (not a marker): what `keep` is asked about.
    current: Option<BlobMeta>,
}

impl S3BlobStore {
    /// `DeleteObjects` of these versions (at most [`DELETE_BATCH`]).
    async fn delete_versions(&self, versions: &[Version]) -> Result<(), StoreError> {
        let objects = versions.iter().map(|v| {
            ObjectIdentifier::builder()
                .key(&v.key)
                .set_version_id(v.id.clone())
                .build()
        });
        self.delete_objects(objects, "erasing object versions")
            .await
    }
}

#[async_trait]
impl BlobStore for S3BlobStore {
    /// `ListObjectVersions` of the prefix, a page at a time, and `DeleteObjects` of each
    /// version by its id (deleting a version leaves no marker): no role of the stack may, so
    /// on AWS the operator's `imgest erase --pending` does.
    async fn erase(&self, prefix: &str, keep: KeepCurrent<'_>) -> Result<Erased, StoreError> {
        let context = || format!("listing object versions under {prefix:?}");
        let mut erased = Erased::default();
        let (mut key_marker, mut version_marker) = (None, None);
        loop {
            let out = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.clone())
                .set_version_id_marker(version_marker.clone())
                .max_keys(MAX_LIST_KEYS as i32)
                .send()
                .await
                .map_err(|e| sdk_error(context(), e))?;
            let mut doomed = Vec::new();
            for v in out.versions() {
                let Some(raw) = v.key() else { continue };
                let current = match (v.is_latest(), BlobKey::parse(raw)) {
                    (Some(true), Some(key)) => Some(BlobMeta {
                        key,
                        size: v.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
                        last_modified: Timestamp::from_millis(
                            v.last_modified()
                                .and_then(|t| t.to_millis().ok())
                                .unwrap_or(0),
                        ),
                    }),
                    _ => None,
                };
                if current.as_ref().is_some_and(keep) {
                    continue;
                }
                doomed.push(Version {
                    key: raw.to_owned(),
                    id: v.version_id().map(str::to_owned),
                    current,
                });
            }
            for m in out.delete_markers() {
                if let Some(raw) = m.key() {
                    doomed.push(Version {
                        key: raw.to_owned(),
                        id: m.version_id().map(str::to_owned),
                        current: None,
                    });
                }
            }
            for batch in doomed.chunks(DELETE_BATCH) {
                self.delete_versions(batch).await?;
            }
            let objects = doomed.iter().filter(|v| v.current.is_some()).count() as u64;
            erased.objects += objects;
            erased.versions += doomed.len() as u64 - objects;
            if !out.is_truncated().unwrap_or(false) {
                return Ok(erased);
            }
            key_marker = out.next_key_marker().map(str::to_owned);
            version_marker = out.next_version_id_marker().map(str::to_owned);
            if key_marker.is_none() {
                return Ok(erased);
            }
        }
    }

    async fn put(&self, key: &BlobKey, body: Bytes, content_type: &str) -> Result<(), StoreError> {
        let len = i64::try_from(body.len())
            .map_err(|_| StoreError::corrupt(format!("blob {key} is too large to store")))?;
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .content_length(len)
            .body(ByteStream::from(body));
        if !content_type.is_empty() {
            req = req.content_type(content_type);
        }
        if !key.is_write_once() {
            req.send()
                .await
                .map_err(|e| sdk_error(format!("writing blob {key}"), e))?;
            return Ok(());
        }
        // An original only if none is there (the bucket's policy refuses any other write
        // under originals/): one there already (a write retried after a lost answer) stays.
        match req.if_none_match("*").send().await {
            Ok(_) => Ok(()),
            Err(e) if status_of(&e) == Some(412) => Ok(()),
            // Another conditional write of the key was in flight: asked again, it is a 412.
            Err(e) if status_of(&e) == Some(409) => Err(StoreError::unavailable(
                format!("writing blob {key}: a concurrent write of it was in flight"),
                e,
            )),
            Err(e) => Err(sdk_error(format!("writing blob {key}"), e)),
        }
    }

    async fn get(&self, key: &BlobKey) -> Result<Bytes, StoreError> {
        let out = self
            .get_object(key.as_str(), format!("reading blob {key}"))
            .await?;
        // The body streams after the headers: a failure here is a broken connection.
        let body =
            out.body.collect().await.map_err(|e| {
                StoreError::unavailable(format!("reading the body of blob {key}"), e)
            })?;
        Ok(body.into_bytes())
    }

    async fn delete(&self, keys: &[BlobKey]) -> Result<(), StoreError> {
        if keys.len() <= SINGLE_DELETES {
            let deletes = keys.iter().map(|k| async move {
                self.client
                    .delete_object()
                    .bucket(&self.bucket)
                    .key(k.as_str())
                    .send()
                    .await
                    .map_err(|e| sdk_error(format!("deleting blob {k}"), e))
            });
            // S3 answers a delete of a missing key with success, as the port asks.
            for result in futures_util::future::join_all(deletes).await {
                result?;
            }
            return Ok(());
        }
        for batch in keys.chunks(DELETE_BATCH) {
            self.delete_batch(batch).await?;
        }
        Ok(())
    }

    async fn list(
        &self,
        prefix: &str,
        after: Option<&BlobKey>,
        limit: usize,
    ) -> Result<BlobPage, StoreError> {
        let limit = limit.clamp(1, MAX_LIST_KEYS);
        let max_keys = i32::try_from(limit).unwrap_or(1000);
        let context = || format!("listing blobs under {prefix:?}");
        // Where S3 resumes: the cursor, or (after a page of nothing but foreign keys) the last
        // key S3 returned, which need not be a valid `BlobKey`.
        let mut start_after = after.map(|k| k.as_str().to_owned());
        loop {
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_start_after(start_after.clone())
                .max_keys(max_keys)
                .send()
                .await
                .map_err(|e| sdk_error(context(), e))?;
            let mut blobs = Vec::with_capacity(out.contents().len());
            let mut last_raw = None;
            for object in out.contents() {
                let Some(raw) = object.key() else { continue };
                last_raw = Some(raw);
                let Some(key) = BlobKey::parse(raw) else {
                    continue;
                };
                let size = object
                    .size()
                    .and_then(|s| u64::try_from(s).ok())
                    .ok_or_else(|| {
                        StoreError::corrupt(format!("{}: {raw} has no size", context()))
                    })?;
                let last_modified = object
                    .last_modified()
                    .and_then(|t| t.to_millis().ok())
                    .ok_or_else(|| {
                        StoreError::corrupt(format!(
                            "{}: {raw} has no modification time",
                            context()
                        ))
                    })?;
                blobs.push(BlobMeta {
                    key,
                    size,
                    last_modified: Timestamp::from_millis(last_modified),
                });
            }
            let truncated = out.is_truncated().unwrap_or(false);
            if !truncated {
                return Ok(BlobPage { blobs, next: None });
            }
            if let Some(last) = blobs.last() {
                // The next page starts after the last key returned; foreign keys between it
                // and the end of this page are skipped again then.
                let next = Some(last.key.clone());
                return Ok(BlobPage { blobs, next });
            }
            // A full page of foreign keys only: read on rather than return an empty page with
            // a cursor that cannot name where to resume.
            match last_raw {
                Some(raw) => start_after = Some(raw.to_owned()),
                None => return Ok(BlobPage { blobs, next: None }),
            }
        }
    }

    /// Keys whose latest version is a delete marker, each with the newest version before it
    /// (`ListObjectVersions` lists a key's versions newest first).
    async fn deleted(&self, prefix: &str, limit: usize) -> Result<Vec<DeletedBlob>, StoreError> {
        use std::collections::BTreeMap;
        let context = || format!("listing deleted versions under {prefix:?}");
        let millis = |t: Option<&aws_sdk_s3::primitives::DateTime>| {
            t.and_then(|t| t.to_millis().ok())
                .map(Timestamp::from_millis)
        };
        // Per key: when its latest delete marker was made, and its newest kept version.
        let mut deleted_at: BTreeMap<String, Timestamp> = BTreeMap::new();
        let mut kept: BTreeMap<String, (String, u64, Timestamp)> = BTreeMap::new();
        let (mut key_marker, mut version_marker) = (None, None);
        for _ in 0..MAX_VERSION_PAGES {
            let out = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| sdk_error(context(), e))?;
            for marker in out.delete_markers() {
                if let (Some(key), true, Some(at)) = (
                    marker.key(),
                    marker.is_latest().unwrap_or(false),
                    millis(marker.last_modified()),
                ) {
                    deleted_at.insert(key.to_owned(), at);
                }
            }
            for version in out.versions() {
                let (Some(key), Some(id), Some(at)) = (
                    version.key(),
                    version.version_id(),
                    millis(version.last_modified()),
                ) else {
                    continue;
                };
                let size = version
                    .size()
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(0);
                let newer = kept.get(key).is_none_or(|(_, _, seen)| at > *seen);
                if newer {
                    kept.insert(key.to_owned(), (id.to_owned(), size, at));
                }
            }
            if !out.is_truncated().unwrap_or(false) {
                break;
            }
            key_marker = out.next_key_marker().map(str::to_owned);
            version_marker = out.next_version_id_marker().map(str::to_owned);
        }
        let mut found: Vec<DeletedBlob> = deleted_at
            .into_iter()
            .filter_map(|(raw, at)| {
                let key = BlobKey::parse(&raw)?;
                let (version, size, _) = kept.remove(&raw)?;
                Some(DeletedBlob {
                    key,
                    version,
                    size,
                    deleted_at: at,
                })
            })
            .collect();
        found.sort_by_key(|b| std::cmp::Reverse(b.deleted_at));
        found.truncate(limit);
        Ok(found)
    }

    async fn get_deleted(&self, blob: &DeletedBlob) -> Result<Bytes, StoreError> {
        let key = &blob.key;
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .version_id(&blob.version)
            .send()
            .await
            .map_err(|e| sdk_error(format!("reading the kept version of {key}"), e))?;
        let body = out.body.collect().await.map_err(|e| {
            StoreError::unavailable(format!("reading the kept version of {key}"), e)
        })?;
        Ok(body.into_bytes())
    }
}

#[async_trait]
impl UploadUrls for S3BlobStore {
    /// A presigned `PutObject` URL for exactly `size` bytes.
    ///
    /// The request is presigned with `Content-Length: size`, and the Rust SDK's presigner signs
    /// it: the URL's `X-Amz-SignedHeaders` is `content-length;host` (checked by a unit test
    /// below), so S3 refuses a PUT of any other length (`SignatureDoesNotMatch`). A plain
    /// `PUT` of the body is all a client has to do: HTTP clients send `Content-Length` for a
    /// body of known size. The processing side re-checks the size all the same (emulators do
    /// not verify signatures, and a check that costs nothing should not rest on one layer).
    async fn presign_put(
        &self,
        key: &BlobKey,
        size: u64,
        content_type: &str,
        expires_in: Duration,
    ) -> Result<String, StoreError> {
        let length = i64::try_from(size)
            .map_err(|_| StoreError::corrupt(format!("upload size {size} is out of range")))?;
        let config = PresigningConfig::expires_in(expires_in).map_err(|e| {
            StoreError::backend(
                format!("presigning an upload to {key} for {expires_in:?}"),
                e,
            )
        })?;
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .content_length(length)
            .content_type(content_type)
            .presigned(config)
            .await
            .map_err(|e| sdk_error(format!("presigning an upload to {key}"), e))?;
        Ok(presigned.uri().to_owned())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};

    use super::*;

    #[test]
    fn only_a_403_access_denied_reads_as_a_missing_key() {
        use aws_sdk_s3::config::http::HttpResponse;
        use aws_sdk_s3::error::{ErrorMetadata, SdkError};
        use aws_sdk_s3::operation::get_object::GetObjectError;
        let error = |code: &str, status: u16| {
            SdkError::service_error(
                GetObjectError::generic(ErrorMetadata::builder().code(code).build()),
                HttpResponse::new(status.try_into().unwrap(), "".into()),
            )
        };
        assert!(is_denied(&error("AccessDenied", 403)));
        assert!(!is_denied(&error("AccessDenied", 400)));
        assert!(!is_denied(&error("InvalidAccessKeyId", 403)));
        assert!(!is_denied(&error("NoSuchKey", 404)));
    }

    fn offline_store() -> S3BlobStore {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("eu-west-1"))
            .credentials_provider(Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                None,
                "test",
            ))
            .build();
        S3BlobStore::new(aws_sdk_s3::Client::from_conf(config), "imgest-bucket")
    }

    fn query_param(url: &str, name: &str) -> Option<String> {
        let url = url::Url::parse(url).unwrap();
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    /// Presigning needs no network: what the URL binds is checked offline.
    #[tokio::test]
    async fn presigned_put_urls_bind_the_content_length_and_type() {
        let store = offline_store();
        let key = BlobKey::parse("incoming/0123456789abcdef0123456789abcdef").unwrap();
        let url = store
            .presign_put(
                &key,
                1_234_567,
                "application/octet-stream",
                Duration::from_secs(900),
            )
            .await
            .unwrap();
        assert!(url.contains("imgest-bucket"), "{url}");
        assert!(
            url.contains("incoming/0123456789abcdef0123456789abcdef"),
            "{url}"
        );
        assert_eq!(
            query_param(&url, "X-Amz-SignedHeaders").as_deref(),
            Some("content-length;content-type;host"),
            "{url}"
        );
        assert_eq!(query_param(&url, "X-Amz-Expires").as_deref(), Some("900"));
        // Longer than SigV4 allows (7 days) is refused, not silently shortened.
        assert!(
            store
                .presign_put(
                    &key,
                    1,
                    "application/octet-stream",
                    Duration::from_secs(8 * 24 * 3600)
                )
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_retryable_and_keeps_the_sdk_error() {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("eu-west-1"))
            .credentials_provider(Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                None,
                "test",
            ))
            // Nothing listens on the discard port; the SDK's own retries are off.
            .endpoint_url("http://127.0.0.1:9")
            .force_path_style(true)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
            .build();
        let store = S3BlobStore::new(aws_sdk_s3::Client::from_conf(config), "b");
        let err = store
            .get(&BlobKey::parse("a/b").unwrap())
            .await
            .unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        assert!(std::error::Error::source(&err).is_some());
    }
}
