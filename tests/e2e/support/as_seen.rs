//! Documents as one process sees them (a test double in front of a real adapter): a process
//! that dies at a chosen step, or whose eventually consistent reads are behind.

/// The documents as one process sees them: one that dies right after a finisher recorded a
/// URL's outcome (`dies`: its first walk of the joined crawls fails, the process gone before
/// it tells them), or one whose peeks of a URL's record are behind (`stale`: DynamoDB's
/// eventually consistent read, held at a snapshot).
pub struct AsSeen {
    inner: std::sync::Arc<dyn imgest_core::ports::Documents>,
    dies: bool,
    died: std::sync::atomic::AtomicBool,
    /// A URL record's key and what its peeks answer.
    stale: Option<(String, Option<imgest_core::ports::StoredDocument>)>,
}

impl AsSeen {
    /// `inner` as it is (nothing dies, nothing is behind).
    pub fn over(inner: std::sync::Arc<dyn imgest_core::ports::Documents>) -> Self {
        Self {
            inner,
            dies: false,
            died: false.into(),
            stale: None,
        }
    }

    /// Its first walk of a group fails, as a process that died.
    pub fn dying(self) -> Self {
        Self { dies: true, ..self }
    }

    /// Its peeks of the URL record `key` answer `seen`.
    pub fn behind(self, key: &str, seen: Option<imgest_core::ports::StoredDocument>) -> Self {
        Self {
            stale: Some((key.to_owned(), seen)),
            ..self
        }
    }

    fn inner(&self) -> &dyn imgest_core::ports::Documents {
        self.inner.as_ref()
    }
}

#[async_trait::async_trait]
impl imgest_core::ports::Documents for AsSeen {
    async fn get_document(
        &self,
        kind: &str,
        key: &str,
        now: imgest_core::domain::Timestamp,
    ) -> Result<Option<imgest_core::ports::StoredDocument>, imgest_core::ports::StoreError> {
        self.inner().get_document(kind, key, now).await
    }

    async fn peek_document(
        &self,
        kind: &str,
        key: &str,
        now: imgest_core::domain::Timestamp,
    ) -> Result<Option<imgest_core::ports::StoredDocument>, imgest_core::ports::StoreError> {
        match &self.stale {
            Some((stale, seen)) if kind == "url" && key == stale => Ok(seen.clone()),
            _ => self.inner().peek_document(kind, key, now).await,
        }
    }

    async fn put_document(
        &self,
        kind: &str,
        key: &str,
        body: &str,
        expected: Option<u64>,
        expires_at: imgest_core::domain::Timestamp,
        now: imgest_core::domain::Timestamp,
    ) -> Result<u64, imgest_core::ports::StoreError> {
        self.inner()
            .put_document(kind, key, body, expected, expires_at, now)
            .await
    }

    async fn scan_documents(
        &self,
        kind: &str,
        cursor: Option<&str>,
        limit: usize,
        now: imgest_core::domain::Timestamp,
    ) -> Result<imgest_core::ports::DocumentPage, imgest_core::ports::StoreError> {
        self.inner().scan_documents(kind, cursor, limit, now).await
    }

    async fn put_member(
        &self,
        kind: &str,
        group: &str,
        member: &str,
        body: &str,
        expires_at: imgest_core::domain::Timestamp,
        now: imgest_core::domain::Timestamp,
    ) -> Result<(), imgest_core::ports::StoreError> {
        self.inner()
            .put_member(kind, group, member, body, expires_at, now)
            .await
    }

    async fn list_members(
        &self,
        kind: &str,
        group: &str,
        cursor: Option<&str>,
        limit: usize,
        now: imgest_core::domain::Timestamp,
    ) -> Result<imgest_core::ports::MemberPage, imgest_core::ports::StoreError> {
        if self.dies && !self.died.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(imgest_core::ports::StoreError::Unavailable {
                message: "the process died".into(),
                source: None,
            });
        }
        self.inner()
            .list_members(kind, group, cursor, limit, now)
            .await
    }

    async fn delete_members(
        &self,
        kind: &str,
        group: &str,
        members: &[String],
    ) -> Result<(), imgest_core::ports::StoreError> {
        self.inner().delete_members(kind, group, members).await
    }

    async fn add_counts(
        &self,
        kind: &str,
        key: &str,
        bucket: i64,
        counts: &[(&str, u64)],
        expires_at: imgest_core::domain::Timestamp,
        now: imgest_core::domain::Timestamp,
    ) -> Result<(), imgest_core::ports::StoreError> {
        self.inner()
            .add_counts(kind, key, bucket, counts, expires_at, now)
            .await
    }

    async fn read_counts(
        &self,
        kind: &str,
        key: &str,
        from: i64,
        to: i64,
        now: imgest_core::domain::Timestamp,
    ) -> Result<Vec<imgest_core::ports::CountBucket>, imgest_core::ports::StoreError> {
        self.inner().read_counts(kind, key, from, to, now).await
    }
}
