//! `imgest dlq list|redrive`: the messages every queue gave up on, with their reasons, and
//! moving them back once the cause is fixed. Works on both backends: the local task queue's
//! dead letters, or each SQS queue's dead-letter queue (the reason in each letter's
//! attributes).

use crate::commands::operator_service;
use anyhow::{Result, bail};
use clap::Subcommand;
use imgest_core::ports::RedriveKinds;

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
    /// Move a queue's dead letters back onto it, due now (every handler is idempotent): every
    /// kind but `forbidden` unless `--kind` names the kinds to move. Example: `imgest dlq
    /// redrive --queue process --max 100`
    Redrive {
        /// The queue whose dead letters go back.
        #[arg(long)]
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 1000)]
        max: usize,
        /// Only letters of this kind (repeat for several; `died` for those SQS moved without a
        /// reason). A `forbidden` letter, refused for its sender, goes back only when named.
        #[arg(long = "kind")]
        kinds: Vec<String>,
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
                    let sender = letter.sender.as_deref().unwrap_or("-");
                    let body: String = letter.body.chars().take(120).collect();
                    println!(
                        "  {}  sender {}  {}\n    {}",
                        shown(&letter.id),
                        shown(sender),
                        shown(&reason),
                        shown(&body)
                    );
                }
            }
            Ok(())
        }
        DlqCommand::Redrive {
            queue,
            max,
            kinds,
            json,
        } => {
            check(&queue)?;
            let filter = if kinds.is_empty() {
                RedriveKinds::Routine
            } else {
                RedriveKinds::Only(kinds.clone())
            };
            let moved = service.redrive_kinds(&queue, max, &filter).await?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"queue": queue, "redriven": moved, "kinds": kinds})
                );
            } else if kinds.is_empty() {
                println!(
                    "{queue}: {moved} dead letter(s) moved back onto the queue (forbidden ones left: name them with --kind forbidden)"
                );
            } else {
                println!(
                    "{queue}: {moved} dead letter(s) of kind {} moved back onto the queue",
                    kinds.join(", ")
                );
            }
            Ok(())
        }
    }
}

/// `text` for a terminal: control characters (a partner's body or sender may hold escape
/// sequences) escaped as Rust writes them, the rest as is.
fn shown(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(shown("plain text é"), "plain text é");
        assert_eq!(
            shown("\u{1b}[2J\u{1b}]0;owned\u{7}ok\r\n"),
            "\\u{1b}[2J\\u{1b}]0;owned\\u{7}ok\\r\\n"
        );
        assert!(!shown("a\u{9b}b\u{0}").chars().any(char::is_control));
    }
}
