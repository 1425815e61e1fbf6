//! The hostile corpus (`imgest_hosts::hostile::corpus`) written to files, one per photo, for
//! `bench/process.sh` to measure what each costs `imgest process`.

use std::path::Path;

use anyhow::Context;
use imgest_hosts::hostile;

/// Writes the corpus into `out` and prints a line per file: its name, the answer expected
/// (`ok` or the error kind) and what it is, tab-separated.
pub fn write(out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for case in hostile::corpus() {
        let path = out.join(case.file);
        std::fs::write(&path, &case.bytes)
            .with_context(|| format!("writing {}", path.display()))?;
        println!(
            "{}\t{}\t{}",
            case.file,
            case.refused.unwrap_or("ok"),
            case.name
        );
    }
    Ok(())
}
