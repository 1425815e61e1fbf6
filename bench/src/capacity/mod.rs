//! `imgest-bench capacity --scenario FILE`: the deployment held against a scenario's peak,
//! from measured counts. The cost benchmark's profile gives what each stage's invocations did
//! (CPU, modeled time, DynamoDB requests by operation and item class, the hottest key per
//! invocation, bills); the contention benchmark's gives how the shared items behave under 64
//! writers. The scenario names everything else. One table per group (functions, queues,
//! DynamoDB, API routes, S3, maintenance, the bill per hour); every figure carries its trace,
//! every breach is flagged, and any breach makes the command fail. `docs/capacity.md`
//! explains the model.

mod measured;
mod model;
mod scenario;
mod similar;
#[cfg(test)]
mod tests;

use std::path::Path;

use anyhow::{Context, Result, bail};

pub use measured::{FULL_VCPU_MB, Measured};
pub use model::{
    Report, SweepPage, fetch_invocation_s, fmt, gc_job_rate, model, suggested, sweep_job_rate,
};
pub use scenario::Scenario;

/// Where the default inputs live (relative to the repository's root).
pub const DEFAULT_SCENARIO: &str = "docs/capacity/default.json";
pub const DEFAULT_PROFILE: &str = "docs/capacity/profile.json";
pub const DEFAULT_CONTENTION: &str = "docs/capacity/contention.json";

pub struct Options {
    pub scenario: std::path::PathBuf,
    pub profile: std::path::PathBuf,
    pub contention: std::path::PathBuf,
    pub json: bool,
    pub suggest: bool,
    /// Where `--suggest` writes the scenario under its suggested deployment.
    pub out: Option<std::path::PathBuf>,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

pub fn run(o: &Options) -> Result<()> {
    let scenario = Scenario::parse(&read(&o.scenario)?)
        .with_context(|| format!("{} is not a scenario", o.scenario.display()))?;
    let measured = Measured::load(&read(&o.profile)?, &read(&o.contention)?)?;
    let report = model(&scenario, &measured)?;
    if o.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&scenario, &measured, &report, o.suggest);
    }
    if o.suggest {
        // The deployment is judged by the scenario under it: the command fails if that one
        // still breaches (a row no setting sizes, a design limit).
        let under = suggested(&scenario, &measured)?;
        let after = model(&under, &measured)?;
        if !o.json {
            println!("\n## under the suggested deployment\n");
            for row in after.rows.iter().filter(|r| r.breach) {
                println!(
                    "BREACH {}: {} vs {}",
                    row.item,
                    model::fmt(row.value),
                    row.limit.map_or("-".into(), model::fmt)
                );
            }
            println!(
                "{} breaches under the suggested deployment.",
                after.breaches()
            );
        }
        if let Some(path) = &o.out {
            std::fs::write(path, serde_json::to_string_pretty(&under)? + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
            if !o.json {
                println!("The scenario under it is in {}.", path.display());
            }
        }
        if after.breaches() > 0 {
            bail!(
                "{} breaches of scenario {:?} under its suggested deployment",
                after.breaches(),
                scenario.name
            );
        }
        return Ok(());
    }
    let breaches = report.breaches();
    if breaches > 0 {
        bail!("{breaches} breaches of scenario {:?}", scenario.name);
    }
    Ok(())
}

/// The groups, in the order they print.
const GROUPS: [&str; 8] = [
    "service",
    "functions",
    "queues",
    "dynamodb",
    "api routes",
    "s3",
    "maintenance",
    "bill",
];

fn print(scenario: &Scenario, measured: &Measured, report: &Report, suggest: bool) {
    println!("# Capacity of {:?}\n", scenario.name);
    println!("Measured: {}", measured.cost.source);
    println!("Contention: {}", measured.contention.source);
    for group in GROUPS {
        println!("\n## {group}\n");
        println!("| | figure | value | limit | trace |");
        println!("|---|---|---|---|---|");
        for row in report.rows.iter().filter(|r| r.group == group) {
            let limit = row.limit.map_or("-".to_owned(), model::fmt);
            let flag = if row.breach { "BREACH" } else { "" };
            println!(
                "| {flag} | {} | {} {} | {limit} | {} |",
                row.item,
                model::fmt(row.value),
                row.unit,
                row.trace
            );
        }
    }
    println!("\n{} breaches.", report.breaches());
    if suggest {
        println!("\n## suggested deployment\n");
        println!("| parameter | value | from |");
        println!("|---|---|---|");
        for s in &report.suggestions {
            println!("| {} | {} | {} |", s.parameter, s.value, s.trace);
        }
    }
}
