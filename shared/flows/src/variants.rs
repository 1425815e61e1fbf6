//! The confirmed variant set: which sizes an operator said the files should have. The sweep
//! deletes a size's files only once it is dropped from the confirmed set, never because the
//! configuration of the moment lacks it: a typo in `IMGEST_VARIANTS` (`lage=…`) then deletes
//! nothing, the misspelled size is made for new photos only, and the sweep reports the
//! records it kept (`variants_kept_unconfirmed`).
//!
//! `imgest variants status` compares the configuration with the confirmed set;
//! `imgest variants confirm` records the configured set, and refuses while it drops a
//! confirmed size unless that size is named with `--drop` (a deliberate change). A backfill
//! starts only under a confirmed set: it rewrites every record, and the sweep would then
//! delete the previous files. With no confirmed set yet (a store from before it was recorded),
//! the sweep retires nothing.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tracing::info;

use super::{FlowError, Service};
use imgest_core::domain::{Timestamp, VariantName};

/// Where the confirmed set is saved.
const CONFIRMED_CHECKPOINT: &str = "variants.confirmed";

/// The variant set an operator confirmed, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmedVariants {
    pub names: BTreeSet<VariantName>,
    pub confirmed_at: Timestamp,
}

/// The configuration against the confirmed set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VariantSetStatus {
    pub configured: BTreeSet<VariantName>,
    pub confirmed: Option<ConfirmedVariants>,
    /// Configured, not confirmed: made for new photos; a backfill needs them confirmed.
    pub added: Vec<VariantName>,
    /// Confirmed, not configured: their files stay until the drop is confirmed.
    pub dropped: Vec<VariantName>,
}

impl VariantSetStatus {
    /// Whether the configuration is the confirmed set.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed.is_some() && self.added.is_empty() && self.dropped.is_empty()
    }
}

impl Service {
    /// The confirmed set, if one was ever recorded.
    pub async fn confirmed_variants(&self) -> Result<Option<ConfirmedVariants>, FlowError> {
        let Some(raw) = self
            .ports
            .checkpoints
            .load_checkpoint(CONFIRMED_CHECKPOINT)
            .await?
        else {
            return Ok(None);
        };
        serde_json::from_str(&raw).map(Some).map_err(|e| {
            FlowError::Internal(format!("the confirmed variant set is unreadable: {e}"))
        })
    }

    /// The configured variant names.
    pub(crate) fn configured_variants(&self) -> BTreeSet<VariantName> {
        self.variants()
            .specs()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// The configuration compared with the confirmed set.
    pub async fn variant_set_status(&self) -> Result<VariantSetStatus, FlowError> {
        let configured = self.configured_variants();
        let confirmed = self.confirmed_variants().await?;
        let (added, dropped) = match &confirmed {
            None => (configured.iter().cloned().collect(), Vec::new()),
            Some(c) => (
                configured.difference(&c.names).cloned().collect(),
                c.names.difference(&configured).cloned().collect(),
            ),
        };
        Ok(VariantSetStatus {
            configured,
            confirmed,
            added,
            dropped,
        })
    }

    /// Records the configured set as confirmed. Refuses while it drops a confirmed size that
    /// `drop` does not name: dropping a size deletes its files everywhere.
    pub async fn confirm_variants(
        &self,
        drop: &[VariantName],
    ) -> Result<VariantSetStatus, FlowError> {
        let status = self.variant_set_status().await?;
        let unconfirmed: Vec<VariantName> = status
            .dropped
            .iter()
            .filter(|name| !drop.contains(name))
            .cloned()
            .collect();
        if !unconfirmed.is_empty() {
            return Err(FlowError::VariantDropUnconfirmed(unconfirmed));
        }
        let confirmed = ConfirmedVariants {
            names: status.configured.clone(),
            confirmed_at: self.ports.clock.now(),
        };
        let raw = serde_json::to_string(&confirmed)
            .map_err(|e| FlowError::Internal(format!("encoding the confirmed variants: {e}")))?;
        self.ports
            .checkpoints
            .save_checkpoint(CONFIRMED_CHECKPOINT, &raw)
            .await?;
        info!(names = ?confirmed.names, dropped = ?status.dropped, "variant set confirmed");
        self.variant_set_status().await
    }
}
