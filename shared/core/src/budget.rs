//! The process's memory budget: what photos in flight may hold, so that a burst of large
//! photos waits its turn instead of taking the process down (and an innocent batch with it).
//!
//! `IMGEST_MEMORY_BUDGET` is the memory the whole process should stay within. [`BASE`] of it
//! is the process's own (runtime, clients, SQLite's cache, the pipeline's kept buffers). Of
//! the rest, a quarter holds bodies (uploads as they arrive, downloads, objects read back)
//! and three quarters decoding, each photo reserving its footprint (the pipeline's estimate of
//! its decode's memory) before it decodes.
//! Two pools, so bodies waiting for a decode can never hold the memory that decode needs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The process's own memory, outside both pools.
pub const BASE: u64 = 64 << 20;

/// Permits are KiB: a `u32` of them covers 4 TiB.
const UNIT: u64 = 1024;

/// Memory held for one body or one decode; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    _permit: OwnedSemaphorePermit,
}

/// Body memory that grows as a body arrives (a download whose length is not known before
/// its headers, or not declared at all): reserved a first estimate before the request
/// leaves, then grown to what the body needs. Given back when dropped.
#[derive(Debug)]
pub struct BodyHold {
    pool: Pool,
    permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
    waiting: bool,
}

impl BodyHold {
    /// The bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether the hold was waiting for room when last left (a caller whose deadline cut a
    /// [`grow_to`](Self::grow_to) tells its own wait from the far side's slowness by it).
    pub fn was_waiting(&self) -> bool {
        self.waiting
    }

    /// Holds at least `bytes`, waiting as long as it takes for the rest (the caller bounds
    /// the wait, and can tell it was cut while waiting by [`was_waiting`](Self::was_waiting)).
    /// More than the whole pool never fits.
    pub async fn grow_to(&mut self, bytes: u64) -> Result<(), Refusal> {
        if bytes <= self.bytes {
            return Ok(());
        }
        if bytes > self.pool.bytes {
            return Err(Refusal::NeverFits {
                needed: bytes,
                pool: self.pool.bytes,
            });
        }
        self.waiting = true;
        let more = self.pool.permit(bytes - self.bytes, None).await?;
        self.waiting = false;
        match &mut self.permit {
            Some(permit) => permit.merge(more),
            None => self.permit = Some(more),
        }
        self.bytes = bytes;
        Ok(())
    }
}

/// Why a reservation was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// More than the whole pool: it can never be given.
    #[error("{needed} bytes is more than the {pool} bytes this process has for it")]
    NeverFits { needed: u64, pool: u64 },
    /// Not free within the wait.
    #[error("no room for {needed} more bytes yet")]
    Busy { needed: u64 },
}

/// The two pools; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    total: u64,
    bodies: Pool,
    work: Pool,
}

#[derive(Debug, Clone)]
struct Pool {
    bytes: u64,
    permits: Arc<Semaphore>,
}

impl Pool {
    fn new(bytes: u64) -> Self {
        let units = usize::try_from(bytes / UNIT).unwrap_or(Semaphore::MAX_PERMITS);
        Self {
            bytes,
            permits: Arc::new(Semaphore::new(units.min(Semaphore::MAX_PERMITS))),
        }
    }

    async fn reserve(&self, bytes: u64, wait: Option<Duration>) -> Result<Reservation, Refusal> {
        self.permit(bytes, wait)
            .await
            .map(|p| Reservation { _permit: p })
    }

    async fn permit(
        &self,
        bytes: u64,
        wait: Option<Duration>,
    ) -> Result<OwnedSemaphorePermit, Refusal> {
        if bytes > self.bytes {
            return Err(Refusal::NeverFits {
                needed: bytes,
                pool: self.bytes,
            });
        }
        // Rounded up, at least one: every reservation counts.
        let units = u32::try_from(bytes.div_ceil(UNIT).max(1)).unwrap_or(u32::MAX);
        let acquire = Arc::clone(&self.permits).acquire_many_owned(units);
        let permit = match wait {
            None => acquire.await,
            Some(wait) => match tokio::time::timeout(wait, acquire).await {
                Ok(permit) => permit,
                Err(_) => return Err(Refusal::Busy { needed: bytes }),
            },
        };
        // The semaphore is never closed.
        permit.map_err(|_| Refusal::Busy { needed: bytes })
    }

    fn available(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }
}

impl MemoryBudget {
    /// Pools carved from `total` bytes (see the module's documentation).
    pub fn new(total: u64) -> Self {
        let rest = total.saturating_sub(BASE);
        let bodies = rest / 4;
        Self {
            total,
            bodies: Pool::new(bodies),
            work: Pool::new(rest - bodies),
        }
    }

    /// The budget it was made from.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The most one body may be.
    pub fn body_pool(&self) -> u64 {
        self.bodies.bytes
    }

    /// The most one decode may need.
    pub fn work_pool(&self) -> u64 {
        self.work.bytes
    }

    /// Room for a body of `len` bytes, waiting at most `wait` for it.
    pub async fn body(&self, len: u64, wait: Duration) -> Result<Reservation, Refusal> {
        self.bodies.reserve(len, Some(wait)).await
    }

    /// A growable hold on body memory, `first` bytes of it at once, waiting at most `wait`
    /// for them.
    pub async fn body_hold(&self, first: u64, wait: Duration) -> Result<BodyHold, Refusal> {
        let permit = self.bodies.permit(first, Some(wait)).await?;
        Ok(BodyHold {
            pool: self.bodies.clone(),
            permit: Some(permit),
            bytes: first,
            waiting: false,
        })
    }

    /// Room for a decode of `bytes`, waiting for it as long as it takes (first come, first
    /// served: a large photo is not overtaken forever by small ones).
    pub async fn work(&self, bytes: u64) -> Result<Reservation, Refusal> {
        self.work.reserve(bytes, None).await
    }

    /// Free bytes now, bodies and decoding (for metrics and tests).
    pub fn available(&self) -> (u64, u64) {
        (self.bodies.available(), self.work.available())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn the_pools_are_a_quarter_and_three_quarters_of_what_is_left() {
        let budget = MemoryBudget::new(512 * MB);
        assert_eq!(budget.body_pool(), 112 * MB);
        assert_eq!(budget.work_pool(), 336 * MB);
        assert_eq!(budget.available(), (112 * MB, 336 * MB));
    }

    #[tokio::test]
    async fn a_decode_waits_for_room_and_more_than_the_pool_never_fits() {
        let budget = MemoryBudget::new(BASE + 400 * MB);
        assert_eq!(
            budget.work(301 * MB).await.unwrap_err(),
            Refusal::NeverFits {
                needed: 301 * MB,
                pool: 300 * MB
            }
        );
        let first = budget.work(200 * MB).await.unwrap();
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.work(200 * MB).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        waiting.await.unwrap().unwrap();
        assert_eq!(budget.available().1, 300 * MB);
    }

    #[tokio::test]
    async fn a_body_hold_grows_while_there_is_room_and_gives_it_all_back() {
        let budget = MemoryBudget::new(BASE + 40 * MB);
        let mut hold = budget.body_hold(MB, Duration::ZERO).await.unwrap();
        hold.grow_to(6 * MB).await.unwrap();
        assert_eq!(hold.bytes(), 6 * MB);
        assert_eq!(budget.available().0, 4 * MB);
        // Growing past what is free waits for it.
        let other = budget.body(4 * MB, Duration::ZERO).await.unwrap();
        let grown = tokio::spawn(async move { hold.grow_to(8 * MB).await.map(|()| hold) });
        tokio::task::yield_now().await;
        assert!(!grown.is_finished());
        drop(other);
        let hold = grown.await.unwrap().unwrap();
        assert!(!hold.was_waiting());
        drop(hold);
        assert_eq!(budget.available().0, 10 * MB);
        let mut hold = budget.body_hold(MB, Duration::ZERO).await.unwrap();
        assert_eq!(
            hold.grow_to(11 * MB).await.unwrap_err(),
            Refusal::NeverFits {
                needed: 11 * MB,
                pool: 10 * MB
            }
        );
        assert_eq!(hold.bytes(), MB);
    }

    #[tokio::test]
    async fn a_body_waits_only_so_long() {
        let budget = MemoryBudget::new(BASE + 40 * MB);
        let _held = budget.body(8 * MB, Duration::ZERO).await.unwrap();
        let refused = budget
            .body(4 * MB, Duration::from_millis(10))
            .await
            .unwrap_err();
        assert_eq!(refused, Refusal::Busy { needed: 4 * MB });
        assert!(budget.body(2 * MB, Duration::ZERO).await.is_ok());
    }
}
