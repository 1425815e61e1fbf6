//! The `RateLimiter` contract.
//!
//! Clients ask at explicit, increasing times; every grant is logged with its time and the log
//! is checked with an exact sliding window, so a conservative adapter passes and a leaky one
//! does not.

use std::sync::Arc;
use std::time::Duration;

use super::{BASE, secs, unique_name};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{Grant, RateLimiter};

contract_suite!($ rate_limiter_contract_tests, rate_limiter, Arc<dyn RateLimiter>;
    a_fresh_client_gets_up_to_its_limit_at_once,
    grants_never_exceed_the_limit_in_any_window,
    retry_at_is_later_and_a_permit_is_free_then,
    clients_are_independent,
    concurrent_acquirers_get_exactly_the_limit,
    many_concurrent_acquirers_over_windows_never_exceed_the_limit,
    a_lowered_limit_applies_to_the_next_request,
    a_client_asking_continuously_gets_nearly_its_whole_limit,
    a_limit_of_thousands_a_second_is_never_exceeded_and_nearly_all_granted,
);

const LIMIT: u32 = 10;
const WINDOW: Duration = secs(6);

async fn acquire(l: &dyn RateLimiter, client: &str, wanted: u32, now: Timestamp) -> Grant {
    acquire_limited(l, client, wanted, LIMIT, WINDOW, now).await
}

async fn acquire_limited(
    l: &dyn RateLimiter,
    client: &str,
    wanted: u32,
    limit: u32,
    window: Duration,
    now: Timestamp,
) -> Grant {
    let grant = l.acquire(client, wanted, limit, window, now).await.unwrap();
    assert!(grant.granted <= wanted, "{grant:?} for {wanted} wanted");
    match grant.retry_at {
        None => assert_eq!(
            grant.granted, wanted,
            "{grant:?}: short without a retry time"
        ),
        Some(at) => {
            assert!(
                grant.granted < wanted,
                "{grant:?}: a retry time with all granted"
            );
            assert!(at > now, "{grant:?}: retry time not after {now}");
        }
    }
    grant
}

/// Grants as (time, permits), in time order.
type GrantLog = Vec<(Timestamp, u32)>;

/// The most permits granted in any window of `window` (each window ending at a grant: the
/// count only grows at grants).
fn busiest_window(log: &GrantLog, window: Duration) -> u32 {
    log.iter()
        .map(|&(end, _)| {
            log.iter()
                .filter(|&&(t, _)| t > end.minus(window) && t <= end)
                .map(|&(_, p)| p)
                .sum::<u32>()
        })
        .max()
        .unwrap_or(0)
}

/// Permits granted per window from the second of `windows` on (the first starts empty).
fn per_window_after_the_first(log: &GrantLog, window: Duration, windows: u32) -> f64 {
    let after_first: u32 = log
        .iter()
        .filter(|&&(t, _)| t >= BASE.plus(window))
        .map(|&(_, p)| p)
        .sum();
    f64::from(after_first) / f64::from(windows - 1)
}

pub async fn a_fresh_client_gets_up_to_its_limit_at_once(limiter: Arc<dyn RateLimiter>) {
    let l = limiter.as_ref();
    let greedy = unique_name("greedy");
    let grant = acquire(l, &greedy, LIMIT + 5, BASE).await;
    assert_eq!(grant.granted, LIMIT);
    assert!(grant.retry_at.is_some());
    let grant = acquire(l, &greedy, 1, BASE).await;
    assert_eq!(grant.granted, 0);

    let modest = unique_name("modest");
    assert_eq!(
        acquire(l, &modest, 4, BASE).await,
        Grant {
            granted: 4,
            retry_at: None
        }
    );
    assert_eq!(acquire(l, &modest, 6, BASE).await.granted, 6);
    assert_eq!(acquire(l, &modest, 1, BASE).await.granted, 0);
    // Asking for nothing is always granted.
    assert_eq!(
        acquire(l, &modest, 0, BASE).await,
        Grant {
            granted: 0,
            retry_at: None
        }
    );
}

pub async fn grants_never_exceed_the_limit_in_any_window(limiter: Arc<dyn RateLimiter>) {
    let (l, client) = (limiter.as_ref(), unique_name("steady"));
    let mut log = GrantLog::new();
    // Every 100 ms for five windows, asking for 1 to 3 at a time.
    for i in 0..300_u32 {
        let now = BASE.plus(Duration::from_millis(u64::from(i) * 100));
        let grant = acquire(l, &client, 1 + i % 3, now).await;
        if grant.granted > 0 {
            log.push((now, grant.granted));
        }
    }
    assert!(busiest_window(&log, WINDOW) <= LIMIT, "{log:?}");
    // And it did grant, close to the limit (which allows 50 in five windows).
    let total: u32 = log.iter().map(|&(_, p)| p).sum();
    assert!(total >= 4 * LIMIT, "only {total} granted: {log:?}");
}

pub async fn retry_at_is_later_and_a_permit_is_free_then(limiter: Arc<dyn RateLimiter>) {
    let (l, client) = (limiter.as_ref(), unique_name("retry"));
    let mut log: GrantLog = Vec::new();
    for (at, wanted) in [(0, 3), (1, 3), (2, 4)] {
        let now = BASE.plus(secs(at));
        let grant = acquire(l, &client, wanted, now).await;
        assert_eq!(grant.granted, wanted);
        log.push((now, wanted));
    }
    let now = BASE.plus(secs(3));
    let refused = acquire(l, &client, 5, now).await;
    assert_eq!(refused.granted, 0);
    let retry_at = refused.retry_at.unwrap();
    // No earlier than the first grants leave the window, and not much later.
    assert!(retry_at >= BASE.plus(WINDOW), "{retry_at}");
    assert!(retry_at <= BASE.plus(WINDOW + WINDOW / 30), "{retry_at}");
    // Just before it, still nothing.
    let before = retry_at.minus(Duration::from_millis(1));
    assert_eq!(acquire(l, &client, 5, before).await.granted, 0);
    let grant = acquire(l, &client, 5, retry_at).await;
    assert!(grant.granted >= 1, "{grant:?} at {retry_at}");
    log.push((retry_at, grant.granted));
    assert!(busiest_window(&log, WINDOW) <= LIMIT, "{log:?}");
}

pub async fn clients_are_independent(limiter: Arc<dyn RateLimiter>) {
    let l = limiter.as_ref();
    let (busy, quiet) = (unique_name("busy"), unique_name("quiet"));
    assert_eq!(acquire(l, &busy, LIMIT, BASE).await.granted, LIMIT);
    assert_eq!(acquire(l, &busy, 1, BASE).await.granted, 0);
    assert_eq!(acquire(l, &quiet, LIMIT, BASE).await.granted, LIMIT);
    // Each client's own limit applies.
    let other = unique_name("other");
    let grant = acquire_limited(l, &other, 100, 50, WINDOW, BASE).await;
    assert_eq!(grant.granted, 50);
}

pub async fn concurrent_acquirers_get_exactly_the_limit(limiter: Arc<dyn RateLimiter>) {
    const LIMIT: u32 = 5;
    let client = unique_name("crowd");
    let asks = (0..20).map(|_| {
        let (limiter, client) = (limiter.clone(), client.clone());
        async move {
            acquire_limited(limiter.as_ref(), &client, 1, LIMIT, WINDOW, BASE)
                .await
                .granted
        }
    });
    let granted: u32 = futures_util::future::join_all(asks).await.into_iter().sum();
    assert_eq!(granted, LIMIT);
}

pub async fn many_concurrent_acquirers_over_windows_never_exceed_the_limit(
    limiter: Arc<dyn RateLimiter>,
) {
    const LIMIT: u32 = 20;
    let client = unique_name("herd");
    let mut log = GrantLog::new();
    // 32 at once, every 500 ms, over three windows.
    for step in 0..36_u64 {
        let now = BASE.plus(Duration::from_millis(step * 500));
        let asks = (0..32).map(|_| {
            let (limiter, client) = (limiter.clone(), client.clone());
            async move {
                acquire_limited(limiter.as_ref(), &client, 1, LIMIT, WINDOW, now)
                    .await
                    .granted
            }
        });
        let granted: u32 = futures_util::future::join_all(asks).await.into_iter().sum();
        if granted > 0 {
            log.push((now, granted));
        }
    }
    assert!(busiest_window(&log, WINDOW) <= LIMIT, "{log:?}");
    let total: u32 = log.iter().map(|&(_, p)| p).sum();
    assert!(
        total >= 2 * LIMIT,
        "only {total} granted in three windows: {log:?}"
    );
}

pub async fn a_lowered_limit_applies_to_the_next_request(limiter: Arc<dyn RateLimiter>) {
    let (l, client) = (limiter.as_ref(), unique_name("lowered"));
    assert_eq!(
        acquire_limited(l, &client, 6, 10, WINDOW, BASE)
            .await
            .granted,
        6
    );
    let now = BASE.plus(secs(1));
    // Six already granted in the window: a limit of 5 leaves nothing, of 8 leaves two.
    assert_eq!(
        acquire_limited(l, &client, 1, 5, WINDOW, now).await.granted,
        0
    );
    assert_eq!(
        acquire_limited(l, &client, 5, 8, WINDOW, now).await.granted,
        2
    );
}

pub async fn a_client_asking_continuously_gets_nearly_its_whole_limit(
    limiter: Arc<dyn RateLimiter>,
) {
    const LIMIT: u32 = 60;
    const WINDOWS: u32 = 10;
    let (l, client) = (limiter.as_ref(), unique_name("saturated"));
    let step = WINDOW / 600;
    let mut log = GrantLog::new();
    for i in 0..600 * WINDOWS {
        let now = BASE.plus(step * i);
        let grant = acquire_limited(l, &client, 1, LIMIT, WINDOW, now).await;
        if grant.granted > 0 {
            log.push((now, grant.granted));
        }
    }
    assert!(busiest_window(&log, WINDOW) <= LIMIT);
    let per_window = per_window_after_the_first(&log, WINDOW, WINDOWS);
    assert!(
        per_window >= 0.98 * f64::from(LIMIT),
        "{per_window:.1} granted per window of a limit of {LIMIT}"
    );
}

/// A limit big enough that an adapter may spread its counter over partitions (6,000 a second:
/// DynamoDB's splits it in three): asked for more than it allows, every 10 ms, it still never
/// lets more through in any second, and still grants nearly all of it.
pub async fn a_limit_of_thousands_a_second_is_never_exceeded_and_nearly_all_granted(
    limiter: Arc<dyn RateLimiter>,
) {
    const LIMIT: u32 = 6_000;
    const WINDOWS: u32 = 4;
    let window = secs(1);
    let (l, client) = (limiter.as_ref(), unique_name("big"));
    let mut log = GrantLog::new();
    for i in 0..100 * WINDOWS {
        let now = BASE.plus(Duration::from_millis(u64::from(i) * 10));
        let grant = acquire_limited(l, &client, 100, LIMIT, window, now).await;
        if grant.granted > 0 {
            log.push((now, grant.granted));
        }
    }
    let busiest = busiest_window(&log, window);
    assert!(
        busiest <= LIMIT,
        "{busiest} in a second of a limit of {LIMIT}"
    );
    let per_window = per_window_after_the_first(&log, window, WINDOWS);
    assert!(
        per_window >= 0.98 * f64::from(LIMIT),
        "{per_window:.1} granted per second of a limit of {LIMIT}"
    );
}
