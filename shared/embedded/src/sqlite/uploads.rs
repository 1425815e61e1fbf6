//! `UploadRecords` and `Checkpoints` on the `uploads` and `checkpoints` tables. An upload's
//! state is stored as its JSON form (one column, no schema change when states grow).

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, sql_error};
use imgest_core::domain::{Owner, Timestamp, UploadId};
use imgest_core::ports::{Checkpoints, StoreError, UploadRecord, UploadRecords, UploadState};

fn state_json(state: &UploadState) -> Result<String, StoreError> {
    serde_json::to_string(state).map_err(|e| StoreError::backend("encoding an upload state", e))
}

#[async_trait]
impl UploadRecords for SqliteStore {
    async fn create_upload(&self, record: &UploadRecord) -> Result<(), StoreError> {
        let state = state_json(&record.state)?;
        let r = record.clone();
        self.run(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO uploads (id, size, state, created_at, expires_at, owner) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        r.id.as_str(),
                        i64::try_from(r.size).unwrap_or(i64::MAX),
                        state,
                        r.created_at.as_millis(),
                        r.expires_at.as_millis(),
                        r.owner.as_ref().map(Owner::as_str)
                    ])
                })
                .map_err(|e| sql_error("creating an upload", e))?;
            if inserted == 0 {
                return Err(StoreError::Conflict(format!("upload {} exists", r.id)));
            }
            Ok(())
        })
        .await
    }

    async fn get_upload(&self, id: &UploadId) -> Result<Option<UploadRecord>, StoreError> {
        let id = id.clone();
        self.run(move |conn| {
            let row = conn
                .prepare_cached(
                    "SELECT size, state, created_at, expires_at, owner FROM uploads WHERE id = ?1",
                )
                .and_then(|mut st| {
                    st.query_row([id.as_str()], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, Option<String>>(4)?,
                        ))
                    })
                    .optional()
                })
                .map_err(|e| sql_error("reading an upload", e))?;
            let Some((size, state, created_at, expires_at, owner)) = row else {
                return Ok(None);
            };
            let state: UploadState = serde_json::from_str(&state).map_err(|e| {
                StoreError::backend(format!("upload {id} has an unreadable state"), e)
            })?;
            let owner = match owner {
                None => None,
                Some(raw) => Some(Owner::parse(&raw).ok_or_else(|| {
                    StoreError::corrupt(format!("upload {id} has an unreadable owner"))
                })?),
            };
            Ok(Some(UploadRecord {
                id,
                size: u64::try_from(size).unwrap_or(0),
                state,
                created_at: Timestamp::from_millis(created_at),
                expires_at: Timestamp::from_millis(expires_at),
                owner,
            }))
        })
        .await
    }

    async fn finish_upload(&self, id: &UploadId, state: &UploadState) -> Result<(), StoreError> {
        let state = state_json(state)?;
        let id = id.clone();
        self.run(move |conn| {
            let updated = conn
                .prepare_cached("UPDATE uploads SET state = ?2 WHERE id = ?1")
                .and_then(|mut st| st.execute(params![id.as_str(), state]))
                .map_err(|e| sql_error("finishing an upload", e))?;
            if updated == 0 {
                return Err(StoreError::NotFound(format!("upload {id}")));
            }
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl Checkpoints for SqliteStore {
    async fn load_checkpoint(&self, name: &str) -> Result<Option<String>, StoreError> {
        let name = name.to_owned();
        self.run(move |conn| {
            conn.prepare_cached("SELECT value FROM checkpoints WHERE name = ?1")
                .and_then(|mut st| {
                    st.query_row([name.as_str()], |r| r.get::<_, String>(0))
                        .optional()
                })
                .map_err(|e| sql_error("reading a checkpoint", e))
        })
        .await
    }

    async fn save_checkpoint(&self, name: &str, value: &str) -> Result<(), StoreError> {
        let (name, value) = (name.to_owned(), value.to_owned());
        self.run(move |conn| {
            conn.prepare_cached(
                "INSERT INTO checkpoints (name, value) VALUES (?1, ?2) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut st| st.execute(params![name, value]))
            .map(|_| ())
            .map_err(|e| sql_error("saving a checkpoint", e))
        })
        .await
    }
}
