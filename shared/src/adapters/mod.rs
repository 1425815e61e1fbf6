//! Embedded adapters (stub: being written).
