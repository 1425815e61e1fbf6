//! What is known of a host's health, as a value that any process can fold its observations
//! into: the concurrency it tolerates (AIMD: halved on 429, one more per window of answers), a
//! failure score that decays with time (a host that keeps failing is backed off), and a
//! circuit breaker (a host failing most of its recent requests gets none until a probe after a
//! cool-down succeeds). Pure: [`HostLimits`](super::HostLimits) keeps one per host in a
//! process, and the crawl flows fold each process's observations into a shared copy.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use imgest_core::domain::Timestamp;
pub use imgest_core::download_rules::CircuitRules;

/// The failure score halves over this time.
const SCORE_HALF_LIFE: Duration = Duration::from_secs(600);
/// Below this score a host is not backed off.
const SCORE_THRESHOLD: f64 = 5.0;
/// The backoff for a score just over the threshold; doubles per point above it.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(900);
/// A failed probe doubles the cool-down, up to this many times the configured one.
const COOL_DOWN_GROWTH_CAP: u32 = 32;

/// How a host's circuit lets downloads through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Circuit {
    /// Downloads go ahead.
    #[default]
    Closed,
    /// No downloads until `until`; then one probe.
    Open { until: Timestamp, cool_down_ms: u64 },
    /// One download (the probe) is out until `until`; nothing else goes.
    Probing { until: Timestamp, cool_down_ms: u64 },
}

/// What a download may do now, as the circuit says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Go,
    /// The circuit is open (or a probe is out): settle as `host_unavailable`.
    Refused,
    /// The cool-down is over: the first to claim the probe goes.
    ProbeDue,
}

/// A download's outcome, as far as a host's health cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostEvent {
    /// The host answered (any status but 429, 5xx and 408).
    Answered,
    /// 429: the host asks for fewer requests.
    RateLimited,
    /// A failure the host is responsible for (5xx, connection, the last tier's timeout).
    Failed,
}

/// A host's outcomes counted together (a time bucket's worth, from every process): what the
/// shared counts hold of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts {
    pub answered: u64,
    pub rate_limited: u64,
    pub failed: u64,
}

impl EventCounts {
    /// One more `event`.
    pub fn count(&mut self, event: HostEvent) {
        match event {
            HostEvent::Answered => self.answered += 1,
            HostEvent::RateLimited => self.rate_limited += 1,
            HostEvent::Failed => self.failed += 1,
        }
    }
}

/// Answers and 429s folded one by one, at most (their effect on the score and the limit is
/// saturated long before: a score halved a thousand times is zero, a limit halved 64 times one).
const FOLD_CAP: u64 = 1_000;

/// One host's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostHealth {
    /// Downloads at once (AIMD); at least one.
    pub limit: f64,
    pub score: f64,
    pub score_at: Timestamp,
    /// Recent requests and failures, decayed over the circuit's window since `counted_at`.
    #[serde(default)]
    pub requests: f64,
    #[serde(default)]
    pub failures: f64,
    pub counted_at: Timestamp,
    #[serde(default)]
    pub circuit: Circuit,
}

impl HostHealth {
    /// A host not seen before: `initial` downloads at once, nothing against it.
    pub fn new(initial: f64, now: Timestamp) -> Self {
        Self {
            limit: initial,
            score: 0.0,
            score_at: now,
            requests: 0.0,
            failures: 0.0,
            counted_at: now,
            circuit: Circuit::Closed,
        }
    }

    /// Folds in one outcome observed at `at`. `max` caps the concurrency. Events may arrive
    /// late and out of order (another process's batch); decay never runs backwards.
    pub fn apply(&mut self, event: HostEvent, at: Timestamp, max: f64, rules: &CircuitRules) {
        let score = self.score_at(at);
        self.score = match event {
            // A host that works again is not held off for long.
            HostEvent::Answered => score / 2.0,
            HostEvent::RateLimited | HostEvent::Failed => score + 1.0,
        };
        self.score_at = self.score_at.max(at);
        self.limit = match event {
            // Additive increase of one slot per `limit` answers: one per round trip of a full
            // window, as TCP does.
            HostEvent::Answered => (self.limit + 1.0 / self.limit.max(1.0)).min(max),
            HostEvent::RateLimited => (self.limit / 2.0).max(1.0),
            HostEvent::Failed => self.limit,
        };
        let kept = half_life_factor(self.counted_at, at, rules.window);
        self.requests = self.requests * kept + 1.0;
        self.failures = self.failures * kept + if event == HostEvent::Failed { 1.0 } else { 0.0 };
        self.counted_at = self.counted_at.max(at);
        // Rounded: requests a few milliseconds apart have decayed by a hair, and four of
        // them are still four.
        if self.circuit == Circuit::Closed
            && self.requests.round() >= f64::from(rules.min_requests)
            && self.failures * 100.0 >= self.requests * f64::from(rules.failure_percent)
        {
            self.circuit = Circuit::Open {
                until: at.plus(rules.cool_down),
                cool_down_ms: millis(rules.cool_down),
            };
        }
    }

    /// Folds in `counts` outcomes observed at `at` (a bucket of the shared counts), as that
    /// many [`apply`](Self::apply)s would, taking the failures and 429s first and the answers
    /// after (their order within a bucket is not kept). The circuit is left as it is: whether
    /// the counts call for opening it is [`should_open`](Self::should_open)'s question.
    pub fn apply_counts(
        &mut self,
        counts: EventCounts,
        at: Timestamp,
        max: f64,
        rules: &CircuitRules,
    ) {
        let bad = (counts.failed + counts.rate_limited) as f64;
        let halvings = i32::try_from(counts.answered.min(FOLD_CAP)).unwrap_or(i32::MAX);
        self.score = (self.score_at(at) + bad) * 0.5f64.powi(halvings);
        self.score_at = self.score_at.max(at);
        let mut limit = self.limit;
        for _ in 0..counts.rate_limited.min(64) {
            limit = (limit / 2.0).max(1.0);
        }
        for _ in 0..counts.answered.min(FOLD_CAP) {
            if limit >= max {
                break;
            }
            limit = (limit + 1.0 / limit.max(1.0)).min(max);
        }
        self.limit = limit;
        let kept = half_life_factor(self.counted_at, at, rules.window);
        let all = counts.answered + counts.rate_limited + counts.failed;
        self.requests = self.requests * kept + all as f64;
        self.failures = self.failures * kept + counts.failed as f64;
        self.counted_at = self.counted_at.max(at);
    }

    /// Whether the host's recent requests, as of `now`, call for opening its circuit: enough of
    /// them, and most of them failed (the rule [`apply`](Self::apply) opens it by).
    pub fn should_open(&self, now: Timestamp, rules: &CircuitRules) -> bool {
        let kept = half_life_factor(self.counted_at, now, rules.window);
        let (requests, failures) = (self.requests * kept, self.failures * kept);
        requests.round() >= f64::from(rules.min_requests)
            && failures * 100.0 >= requests * f64::from(rules.failure_percent)
    }

    /// Opens the circuit now for the configured cool-down (what [`apply`](Self::apply) does
    /// when the failures pass the rule).
    pub fn open(&mut self, now: Timestamp, rules: &CircuitRules) {
        self.circuit = Circuit::Open {
            until: now.plus(rules.cool_down),
            cool_down_ms: millis(rules.cool_down),
        };
    }

    /// How long to hold off new downloads, if the failure score is high.
    pub fn backoff(&self, now: Timestamp) -> Option<Duration> {
        let score = self.score_at(now);
        (score >= SCORE_THRESHOLD).then(|| {
            let steps = (score - SCORE_THRESHOLD).floor().min(20.0) as u32;
            BACKOFF_BASE.saturating_mul(1 << steps).min(BACKOFF_CAP)
        })
    }

    pub fn admission(&self, now: Timestamp) -> Admission {
        match self.circuit {
            Circuit::Closed => Admission::Go,
            Circuit::Open { until, .. } | Circuit::Probing { until, .. } if now >= until => {
                Admission::ProbeDue
            }
            Circuit::Open { .. } | Circuit::Probing { .. } => Admission::Refused,
        }
    }

    /// Takes the probe if it is due: `true` if this caller is the one download let through
    /// until `now + lease` (a probe that never reports is given up after it).
    pub fn claim_probe(&mut self, now: Timestamp, lease: Duration) -> bool {
        match self.circuit {
            Circuit::Open {
                until,
                cool_down_ms,
            }
            | Circuit::Probing {
                until,
                cool_down_ms,
            } if now >= until => {
                self.circuit = Circuit::Probing {
                    until: now.plus(lease),
                    cool_down_ms,
                };
                true
            }
            _ => false,
        }
    }

    /// The probe's outcome: the circuit closes with a clean slate, or opens again for twice
    /// the cool-down (up to 32 times the configured one).
    pub fn probe_result(&mut self, ok: bool, now: Timestamp, rules: &CircuitRules) {
        let Circuit::Probing { cool_down_ms, .. } = self.circuit else {
            return;
        };
        if ok {
            self.circuit = Circuit::Closed;
            self.requests = 0.0;
            self.failures = 0.0;
            self.score = 0.0;
            self.counted_at = self.counted_at.max(now);
            self.score_at = self.score_at.max(now);
        } else {
            let cap = millis(rules.cool_down).saturating_mul(u64::from(COOL_DOWN_GROWTH_CAP));
            let cool_down_ms = cool_down_ms.saturating_mul(2).min(cap);
            self.circuit = Circuit::Open {
                until: now.plus(Duration::from_millis(cool_down_ms)),
                cool_down_ms,
            };
        }
    }

    fn score_at(&self, now: Timestamp) -> f64 {
        self.score * half_life_factor(self.score_at, now, SCORE_HALF_LIFE)
    }
}

/// What is left of a count made at `then` at `now`, halving over `half_life`.
fn half_life_factor(then: Timestamp, now: Timestamp, half_life: Duration) -> f64 {
    let age_ms = (now.as_millis() - then.as_millis()).max(0) as f64;
    0.5f64.powf(age_ms / half_life.as_millis().max(1) as f64)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);

    fn rules() -> CircuitRules {
        CircuitRules {
            min_requests: 10,
            failure_percent: 50,
            window: Duration::from_secs(60),
            cool_down: Duration::from_secs(30),
        }
    }

    fn health() -> HostHealth {
        HostHealth::new(8.0, T0)
    }

    /// A host whose circuit opened at `T0` (ten failures of ten).
    fn opened() -> HostHealth {
        let mut h = health();
        for _ in 0..10 {
            h.apply(HostEvent::Failed, T0, 32.0, &rules());
        }
        h
    }

    #[test]
    fn failing_hosts_are_backed_off_until_the_score_decays() {
        let mut h = health();
        let open = CircuitRules {
            min_requests: 1000,
            ..rules()
        };
        for _ in 0..4 {
            h.apply(HostEvent::Failed, T0, 32.0, &open);
        }
        assert_eq!(h.backoff(T0), None);
        h.apply(HostEvent::Failed, T0, 32.0, &open);
        assert_eq!(h.backoff(T0), Some(BACKOFF_BASE));
        h.apply(HostEvent::Failed, T0, 32.0, &open);
        h.apply(HostEvent::Failed, T0, 32.0, &open);
        assert_eq!(h.backoff(T0), Some(BACKOFF_BASE * 4));
        assert_eq!(h.backoff(T0.plus(SCORE_HALF_LIFE)), None);
    }

    #[test]
    fn a_429_halves_concurrency_and_answers_grow_it_back_slowly() {
        let mut h = health();
        h.apply(HostEvent::RateLimited, T0, 32.0, &rules());
        assert_eq!(h.limit, 4.0);
        for _ in 0..3 {
            h.apply(HostEvent::RateLimited, T0, 32.0, &rules());
        }
        assert_eq!(h.limit, 1.0, "never below one");
        for _ in 0..3 {
            h.apply(HostEvent::Answered, T0, 32.0, &rules());
        }
        assert_eq!(h.limit.floor(), 2.0);
    }

    #[test]
    fn the_circuit_opens_when_most_recent_requests_fail_and_not_before_enough_requests() {
        let mut h = health();
        for _ in 0..9 {
            h.apply(HostEvent::Failed, T0, 32.0, &rules());
        }
        assert_eq!(h.admission(T0), Admission::Go, "9 requests are too few");
        h.apply(HostEvent::Failed, T0, 32.0, &rules());
        assert_eq!(h.admission(T0), Admission::Refused);
        assert_eq!(
            h.admission(T0.plus(Duration::from_secs(30))),
            Admission::ProbeDue
        );
    }

    #[test]
    fn a_host_failing_less_than_the_share_keeps_its_circuit_closed() {
        let mut h = health();
        for i in 0..100 {
            let event = if i % 3 == 0 {
                HostEvent::Failed
            } else {
                HostEvent::Answered
            };
            h.apply(event, T0, 32.0, &rules());
        }
        assert_eq!(h.admission(T0), Admission::Go);
    }

    #[test]
    fn old_failures_fade_out_of_the_window() {
        let mut h = health();
        for _ in 0..8 {
            h.apply(HostEvent::Failed, T0, 32.0, &rules());
        }
        // Ten minutes on, the eight failures count for almost nothing: two more are not enough.
        let later = T0.plus(Duration::from_secs(600));
        for _ in 0..2 {
            h.apply(HostEvent::Failed, later, 32.0, &rules());
        }
        assert_eq!(h.admission(later), Admission::Go);
    }

    #[test]
    fn one_probe_at_a_time_then_closed_or_open_for_twice_as_long() {
        let mut h = opened();
        let due = T0.plus(Duration::from_secs(30));
        let lease = Duration::from_secs(90);
        assert!(!h.claim_probe(T0, lease), "not before the cool-down");
        assert!(h.claim_probe(due, lease));
        assert!(!h.claim_probe(due, lease), "one probe at a time");
        assert_eq!(h.admission(due), Admission::Refused);
        h.probe_result(false, due, &rules());
        assert_eq!(
            h.circuit,
            Circuit::Open {
                until: due.plus(Duration::from_secs(60)),
                cool_down_ms: 60_000
            }
        );
        let next = due.plus(Duration::from_secs(60));
        assert!(
            h.claim_probe(next.plus(lease).plus(lease), lease),
            "a lost probe is given up"
        );
        h.probe_result(true, next, &rules());
        assert_eq!(h.circuit, Circuit::Closed);
        assert_eq!(h.admission(next), Admission::Go);
        assert_eq!(h.backoff(next), None, "a clean slate");
    }

    #[test]
    fn failed_probes_stop_doubling_the_cool_down_at_its_cap() {
        let mut h = opened();
        let mut now = T0;
        for _ in 0..12 {
            now = now.plus(Duration::from_secs(86_400));
            assert!(h.claim_probe(now, Duration::from_secs(1)));
            h.probe_result(false, now, &rules());
        }
        let Circuit::Open { cool_down_ms, .. } = h.circuit else {
            panic!("{:?}", h.circuit)
        };
        assert_eq!(cool_down_ms, 30_000 * 32);
    }

    #[test]
    fn counts_fold_as_the_events_would_one_by_one() {
        let (max, rules) = (32.0, rules());
        let counts = EventCounts {
            answered: 0,
            rate_limited: 2,
            failed: 3,
        };
        let (mut one_by_one, mut counted) = (health(), health());
        for event in [HostEvent::Failed, HostEvent::Failed, HostEvent::Failed] {
            one_by_one.apply(event, T0, max, &rules);
        }
        for _ in 0..2 {
            one_by_one.apply(HostEvent::RateLimited, T0, max, &rules);
        }
        counted.apply_counts(counts, T0, max, &rules);
        assert_eq!(counted.limit, one_by_one.limit);
        assert!((counted.score - one_by_one.score).abs() < 1e-9);
        assert!((counted.requests - one_by_one.requests).abs() < 1e-9);
        assert!((counted.failures - one_by_one.failures).abs() < 1e-9);
        // Answers after them: the score halves per answer, the limit grows by one per window.
        let later = T0.plus(Duration::from_secs(10));
        for _ in 0..5 {
            one_by_one.apply(HostEvent::Answered, later, max, &rules);
        }
        let answers = EventCounts {
            answered: 5,
            ..EventCounts::default()
        };
        counted.apply_counts(answers, later, max, &rules);
        assert!((counted.limit - one_by_one.limit).abs() < 1e-9);
        assert!((counted.score - one_by_one.score).abs() < 1e-9);
        assert!((counted.requests - one_by_one.requests).abs() < 1e-9);
    }

    #[test]
    fn counts_say_open_when_most_recent_requests_failed_and_not_once_they_fade() {
        let mut h = health();
        let failed = |n| EventCounts {
            failed: n,
            ..EventCounts::default()
        };
        h.apply_counts(failed(9), T0, 32.0, &rules());
        assert!(!h.should_open(T0, &rules()), "9 requests are too few");
        h.apply_counts(failed(1), T0, 32.0, &rules());
        assert!(h.should_open(T0, &rules()));
        assert_eq!(
            h.circuit,
            Circuit::Closed,
            "counts leave the circuit to the caller"
        );
        assert!(!h.should_open(T0.plus(Duration::from_secs(600)), &rules()));
        // A million answers in one bucket fold in bounded time, and the limit stops at its cap.
        let answers = EventCounts {
            answered: 1_000_000,
            ..EventCounts::default()
        };
        h.apply_counts(answers, T0, 32.0, &rules());
        assert_eq!(h.limit, 32.0);
        assert_eq!(h.backoff(T0), None);
        h.open(T0, &rules());
        assert_eq!(h.admission(T0), Admission::Refused);
    }

    #[test]
    fn late_events_do_not_run_decay_backwards() {
        let mut h = health();
        let later = T0.plus(Duration::from_secs(60));
        h.apply(HostEvent::Failed, later, 32.0, &rules());
        h.apply(HostEvent::Failed, T0, 32.0, &rules());
        assert_eq!(h.score_at, later);
        assert!(h.score <= 2.0 && h.requests <= 2.0, "{h:?}");
    }
}
