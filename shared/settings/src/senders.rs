//! Who sent a queue's message, and what it may ask for: the crawl requests partners send
//! through the intake queue (`IMGEST_INTAKE_SENDERS`), the messages the stack's own functions
//! send each other (`IMGEST_STACK_ROLES`), and the operators whose redrives keep each
//! message's original sender (`IMGEST_REDRIVERS`).
//!
//! SQS tells the receiver each message's `SenderId`: the unique id of the IAM identity that
//! sent it (an IAM user's `AIDA…`; for an assumed role `AROA…:{session}`, matched on the role
//! id before the `:`). Nothing else about a message says who sent it: a message's own
//! attributes are the sender's words. A message's `client_id` is believed only when its
//! sender is listed for that client; nothing is listed by default, so no queued crawl is
//! accepted until the operator says whose may be (partners without an AWS identity send
//! `POST /v1/crawl`, where their token names their client). The internal queues (fetch,
//! process, settle, backfill) take only what the stack's roles sent.
//!
//! A redrive (`imgest dlq redrive`) sends the messages again as the operator: a queue then
//! believes the original sender the message carries (`imgest.sender`) only when the
//! redriver is listed in `IMGEST_REDRIVERS`.

use std::collections::{BTreeSet, HashMap, HashSet};

use imgest_core::domain::ClientId;

/// The clients one sender may act for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clients {
    /// `*`: any client (the marketplace's own crawler service).
    Any,
    Only(BTreeSet<ClientId>),
}

/// Which list a bad entry came from (to name its variable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendersList {
    Intake,
    Redrivers,
    StackRoles,
}

/// Each intake sender's clients, the redrivers and the stack's roles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSenders {
    senders: HashMap<String, Clients>,
    redrivers: HashSet<String>,
    stack: HashSet<String>,
}

impl QueueSenders {
    /// `senders`: `ID=client,client;ID=*` (blank entries ignored); `redrivers` and
    /// `stack_roles`: `ID,ID`.
    pub fn parse(
        senders: &str,
        redrivers: &str,
        stack_roles: &str,
    ) -> Result<Self, (SendersList, String)> {
        let expected = "expected SENDER_ID=client,client;SENDER_ID=* (an IAM user's or role's unique id, e.g. AROAEXAMPLEID=acme)";
        let bad = |e: String| (SendersList::Intake, e);
        let mut out = Self::default();
        for entry in senders.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let (id, clients) = entry
                .split_once('=')
                .ok_or_else(|| bad(format!("{entry:?}: {expected}")))?;
            let id = principal_id(id.trim())
                .ok_or_else(|| bad(format!("{id:?} is not a sender id; {expected}")))?;
            let clients = match clients.trim() {
                "*" => Clients::Any,
                list => Clients::Only(
                    list.split(',')
                        .map(str::trim)
                        .filter(|c| !c.is_empty())
                        .map(|c| {
                            ClientId::parse(c).map_err(|e| bad(format!("{id}: {e}; {expected}")))
                        })
                        .collect::<Result<_, _>>()?,
                ),
            };
            if matches!(&clients, Clients::Only(c) if c.is_empty()) {
                return Err(bad(format!("{id} lists no client; {expected}")));
            }
            if out.senders.insert(id.to_owned(), clients).is_some() {
                return Err(bad(format!("{id} is listed twice")));
            }
        }
        out.redrivers = ids(redrivers).map_err(|e| (SendersList::Redrivers, e))?;
        out.stack = ids(stack_roles).map_err(|e| (SendersList::StackRoles, e))?;
        Ok(out)
    }

    /// Whether no intake sender is listed (no queued crawl is accepted).
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    /// Whether the stack's roles are known (without them no internal queue takes anything).
    pub fn knows_stack_roles(&self) -> bool {
        !self.stack.is_empty()
    }

    /// Who a message is from: the principal of its `SenderId`, or the original sender it
    /// carries when a listed redriver sent it (`None` without a `SenderId`). This is the
    /// principal every decision about the message uses, and the one its dead letter names.
    pub fn sender_of<'a>(
        &self,
        sender_id: Option<&'a str>,
        original: Option<&'a str>,
    ) -> Option<&'a str> {
        let sender = principal_id(sender_id?)?;
        match original.and_then(principal_id) {
            Some(original) if self.redrivers.contains(sender) => Some(original),
            _ => Some(sender),
        }
    }

    /// Whether `sender` (a principal, see [`sender_of`](Self::sender_of)) is one of the
    /// stack's roles: its message is one function's to another, and its `imgest.*`
    /// attributes are believed.
    pub fn is_stack_role(&self, sender: Option<&str>) -> bool {
        sender.is_some_and(|s| self.stack.contains(s))
    }

    /// Whether `sender` (a principal, see [`sender_of`](Self::sender_of)) may send crawl
    /// requests for `client`.
    pub fn may_act_for(&self, sender: &str, client: &ClientId) -> bool {
        match self.senders.get(sender) {
            Some(Clients::Any) => true,
            Some(Clients::Only(clients)) => clients.contains(client),
            None => false,
        }
    }
}

/// `ID,ID` as principals.
fn ids(list: &str) -> Result<HashSet<String>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|id| {
            principal_id(id)
                .map(str::to_owned)
                .ok_or_else(|| format!("{id:?} is not an IAM user's or role's unique id"))
        })
        .collect()
}

/// The principal of a sender id: the id before a role session's `:`, if it looks like one
/// (letters and digits, 1 to 128 of them).
pub fn principal_id(sender_id: &str) -> Option<&str> {
    let id = sender_id.split(':').next()?;
    (!id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn client(c: &str) -> ClientId {
        ClientId::parse(c).unwrap()
    }

    #[test]
    fn a_sender_acts_for_its_listed_clients_only() {
        let rights = QueueSenders::parse(
            " AIDAPARTNERA=acme,acme-fr ; AROACRAWLER=* ;; ",
            "AROAOPERATOR",
            "",
        )
        .unwrap();
        assert!(rights.may_act_for("AIDAPARTNERA", &client("acme")));
        assert!(rights.may_act_for("AIDAPARTNERA", &client("acme-fr")));
        assert!(!rights.may_act_for("AIDAPARTNERA", &client("globex")));
        assert!(rights.may_act_for("AROACRAWLER", &client("globex")));
        assert!(!rights.may_act_for("AIDASTRANGER", &client("acme")));
        assert!(QueueSenders::default().is_empty());
        assert!(!QueueSenders::default().may_act_for("AIDAPARTNERA", &client("acme")));
    }

    #[test]
    fn a_role_is_its_role_id_whatever_its_session_and_only_redrivers_vouch() {
        let rights = QueueSenders::parse("AROACRAWLER=acme", "AROAOPERATOR", "").unwrap();
        assert_eq!(
            rights.sender_of(Some("AROACRAWLER:i-0abc"), None),
            Some("AROACRAWLER")
        );
        // A redriver's message is the original sender's...
        assert_eq!(
            rights.sender_of(Some("AROAOPERATOR:ops"), Some("AROACRAWLER:i-0abc")),
            Some("AROACRAWLER")
        );
        // ...anyone else's is their own, whatever it claims.
        assert_eq!(
            rights.sender_of(Some("AIDASTRANGER"), Some("AROACRAWLER")),
            Some("AIDASTRANGER")
        );
        assert_eq!(rights.sender_of(None, Some("AROACRAWLER")), None);
        assert_eq!(rights.sender_of(Some("not/an id"), None), None);
    }

    #[test]
    fn only_the_stack_roles_are_the_stack_and_a_redriver_vouches_only_for_what_it_redrives() {
        let rights = QueueSenders::parse("", "AROAOPERATOR", "AROAFETCH, AROAINTAKE").unwrap();
        assert!(rights.knows_stack_roles());
        let fetch = rights.sender_of(Some("AROAFETCH:imgest-fetch-0"), None);
        assert_eq!(fetch, Some("AROAFETCH"));
        assert!(rights.is_stack_role(fetch));
        // A partner naming a stack role as its original sender is still the partner.
        let forged = rights.sender_of(Some("AIDAPARTNER"), Some("AROAFETCH"));
        assert!(!rights.is_stack_role(forged));
        // An operator's redrive of a function's letter is that function's message...
        let redriven = rights.sender_of(Some("AROAOPERATOR:ops"), Some("AROAINTAKE:i"));
        assert!(rights.is_stack_role(redriven));
        // ...but the operator alone is not the stack.
        assert!(!rights.is_stack_role(rights.sender_of(Some("AROAOPERATOR:ops"), None)));
        assert!(!rights.is_stack_role(None));
        assert!(!QueueSenders::default().knows_stack_roles());
        assert!(!QueueSenders::default().is_stack_role(Some("AROAFETCH")));
    }

    #[test]
    fn bad_lists_are_refused() {
        for (senders, redrivers) in [
            ("AIDAX", ""),
            ("AIDAX=", ""),
            ("=acme", ""),
            ("AIDAX=acme;AIDAX=globex", ""),
            ("AIDAX=a b", ""),
            ("AI/DA=acme", ""),
            ("", "not an id"),
        ] {
            assert!(
                QueueSenders::parse(senders, redrivers, "").is_err(),
                "{senders:?} {redrivers:?}"
            );
        }
        for stack in ["AROA:x:y,a b", "ar/n"] {
            assert_eq!(
                QueueSenders::parse("", "", stack).map_err(|e| e.0),
                Err(SendersList::StackRoles)
            );
        }
    }
}
