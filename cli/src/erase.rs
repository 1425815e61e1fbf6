//! `imgest erase`: an operator's purge of an image (every offer of every client, every seller's
//! upload, the record, every file and stored version, the CDN), or its receipts (`--status`).
//! Runs the flow here, with the operator's rights (on AWS, the erasure's own role is the
//! functions'; this is the operator's).

use anyhow::{Context, Result};

use super::commands::operator_service;
use imgest_core::domain::ImageId;
use imgest_flows::erase::{Erasure, Receipt};

pub async fn run(
    image_id: String,
    block: bool,
    reason: Option<String>,
    status: bool,
    json: bool,
) -> Result<()> {
    let id = ImageId::parse(&image_id).context("imgest erase IMAGE_ID")?;
    let (_, service) = operator_service().await?;
    let service = service.erasing_files_here();
    if status {
        let status = service.erasure_status(&id).await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&status)?);
            return Ok(());
        }
        println!(
            "image {id}: {} erasure(s){}{}{}",
            status.receipts.len(),
            if status.blocked { ", blocked" } else { "" },
            if status.files_pending {
                ", files waiting for the erasure function"
            } else {
                ""
            },
            if status.awaiting_offers {
                ", a seller's erasure waiting for offers to drop it"
            } else {
                ""
            },
        );
        for receipt in &status.receipts {
            println!("  {}", line(receipt));
        }
        return Ok(());
    }
    let erasure = service.purge(&id, block, reason).await?;
    match &erasure {
        Erasure::Erased { receipt } if json => {
            println!("{}", serde_json::to_string_pretty(receipt)?);
        }
        Erasure::Erased {
            receipt: Some(receipt),
        } => println!("image {id}: {}", line(receipt)),
        Erasure::Erased { receipt: None } => println!("image {id}: erased"),
        Erasure::Kept { .. } => anyhow::bail!("image {id}: still referenced; run it again"),
    }
    Ok(())
}

/// `imgest erase --pending`: the erasures under way, worked through once.
pub async fn pending(json: bool) -> Result<()> {
    let (_, service) = operator_service().await?;
    let report = service.erasing_files_here().erase_pending().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "erase: {} images' files erased, {} waiting erasures settled, {} failed (left filed; their errors are logged)",
            report.erased, report.settled, report.failed
        );
    }
    if report.failed > 0 {
        anyhow::bail!("{} erasure(s) under way failed", report.failed);
    }
    Ok(())
}

/// One receipt on one line.
fn line(r: &Receipt) -> String {
    format!(
        "erased at {} by the {:?} ({} generation(s), {} files, {} earlier versions, {} offers of {} client(s) told, {} uploads removed{}{}){}",
        humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH
                + std::time::Duration::from_millis(r.erased_at.as_millis().unsigned_abs())
        ),
        r.by,
        r.generations.len(),
        r.files,
        r.versions,
        r.offers_unlinked,
        r.clients_told.len(),
        r.uploaders_removed,
        if r.blocked { ", blocked" } else { "" },
        r.cdn_invalidation
            .as_deref()
            .map(|i| format!(", CDN invalidation {i}"))
            .unwrap_or_default(),
        r.reason
            .as_deref()
            .map(|why| format!(": {why}"))
            .unwrap_or_default(),
    )
}
