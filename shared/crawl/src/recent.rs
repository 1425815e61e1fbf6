//! URL records as this process last read them, reused for a moment in place of a peek.
//!
//! A popular URL (a dealer's banner in every offer) is peeked by every crawl that lists it:
//! thousands a second on one item, past a DynamoDB partition's 3,000 reads a second. A peek may
//! miss writes of about the last second anyway ([`Documents::peek_document`]), so a record this
//! process read less than [`REUSE`] ago answers as well: every decision taken on it is made again
//! on a consistent read before anything is written over it (a write names the version read, and
//! conflicts if it moved on). So an instance peeks a URL at most about once a second, however
//! often its crawls list it.
//!
//! Every read of a URL's record the intake makes is kept (the consistent ones too: a join that
//! found its peek stale leaves the fresh record for the next), and what it wrote is forgotten.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use imgest_core::domain::UrlHash;
#[cfg(doc)]
use imgest_core::ports::Documents;
use imgest_core::ports::StoredDocument;

/// How long a record read stands in for a peek: about what an eventually consistent read may
/// miss.
pub const REUSE: Duration = Duration::from_secs(1);
/// Records kept at most (a few hundred bytes each): past it, the stale ones go, then all.
const CAPACITY: usize = 4096;

/// The records, by URL hash, with when each was read.
#[derive(Default)]
pub(super) struct RecentRecords {
    entries: Mutex<HashMap<UrlHash, (Instant, Option<StoredDocument>)>>,
}

impl RecentRecords {
    /// The record as read less than [`REUSE`] ago (`Some(None)`: there was none), if it was.
    pub fn get(&self, hash: &UrlHash) -> Option<Option<StoredDocument>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(hash)
            .filter(|(at, _)| at.elapsed() < REUSE)
            .map(|(_, record)| record.clone())
    }

    /// Keeps `record` as read just now.
    pub fn keep(&self, hash: &UrlHash, record: Option<StoredDocument>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= CAPACITY && !entries.contains_key(hash) {
            entries.retain(|_, (at, _)| at.elapsed() < REUSE);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(hash.clone(), (Instant::now(), record));
    }

    /// Forgets the record (this process has just written it).
    pub fn forget(&self, hash: &UrlHash) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.remove(hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: usize) -> UrlHash {
        UrlHash::parse(&format!("{n:032x}")).unwrap()
    }

    fn doc(version: u64) -> Option<StoredDocument> {
        Some(StoredDocument {
            body: "{}".into(),
            version,
        })
    }

    #[test]
    fn a_record_read_is_reused_until_forgotten() {
        let recent = RecentRecords::default();
        assert_eq!(recent.get(&hash(1)), None);
        recent.keep(&hash(1), doc(3));
        recent.keep(&hash(2), None);
        assert_eq!(recent.get(&hash(1)), Some(doc(3)));
        assert_eq!(recent.get(&hash(2)), Some(None));
        recent.forget(&hash(1));
        assert_eq!(recent.get(&hash(1)), None);
    }

    #[test]
    fn no_more_than_its_capacity_is_kept() {
        let recent = RecentRecords::default();
        for n in 0..CAPACITY * 3 {
            recent.keep(&hash(n), doc(1));
        }
        let kept = recent.entries.lock().unwrap().len();
        assert!(kept <= CAPACITY, "{kept}");
        // The newest is there.
        assert_eq!(recent.get(&hash(CAPACITY * 3 - 1)), Some(doc(1)));
    }
}
