//! An image's files: the original and its variants, written under a generation before the
//! record that names them, and deleted after the record that named them is gone (a record
//! never points at a missing file; a file without a record is garbage the sweep collects).
//! Uploads, crawls, backfill, GC and the audit's repairs all write and delete through here.

use bytes::Bytes;

use super::{FlowCounters, FlowError};
use imgest_core::Ports;
use imgest_core::domain::{
    BlobKey, Generation, ImageId, ImageRecord, ImageState, StoredVariant, VariantSetVersion,
};
use imgest_core::ports::{ReadyImage, StoreError};
use imgest_pipeline::{Colour, Processed};

/// Writes the original and every variant (concurrently) and describes them for the record.
pub(crate) async fn write_files(
    ports: &Ports,
    id: &ImageId,
    generation: &Generation,
    original: &Bytes,
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
    writes.push((
        BlobKey::original(id, generation),
        original.clone(),
        processed.format.mime(),
    ));
    for v in processed.variants {
        variants.push(StoredVariant {
            name: v.name.clone(),
            width: v.width,
            height: v.height,
            bytes: v.jpeg.len() as u64,
        });
        writes.push((
            BlobKey::variant(id, generation, &v.name),
            Bytes::from(v.jpeg),
            "image/jpeg",
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
        format: processed.format,
        width: processed.width,
        height: processed.height,
        original_bytes: original.len() as u64,
        variants,
        variant_set,
    })
}

/// Deletes every file under one generation of an image, found by listing its prefixes.
pub(crate) async fn delete_generation_files(
    ports: &Ports,
    id: &ImageId,
    generation: &Generation,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    for prefix in BlobKey::generation_prefixes(id, generation) {
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
            delete_generation_files(ports, &record.id, &record.generation).await
        }
    }
}
