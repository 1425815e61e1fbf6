//! `imgest restore IMAGE_ID`: a collected photo stored again from the original the versioned
//! bucket kept (see `imgest_flows::restore`).

use anyhow::{Result, bail};
use imgest_core::domain::ImageId;
use imgest_flows::restore::Restored;
use imgest_settings::Backend;

use crate::commands::operator_service;

pub async fn run(image_id: &str, json: bool) -> Result<()> {
    let id = ImageId::parse(image_id)?;
    let (settings, service) = operator_service().await?;
    let restored = service.restore(&id).await?;
    if json {
        println!("{}", serde_json::to_string(&restored)?);
    }
    match restored {
        Restored::Live => {
            if !json {
                println!("{id} has a live record: nothing to restore");
            }
            Ok(())
        }
        Restored::NothingKept => match settings.backend {
            Backend::Embedded { .. } => bail!(
                "no deleted original of {id} is kept: the embedded store keeps no deleted files"
            ),
            Backend::Aws(_) => bail!(
                "no deleted original of {id} is kept: never stored, erased, or deleted longer \
                 ago than the bucket keeps versions (DeletedOriginalsRetentionDays)"
            ),
        },
        Restored::Restored {
            from,
            deleted_at,
            generation,
            variants,
        } => {
            if !json {
                println!(
                    "{id} restored from {from} (deleted at {deleted_at}): a new record under \
                     generation {generation} with {}; link it to its offers again",
                    variants.join(", ")
                );
            }
            Ok(())
        }
    }
}
