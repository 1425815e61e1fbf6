//! The operator's browse of the stored images (the local page's "Images" view): pages of the
//! live images in id order, every image or only the orphans (linked by no offer, waiting for
//! their orphan window to end). Images are shared by content across clients, so this is an
//! operator's view, never a seller's or a partner's.

use super::{FlowError, Service};
use imgest_core::domain::ImageRecord;

/// Records read per call at most, whatever the filter keeps: a call over an index of mostly
/// linked images answers with fewer orphans (or none) and a cursor, rather than reading on.
const READ_PER_CALL: usize = 2000;

/// Which images a browse keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Browse {
    All,
    Orphans,
}

/// One page of a browse.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsePage {
    pub images: Vec<ImageRecord>,
    /// Where the next page starts; `None` at the end. Opaque.
    pub next: Option<String>,
}

impl Service {
    /// Up to `limit` live images after `cursor` (`None`: the first), that `filter` keeps. A
    /// page may hold fewer than `limit` (even none) and still have a next one: a call reads
    /// at most [`READ_PER_CALL`] records.
    pub async fn browse_images(
        &self,
        filter: Browse,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<BrowsePage, FlowError> {
        let limit = limit.max(1);
        let now = self.ports.clock.now();
        let mut images = Vec::new();
        let mut cursor = cursor.map(str::to_owned);
        let mut read = 0;
        while images.len() < limit && read < READ_PER_CALL {
            let want = (limit - images.len()).min(READ_PER_CALL - read);
            let page = self
                .ports
                .images
                .scan(0, 1, cursor.as_deref(), want)
                .await?;
            read += page.records.len().max(1);
            images.extend(
                page.records
                    .into_iter()
                    .filter(|r| r.is_live(now) && (filter == Browse::All || r.link_count == 0)),
            );
            cursor = page.next;
            if cursor.is_none() {
                break;
            }
        }
        Ok(BrowsePage {
            images,
            next: cursor,
        })
    }
}
