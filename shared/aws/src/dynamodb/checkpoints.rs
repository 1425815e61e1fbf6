//! `Checkpoints` on checkpoint items: `pk = checkpoint#{name}`, `sk = checkpoint`, `value` S.

use async_trait::async_trait;

use super::DynamoStore;
use super::item::{Attrs, Expr, Item, key, s};
use crate::sdk_error::sdk_error;
use imgest_core::ports::{Checkpoints, StoreError};

const KIND: &str = "checkpoint";
const VALUE: &str = "value";

fn checkpoint_key(name: &str) -> Item {
    key(KIND, name)
}

#[async_trait]
impl Checkpoints for DynamoStore {
    async fn load_checkpoint(&self, name: &str) -> Result<Option<String>, StoreError> {
        let item = self
            .get(
                checkpoint_key(name),
                &format!("reading checkpoint {name:?}"),
            )
            .await?;
        let Some(item) = item else {
            return Ok(None);
        };
        let what = format!("checkpoint item {name:?}");
        Ok(Some(Attrs::new(&item, &what).s(VALUE)?.to_owned()))
    }

    async fn save_checkpoint(&self, name: &str, value: &str) -> Result<(), StoreError> {
        let mut e = Expr::new();
        e.set(VALUE, s(value));
        let parts = e.finish();
        self.update(checkpoint_key(name), parts, None)
            .send()
            .await
            .map_err(|e| sdk_error(format!("saving checkpoint {name:?}"), e))?;
        Ok(())
    }
}
