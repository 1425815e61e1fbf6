//! What a real DynamoDB partition refuses and the emulator never does (moto serialises every
//! request: no write is ever throttled, no transaction ever conflicts): a test double in the
//! counting proxy that answers some writes the way DynamoDB would, before they reach the
//! emulator.
//!
//! - **Throttling**: each partition key of the limited class (the partition key up to its first
//!   `#`: `image`, `linkdelta`, `ratelimit`, …) gets `partition_wcu` write units a second, every
//!   other key a whole partition's [`PARTITION_WCU`] (a token bucket holding one second's
//!   worth); a write whose key has no units left is answered
//!   `ProvisionedThroughputExceededException` (a transactional write costs two units, as
//!   DynamoDB bills it).
//! - **Transaction conflicts**: while a `TransactWriteItems` is in flight, another transaction
//!   touching one of its items is cancelled with `TransactionConflict`, and a single-item write
//!   to one of them fails with `TransactionConflictException` (DynamoDB's documented behaviour
//!   for items with a pending transaction).
//!
//! The contention benchmark limits the class of the key its writers asked the most of, at about
//! half of that, like a partition asked twice its limit (a class, not the key: the run under
//! refusals writes fresh items of the same kinds), and counts what the adapters do about it:
//! requests per successful update, errors, and updates lost (which must be none). The other
//! classes get what DynamoDB gives a partition, so a target whose writes are spread is not
//! throttled on the items it writes afterwards (its image's item, its results) at its hottest
//! key's rate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde_json::{Value, json};

/// The refusing double; off until [`Refusals::limit`] sets a rate.
#[derive(Default)]
pub struct Refusals {
    inner: Mutex<State>,
}

/// Write units a second a DynamoDB partition takes.
pub const PARTITION_WCU: f64 = 1000.0;

/// The class of a partition key: up to its first `#`.
fn class(pk: &str) -> &str {
    pk.split('#').next().unwrap_or(pk)
}

#[derive(Default)]
struct State {
    /// The limited class and its write units a second per partition key; `None`: refuse
    /// nothing.
    limit: Option<(String, f64)>,
    /// Per partition key: units left, and when they were last topped up.
    buckets: HashMap<String, (f64, Instant)>,
    /// Items (their key, as JSON) in a transaction in flight, and how many.
    in_transaction: HashMap<String, u32>,
    refused: u64,
    /// Write units admitted per partition key since [`Refusals::take_admitted`] (counted with
    /// the double off too: what a run asks of its hottest key).
    admitted: HashMap<String, f64>,
}

/// One item a write names: its partition key and its whole key (as JSON).
pub struct Target {
    pub pk: String,
    pub key: String,
}

/// The double's verdict on a write.
pub enum Admission {
    /// Answer this instead (HTTP 400, DynamoDB's JSON error).
    Refuse(Value),
    /// Forward it; a transaction's items stay in flight until the guard drops.
    Go(Option<InFlight>),
}

/// A transaction's items, in flight until dropped.
pub struct InFlight {
    refusals: Arc<Refusals>,
    keys: Vec<String>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.refusals.with(|s| {
            for k in &self.keys {
                if let Some(n) = s.in_transaction.get_mut(k) {
                    *n -= 1;
                    if *n == 0 {
                        s.in_transaction.remove(k);
                    }
                }
            }
        });
    }
}

const ERROR_PREFIX: &str = "com.amazonaws.dynamodb.v20120810#";

impl Refusals {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Refuses writes past `limit.1` units a second per key of class `limit.0` (past
    /// [`PARTITION_WCU`] on other keys), and conflicting ones; `None` turns the double off.
    pub fn limit(&self, limit: Option<(String, f64)>) {
        self.with(|s| {
            s.limit = limit;
            s.buckets.clear();
        });
    }

    /// Writes refused so far.
    pub fn refused(&self) -> u64 {
        self.with(|s| s.refused)
    }

    /// The class of the partition key given the most write units since the last call, and
    /// those units (`None`: no write).
    pub fn take_admitted(&self) -> Option<(String, f64)> {
        self.with(|s| {
            std::mem::take(&mut s.admitted)
                .into_iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(pk, units)| (class(&pk).to_owned(), units))
        })
    }

    /// The verdict on a write request `op` (`PutItem`, `TransactWriteItems`, …) naming
    /// `targets`.
    pub fn admit(self: &Arc<Self>, op: &str, targets: &[Target]) -> Admission {
        let transaction = op == "TransactWriteItems";
        let units = if transaction { 2.0 } else { 1.0 };
        let refusal = self.with(|s| {
            let Some((limited, limited_rate)) = s.limit.clone() else {
                for t in targets {
                    *s.admitted.entry(t.pk.clone()).or_default() += units;
                }
                return None;
            };
            if op != "BatchWriteItem" {
                let pending: Vec<usize> = targets
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| s.in_transaction.contains_key(&t.key))
                    .map(|(i, _)| i)
                    .collect();
                if !pending.is_empty() {
                    s.refused += 1;
                    return Some(conflict(transaction, targets.len(), &pending));
                }
            }
            let now = Instant::now();
            let mut wanted: HashMap<&str, f64> = HashMap::new();
            for t in targets {
                *wanted.entry(t.pk.as_str()).or_default() += units;
            }
            let rate = |pk: &str| {
                if class(pk) == limited {
                    limited_rate
                } else {
                    PARTITION_WCU
                }
            };
            let short = wanted.iter().any(|(pk, need)| {
                let rate = rate(pk);
                let (left, at) = s.buckets.get(*pk).copied().unwrap_or((rate, now));
                let topped = (left + rate * now.duration_since(at).as_secs_f64()).min(rate);
                topped < *need
            });
            for (pk, need) in wanted {
                let rate = rate(pk);
                let (left, at) = s.buckets.get(pk).copied().unwrap_or((rate, now));
                let topped = (left + rate * now.duration_since(at).as_secs_f64()).min(rate);
                let after = if short { topped } else { topped - need };
                s.buckets.insert(pk.to_owned(), (after, now));
            }
            if short {
                s.refused += 1;
                return Some(json!({
                    "__type": format!("{ERROR_PREFIX}ProvisionedThroughputExceededException"),
                    "message": "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
                }));
            }
            for t in targets {
                *s.admitted.entry(t.pk.clone()).or_default() += units;
                if transaction {
                    *s.in_transaction.entry(t.key.clone()).or_default() += 1;
                }
            }
            None
        });
        match refusal {
            Some(answer) => Admission::Refuse(answer),
            None => Admission::Go(transaction.then(|| InFlight {
                refusals: Arc::clone(self),
                keys: targets.iter().map(|t| t.key.clone()).collect(),
            })),
        }
    }
}

/// DynamoDB's answer to a write that meets a transaction in flight on the items at `pending`.
fn conflict(transaction: bool, items: usize, pending: &[usize]) -> Value {
    if !transaction {
        return json!({
            "__type": format!("{ERROR_PREFIX}TransactionConflictException"),
            "message": "Transaction is ongoing for the item",
        });
    }
    let reasons: Vec<Value> = (0..items)
        .map(|i| {
            if pending.contains(&i) {
                json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    let codes: Vec<&str> = (0..items)
        .map(|i| {
            if pending.contains(&i) {
                "TransactionConflict"
            } else {
                "None"
            }
        })
        .collect();
    json!({
        "__type": format!("{ERROR_PREFIX}TransactionCanceledException"),
        "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
        "CancellationReasons": reasons,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(pk: &str, sk: &str) -> Target {
        Target {
            pk: pk.into(),
            key: format!("{pk}/{sk}"),
        }
    }

    #[test]
    fn writes_past_a_keys_units_are_throttled_and_other_keys_are_not() {
        let r = Arc::new(Refusals::default());
        r.limit(Some(("hot".into(), 3.0)));
        for _ in 0..3 {
            assert!(matches!(
                r.admit("UpdateItem", &[target("hot#1", "a")]),
                Admission::Go(None)
            ));
        }
        let Admission::Refuse(answer) = r.admit("UpdateItem", &[target("hot#1", "a")]) else {
            panic!("the fourth write within the second was admitted");
        };
        assert!(
            answer["__type"]
                .as_str()
                .unwrap()
                .ends_with("ProvisionedThroughputExceededException")
        );
        // Another key of the class has its own units; a key of another class a partition's.
        assert!(matches!(
            r.admit("UpdateItem", &[target("hot#2", "a")]),
            Admission::Go(None)
        ));
        for _ in 0..100 {
            assert!(matches!(
                r.admit("PutItem", &[target("cold#1", "a")]),
                Admission::Go(None)
            ));
        }
        assert_eq!(r.refused(), 1);
        r.limit(None);
        assert!(matches!(
            r.admit("UpdateItem", &[target("hot#1", "a")]),
            Admission::Go(None)
        ));
    }

    #[test]
    fn an_item_in_a_transaction_in_flight_refuses_other_writes_until_it_ends() {
        let r = Arc::new(Refusals::default());
        r.limit(Some(("image".into(), 1000.0)));
        let Admission::Go(Some(in_flight)) = r.admit(
            "TransactWriteItems",
            &[target("image", "x"), target("offer", "y")],
        ) else {
            panic!("the first transaction was refused");
        };
        let Admission::Refuse(answer) = r.admit(
            "TransactWriteItems",
            &[target("link", "z"), target("image", "x")],
        ) else {
            panic!("a conflicting transaction went through");
        };
        assert_eq!(answer["CancellationReasons"][0]["Code"], "None");
        assert_eq!(
            answer["CancellationReasons"][1]["Code"],
            "TransactionConflict"
        );
        let Admission::Refuse(single) = r.admit("UpdateItem", &[target("image", "x")]) else {
            panic!("a write to an item in a transaction went through");
        };
        assert!(
            single["__type"]
                .as_str()
                .unwrap()
                .ends_with("TransactionConflictException")
        );
        drop(in_flight);
        assert!(matches!(
            r.admit("UpdateItem", &[target("image", "x")]),
            Admission::Go(None)
        ));
    }
}
