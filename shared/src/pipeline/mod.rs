//! The photo pipeline (stub: being written).
