//! The local runner: the whole service in one process ([`runner`]), over the backend the
//! settings name ([`app`]: the one place both backends' ports are built).

pub mod app;
pub mod prometheus;
pub mod runner;
