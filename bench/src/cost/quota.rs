//! A CPU quota for the functions' threads, the way Lambda gives a function its share of a vCPU
//! (`memory ÷ 1,769 MB`): a cgroup (v1's `cpu` controller) holding only the thread that drives
//! the functions and the threads it starts (their blocking pool: the pipeline's decodes), whose
//! CFS quota is set to the share of the function invoked now. The proxy, the partner hosts and
//! the emulator stay outside it, unthrottled, as AWS's services and the partners are.
//!
//! Threads a cgroup member starts are members too, so the pool's later threads join by
//! themselves; [`CpuQuota::limit`] also moves any function thread started before.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// Where cgroup v1 mounts its `cpu` controller.
const CPU_CONTROLLER: &str = "/sys/fs/cgroup/cpu";

/// The scheduler's accounting period, µs (Linux's default).
const PERIOD_US: u64 = 100_000;

/// One cgroup of the functions' threads; removed when dropped.
pub struct CpuQuota {
    dir: PathBuf,
    /// The quota set now, as a share of one CPU.
    share: std::sync::Mutex<Option<f64>>,
}

impl CpuQuota {
    /// A new cgroup under the `cpu` controller, or an error that says what the machine lacks.
    pub fn create() -> Result<Self> {
        let root = PathBuf::from(CPU_CONTROLLER);
        if !root.join("cpu.cfs_quota_us").exists() {
            bail!(
                "the validation throttles the functions' threads with cgroup v1's cpu controller, and {CPU_CONTROLLER} has none (cgroup v2 only?): run it on a machine that mounts the v1 cpu controller"
            );
        }
        let dir = root.join(format!("imgest-validate-{}", std::process::id()));
        std::fs::create_dir(&dir).with_context(|| {
            format!(
                "creating the cgroup {} (the validation needs to write under {CPU_CONTROLLER}: root, or a delegated subtree)",
                dir.display()
            )
        })?;
        let quota = Self {
            dir,
            share: std::sync::Mutex::new(None),
        };
        quota.write("cpu.cfs_period_us", &PERIOD_US.to_string())?;
        Ok(quota)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.dir.join(file);
        std::fs::write(&path, value)
            .with_context(|| format!("writing {value:?} to {}", path.display()))
    }

    /// Holds `threads` (ids under `/proc/self/task`) to `share` of one CPU (at most one: an
    /// item's work runs on one thread, and a function has at most one vCPU's worth here).
    pub fn limit(&self, share: f64, threads: &[String]) -> Result<()> {
        let share = share.clamp(0.01, 1.0);
        for tid in threads {
            // A thread that ended since it was listed is not an error.
            if std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
                self.write("tasks", tid)?;
            }
        }
        let mut current = self
            .share
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *current != Some(share) {
            let quota = (share * PERIOD_US as f64).round() as u64;
            self.write("cpu.cfs_quota_us", &quota.to_string())?;
            *current = Some(share);
        }
        Ok(())
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // Its threads go back to the root group first: a cgroup with members cannot go.
        let root = PathBuf::from(CPU_CONTROLLER).join("tasks");
        if let Ok(tasks) = std::fs::read_to_string(self.dir.join("tasks")) {
            for tid in tasks.lines() {
                let _ = std::fs::write(&root, tid);
            }
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!(
                "imgest-bench: could not remove the cgroup {}: {e}",
                self.dir.display()
            );
        }
    }
}
