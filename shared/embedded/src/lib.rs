//! The ports on embedded storage: a directory ([`FsBlobStore`]), one SQLite file
//! ([`SqliteStore`]: image, offer and upload records, checkpoints, the task queue) and the
//! runner's own upload URLs ([`LocalUploadUrls`]); [`ports`] builds them all over a data
//! directory.

pub mod fs;
pub mod local_upload_urls;
pub mod sqlite;

pub use fs::FsBlobStore;
pub use local_upload_urls::LocalUploadUrls;
pub use sqlite::SqliteStore;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use imgest_core::Ports;
use imgest_core::ports::{Clock, StoreError};

use crate::sqlite::QueueSender;

/// The data directory could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot open the store: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// The SQLite file inside a data directory.
pub fn sqlite_path(data_dir: &Path) -> PathBuf {
    data_dir.join("imgest.sqlite3")
}

/// The blob directory inside a data directory.
pub fn blobs_path(data_dir: &Path) -> PathBuf {
    data_dir.join("files")
}

/// The ports over a data directory (created if missing): its SQLite file holds the records and
/// the task queue every message goes to; its `files/` directory the files. `public_url` is
/// where the local runner is reached (its presigned-upload URLs point there).
pub async fn ports(
    data_dir: &Path,
    public_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Ports, OpenError> {
    let blobs_dir = blobs_path(data_dir);
    tokio::fs::create_dir_all(&blobs_dir)
        .await
        .map_err(|source| OpenError::DataDir {
            path: blobs_dir.clone(),
            source,
        })?;
    // Opening creates the schema: blocking file IO, kept off the async workers.
    let db = sqlite_path(data_dir);
    let store = Arc::new(tokio::task::spawn_blocking(move || SqliteStore::open(&db)).await??);
    let moving = blobs_dir.clone();
    let moved = tokio::task::spawn_blocking(move || fs::move_to_areas(&moving)).await??;
    if moved > 0 {
        tracing::info!(
            moved,
            "moved image files of an earlier layout to public/ and originals/"
        );
    }
    Ok(Ports {
        blobs: Arc::new(FsBlobStore::new(blobs_dir)),
        images: store.clone(),
        offers: store.clone(),
        uploads: store.clone(),
        upload_urls: Arc::new(LocalUploadUrls::new(public_url.trim_end_matches('/'))),
        checkpoints: store.clone(),
        documents: store.clone(),
        rate_limits: store.clone(),
        // Messages become tasks of the same file's queue, which the local workers receive.
        messages: Arc::new(QueueSender::new(store.clone(), clock.clone())),
        queue: Some(store),
        clock,
    })
}
