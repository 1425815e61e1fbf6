//! Working memory kept from one photo to the next: pixel buffers, resizers, colour transforms,
//! a signature's float buffers and (with libjpeg-turbo) codec handles.
//!
//! A warm process handles photo after photo. Freed between them, the few megabytes of planes
//! and resize intermediates a photo needs go back to the operating system (glibc trims the heap
//! and unmaps large blocks), and the next photo page-faults every page of them in again: on a
//! 1920x1200 photo that was up to a third of the pipeline's time. Kept here instead, steady
//! state allocates nothing large.
//!
//! Shared by every thread using the [`Pipeline`](super::Pipeline): each photo takes what it
//! needs and puts it back when done, so concurrent photos never share a buffer. What is kept is
//! bounded (a number of items, and bytes for the pixel buffers); anything beyond is freed as
//! before. A buffer handed out holds whatever its last user left in it: callers overwrite it.

use std::sync::{Mutex, PoisonError};

/// Items of one kind, taken and put back; at most `max` are kept.
#[derive(Debug)]
pub(crate) struct Pool<T> {
    items: Mutex<Vec<T>>,
    max: usize,
}

impl<T> Pool<T> {
    pub(crate) const fn new(max: usize) -> Self {
        Self {
            items: Mutex::new(Vec::new()),
            max,
        }
    }

    /// A kept item, if any.
    pub(crate) fn take(&self) -> Option<T> {
        // A panic while the lock was held cannot leave the list inconsistent: use it anyway.
        self.items
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// Keeps `item` for a later [`take`](Self::take), unless `max` are kept already.
    pub(crate) fn put(&self, item: T) {
        let mut items = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        if items.len() < self.max {
            items.push(item);
        }
    }
}

/// Byte buffers of any size, at most `max_count` of them and `max_bytes` in all (by capacity).
#[derive(Debug)]
pub(crate) struct Buffers {
    kept: Mutex<Kept>,
    max_count: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Kept {
    /// Each buffer with the value of `takes` when it was put back.
    items: Vec<(u64, Vec<u8>)>,
    /// Buffers handed out so far: the clock that says which kept buffers are still in use.
    takes: u64,
}

impl Buffers {
    pub(crate) const fn new(max_count: usize, max_bytes: usize) -> Self {
        Self {
            kept: Mutex::new(Kept {
                items: Vec::new(),
                takes: 0,
            }),
            max_count,
            max_bytes,
        }
    }

    /// A buffer of exactly `len` bytes, of unspecified content: the smallest kept one that
    /// holds `len` without growing (of equals, the one put back last), else a new one.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let mut buf = self.take_capacity(len);
        // Only bytes beyond the buffer's old length are written (zeroed) here.
        buf.resize(len, 0);
        buf
    }

    /// An empty buffer with room for `capacity` bytes (for `extend_from_slice`).
    #[cfg_attr(not(feature = "turbojpeg"), allow(dead_code))]
    pub(crate) fn take_empty(&self, capacity: usize) -> Vec<u8> {
        let mut buf = self.take_capacity(capacity);
        buf.clear();
        buf
    }

    fn take_capacity(&self, capacity: usize) -> Vec<u8> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.takes += 1;
        let best = kept
            .items
            .iter()
            .enumerate()
            .filter(|(_, (_, b))| b.capacity() >= capacity)
            // Of equals, the one put back last: so a spare left by other photos ages and goes.
            .min_by_key(|(_, (stamp, b))| (b.capacity(), std::cmp::Reverse(*stamp)))
            .map(|(i, _)| i);
        match best {
            Some(i) => kept.items.swap_remove(i).1,
            None => {
                drop(kept);
                Vec::with_capacity(capacity)
            }
        }
    }

    /// Keeps `buf` for a later [`take`](Self::take). Over the bounds, buffers go in this
    /// order: first those nobody took back within the last `max_count / 2` takes (some two
    /// photos' worth: what photos of another shape left), largest first; then, if the photos
    /// now running need more than the bounds, the largest of theirs (one photo far larger than
    /// the rest should not pin its memory, and the smaller buffers serve every photo).
    ///
    /// Freeing the largest first regardless of age freed exactly the buffers a photo had just
    /// allocated whenever earlier photos of another shape filled the bound, so each later photo
    /// of its shape allocated and page-faulted them again; freeing the oldest first fails the
    /// other way (a photo that needs more than the bound frees, in turn, everything it uses).
    pub(crate) fn put(&self, buf: Vec<u8>) {
        if buf.capacity() == 0 || buf.capacity() > self.max_bytes {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let now = kept.takes;
        kept.items.push((now, buf));
        let recent = now.saturating_sub((self.max_count / 2) as u64);
        let mut total: usize = kept.items.iter().map(|(_, b)| b.capacity()).sum();
        while kept.items.len() > self.max_count || total > self.max_bytes {
            let Some((victim, _)) = kept
                .items
                .iter()
                .enumerate()
                .max_by_key(|(_, (stamp, b))| (*stamp < recent, b.capacity()))
            else {
                break;
            };
            total -= kept.items.swap_remove(victim).1.capacity();
        }
    }
}

/// Everything a [`Pipeline`](super::Pipeline) keeps between photos.
#[derive(Debug)]
pub(crate) struct Scratch {
    pub buffers: Buffers,
    /// Colour profiles seen and their transforms to sRGB.
    pub profiles: super::colour::Profiles,
    pub resizers: Pool<fast_image_resize::Resizer>,
    /// The float buffers of a photo's signature (its points: `crate::points::Work`).
    pub signatures: Pool<crate::points::Work>,
    #[cfg(feature = "turbojpeg")]
    pub decompressors: Pool<turbojpeg::Decompressor>,
    #[cfg(feature = "turbojpeg")]
    pub compressors: Pool<turbojpeg::Compressor>,
}

/// Photos processed at once whose working memory is kept (more may run; theirs is freed).
const KEPT_PHOTOS: usize = 4;

impl Default for Scratch {
    fn default() -> Self {
        Self {
            // A photo uses up to about 16 buffers (planes of the decoded photo and of each
            // variant, encoder output), some 10 MB for a 1920x1200 JPEG or a 20 MP one (decoded
            // at a quarter): the bytes bound keeps two such photos' worth.
            buffers: Buffers::new(16 * KEPT_PHOTOS, 32 << 20),
            profiles: super::colour::Profiles::default(),
            resizers: Pool::new(KEPT_PHOTOS),
            signatures: Pool::new(KEPT_PHOTOS),
            #[cfg(feature = "turbojpeg")]
            decompressors: Pool::new(KEPT_PHOTOS),
            #[cfg(feature = "turbojpeg")]
            compressors: Pool::new(KEPT_PHOTOS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_buffer_that_fits_is_reused() {
        let buffers = Buffers::new(8, 1 << 20);
        buffers.put(Vec::with_capacity(100));
        buffers.put(Vec::with_capacity(1000));
        buffers.put(Vec::with_capacity(10_000));
        let b = buffers.take(500);
        assert_eq!((b.len(), b.capacity()), (500, 1000));
        let e = buffers.take_empty(20_000);
        assert!(e.is_empty() && e.capacity() >= 20_000);
        assert_eq!(buffers.take(10).capacity(), 100);
    }

    #[test]
    fn the_largest_buffers_go_first_over_the_bounds() {
        let buffers = Buffers::new(2, 1000);
        buffers.put(Vec::with_capacity(2000)); // never kept
        buffers.put(Vec::with_capacity(600));
        buffers.put(Vec::with_capacity(300));
        buffers.put(Vec::with_capacity(200)); // 1100 bytes: the 600 goes
        assert_eq!(capacities(&buffers), [200, 300]);
    }

    #[test]
    fn a_photo_of_another_shape_keeps_its_buffers_over_those_nobody_uses() {
        let buffers = Buffers::new(8, 1000);
        // An earlier photo's buffers, the bound nearly full.
        for _ in 0..3 {
            buffers.put(Vec::with_capacity(300));
        }
        // Photos of another shape, one after the other: each needs 400 and 300 bytes.
        let mut allocated = Vec::new();
        for _ in 0..6 {
            allocated.push(!capacities(&buffers).contains(&400));
            let a = buffers.take(400);
            let b = buffers.take(300);
            for buf in [a, b] {
                buffers.put(buf);
            }
        }
        // Allocated anew until the unused 300s aged, then kept (they went instead, though the
        // 400 was the largest).
        assert_eq!(allocated[3..], [false, false, false], "{allocated:?}");
        assert!(capacities(&buffers).contains(&400));
    }

    fn capacities(buffers: &Buffers) -> Vec<usize> {
        let kept = buffers.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut caps: Vec<usize> = kept.items.iter().map(|(_, b)| b.capacity()).collect();
        caps.sort_unstable();
        caps
    }

    #[test]
    fn a_pool_keeps_at_most_its_bound() {
        let pool = Pool::new(1);
        pool.put(1);
        pool.put(2);
        assert_eq!(pool.take(), Some(1));
        assert_eq!(pool.take(), None);
    }
}
