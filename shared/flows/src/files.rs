//! An image's files: the original and its variants, written under a generation before the
//! record that names them, and deleted after the record that named them is gone (a record
//! never points at a missing file; a file without a record is garbage the sweep collects).
//! Uploads, crawls, backfill, GC and the audit's repairs all write and delete through here.
//!
//! **Deciding the files after the record write** ([`settle_files`]): a record write that names
//! new files may answer "refused" or fail although it was applied (DynamoDB: the answer was
//! lost, the SDK sent the request again and the condition then refused it; or a timeout hid a
//! write that went through, or that is still on its way). So whoever wrote files under a
//! generation reads the record back before it deletes them, and deletes them only when no
//! write of theirs can ever make a record name them; when that is unknown, the files are left
//! to the sweep (garbage after `IMGEST_SWEEP_GRACE` if no record names them).

use bytes::Bytes;
use tracing::{info, warn};

use super::{FlowCounters, FlowError};
use imgest_core::Ports;
use imgest_core::domain::{
    BlobKey, ContentHash, Generation, ImageId, ImageRecord, ImageState, OriginalMetadata,
    StoredVariant, VariantSetVersion,
};
use imgest_core::imaging::{Colour, Processed};
use imgest_core::ports::{ReadyImage, StoreError};

/// The record write whose new files are at stake.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RecordWrite<'a> {
    /// The writer's claim made ready ([`ImageIndex::complete`](imgest_core::ports::ImageIndex::complete)).
    Complete,
    /// A new ready record ([`ImageIndex::create_ready`](imgest_core::ports::ImageIndex::create_ready)).
    CreateReady,
    /// A ready record re-pointed from `expected` ([`ImageIndex::replace_files`](imgest_core::ports::ImageIndex::replace_files)).
    Replace { expected: &'a Generation },
}

/// What the record write answered.
#[derive(Debug)]
pub(crate) enum Answer<'a> {
    /// Written: the record it returned.
    Applied(Box<ImageRecord>),
    /// Refused by its condition (`None` from `create_ready`/`replace_files`, `Conflict` from
    /// `complete`).
    Refused,
    /// Failed: it may or may not have been applied, or may still be.
    Failed(&'a StoreError),
}

/// What becomes of the files written under the writer's generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FilesFate {
    /// The record names them: they are its files. Never delete.
    Ours(Box<ImageRecord>),
    /// No write of ours can make a record name them, now or later: delete them.
    Delete,
    /// Unknown: leave them to the sweep.
    Leave,
}

/// The decision, from the answer and the record read back (consistently) after it. Generations
/// are random and never reused, and every condition names one: a record of another generation
/// than the ones a write's condition names can never let that write land.
pub(crate) fn decide(
    write: RecordWrite<'_>,
    ours: &Generation,
    answer: &Answer<'_>,
    read_back: Result<Option<&ImageRecord>, &StoreError>,
) -> FilesFate {
    let failed = matches!(answer, Answer::Failed(_));
    match (answer, read_back) {
        (Answer::Applied(record), _) => FilesFate::Ours(record.clone()),
        (_, Err(_)) => FilesFate::Leave,
        (_, Ok(Some(record))) if &record.generation == ours => {
            if record.is_ready() {
                FilesFate::Ours(Box::new(record.clone()))
            } else {
                // Still our claim: a failed completion may yet land; a refused one is
                // unexplained. Either way the files are not known to be garbage.
                FilesFate::Leave
            }
        }
        (_, Ok(Some(record))) => match write {
            // Still as the condition wants it: a failed write may yet land (a refusal with the
            // condition still true is unexplained).
            RecordWrite::Replace { expected } if &record.generation == expected => FilesFate::Leave,
            // Another generation: a condition naming ours (or `expected`) can never hold again.
            // A create is refused while any record exists, and the record there can go only
            // through GC, after `IMGEST_ORPHAN_TTL` (at least an hour: longer than any request
            // of ours lives).
            _ => FilesFate::Delete,
        },
        (_, Ok(None)) => match write {
            // Refused, then gone: the record that refused it was collected meanwhile.
            RecordWrite::CreateReady if !failed => FilesFate::Delete,
            // A create that failed may still land on the empty key.
            RecordWrite::CreateReady => FilesFate::Leave,
            // Our claim, or the record as `expected`, is gone: the condition can never hold.
            RecordWrite::Complete | RecordWrite::Replace { .. } => FilesFate::Delete,
        },
    }
}

/// Reads the record back (unless the write was applied) and decides the fate of the files
/// written under `ours`; logs what a lost answer or an unknown outcome did.
pub(crate) async fn settle_files(
    ports: &Ports,
    counters: &FlowCounters,
    id: &ImageId,
    ours: &Generation,
    write: RecordWrite<'_>,
    answer: Answer<'_>,
) -> FilesFate {
    if let Answer::Applied(record) = answer {
        return FilesFate::Ours(record);
    }
    let read = ports.images.get(id).await;
    let fate = decide(write, ours, &answer, read.as_ref().map(Option::as_ref));
    match (&fate, &answer) {
        (FilesFate::Ours(_), _) => {
            counters.record_answers_lost.increment(1);
            info!(image_id = %id, generation = %ours, ?write, "a record write whose answer was lost was ours: the files stay");
        }
        (FilesFate::Leave, answer) => {
            let failed = match answer {
                Answer::Failed(e) => Some(e.to_string()),
                _ => None,
            };
            let read = read.as_ref().err().map(ToString::to_string);
            warn!(image_id = %id, generation = %ours, ?write, ?failed, ?read, "unknown whether a record will name these files: left to the sweep");
        }
        (FilesFate::Delete, _) => {}
    }
    fate
}

/// The bytes a processing run started from: what they are and what is known of them.
pub(crate) struct Source<'a> {
    /// The bytes processed: the body sent, or a stored original being re-processed.
    pub bytes: &'a Bytes,
    /// SHA-256 of the bytes the client sent (the record's strong hash).
    pub sha256: Option<ContentHash>,
    /// What `bytes` kept of the photo's metadata (`Some(Keep)`: a body as sent; a stored
    /// original: its record's).
    pub metadata: Option<OriginalMetadata>,
}

impl<'a> Source<'a> {
    /// A body as the client sent it.
    pub(crate) fn sent(bytes: &'a Bytes) -> Self {
        Self {
            bytes,
            sha256: Some(ContentHash::of_bytes(bytes)),
            metadata: Some(OriginalMetadata::Keep),
        }
    }
}

/// Writes the original (the processed bytes, stripped of their metadata as the pipeline's
/// policy says) and every variant (concurrently) and describes them for the record.
pub(crate) async fn write_files(
    ports: &Ports,
    id: &ImageId,
    generation: &Generation,
    source: Source<'_>,
    processed: Processed,
    variant_set: VariantSetVersion,
    counters: &FlowCounters,
) -> Result<ReadyImage, FlowError> {
    if let Colour::Ignored(why) = &processed.colour {
        // The variants are made all the same (the pixels taken as sRGB): worth knowing, not
        // worth refusing the photo for.
        tracing::warn!(image_id = %id, reason = %why, "colour profile ignored");
        counters.colour_profiles_ignored.increment(1);
    }
    let mut writes = Vec::with_capacity(processed.variants.len() + 1);
    let mut variants = Vec::with_capacity(processed.variants.len());
    let (original, original_metadata) = match processed.original {
        Some(stripped) => (Bytes::from(stripped), Some(processed.original_metadata)),
        None => (source.bytes.clone(), source.metadata),
    };
    let original_bytes = original.len() as u64;
    writes.push((
        BlobKey::original(id, generation),
        original,
        processed.format.mime(),
    ));
    for v in processed.variants {
        variants.push(StoredVariant {
            name: v.name.clone(),
            width: v.width,
            height: v.height,
            bytes: v.bytes.len() as u64,
            format: v.format,
        });
        writes.push((
            BlobKey::variant(id, generation, &v.name, v.format),
            Bytes::from(v.bytes),
            v.format.mime(),
        ));
    }
    let results = futures_util::future::join_all(
        writes
            .iter()
            .map(|(key, body, content_type)| ports.blobs.put(key, body.clone(), content_type)),
    )
    .await;
    for r in results {
        r?;
    }
    counters.files_written.increment(writes.len() as u64);
    Ok(ReadyImage {
        sha256: source.sha256,
        format: processed.format,
        width: processed.width,
        height: processed.height,
        original_bytes,
        variants,
        variant_set,
        original_metadata,
        thumbhash: processed.thumbhash,
        signature: processed.signature,
    })
}

/// Which of a generation's files a deletion may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileScope {
    /// The variants only (under `public/`): what a failed upload, crawl or re-processing
    /// removes. Its original is left to the sweep: only the collectors (GC, the sweep) delete
    /// originals, the only copy of a photo (on AWS no other function may).
    Variants,
    /// The original too: GC, for a record it removed.
    All,
}

/// Deletes the files under one generation of an image in `scope`, found by listing.
pub(crate) async fn delete_generation_files(
    ports: &Ports,
    id: &ImageId,
    generation: &Generation,
    scope: FileScope,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    let [public, originals] = BlobKey::generation_prefixes(id, generation);
    let prefixes = match scope {
        FileScope::Variants => vec![public],
        FileScope::All => vec![public, originals],
    };
    for prefix in prefixes {
        loop {
            // Always from the start: the previous page is gone once deleted.
            let page = ports.blobs.list(&prefix, None, 1000).await?;
            if page.blobs.is_empty() {
                break;
            }
            let keys: Vec<BlobKey> = page.blobs.into_iter().map(|b| b.key).collect();
            ports.blobs.delete(&keys).await?;
            deleted += keys.len() as u64;
            if page.next.is_none() {
                break;
            }
        }
    }
    Ok(deleted)
}

/// Deletes the files of a record that is gone: a ready record's own keys; an unfinished one's
/// (an abandoned claim may have written any subset of its files) found by listing.
pub(crate) async fn delete_record_files(
    ports: &Ports,
    record: &ImageRecord,
) -> Result<u64, StoreError> {
    match record.state {
        ImageState::Ready { .. } => {
            let keys = record.file_keys();
            ports.blobs.delete(&keys).await?;
            Ok(keys.len() as u64)
        }
        ImageState::Processing { .. } => {
            delete_generation_files(ports, &record.id, &record.generation, FileScope::All).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use imgest_core::domain::{SourceFormat, Timestamp};

    fn record(generation: &Generation, ready: bool) -> ImageRecord {
        let state = if ready {
            ImageState::Ready {
                format: SourceFormat::Jpeg,
                width: 1,
                height: 1,
                original_bytes: 1,
                variants: Vec::new(),
                variant_set: None,
                sha256: None,
                original_metadata: None,
                thumbhash: None,
                signature: None,
            }
        } else {
            ImageState::Processing {
                claim_expires_at: Timestamp::from_millis(1),
            }
        };
        ImageRecord {
            id: ImageId::of_bytes(b"x"),
            generation: generation.clone(),
            state,
            created_at: Timestamp::from_millis(0),
            last_update: Timestamp::from_millis(0),
            link_count: 0,
            expires_at: None,
            previous: None,
        }
    }

    /// The decision table of `docs/consistency.md`, row by row, for both answers.
    #[test]
    fn files_are_deleted_only_when_no_write_of_ours_can_name_them() {
        use FilesFate::{Delete, Leave};
        let ours = Generation::random();
        let expected = Generation::random();
        let other = Generation::random();
        let failure = StoreError::Unavailable {
            message: "timed out".into(),
            source: None,
        };
        let read_failure = StoreError::Unavailable {
            message: "read timed out".into(),
            source: None,
        };
        let replace = RecordWrite::Replace {
            expected: &expected,
        };
        let answers = [Answer::Refused, Answer::Failed(&failure)];
        let decide_all = |write, read: Result<Option<&ImageRecord>, &StoreError>| {
            answers
                .iter()
                .map(|answer| decide(write, &ours, answer, read))
                .collect::<Vec<_>>()
        };
        let ours_ready = record(&ours, true);
        let is_ours = FilesFate::Ours(Box::new(ours_ready.clone()));
        for write in [RecordWrite::Complete, RecordWrite::CreateReady, replace] {
            // Ours and ready: the write went through.
            assert_eq!(
                decide_all(write, Ok(Some(&ours_ready))),
                [is_ours.clone(), is_ours.clone()],
                "{write:?}"
            );
            // Another generation: our condition can never hold again.
            assert_eq!(
                decide_all(write, Ok(Some(&record(&other, true)))),
                [Delete, Delete],
                "{write:?}"
            );
            // The record could not be read: unknown.
            assert_eq!(
                decide_all(write, Err(&read_failure)),
                [Leave, Leave],
                "{write:?}"
            );
        }
        // Our claim still there: a failed completion may land; a refusal is unexplained.
        assert_eq!(
            decide_all(RecordWrite::Complete, Ok(Some(&record(&ours, false)))),
            [Leave, Leave]
        );
        // The record still as the re-pointing expects it.
        assert_eq!(
            decide_all(replace, Ok(Some(&record(&expected, true)))),
            [Leave, Leave]
        );
        // No record: a completion or re-pointing needs one; a create may still land.
        assert_eq!(
            decide_all(RecordWrite::Complete, Ok(None)),
            [Delete, Delete]
        );
        assert_eq!(decide_all(replace, Ok(None)), [Delete, Delete]);
        assert_eq!(
            decide_all(RecordWrite::CreateReady, Ok(None)),
            [Delete, Leave]
        );
        // Applied: ours without reading.
        assert_eq!(
            decide(
                RecordWrite::CreateReady,
                &ours,
                &Answer::Applied(Box::new(ours_ready.clone())),
                Err(&read_failure)
            ),
            is_ours
        );
    }
}
