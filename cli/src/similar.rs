//! `imgest similar IMAGE_ID`: a stored photo's near-duplicates among every stored image (the
//! operator's view; see `imgest_flows::similar`).

use anyhow::Result;
use imgest_core::domain::ImageId;
use imgest_flows::similar::Scope;

use crate::commands::operator_service;

pub async fn run(image_id: &str, json: bool) -> Result<()> {
    let id = ImageId::parse(image_id)?;
    let (_, service) = operator_service().await?;
    let found = service.similar(&id, &Scope::All).await?;
    if json {
        let matches: Vec<serde_json::Value> = found
            .matches
            .iter()
            .map(|m| {
                serde_json::json!({
                    "image_id": m.image_id.to_string(),
                    "distance": m.distance,
                    "signal": m.signal.as_str(),
                    "mirrored": m.mirrored,
                })
            })
            .collect();
        let out = serde_json::json!({
            "image_id": id.to_string(),
            "searched": found.searched,
            "matches": matches,
            "buckets_read": found.buckets_read,
            "entries_read": found.entries_read,
        });
        println!("{out}");
        return Ok(());
    }
    if !found.searched {
        println!(
            "{id} has no signature to look up with (stored before signatures were: \
             `imgest backfill start` adds them; or too flat to match on)"
        );
        return Ok(());
    }
    for m in &found.matches {
        let mirrored = if m.mirrored { ", mirrored" } else { "" };
        println!(
            "{}  {:>2} bits  {}{mirrored}",
            m.image_id,
            m.distance,
            m.signal.as_str()
        );
    }
    println!(
        "{} near-duplicate(s) of {id} ({} index buckets read, {} entries)",
        found.matches.len(),
        found.buckets_read,
        found.entries_read
    );
    Ok(())
}
