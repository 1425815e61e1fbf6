//! What imgest tells its operators while it runs: JSON-lines logs ([`logs`]) and the stages'
//! counts and timings ([`metrics`]).

pub mod logs;
pub mod metrics;

pub use logs::init;
