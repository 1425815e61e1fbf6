//! The flows' events, counted through the `metrics` facade, each a counter of its own
//! (`imgest_uploads_new_total`, `imgest_download_attempts_total`, …).
//!
//! A [`Tally`] is a recorder that keeps one service's counts and passes every increment on to
//! the process's recorder (the exporter, when one is installed: Prometheus locally, CloudWatch
//! on AWS). The flows increment `metrics::Counter` handles registered through their service's
//! tally, so one increment is both what the exporter sees and what the CLI's summaries, the
//! benchmarks and the tests read back from the tally (several services in one process, as in
//! the tests, each read their own). A set of counters is declared once, with [`counters!`]:
//! its handles, the snapshot of its values, and their names.
//!
//! An exporter installed after a tally registered its counters does not see them: binaries
//! install it first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Level, Metadata, Recorder, SharedString,
    Unit,
};

/// The metadata the counters are registered with.
const METADATA: Metadata<'static> = Metadata::new("imgest", Level::INFO, Some(module_path!()));

/// A recorder of one service's counters: each counter registered through it counts here and in
/// the process's recorder.
#[derive(Debug, Default)]
pub struct Tally {
    counts: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl Tally {
    /// The counter `name`'s value (0 if nothing registered it).
    pub fn get(&self, name: &str) -> u64 {
        self.lock()
            .get(name)
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// A counter handle named `name`, counting here and in the process's recorder.
    pub fn counter(&self, name: &'static str) -> Counter {
        self.register_counter(&Key::from_static_name(name), &METADATA)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<AtomicU64>>> {
        // A panic while holding the map leaves it consistent (one insert at a time).
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One counter's increment, here and in the process's recorder.
struct Both {
    here: Arc<AtomicU64>,
    process: Counter,
}

impl CounterFn for Both {
    fn increment(&self, value: u64) {
        self.here.fetch_add(value, Ordering::Relaxed);
        self.process.increment(value);
    }

    fn absolute(&self, value: u64) {
        self.here.fetch_max(value, Ordering::Relaxed);
        self.process.absolute(value);
    }
}

impl Recorder for Tally {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        metrics::with_recorder(|r| r.describe_counter(key, unit, description));
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        metrics::with_recorder(|r| r.describe_gauge(key, unit, description));
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        metrics::with_recorder(|r| r.describe_histogram(key, unit, description));
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        let here = Arc::clone(self.lock().entry(key.name().to_owned()).or_default());
        // The process's recorder: never this tally, which is not installed anywhere.
        let process = metrics::with_recorder(|r| r.register_counter(key, metadata));
        Counter::from_arc(Arc::new(Both { here, process }))
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        metrics::with_recorder(|r| r.register_gauge(key, metadata))
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        metrics::with_recorder(|r| r.register_histogram(key, metadata))
    }
}

/// Declares a set of counters: `$handles` (one `metrics::Counter` per field, registered through
/// a [`Tally`]) and `$counts` (their values, read back from the tally). Each field `f` is the
/// counter `imgest_f_total`, described by its doc comment.
#[macro_export]
macro_rules! counters {
    (
        $(#[$handles_meta:meta])* $vis:vis struct $handles:ident;
        $(#[$counts_meta:meta])* struct $counts:ident;
        $( #[doc = $doc:literal] $field:ident, )*
    ) => {
        $(#[$handles_meta])*
        #[derive(Clone)]
        $vis struct $handles {
            $( #[doc = $doc] pub $field: ::metrics::Counter, )*
        }

        $(#[$counts_meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ::serde::Serialize)]
        $vis struct $counts {
            $( #[doc = $doc] pub $field: u64, )*
        }

        impl $handles {
            /// The counters' names, in declaration order.
            pub const NAMES: &[&str] = &[$( concat!("imgest_", stringify!($field), "_total"), )*];

            /// Every counter of the set, registered through `tally` (and described to the
            /// process's recorder).
            pub fn register(tally: &$crate::telemetry::counters::Tally) -> Self {
                $(
                    ::metrics::Recorder::describe_counter(
                        tally,
                        concat!("imgest_", stringify!($field), "_total").into(),
                        Some(::metrics::Unit::Count),
                        $doc.trim().into(),
                    );
                )*
                Self {
                    $( $field: tally.counter(concat!("imgest_", stringify!($field), "_total")), )*
                }
            }
        }

        impl $counts {
            /// The counters' values as `tally` holds them.
            pub fn read(tally: &$crate::telemetry::counters::Tally) -> Self {
                Self {
                    $( $field: tally.get(concat!("imgest_", stringify!($field), "_total")), )*
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    crate::counters! {
        /// Test counters.
        struct Handles;
        /// Their values.
        struct Counts;
        /// Apples seen.
        apples,
        /// Pears seen.
        pears,
    }

    #[test]
    fn each_tally_counts_what_its_own_handles_counted() {
        let (one, two) = (Tally::default(), Tally::default());
        let (a, b) = (Handles::register(&one), Handles::register(&two));
        a.apples.increment(2);
        a.pears.increment(1);
        b.apples.increment(5);
        a.clone().apples.increment(1);
        assert_eq!(
            Counts::read(&one),
            Counts {
                apples: 3,
                pears: 1
            }
        );
        assert_eq!(
            Counts::read(&two),
            Counts {
                apples: 5,
                pears: 0
            }
        );
        assert_eq!(
            Handles::NAMES,
            ["imgest_apples_total", "imgest_pears_total"]
        );
    }

    #[test]
    fn increments_reach_the_process_recorder_too() {
        let process = metrics_util_free::Recording::default();
        let tally = Tally::default();
        let handles = metrics::with_local_recorder(&process, || Handles::register(&tally));
        handles.pears.increment(4);
        assert_eq!(tally.get("imgest_pears_total"), 4);
        assert_eq!(process.get("imgest_pears_total"), 4);
    }

    /// A process recorder for the test above, without a dependency for it.
    mod metrics_util_free {
        use super::*;

        #[derive(Debug, Default)]
        pub struct Recording(Tally);

        impl Recording {
            pub fn get(&self, name: &str) -> u64 {
                self.0.get(name)
            }
        }

        impl Recorder for Recording {
            fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
            fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
            fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
            fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
                let here = Arc::clone(self.0.lock().entry(key.name().to_owned()).or_default());
                Counter::from_arc(here)
            }
            fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
                Gauge::noop()
            }
            fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
                Histogram::noop()
            }
        }
    }
}
