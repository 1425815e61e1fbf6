//! Sending work to named queues: SQS on AWS (a delay beyond SQS's 15 minutes chained over
//! hops), the embedded task queue locally; and the messages given up on, kept with their
//! reasons.

use std::time::Duration;

use async_trait::async_trait;

use super::{QueueCounts, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    pub body: String,
    /// Delivered no earlier than this from now.
    pub delay: Duration,
    /// String attributes beside the body (SQS message attributes: what a dead letter's reason
    /// is kept in, what a topic's subscriptions filter on). The embedded queue keeps none.
    pub attributes: Vec<(String, String)>,
}

impl OutgoingMessage {
    /// A message due now.
    pub fn now(body: impl Into<String>) -> Self {
        Self::delayed(body, Duration::ZERO)
    }

    /// A message due `delay` from now.
    pub fn delayed(body: impl Into<String>, delay: Duration) -> Self {
        Self {
            body: body.into(),
            delay,
            attributes: Vec::new(),
        }
    }

    /// With the attribute `name` set to `value`.
    pub fn with_attribute(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.push((name.into(), value.into()));
        self
    }
}

/// Why a message was given up on: a stable kind that scripts and alarms may match on, and
/// what happened in words. Neither carries credentials or bodies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reason {
    /// `unusable` (it can never be read), `forbidden` (its sender may not ask for it), or the
    /// kind of the error that failed it every time (`storage_unavailable`, ...).
    pub kind: String,
    pub message: String,
}

impl Reason {
    /// The kind of a message that can never be read as what its queue carries.
    pub const UNUSABLE: &str = "unusable";
    /// The kind of a message whose sender may not ask for what it asks.
    pub const FORBIDDEN: &str = "forbidden";
    /// The kind a listing and a redrive give a message SQS moved on its own after its receive
    /// limit, with no reason of ours (the function stopped on every attempt before it could
    /// say; whatever the message claims of itself is not read).
    pub const DIED: &str = "died";

    /// The longest message kept: a reason says why, it does not carry a payload.
    pub const MAX_MESSAGE: usize = 1024;

    /// `kind` and `message`, the message cut to [`MAX_MESSAGE`](Self::MAX_MESSAGE) bytes (at
    /// a character boundary).
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > Self::MAX_MESSAGE {
            let mut end = Self::MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        Self {
            kind: kind.into(),
            message,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Which dead letters a redrive moves back onto their queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RedriveKinds {
    /// Every kind but `forbidden`: a message refused for its sender goes back only when the
    /// operator asks for it by name (its sender's rights changed, say).
    #[default]
    Routine,
    /// Only letters of these kinds ([`Reason::DIED`] for those SQS moved without one).
    Only(Vec<String>),
}

impl RedriveKinds {
    /// Whether a letter of `kind` (`None`: moved without a reason) goes back.
    pub fn takes(&self, kind: Option<&str>) -> bool {
        let kind = kind.unwrap_or(Reason::DIED);
        match self {
            Self::Routine => kind != Reason::FORBIDDEN,
            Self::Only(kinds) => kinds.iter().any(|k| k == kind),
        }
    }
}

/// A message given up on, on its way to its queue's dead letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    pub body: String,
    pub reason: Reason,
    /// Deliveries so far (SQS's receive count).
    pub attempts: u32,
    /// The message's id on its queue.
    pub message_id: String,
    /// Who sent it, as the decision about it took it (SQS's `SenderId`, or the original
    /// sender a listed redriver vouched for): kept so that a redrive, sent by an operator,
    /// still names the original sender.
    pub sender: Option<String>,
}

/// A message its queue gave up on, as its dead-letter list holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeadMessage {
    /// The task's key (locally) or the message id (SQS).
    pub id: String,
    pub body: String,
    /// Why it was given up on. `None` for a message SQS moved on its own after its receive
    /// limit: the function stopped (timed out or crashed) on every attempt before it could say.
    pub reason: Option<Reason>,
    pub attempts: Option<u32>,
    /// When it failed (locally) or was first sent (SQS), in ms since the epoch.
    pub sent_at_ms: Option<i64>,
    /// The original sender (see [`Letter::sender`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
}

/// Who reads a queue that fans out to subscribers (the results topic on AWS): one
/// subscription, and the clients its filter lets through.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Subscriber {
    /// The subscription's id (its ARN on SNS).
    pub subscription: String,
    /// Where it delivers (a queue's ARN).
    pub endpoint: String,
    /// The one client whose messages its filter takes, or `None` when its filter does not
    /// name exactly one client by the `client_id` attribute (no filter, another attribute, a
    /// pattern, several clients): such a subscriber may read other clients' messages.
    pub client: Option<String>,
}

#[async_trait]
pub trait MessageSender: Send + Sync {
    /// Sends the messages to the queue with this logical name (`StoreError::NotFound` for a
    /// name the sender does not know). Batches as the backend allows.
    async fn send(&self, queue: &str, messages: &[OutgoingMessage]) -> Result<(), StoreError>;

    /// Puts `letters` on the dead-letter list of the queue with this logical name, each with
    /// its reason (`StoreError::NotFound` for a queue without one). Once this returns `Ok`,
    /// the caller may acknowledge the originals.
    async fn dead_letter(&self, queue: &str, letters: &[Letter]) -> Result<(), StoreError>;

    /// How many messages the queue holds, by state, and how many were dead-lettered
    /// (approximate on SQS, as its attributes are).
    async fn counts(&self, queue: &str) -> Result<QueueCounts, StoreError>;

    /// Up to `limit` of the queue's dead letters (locally the newest first).
    async fn dead_letters(&self, queue: &str, limit: usize)
    -> Result<Vec<DeadMessage>, StoreError>;

    /// Moves up to `max` of the queue's dead letters that `kinds` takes back onto the queue,
    /// due now; returns how many. Each goes back with its original sender (a redriver's
    /// message names it), and nothing else a message said of itself. A handler must expect a
    /// redriven message to be one it has seen (they are all idempotent).
    async fn redrive(
        &self,
        queue: &str,
        max: usize,
        kinds: &RedriveKinds,
    ) -> Result<u64, StoreError>;

    /// The subscribers of a queue that fans out to them (`None` for one that does not: the
    /// embedded queues, SQS queues).
    async fn subscribers(&self, queue: &str) -> Result<Option<Vec<Subscriber>>, StoreError> {
        let _ = queue;
        Ok(None)
    }
}
