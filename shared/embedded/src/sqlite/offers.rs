//! `OfferLinks` on the `offers` and `offer_photos` tables, keeping `images.link_count` and the
//! orphan expiry in step inside the same transaction.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, params};

use super::images::{commit, immediate, select_many};
use super::{SqliteStore, sql_error};
use imgest_core::domain::{ClientId, ImageId, OfferKey, Timestamp};
use imgest_core::ports::{LinkError, OfferLinks, OfferPage, PhotoListPage, StoreError};

/// The `(client_id, offer_id)` columns of an offer: `''` is the shared namespace.
fn columns(offer: &OfferKey) -> (&str, &str) {
    (
        offer.tenant().client().map_or("", |c| c.as_str()),
        offer.id().as_str(),
    )
}

/// The offer's photo ids in order, or `None` if the offer does not exist (one statement, so
/// one consistent read).
fn current_photos(conn: &Connection, offer: &OfferKey) -> Result<Option<Vec<String>>, StoreError> {
    let (client, id) = columns(offer);
    let rows = conn
        .prepare_cached(
            "SELECT p.image_id FROM offers o \
             LEFT JOIN offer_photos p ON p.client_id = o.client_id AND p.offer_id = o.offer_id \
             WHERE o.client_id = ?1 AND o.offer_id = ?2 ORDER BY p.position",
        )
        .and_then(|mut stmt| {
            stmt.query_map([client, id], |r| r.get::<_, Option<String>>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sql_error("reading an offer's photos", e))?;
    if rows.is_empty() {
        return Ok(None);
    }
    // An offer without photos is one row with a NULL image id.
    Ok(Some(rows.into_iter().flatten().collect()))
}

fn link(conn: &Connection, image: &str, now: Timestamp) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE images SET link_count = link_count + 1, expires_at = NULL, last_update = ?2 \
         WHERE id = ?1",
    )
    .and_then(|mut stmt| stmt.execute(params![image, now.as_millis()]))
    .map(drop)
    .map_err(|e| sql_error("linking an image", e))
}

/// One link fewer; the last one gone starts the orphan expiry.
fn unlink(
    conn: &Connection,
    image: &str,
    now: Timestamp,
    orphan_ttl: Duration,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE images SET link_count = link_count - 1, last_update = ?2, \
         expires_at = CASE WHEN link_count <= 1 THEN ?3 ELSE expires_at END \
         WHERE id = ?1 AND link_count > 0",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            image,
            now.as_millis(),
            now.plus(orphan_ttl).as_millis()
        ])
    })
    .map(drop)
    .map_err(|e| sql_error("unlinking an image", e))
}

fn set_photos_tx(
    conn: &mut Connection,
    offer: &OfferKey,
    images: &[ImageId],
    now: Timestamp,
    orphan_ttl: Duration,
) -> Result<(), LinkError> {
    // The port promises distinct ids; a repeated one is linked once, at its first position.
    let mut seen = HashSet::with_capacity(images.len());
    let wanted: Vec<&ImageId> = images
        .iter()
        .filter(|id| seen.insert(id.as_str()))
        .collect();
    let tx = immediate(conn)?;
    let owned: Vec<ImageId> = wanted.iter().map(|id| (*id).clone()).collect();
    let live: HashSet<String> = select_many(&tx, &owned)?
        .into_iter()
        .filter(|r| r.is_live(now))
        .map(|r| String::from(r.id))
        .collect();
    if let Some(unknown) = wanted.iter().find(|id| !live.contains(id.as_str())) {
        return Err(LinkError::UnknownImage((*unknown).clone()));
    }
    let old = current_photos(&tx, offer)?.unwrap_or_default();
    let old_set: HashSet<&str> = old.iter().map(String::as_str).collect();
    let (client, offer_id) = columns(offer);
    tx.execute(
        "INSERT INTO offers (client_id, offer_id, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (client_id, offer_id) DO UPDATE SET updated_at = excluded.updated_at",
        params![client, offer_id, now.as_millis()],
    )
    .map_err(|e| sql_error("writing an offer", e))?;
    tx.execute(
        "DELETE FROM offer_photos WHERE client_id = ?1 AND offer_id = ?2",
        [client, offer_id],
    )
    .map_err(|e| sql_error("replacing an offer's photos", e))?;
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO offer_photos (client_id, offer_id, position, image_id) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(|e| sql_error("replacing an offer's photos", e))?;
        for (position, id) in (0_i64..).zip(&wanted) {
            insert
                .execute(params![client, offer_id, position, id.as_str()])
                .map_err(|e| sql_error("replacing an offer's photos", e))?;
        }
    }
    for id in wanted.iter().filter(|id| !old_set.contains(id.as_str())) {
        link(&tx, id.as_str(), now)?;
    }
    for id in old.iter().filter(|id| !seen.contains(id.as_str())) {
        unlink(&tx, id, now, orphan_ttl)?;
    }
    commit(tx)?;
    Ok(())
}

fn delete_offer_tx(
    conn: &mut Connection,
    offer: &OfferKey,
    now: Timestamp,
    orphan_ttl: Duration,
) -> Result<bool, StoreError> {
    let tx = immediate(conn)?;
    let Some(old) = current_photos(&tx, offer)? else {
        return Ok(false);
    };
    let (client, offer_id) = columns(offer);
    tx.execute(
        "DELETE FROM offer_photos WHERE client_id = ?1 AND offer_id = ?2",
        [client, offer_id],
    )
    .map_err(|e| sql_error("deleting an offer's photos", e))?;
    tx.execute(
        "DELETE FROM offers WHERE client_id = ?1 AND offer_id = ?2",
        [client, offer_id],
    )
    .map_err(|e| sql_error("deleting an offer", e))?;
    for id in &old {
        unlink(&tx, id, now, orphan_ttl)?;
    }
    commit(tx)?;
    Ok(true)
}

#[async_trait]
impl OfferLinks for SqliteStore {
    async fn set_photos(
        &self,
        offer: &OfferKey,
        images: &[ImageId],
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<(), LinkError> {
        let (offer, images) = (offer.clone(), images.to_vec());
        self.run(move |conn| set_photos_tx(conn, &offer, &images, now, orphan_ttl))
            .await
    }

    async fn scan_photo_lists(
        &self,
        segment: u32,
        _segments: u32,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PhotoListPage, StoreError> {
        // One part: SQLite walks the offers in key order, cheaply, from the cursor.
        if segment > 0 {
            return Ok(PhotoListPage::default());
        }
        let (client, offer) = match cursor {
            Some(c) => serde_json::from_str::<(String, String)>(c).map_err(|_| {
                StoreError::corrupt(format!("sqlite: offer scan cursor {c:?} is not ours"))
            })?,
            None => (String::new(), String::new()),
        };
        let limit = limit.max(1);
        self.run(move |conn| {
            let rows = conn
                .prepare_cached(
                    "SELECT o.client_id, o.offer_id, p.image_id FROM                      (SELECT client_id, offer_id FROM offers                       WHERE (client_id, offer_id) > (?1, ?2)                       ORDER BY client_id, offer_id LIMIT ?3) o                      LEFT JOIN offer_photos p ON p.client_id = o.client_id AND p.offer_id = o.offer_id                      ORDER BY o.client_id, o.offer_id, p.position",
                )
                .and_then(|mut stmt| {
                    stmt.query_map(params![client, offer, super::sql_limit(limit)], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, Option<String>>(2)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(|e| sql_error("scanning offers", e))?;
            let mut page = PhotoListPage::default();
            let mut last: Option<(String, String)> = None;
            let mut offers = 0;
            for (client, offer, image) in rows {
                if last.as_ref() != Some(&(client.clone(), offer.clone())) {
                    page.lists.push(Vec::new());
                    offers += 1;
                    last = Some((client, offer));
                }
                if let (Some(image), Some(list)) = (image, page.lists.last_mut()) {
                    list.push(ImageId::parse(&image).map_err(|_| {
                        StoreError::corrupt(format!("sqlite: invalid image id {image:?} in an offer"))
                    })?);
                }
            }
            if offers >= limit {
                page.next = last
                    .map(|key| serde_json::to_string(&key))
                    .transpose()
                    .map_err(|e| StoreError::backend("encoding an offer scan cursor", e))?;
            }
            Ok(page)
        })
        .await
    }

    async fn offers_linking(
        &self,
        image: &ImageId,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<OfferPage, StoreError> {
        let (client, offer) = match cursor {
            Some(c) => serde_json::from_str::<(String, String)>(c).map_err(|_| {
                StoreError::BadCursor(format!("sqlite: offer cursor {c:?} is not ours"))
            })?,
            None => (String::new(), String::new()),
        };
        let image = image.as_str().to_owned();
        let limit = limit.max(1);
        self.run(move |conn| {
            // `offer_photos_by_image`: the reverse index.
            let rows = conn
                .prepare_cached(
                    "SELECT client_id, offer_id FROM offer_photos \
                     WHERE image_id = ?1 AND (client_id, offer_id) > (?2, ?3) \
                     ORDER BY client_id, offer_id LIMIT ?4",
                )
                .and_then(|mut stmt| {
                    stmt.query_map(
                        params![image, client, offer, super::sql_limit(limit)],
                        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
                    )?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(|e| sql_error("finding the offers of an image", e))?;
            let mut page = OfferPage::default();
            for (client, offer) in &rows {
                let key = if client.is_empty() {
                    offer.clone()
                } else {
                    format!("{client}/{offer}")
                };
                page.offers.push(OfferKey::parse(&key).map_err(|_| {
                    StoreError::corrupt(format!("sqlite: invalid offer key {key:?}"))
                })?);
            }
            if rows.len() >= limit {
                page.next = rows
                    .last()
                    .map(serde_json::to_string)
                    .transpose()
                    .map_err(|e| StoreError::backend("encoding an offer cursor", e))?;
            }
            Ok(page)
        })
        .await
    }

    async fn linking_clients(&self, image: &ImageId) -> Result<Vec<ClientId>, StoreError> {
        let image = image.clone();
        self.run(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT DISTINCT client_id FROM offer_photos \
                     WHERE image_id = ?1 AND client_id != ''",
                )
                .map_err(|e| sql_error("reading an image's clients", e))?;
            let names = statement
                .query_map(params![image.as_str()], |row| row.get::<_, String>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| sql_error("reading an image's clients", e))?;
            names
                .iter()
                .map(|c| {
                    ClientId::parse(c).map_err(|_| {
                        StoreError::corrupt(format!("image {image}: invalid client id {c:?}"))
                    })
                })
                .collect()
        })
        .await
    }

    async fn photos(&self, offer: &OfferKey) -> Result<Option<Vec<ImageId>>, StoreError> {
        let offer = offer.clone();
        self.run(move |conn| {
            current_photos(conn, &offer)?
                .map(|ids| {
                    ids.iter()
                        .map(|id| {
                            ImageId::parse(id).map_err(|_| {
                                StoreError::corrupt(format!(
                                    "offer {offer}: invalid image id {id:?}"
                                ))
                            })
                        })
                        .collect()
                })
                .transpose()
        })
        .await
    }

    async fn delete_offer(
        &self,
        offer: &OfferKey,
        now: Timestamp,
        orphan_ttl: Duration,
    ) -> Result<bool, StoreError> {
        let offer = offer.clone();
        self.run(move |conn| delete_offer_tx(conn, &offer, now, orphan_ttl))
            .await
    }
}
