//! `imgest variants`: the variant set an operator confirmed, against the configured one. The
//! sweep deletes a size's files only once its drop is confirmed here (a typo in
//! `IMGEST_VARIANTS` deletes nothing), and a backfill starts only under a confirmed set. On
//! AWS (`IMGEST_BACKEND=aws`) the confirmed set is a checkpoint in the table, as the
//! functions see it.

use anyhow::Result;
use clap::Subcommand;
use imgest_core::domain::VariantName;
use imgest_flows::variants::VariantSetStatus;

use crate::commands::operator_service;

#[derive(Subcommand)]
pub enum VariantsCommand {
    /// Compare the configured set (IMGEST_VARIANTS) with the confirmed one.
    /// Example: `imgest variants status`
    Status,
    /// Confirm the configured set. Refused while it drops a confirmed size that is not
    /// named with `--drop` (dropping a size deletes its files everywhere, at the next sweeps).
    /// Example: `IMGEST_VARIANTS=large=fit:1280x1280,medium=fit:640x640 imgest variants confirm --drop thumb`
    Confirm {
        /// A confirmed size the configuration drops, whose files the sweep may then delete.
        #[arg(long = "drop", value_name = "NAME")]
        drop: Vec<String>,
    },
}

pub async fn run(command: VariantsCommand, json: bool) -> Result<()> {
    let (_, service) = operator_service().await?;
    let status = match command {
        VariantsCommand::Status => service.variant_set_status().await?,
        VariantsCommand::Confirm { drop } => {
            let drop = drop
                .iter()
                .map(|n| VariantName::parse(n))
                .collect::<Result<Vec<_>, _>>()?;
            service.confirm_variants(&drop).await?
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print(&status);
    }
    Ok(())
}

fn names<'a>(names: impl IntoIterator<Item = &'a VariantName>) -> String {
    let names: Vec<&str> = names.into_iter().map(VariantName::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn print(status: &VariantSetStatus) {
    println!("configured: {}", names(&status.configured));
    match &status.confirmed {
        None => println!("confirmed: none yet (the sweep retires no size until one is)"),
        Some(c) => println!("confirmed: {} (at {})", names(&c.names), c.confirmed_at),
    }
    if !status.added.is_empty() {
        println!(
            "added: {} (made for new photos; `imgest variants confirm`, then a backfill, for the rest)",
            names(&status.added)
        );
    }
    if !status.dropped.is_empty() {
        println!(
            "dropped: {} (their files are kept until `imgest variants confirm{}`)",
            names(&status.dropped),
            status
                .dropped
                .iter()
                .map(|n| format!(" --drop {}", n.as_str()))
                .collect::<String>()
        );
    }
    if status.is_confirmed() {
        println!("the configured set is the confirmed one");
    }
}
