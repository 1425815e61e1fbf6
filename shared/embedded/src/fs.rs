//! [`FsBlobStore`]: the blob store port on a local directory.
//!
//! A key maps to the relative path of the same name under the root
//! (`public/ab/<id>/<gen>/large.jpg`).
//! Writes go to a temporary file in the target directory that is renamed over the final name,
//! so readers see the old file, no file or the whole new one; concurrent writers of one key
//! each rename their own complete file (the last rename wins). Temporary names contain `~`,
//! which no [`BlobKey`] may contain, so listings never show a write in progress.
//!
//! By default every write is made durable before `put` returns (the file's data is fsynced
//! before the rename, its directory after): a record marked ready after its files are written
//! must not point at empty files after a power cut. [`FsBlobStore::with_fsync`] turns that off
//! for throwaway directories (tests, benchmarks).
//!
//! All file-system work runs on tokio's blocking pool, never on the async workers.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;

use imgest_core::domain::{BlobKey, Timestamp};
use imgest_core::ports::{BlobMeta, BlobPage, BlobStore, StoreError};

/// Temporary files start with this; `~` is outside the key alphabet, so they are never keys.
const TEMP_PREFIX: &str = ".~tmp-";
const TEMP_SUFFIX: &str = ".partial";
/// How often `put` recreates its directory when a concurrent `delete` pruned it meanwhile.
const PUT_DIR_RETRIES: usize = 8;

/// A blob store on a directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FsBlobStore {
    root: PathBuf,
    fsync: bool,
}

impl FsBlobStore {
    /// A store on `root`, without touching the disk: directories (the root included) are
    /// created by the first `put` under them. Writes are fsynced (see the module docs).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            fsync: true,
        }
    }

    /// A store on `root`, created now if missing (so a bad path fails at start-up). Writes are fsynced (see the module docs).
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        fs::create_dir_all(&root)
            .map_err(|e| io_error(format!("creating blob root {}", root.display()), e))?;
        Ok(Self::new(root))
    }

    /// Whether `put` fsyncs the file and its directory (default: yes).
    pub fn with_fsync(mut self, fsync: bool) -> Self {
        self.fsync = fsync;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    async fn blocking<T, F>(&self, what: &'static str, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Path, bool) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let root = self.root.clone();
        let fsync = self.fsync;
        tokio::task::spawn_blocking(move || f(&root, fsync))
            .await
            .map_err(|e| StoreError::backend(format!("blob store {what} task failed"), e))?
    }
}

#[async_trait]
impl BlobStore for FsBlobStore {
    async fn put(&self, key: &BlobKey, body: Bytes, _content_type: &str) -> Result<(), StoreError> {
        let key = key.clone();
        self.blocking("put", move |root, fsync| put_file(root, &key, &body, fsync))
            .await
    }

    async fn get(&self, key: &BlobKey) -> Result<Bytes, StoreError> {
        let path = key_path(&self.root, key.as_str());
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Bytes::from(bytes)),
            Err(e) if is_missing(&e) || e.kind() == io::ErrorKind::IsADirectory => {
                Err(StoreError::NotFound(key.to_string()))
            }
            Err(e) => Err(io_error(format!("reading blob {key}"), e)),
        }
    }

    async fn delete(&self, keys: &[BlobKey]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let keys = keys.to_vec();
        self.blocking("delete", move |root, _| delete_files(root, &keys))
            .await
    }

    async fn list(
        &self,
        prefix: &str,
        after: Option<&BlobKey>,
        limit: usize,
    ) -> Result<BlobPage, StoreError> {
        let prefix = prefix.to_owned();
        let after = after.map(|k| k.as_str().to_owned());
        self.blocking("list", move |root, _| {
            list_files(root, &prefix, after.as_deref(), limit)
        })
        .await
    }
}

/// The path of a key (or of a `/`-terminated directory part of one) under `root`.
/// Moves the image files of the layout before areas (`{shard}/{id}/{generation}/{file}` at the
/// root) to their areas (`public/` for the `.jpg` variants, `originals/` for `original`), so a
/// data directory of an earlier version keeps its photos. Runs at start-up, before anything
/// else uses the directory; returns how many files moved (0 once done).
pub fn move_to_areas(root: &Path) -> Result<u64, StoreError> {
    let context = |what: &str, path: &Path| format!("moving {what} {} to its area", path.display());
    let mut moved = 0;
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if is_missing(&e) => return Ok(0),
        Err(e) => return Err(io_error(context("the files of", root), e)),
    };
    for shard in entries {
        let shard = shard.map_err(|e| io_error(context("the files of", root), e))?;
        let name = shard.file_name();
        let is_shard = name.len() == 2
            && name.to_str().is_some_and(|n| {
                n.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            });
        if !is_shard || !shard.path().is_dir() {
            continue;
        }
        for file in
            walk_files(&shard.path()).map_err(|e| io_error(context("shard", &shard.path()), e))?
        {
            let Ok(rel) = file.strip_prefix(root) else {
                continue;
            };
            let Some(rel) = rel.to_str() else {
                continue;
            };
            let area = if rel.ends_with("/original") {
                imgest_core::domain::ORIGINALS_PREFIX
            } else if rel.ends_with(".jpg") {
                imgest_core::domain::PUBLIC_PREFIX
            } else {
                continue;
            };
            let to = root.join(area).join(rel);
            if let Some(dir) = to.parent() {
                fs::create_dir_all(dir).map_err(|e| io_error(context("file", &file), e))?;
            }
            fs::rename(&file, &to).map_err(|e| io_error(context("file", &file), e))?;
            moved += 1;
        }
        // What is left is empty directories, or files that were never image files.
        let _ = remove_empty_dirs(&shard.path());
    }
    Ok(moved)
}

/// Every file under `dir`, depth first.
fn walk_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            files.extend(walk_files(&path)?);
        } else {
            files.push(path);
        }
    }
    Ok(files)
}

/// Removes `dir` and the directories under it that hold nothing.
fn remove_empty_dirs(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_empty_dirs(&entry.path())?;
        }
    }
    fs::remove_dir(dir)
}

fn key_path(root: &Path, rel: &str) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(rel.split('/').filter(|s| !s.is_empty()));
    path
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// `NotFound` stays `NotFound`; transient conditions are retryable; the rest is a failure.
fn io_error(context: impl Into<String>, e: io::Error) -> StoreError {
    use io::ErrorKind as K;
    match e.kind() {
        K::NotFound => StoreError::NotFound(format!("{}: {e}", context.into())),
        K::Interrupted
        | K::TimedOut
        | K::WouldBlock
        | K::StorageFull
        | K::QuotaExceeded
        | K::ResourceBusy
        | K::OutOfMemory => StoreError::unavailable(context, e),
        _ => StoreError::backend(context, e),
    }
}

fn temp_file_in(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(TEMP_PREFIX).suffix(TEMP_SUFFIX);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Blobs are served to other processes: not the 0600 temp files get by default.
        builder.permissions(fs::Permissions::from_mode(0o644));
    }
    builder.tempfile_in(dir)
}

fn put_file(root: &Path, key: &BlobKey, body: &[u8], fsync: bool) -> Result<(), StoreError> {
    let path = key_path(root, key.as_str());
    let dir = path.parent().unwrap_or(root);
    let mut tries = 0;
    let mut tmp = loop {
        // A concurrent `delete` may prune the directory between these two calls: retry.
        let created = fs::create_dir_all(dir).and_then(|()| temp_file_in(dir));
        match created {
            Ok(tmp) => break tmp,
            Err(e) if e.kind() == io::ErrorKind::NotFound && tries < PUT_DIR_RETRIES => {
                tries += 1;
            }
            Err(e) => return Err(io_error(format!("creating a temporary file for {key}"), e)),
        }
    };
    tmp.write_all(body)
        .map_err(|e| io_error(format!("writing blob {key}"), e))?;
    if fsync {
        tmp.as_file()
            .sync_data()
            .map_err(|e| io_error(format!("syncing blob {key}"), e))?;
    }
    // The temporary file is in `dir` (not empty), so no `delete` can prune it before this.
    if key.is_write_once() {
        // Linked into place only if nothing is there: an original is never replaced.
        match tmp.persist_noclobber(&path) {
            Ok(_) => {}
            // Written already (a retried write): the first body stays.
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(io_error(format!("linking blob {key} into place"), e.error)),
        }
    } else {
        tmp.persist(&path)
            .map_err(|e| io_error(format!("renaming blob {key} into place"), e.error))?;
    }
    if fsync {
        sync_dir(dir).map_err(|e| io_error(format!("syncing the directory of {key}"), e))?;
    }
    Ok(())
}

/// Makes a rename in `dir` durable. File systems that cannot sync directories are tolerated.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        match fs::File::open(dir).and_then(|d| d.sync_all()) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
                ) =>
            {
                Ok(())
            }
            other => other,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

fn delete_files(root: &Path, keys: &[BlobKey]) -> Result<(), StoreError> {
    let mut first_error = None;
    for key in keys {
        let path = key_path(root, key.as_str());
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if is_missing(&e) => {}
            // A directory is not an object: nothing to delete under that key.
            Err(_) if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) => continue,
            Err(e) => {
                first_error.get_or_insert_with(|| io_error(format!("deleting blob {key}"), e));
                continue;
            }
        }
        prune_empty_dirs(root, path.parent());
    }
    first_error.map_or(Ok(()), Err)
}

/// Removes now-empty directories from `dir` up to (not including) the root, best effort: any
/// failure (not empty, already gone, a racing writer) just stops it.
fn prune_empty_dirs(root: &Path, mut dir: Option<&Path>) {
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// One directory's entries being walked, sorted by their path relative to the root (with a
/// trailing `/` on directories, which sorts each directory exactly where its keys sort).
struct Frame {
    entries: std::vec::IntoIter<Entry>,
}

struct Entry {
    /// The key (file) or the key prefix ending with `/` (directory).
    rel: String,
    is_dir: bool,
}

/// Reads one directory, keeping only entries whose names are valid key segments (so never a
/// temporary file), files and directories only.
fn read_sorted(dir: &Path, rel_dir: &str) -> io::Result<Frame> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if is_missing(&e) => continue,
            Err(e) => return Err(e),
        };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.contains('/') || BlobKey::parse(name).is_none() {
            continue;
        }
        let file_type = match entry.file_type() {
            Ok(t) => t,
            Err(e) if is_missing(&e) => continue,
            Err(e) => return Err(e),
        };
        if file_type.is_dir() {
            entries.push(Entry {
                rel: format!("{rel_dir}{name}/"),
                is_dir: true,
            });
        } else if file_type.is_file() {
            entries.push(Entry {
                rel: format!("{rel_dir}{name}"),
                is_dir: false,
            });
        }
    }
    entries.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
    Ok(Frame {
        entries: entries.into_iter(),
    })
}

/// A depth-first walk in key order that starts at the deepest directory the prefix names and
/// skips subtrees outside the prefix or before the cursor: it holds at most one directory
/// listing per level of the path being walked, never the whole tree.
fn list_files(
    root: &Path,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<BlobPage, StoreError> {
    let limit = limit.max(1);
    let start = prefix.rfind('/').map_or("", |i| &prefix[..=i]);
    // A directory part that is not made of key segments matches no key (and never escapes
    // the root: `..` is not a key segment).
    if !start.is_empty() && BlobKey::parse(&start[..start.len() - 1]).is_none() {
        return Ok(BlobPage::default());
    }
    let listing_error = |e: io::Error| io_error(format!("listing blobs under {prefix:?}"), e);
    let mut stack = match read_sorted(&key_path(root, start), start) {
        Ok(frame) => vec![frame],
        Err(e) if is_missing(&e) => return Ok(BlobPage::default()),
        Err(e) => return Err(listing_error(e)),
    };
    let mut blobs = Vec::new();
    let mut more = false;
    while let Some(frame) = stack.last_mut() {
        let Some(entry) = frame.entries.next() else {
            stack.pop();
            continue;
        };
        let rel = entry.rel.as_str();
        if entry.is_dir {
            let in_prefix = rel.starts_with(prefix) || prefix.starts_with(rel);
            let past_cursor = after.is_none_or(|a| a.starts_with(rel) || rel > a);
            if in_prefix && past_cursor {
                match read_sorted(&key_path(root, rel), rel) {
                    Ok(frame) => stack.push(frame),
                    Err(e) if is_missing(&e) => {}
                    Err(e) => return Err(listing_error(e)),
                }
            }
            continue;
        }
        if !rel.starts_with(prefix) || after.is_some_and(|a| rel <= a) {
            continue;
        }
        let meta = match fs::metadata(key_path(root, rel)) {
            Ok(meta) if meta.is_file() => meta,
            Ok(_) => continue,
            Err(e) if is_missing(&e) => continue, // deleted meanwhile
            Err(e) => return Err(listing_error(e)),
        };
        let Some(key) = BlobKey::parse(rel) else {
            continue;
        };
        if blobs.len() == limit {
            more = true;
            break;
        }
        let modified = meta.modified().map_err(listing_error)?;
        blobs.push(BlobMeta {
            key,
            size: meta.len(),
            last_modified: Timestamp::from_system(modified),
        });
    }
    let next = if more {
        blobs.last().map(|b| b.key.clone())
    } else {
        None
    };
    Ok(BlobPage { blobs, next })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn key(s: &str) -> BlobKey {
        BlobKey::parse(s).unwrap()
    }

    fn keys(page: &BlobPage) -> Vec<&str> {
        page.blobs.iter().map(|b| b.key.as_str()).collect()
    }

    #[test]
    fn files_of_the_layout_before_areas_move_to_their_areas_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let gen_dir = root.join("0c/0cc175b9c0f1b6a831c399e269772661/0badcafe");
        fs::create_dir_all(&gen_dir).unwrap();
        for file in ["original", "large.jpg", "thumb.jpg"] {
            fs::write(gen_dir.join(file), file).unwrap();
        }
        fs::create_dir_all(root.join("incoming")).unwrap();
        fs::write(root.join("incoming/x"), "waiting").unwrap();
        assert_eq!(move_to_areas(root).unwrap(), 3);
        let moved = |rel: &str| fs::read_to_string(root.join(rel)).unwrap();
        assert_eq!(
            moved("originals/0c/0cc175b9c0f1b6a831c399e269772661/0badcafe/original"),
            "original"
        );
        assert_eq!(
            moved("public/0c/0cc175b9c0f1b6a831c399e269772661/0badcafe/large.jpg"),
            "large.jpg"
        );
        assert!(!root.join("0c").exists(), "the old shard is gone");
        assert_eq!(moved("incoming/x"), "waiting", "other files stay");
        assert_eq!(move_to_areas(root).unwrap(), 0, "once");
        assert_eq!(move_to_areas(&root.join("missing")).unwrap(), 0);
    }

    #[tokio::test]
    async fn temporary_and_foreign_files_are_never_listed() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap().with_fsync(false);
        store
            .put(&key("ab/x/1/original"), Bytes::from_static(b"x"), "")
            .await
            .unwrap();
        let sub = dir.path().join("ab/x/1");
        fs::write(sub.join(".~tmp-abc.partial"), b"half").unwrap();
        fs::write(sub.join("has space"), b"junk").unwrap();
        fs::write(dir.path().join("ab/x/1/.hidden-ok"), b"y").unwrap();
        let page = store.list("ab/", None, 100).await.unwrap();
        assert_eq!(keys(&page), ["ab/x/1/.hidden-ok", "ab/x/1/original"]);
        // A temporary file does not keep its directory from being pruned for ever, but it
        // does keep it while it exists.
        store.delete(&[key("ab/x/1/original")]).await.unwrap();
        assert!(sub.exists());
    }

    #[tokio::test]
    async fn prefixes_outside_the_key_alphabet_match_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let store = FsBlobStore::open(&root).unwrap().with_fsync(false);
        fs::write(dir.path().join("outside"), b"secret").unwrap();
        for prefix in ["../", "../outside", "./", "a//", "/"] {
            let page = store.list(prefix, None, 10).await.unwrap();
            assert!(page.blobs.is_empty(), "{prefix:?}");
        }
    }

    #[tokio::test]
    async fn delete_prunes_empty_directories_but_keeps_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let a = key("ab/x/1/a.jpg");
        let b = key("ab/x/2/b.jpg");
        store.put(&a, Bytes::from_static(b"a"), "").await.unwrap();
        store.put(&b, Bytes::from_static(b"b"), "").await.unwrap();
        store.delete(std::slice::from_ref(&a)).await.unwrap();
        assert!(!dir.path().join("ab/x/1").exists());
        assert!(dir.path().join("ab/x/2").exists());
        store.delete(&[b, a]).await.unwrap();
        assert!(!dir.path().join("ab").exists());
        assert!(dir.path().exists());
        // Deleting a key that names a directory deletes nothing and is not an error.
        store
            .put(&key("cd/e/f"), Bytes::from_static(b"f"), "")
            .await
            .unwrap();
        store.delete(&[key("cd/e")]).await.unwrap();
        assert_eq!(store.get(&key("cd/e/f")).await.unwrap(), &b"f"[..]);
        assert!(matches!(
            store.get(&key("cd/e")).await,
            Err(StoreError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn walks_only_the_directories_a_prefix_needs() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap().with_fsync(false);
        for k in ["ab/1/f", "ab/2/f", "ac/1/f"] {
            store
                .put(&key(k), Bytes::from_static(b"."), "")
                .await
                .unwrap();
        }
        // An unreadable sibling shard does not matter when listing another shard.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let ac = dir.path().join("ac");
            fs::set_permissions(&ac, fs::Permissions::from_mode(0o000)).unwrap();
            let page = store.list("ab/", None, 10).await.unwrap();
            fs::set_permissions(&ac, fs::Permissions::from_mode(0o755)).unwrap();
            assert_eq!(keys(&page), ["ab/1/f", "ab/2/f"]);
        }
        let page = store.list("ab/2", None, 10).await.unwrap();
        assert_eq!(keys(&page), ["ab/2/f"]);
        let page = store.list("a", Some(&key("ab/1/f")), 1).await.unwrap();
        assert_eq!(keys(&page), ["ab/2/f"]);
        assert_eq!(page.next, Some(key("ab/2/f")));
    }
}
