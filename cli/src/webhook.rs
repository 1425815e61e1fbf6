//! `imgest webhook set|show|rotate|remove`: a client's webhook endpoint, as the operator
//! registers it (the operator's `/v1/operator/webhooks/{client_id}` routes do the same). Works
//! on both backends; deliveries given up on are in `imgest dlq list --queue webhooks`.

use std::sync::Arc;

use anyhow::Result;
use clap::Subcommand;
use imgest_core::domain::ClientId;
use imgest_crawl::webhooks::WebhookView;
use imgest_crawl::{Crawler, Processing};

use crate::commands::operator_service;

#[derive(Subcommand)]
pub enum WebhookCommand {
    /// Register a client's endpoint, or move it (its secrets kept unless --secret is given);
    /// registering again re-enables an endpoint disabled by a 410. Prints the endpoint with its
    /// secret, to hand to the partner. Example: `imgest webhook set --client acme --url
    /// https://hooks.acme.example/imgest`
    Set {
        #[arg(long)]
        client: String,
        /// https (http only with IMGEST_ALLOW_PRIVATE_NETWORKS=true), resolving to public
        /// addresses.
        #[arg(long)]
        url: String,
        /// The secret to sign with (`whsec_` and 24 to 64 bytes in base64); a new one if absent.
        #[arg(long)]
        secret: Option<String>,
    },
    /// Print a client's endpoint and the secrets that sign now.
    Show {
        #[arg(long)]
        client: String,
    },
    /// Add a new secret; the old ones sign beside it for --overlap (at most 7 days), so the
    /// partner verifies with either while it changes over. Example: `imgest webhook rotate
    /// --client acme --overlap 24h`
    Rotate {
        #[arg(long)]
        client: String,
        #[arg(long, default_value = "24h")]
        overlap: humantime::Duration,
    },
    /// Remove a client's endpoint: nothing more is delivered (its results stay in its feed).
    Remove {
        #[arg(long)]
        client: String,
    },
}

pub async fn run(command: WebhookCommand) -> Result<()> {
    let (settings, service) = operator_service().await?;
    let crawler = Crawler::new(
        Arc::new(service),
        settings.crawl.clone(),
        Processing::Inline,
    );
    match command {
        WebhookCommand::Set {
            client,
            url,
            secret,
        } => {
            let client = ClientId::parse(&client)?;
            print(
                &crawler
                    .register_webhook(&client, &url, secret.as_deref())
                    .await?,
            )
        }
        WebhookCommand::Show { client } => {
            let client = ClientId::parse(&client)?;
            match crawler.webhook(&client).await? {
                Some(view) => print(&view),
                None => anyhow::bail!("client {client} has no webhook endpoint"),
            }
        }
        WebhookCommand::Rotate { client, overlap } => {
            let client = ClientId::parse(&client)?;
            print(
                &crawler
                    .rotate_webhook_secret(&client, overlap.into())
                    .await?,
            )
        }
        WebhookCommand::Remove { client } => {
            let client = ClientId::parse(&client)?;
            if crawler.remove_webhook(&client).await? {
                println!("client {client}: webhook endpoint removed");
                Ok(())
            } else {
                anyhow::bail!("client {client} has no webhook endpoint")
            }
        }
    }
}

fn print(view: &WebhookView) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(view)?);
    Ok(())
}
