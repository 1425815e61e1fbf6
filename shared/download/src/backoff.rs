//! When to try a URL again: exponential backoff with full jitter for transient failures
//! (honouring the server's `Retry-After`), and the progressive recheck schedule for URLs that
//! failed permanently.

use std::time::Duration;

/// The longest `Retry-After` honoured: a server asking for more gets this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// Recheck intervals stop growing here.
pub const RECHECK_CAP: Duration = Duration::from_secs(86_400);

/// The wait before retry number `attempt` (1 for the first retry): a uniformly random delay in
/// `[0, min(cap, base · 2^(attempt-1))]` ("full jitter", so clients that failed together do not
/// retry together), but never shorter than the server's `Retry-After`.
/// `unit` is a uniform random number in `[0, 1)`.
pub fn retry_delay(
    attempt: u32,
    base: Duration,
    cap: Duration,
    retry_after: Option<Duration>,
    unit: f64,
) -> Duration {
    let exponent = attempt.saturating_sub(1).min(30);
    let ceiling = base.saturating_mul(1u32 << exponent).min(cap);
    let jittered = ceiling.mul_f64(unit.clamp(0.0, 1.0));
    match retry_after {
        Some(wait) => jittered.max(wait.min(MAX_RETRY_AFTER)),
        None => jittered,
    }
}

/// How long after its `failures`-th permanent failure in a row a URL is downloaded again:
/// `base · 2^(failures-1)`, capped at 24 hours.
pub fn recheck_after(failures: u32, base: Duration) -> Duration {
    let exponent = failures.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << exponent).min(RECHECK_CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_spans_it() {
        let cap = Duration::from_secs(10);
        assert_eq!(retry_delay(1, S, cap, None, 0.999_999).as_millis(), 999);
        assert_eq!(retry_delay(3, S, cap, None, 0.5), Duration::from_secs(2));
        assert_eq!(retry_delay(9, S, cap, None, 0.5), Duration::from_secs(5));
        assert_eq!(retry_delay(9, S, cap, None, 0.0), Duration::ZERO);
    }

    #[test]
    fn retry_after_is_a_floor() {
        let wait = Some(Duration::from_secs(7));
        assert_eq!(retry_delay(1, S, S, wait, 0.5), Duration::from_secs(7));
        let huge = Some(Duration::from_secs(10 * 86_400));
        assert_eq!(retry_delay(1, S, S, huge, 0.5), MAX_RETRY_AFTER);
    }

    #[test]
    fn rechecks_double_and_stop_at_a_day() {
        let base = Duration::from_secs(3600);
        assert_eq!(recheck_after(1, base), base);
        assert_eq!(recheck_after(2, base), base * 2);
        assert_eq!(recheck_after(3, base), base * 4);
        assert_eq!(recheck_after(6, base), RECHECK_CAP);
        assert_eq!(recheck_after(40, base), RECHECK_CAP);
    }
}
