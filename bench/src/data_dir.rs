//! A temporary data directory for a benchmark's local runner, removed when the benchmark is
//! done with it.

use std::path::PathBuf;

use anyhow::{Context, Result};

pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new empty directory named after the benchmark (`name`), this process and `tag`.
    pub fn new(name: &str, tag: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "imgest-bench-{name}-{}-{tag}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
