//! Backoff between rounds of a lost race (a conditional write that another writer beat, a
//! throttled request): full jitter over a doubling base, so racing writers spread out instead
//! of colliding again in lock step.

use std::time::Duration;

/// The first round's ceiling; each later round doubles it.
const BASE: Duration = Duration::from_millis(5);
/// No round waits longer than this.
const CAP: Duration = Duration::from_millis(320);

/// How long to wait before retry `round` (0-based), for `unit` uniform in `[0, 1)`: anywhere
/// in `[0, min(CAP, BASE · 2^round)]` ("full jitter").
pub fn backoff_delay(round: u32, unit: f64) -> Duration {
    let ceiling = BASE.saturating_mul(1 << round.min(16)).min(CAP);
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

/// Sleeps [`backoff_delay`] of `round` with a random draw.
pub async fn backoff(round: u32) {
    tokio::time::sleep(backoff_delay(round, fastrand::f64())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_up_to_the_cap_and_the_draw_spans_it() {
        assert_eq!(backoff_delay(0, 1.0), Duration::from_millis(5));
        assert_eq!(backoff_delay(3, 1.0), Duration::from_millis(40));
        assert_eq!(backoff_delay(6, 1.0), CAP);
        assert_eq!(backoff_delay(40, 1.0), CAP);
        assert_eq!(backoff_delay(3, 0.0), Duration::ZERO);
        assert_eq!(backoff_delay(3, 0.5), Duration::from_millis(20));
    }
}
