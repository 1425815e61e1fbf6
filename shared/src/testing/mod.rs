//! Contract suites (stub: being written).
