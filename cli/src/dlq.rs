//! `imgest dlq list|redrive`: the messages every queue gave up on, with their reasons, and
//! moving them back once the cause is fixed. Works on both backends: the local task queue's
//! dead letters, or each SQS queue's dead-letter queue (the reason in each letter's
//! attributes).

use crate::commands::operator_service;
use anyhow::{Result, bail};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum DlqCommand {
    /// List dead letters: every queue's, or one's. Example: `imgest dlq list --queue process`
    List {
        /// Only this queue (`fetch-0`, `process`, `backfill`, ...; on AWS also `intake`).
        #[arg(long)]
        queue: Option<String>,
        /// At most this many per queue.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Move a queue's dead letters back onto it, due now (every handler is idempotent).
    /// Example: `imgest dlq redrive --queue process --max 100`
    Redrive {
        /// The queue whose dead letters go back.
        #[arg(long)]
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 1000)]
        max: usize,
        /// Print JSON instead of a line.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: DlqCommand) -> Result<()> {
    let (_, service) = operator_service().await?;
    let known = service.dead_letter_queues();
    let check = |queue: &String| -> Result<()> {
        if !known.contains(queue) {
            bail!(
                "no queue {queue:?} here; the queues are: {}",
                known.join(", ")
            );
        }
        Ok(())
    };
    match command {
        DlqCommand::List { queue, limit, json } => {
            let queues = match queue {
                Some(q) => {
                    check(&q)?;
                    vec![q]
                }
                None => known.clone(),
            };
            let letters = service.dead_letters(&queues, limit).await?;
            if json {
                let map: serde_json::Map<String, serde_json::Value> = letters
                    .iter()
                    .map(|(q, l)| Ok((q.clone(), serde_json::to_value(l)?)))
                    .collect::<Result<_>>()?;
                println!("{}", serde_json::to_string_pretty(&map)?);
                return Ok(());
            }
            for (queue, letters) in &letters {
                println!("{queue}: {} dead letter(s) shown", letters.len());
                for letter in letters {
                    let reason = letter.reason.as_ref().map_or_else(
                        || {
                            "died: moved by SQS after its receive limit (the function stopped on every attempt: see its log)".to_owned()
                        },
                        ToString::to_string,
                    );
                    let body: String = letter.body.chars().take(120).collect();
                    println!("  {}  {reason}\n    {body}", letter.id);
                }
            }
            Ok(())
        }
        DlqCommand::Redrive { queue, max, json } => {
            check(&queue)?;
            let moved = service.redrive(&queue, max).await?;
            if json {
                println!("{}", serde_json::json!({"queue": queue, "redriven": moved}));
            } else {
                println!("{queue}: {moved} dead letter(s) moved back onto the queue");
            }
            Ok(())
        }
    }
}
