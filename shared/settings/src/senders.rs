//! Who may send crawl requests through the intake queue, and for which clients
//! (`IMGEST_INTAKE_SENDERS`), and who may redrive them (`IMGEST_INTAKE_REDRIVERS`).
//!
//! SQS tells the receiver each message's `SenderId`: the unique id of the IAM identity that
//! sent it (an IAM user's `AIDA…`; for an assumed role `AROA…:{session}`, matched on the role
//! id before the `:`). A message's `client_id` is believed only when its sender is listed for
//! that client; nothing is listed by default, so no queued crawl is accepted until the
//! operator says whose may be (partners without an AWS identity send `POST /v1/crawl`, where
//! their token names their client).
//!
//! A redrive (`imgest dlq redrive`) sends the messages again as the operator: the intake queue
//! then believes the original sender the message carries (`imgest.sender`) only when the
//! redriver is listed in `IMGEST_INTAKE_REDRIVERS`.

use std::collections::{BTreeSet, HashMap, HashSet};

use imgest_core::domain::ClientId;

/// The clients one sender may act for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clients {
    /// `*`: any client (the marketplace's own crawler service).
    Any,
    Only(BTreeSet<ClientId>),
}

/// Each sender's clients, and the redrivers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntakeSenders {
    senders: HashMap<String, Clients>,
    redrivers: HashSet<String>,
}

impl IntakeSenders {
    /// `senders`: `ID=client,client;ID=*` (blank entries ignored); `redrivers`: `ID,ID`.
    pub fn parse(senders: &str, redrivers: &str) -> Result<Self, String> {
        let expected = "expected SENDER_ID=client,client;SENDER_ID=* (an IAM user's or role's unique id, e.g. AROAEXAMPLEID=acme)";
        let mut out = Self::default();
        for entry in senders.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let (id, clients) = entry
                .split_once('=')
                .ok_or_else(|| format!("{entry:?}: {expected}"))?;
            let id = principal_id(id.trim())
                .ok_or_else(|| format!("{id:?} is not a sender id; {expected}"))?;
            let clients = match clients.trim() {
                "*" => Clients::Any,
                list => Clients::Only(
                    list.split(',')
                        .map(str::trim)
                        .filter(|c| !c.is_empty())
                        .map(|c| ClientId::parse(c).map_err(|e| format!("{id}: {e}; {expected}")))
                        .collect::<Result<_, _>>()?,
                ),
            };
            if matches!(&clients, Clients::Only(c) if c.is_empty()) {
                return Err(format!("{id} lists no client; {expected}"));
            }
            if out.senders.insert(id.to_owned(), clients).is_some() {
                return Err(format!("{id} is listed twice"));
            }
        }
        for id in redrivers
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let id = principal_id(id).ok_or_else(|| format!("{id:?} is not a redriver id"))?;
            out.redrivers.insert(id.to_owned());
        }
        Ok(out)
    }

    /// Whether no sender is listed (no queued crawl is accepted).
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    /// Who a message is from: the principal of its `SenderId`, or the original sender it
    /// carries when a listed redriver sent it (`None` without a `SenderId`).
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

/// The principal of a sender id: the id before a role session's `:`, if it looks like one
/// (letters and digits, 1 to 128 of them).
fn principal_id(sender_id: &str) -> Option<&str> {
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
        let rights = IntakeSenders::parse(
            " AIDAPARTNERA=acme,acme-fr ; AROACRAWLER=* ;; ",
            "AROAOPERATOR",
        )
        .unwrap();
        assert!(rights.may_act_for("AIDAPARTNERA", &client("acme")));
        assert!(rights.may_act_for("AIDAPARTNERA", &client("acme-fr")));
        assert!(!rights.may_act_for("AIDAPARTNERA", &client("globex")));
        assert!(rights.may_act_for("AROACRAWLER", &client("globex")));
        assert!(!rights.may_act_for("AIDASTRANGER", &client("acme")));
        assert!(IntakeSenders::default().is_empty());
        assert!(!IntakeSenders::default().may_act_for("AIDAPARTNERA", &client("acme")));
    }

    #[test]
    fn a_role_is_its_role_id_whatever_its_session_and_only_redrivers_vouch() {
        let rights = IntakeSenders::parse("AROACRAWLER=acme", "AROAOPERATOR").unwrap();
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
                IntakeSenders::parse(senders, redrivers).is_err(),
                "{senders:?} {redrivers:?}"
            );
        }
    }
}
