//! The error every storage port returns; backend errors are translated at the adapter boundary.

/// A storage failure. Flows branch on `NotFound` (nothing there), `Conflict` (a conditional
/// write lost: read again, or the record read back decides) and `BadCursor` (a caller's cursor,
/// answered 400); the rest are reported, retried when [`is_retryable`](Self::is_retryable).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The key or record does not exist (S3 `NoSuchKey`, `io::ErrorKind::NotFound`, no row).
    #[error("not found: {0}")]
    NotFound(String),
    /// A conditional write lost (someone else changed the record first).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The backend failed in a way that a retry may fix (throttling, timeouts, a busy database).
    #[error("storage temporarily unavailable: {message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A walk's cursor that this store did not give out (cursors are opaque: one that does not
    /// parse is the caller's mistake, or a corrupt checkpoint).
    #[error("not a cursor of this store: {0}")]
    BadCursor(String),
    /// A write refused because the item would be larger than the backend allows (DynamoDB's
    /// 400 KB): the same write never succeeds, so whatever asked for it is dead-lettered with
    /// this kind (`item_too_large`), never retried or dropped.
    #[error("item too large: {what}")]
    TooLarge {
        what: String,
        /// The item's size, when the backend said it.
        bytes: Option<u64>,
    },
    /// The backend failed in a way that retrying will not fix (corrupt data, bad configuration).
    #[error("storage failure: {message}")]
    Backend {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    pub fn unavailable(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    pub fn backend(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::Backend {
            message: message.into(),
            source: None,
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Conflict(_))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::Unavailable { .. } => "storage_unavailable",
            Self::BadCursor(_) => "bad_cursor",
            Self::TooLarge { .. } => "item_too_large",
            Self::Backend { .. } => "storage_error",
        }
    }
}
