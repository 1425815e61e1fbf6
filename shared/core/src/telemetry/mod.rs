//! What imgest tells its operators while it runs: JSON-lines logs ([`logs`]) and the stages'
//! counts and timings ([`metrics`]), and the flows' event counters ([`counters`]).

pub mod counters;
pub mod logs;
pub mod metrics;

pub use logs::init;
