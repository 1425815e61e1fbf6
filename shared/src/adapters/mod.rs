//! Embedded adapters: the ports on a local directory ([`FsBlobStore`]) and one SQLite file
//! ([`SqliteStore`]: image records, offer links and the task queue).

pub mod fs;
pub mod sqlite;

pub use fs::FsBlobStore;
pub use sqlite::SqliteStore;
