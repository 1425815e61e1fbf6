//! `IMGEST_MEMORY_BUDGET`: how much memory the process should stay within, and its default.

use super::SettingsError;
use super::parse::{Vars, parse_size};
use imgest_core::budget::BASE;

/// Bodies get a quarter of what is left after [`BASE`]: the budget must hold at least this many
/// of the largest body.
const BODIES_PER_BUDGET: u64 = 4;

/// On Lambda, the part of the function's memory the budget leaves alone: Lambda ends an
/// invocation that goes over its `MemorySize`, and the budget models what photos hold, not the
/// allocator's fragmentation, the threads' stacks or the clients' buffers (the hostile corpus
/// through the fetch and process bootstraps, `tests/e2e/bootstraps.rs`, checks the peak).
const LAMBDA_HEADROOM_EIGHTHS: u64 = 1;

/// Where Lambda tells a function its memory, in MiB.
pub(super) const LAMBDA_MEMORY: &str = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE";

/// The budget: `IMGEST_MEMORY_BUDGET` if set; on Lambda seven eighths of the function's memory
/// (Lambda sets `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, in MiB; see [`LAMBDA_HEADROOM_EIGHTHS`]);
/// else a quarter of the machine's memory (or of the cgroup's limit, if lower), at least
/// 256 MiB. Refused when too small for four bodies of `max_body` bytes beside [`BASE`].
pub(super) fn budget(vars: &Vars<'_>, max_body: u64) -> Result<u64, SettingsError> {
    let budget = match vars.get("IMGEST_MEMORY_BUDGET") {
        Some(_) => vars.size("IMGEST_MEMORY_BUDGET", 0)?,
        None => match vars.get(LAMBDA_MEMORY) {
            Some(mib) => mib
                .parse::<u64>()
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .map(|m| m / 8 * (8 - LAMBDA_HEADROOM_EIGHTHS))
                .ok_or_else(|| vars.bad(LAMBDA_MEMORY, "expected MiB, e.g. 512"))?,
            None => machine_memory().map_or(1 << 30, |m| m / 4).max(256 << 20),
        },
    };
    let least = BASE + BODIES_PER_BUDGET * max_body;
    if budget < least {
        return Err(vars.bad(
            "IMGEST_MEMORY_BUDGET",
            format!(
                "{budget} bytes is too small: it must hold 64 MiB for the process and four bodies \
                 of IMGEST_MAX_BODY ({max_body} bytes), at least {least} bytes"
            ),
        ));
    }
    Ok(budget)
}

/// The memory this process may use: the machine's (`MemTotal`), or its cgroup's limit if lower.
fn machine_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb = line
                .trim_start_matches("MemTotal:")
                .trim()
                .trim_end_matches("kB");
            kb.trim().parse::<u64>().ok().map(|k| k * 1024)
        })?;
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|v| parse_size(v.trim()));
    Some(cgroup.map_or(total, |c| c.min(total)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn budget_of(pairs: &[(&str, &str)]) -> Result<u64, SettingsError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        budget(&Vars::new(&map), 20_000_000)
    }

    #[test]
    fn on_lambda_the_budget_leaves_an_eighth_of_the_functions_memory_alone() {
        let budget = budget_of(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")]).unwrap();
        assert_eq!(budget, 448 << 20);
        // Set, the budget is what it says, whatever the function's memory.
        let set = budget_of(&[
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"),
            ("IMGEST_MEMORY_BUDGET", "512MiB"),
        ])
        .unwrap();
        assert_eq!(set, 512 << 20);
        for bad in ["lots", "-1", "18446744073709551615"] {
            assert!(
                budget_of(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", bad)]).is_err(),
                "{bad}"
            );
        }
    }
}
