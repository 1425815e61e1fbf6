//! The `TaskQueue` contract.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::{BASE, mins, secs, unique_name};
use imgest_core::domain::Timestamp;
use imgest_core::ports::{
    DeadLetter, Delivery, Enqueued, QueueCounts, Reason, RedriveKinds, TaskQueue,
};

contract_suite!($ task_queue_contract_tests, task_queue, Arc<dyn TaskQueue>;
    enqueue_keeps_keys_unique,
    tasks_wait_for_their_run_at,
    receive_delivers_the_earliest_run_at_first,
    a_lease_hides_the_task_until_it_ends,
    released_leases_are_delivered_again_at_once,
    replacing_a_leased_task_voids_its_receipt,
    retry_ends_the_lease_and_reschedules,
    dead_letter_moves_the_task_with_its_reason,
    a_message_given_up_elsewhere_joins_the_dead_letters,
    redrive_puts_dead_letters_back_oldest_first,
    counts_sort_tasks_into_categories,
    queues_are_independent,
    concurrent_receivers_never_share_a_task,
);

const VISIBILITY: Duration = Duration::from_secs(30);

/// A reason of kind `kind`.
fn why(kind: &str) -> Reason {
    Reason::new(kind, format!("{kind} happened"))
}

async fn enqueue(
    q: &dyn TaskQueue,
    name: &str,
    key: &str,
    payload: &str,
    at: Timestamp,
) -> Enqueued {
    q.enqueue(name, key, payload, at).await.unwrap()
}

async fn receive(q: &dyn TaskQueue, name: &str, now: Timestamp, max: usize) -> Vec<Delivery> {
    let got = q.receive(name, now, max, VISIBILITY).await.unwrap();
    assert!(got.len() <= max, "received more than asked for");
    assert!(got.iter().all(|d| d.queue == name));
    got
}

async fn receive_one(q: &dyn TaskQueue, name: &str, now: Timestamp) -> Delivery {
    let mut got = receive(q, name, now, 1).await;
    assert_eq!(got.len(), 1, "expected one due task at {now}");
    got.remove(0)
}

fn keys(deliveries: &[Delivery]) -> Vec<&str> {
    deliveries.iter().map(|d| d.key.as_str()).collect()
}

async fn counts(q: &dyn TaskQueue, name: &str, now: Timestamp) -> QueueCounts {
    q.counts(name, now).await.unwrap()
}

pub async fn enqueue_keeps_keys_unique(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("unique"));
    assert_eq!(enqueue(q, &name, "k", "first", BASE).await, Enqueued::New);
    assert_eq!(
        enqueue(q, &name, "k", "second", BASE).await,
        Enqueued::Replaced
    );
    assert_eq!(enqueue(q, &name, "other", "x", BASE).await, Enqueued::New);
    assert_eq!(counts(q, &name, BASE).await.ready, 2);
    let mut got = receive(q, &name, BASE, 10).await;
    got.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(keys(&got), ["k", "other"]);
    assert_eq!((got[0].payload.as_str(), got[0].attempts), ("second", 1));
    assert_ne!(got[0].receipt, got[1].receipt);
    for d in &got {
        assert!(q.ack(d).await.unwrap());
    }
    // Acknowledged tasks are gone: the key is new again.
    assert_eq!(enqueue(q, &name, "k", "third", BASE).await, Enqueued::New);
}

pub async fn tasks_wait_for_their_run_at(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("run-at"));
    enqueue(q, &name, "later", "p", BASE.plus(secs(10))).await;
    assert!(receive(q, &name, BASE, 10).await.is_empty());
    assert_eq!(
        counts(q, &name, BASE).await,
        QueueCounts {
            delayed: 1,
            ..QueueCounts::default()
        }
    );
    assert!(receive(q, &name, BASE.plus(secs(9)), 10).await.is_empty());
    let d = receive_one(q, &name, BASE.plus(secs(10))).await;
    assert_eq!((d.key.as_str(), d.attempts), ("later", 1));
    assert!(q.ack(&d).await.unwrap());

    // Replacing a due task with a later run-at postpones it.
    enqueue(q, &name, "moved", "p", BASE).await;
    enqueue(q, &name, "moved", "p", BASE.plus(mins(60))).await;
    assert!(receive(q, &name, BASE.plus(mins(10)), 10).await.is_empty());
    assert_eq!(
        receive_one(q, &name, BASE.plus(mins(60))).await.key,
        "moved"
    );
}

pub async fn receive_delivers_the_earliest_run_at_first(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("order"));
    enqueue(q, &name, "third", "3", BASE.plus(secs(3))).await;
    enqueue(q, &name, "first", "1", BASE.plus(secs(1))).await;
    enqueue(q, &name, "second", "2", BASE.plus(secs(2))).await;
    enqueue(q, &name, "not-due", "4", BASE.plus(mins(10))).await;
    let now = BASE.plus(secs(10));
    let got = receive(q, &name, now, 2).await;
    assert_eq!(keys(&got), ["first", "second"]);
    assert_eq!(keys(&receive(q, &name, now, 2).await), ["third"]);
    assert!(receive(q, &name, now, 2).await.is_empty());
    assert!(receive(q, &name, now, 0).await.is_empty());
}

pub async fn a_lease_hides_the_task_until_it_ends(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("lease"));
    enqueue(q, &name, "k", "p", BASE).await;
    let first = receive_one(q, &name, BASE).await;
    assert_eq!(first.attempts, 1);
    assert!(receive(q, &name, BASE.plus(secs(10)), 10).await.is_empty());
    assert_eq!(
        counts(q, &name, BASE.plus(secs(10))).await,
        QueueCounts {
            in_flight: 1,
            ..QueueCounts::default()
        }
    );
    // Not acknowledged in time: delivered again, under a new receipt.
    let lease_end = BASE.plus(VISIBILITY);
    assert_eq!(counts(q, &name, lease_end).await.ready, 1);
    let second = receive_one(q, &name, lease_end).await;
    assert_eq!((second.key.as_str(), second.payload.as_str()), ("k", "p"));
    assert_eq!(second.attempts, 2);
    assert_ne!(second.receipt, first.receipt);
    assert!(!q.ack(&first).await.unwrap(), "the first lease is lost");
    assert!(q.ack(&second).await.unwrap());
    assert!(!q.ack(&second).await.unwrap(), "already acknowledged");
    assert!(receive(q, &name, BASE.plus(mins(10)), 10).await.is_empty());
    assert_eq!(
        counts(q, &name, BASE.plus(mins(10))).await,
        QueueCounts::default()
    );
}

/// A worker that died holding leases: a new one releases them, and their tasks are delivered
/// again at once, under new receipts; a task not leased, or of another queue, is untouched.
pub async fn released_leases_are_delivered_again_at_once(queue: Arc<dyn TaskQueue>) {
    let (q, name, other) = (
        queue.as_ref(),
        unique_name("released"),
        unique_name("released-other"),
    );
    enqueue(q, &name, "leased", "p", BASE).await;
    enqueue(q, &name, "later", "p", BASE.plus(mins(5))).await;
    enqueue(q, &other, "leased", "p", BASE).await;
    let dead = receive_one(q, &name, BASE).await;
    let elsewhere = receive_one(q, &other, BASE).await;
    let now = BASE.plus(secs(1));
    assert_eq!(q.release_leases(&name).await.unwrap(), 1);
    let again = receive_one(q, &name, now).await;
    assert_eq!((again.key.as_str(), again.attempts), ("leased", 2));
    assert!(
        !q.ack(&dead).await.unwrap(),
        "the dead worker's lease is gone"
    );
    assert!(q.ack(&again).await.unwrap());
    assert!(receive(q, &name, now, 10).await.is_empty(), "not due yet");
    assert_eq!(q.release_leases(&name).await.unwrap(), 0);
    assert!(receive(q, &other, now, 10).await.is_empty());
    assert!(q.ack(&elsewhere).await.unwrap());
}

pub async fn replacing_a_leased_task_voids_its_receipt(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("replace"));
    enqueue(q, &name, "k", "old", BASE).await;
    let stale = receive_one(q, &name, BASE).await;
    let now = BASE.plus(secs(1));
    assert_eq!(enqueue(q, &name, "k", "new", now).await, Enqueued::Replaced);
    assert!(!q.ack(&stale).await.unwrap());
    assert!(!q.retry(&stale, now).await.unwrap());
    assert!(!q.dead_letter(&stale, &why("stale"), now).await.unwrap());
    assert_eq!(counts(q, &name, now).await.dead, 0);
    // The replacement runs (again), from a fresh count of attempts.
    let fresh = receive_one(q, &name, now).await;
    assert_eq!((fresh.payload.as_str(), fresh.attempts), ("new", 1));
    assert!(q.ack(&fresh).await.unwrap());
}

pub async fn retry_ends_the_lease_and_reschedules(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("retry"));
    enqueue(q, &name, "k", "p", BASE).await;
    let first = receive_one(q, &name, BASE).await;
    let again_at = BASE.plus(mins(5)); // after the lease would have ended on its own
    assert!(q.retry(&first, again_at).await.unwrap());
    let now = BASE.plus(mins(1));
    assert!(receive(q, &name, now, 10).await.is_empty());
    assert_eq!(
        counts(q, &name, now).await,
        QueueCounts {
            delayed: 1,
            ..QueueCounts::default()
        }
    );
    let second = receive_one(q, &name, again_at).await;
    assert_eq!((second.payload.as_str(), second.attempts), ("p", 2));
    assert!(!q.retry(&first, again_at).await.unwrap(), "a stale receipt");
    // Retrying "now" makes it due at once.
    assert!(q.retry(&second, again_at).await.unwrap());
    let third = receive_one(q, &name, again_at).await;
    assert_eq!(third.attempts, 3);
    assert!(q.ack(&third).await.unwrap());
}

pub async fn dead_letter_moves_the_task_with_its_reason(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("dead"));
    enqueue(q, &name, "k1", "p1", BASE).await;
    enqueue(q, &name, "k2", "p2", BASE.plus(secs(1))).await;
    let now = BASE.plus(secs(1));
    let got = receive(q, &name, now, 2).await;
    assert_eq!(keys(&got), ["k1", "k2"]);
    assert!(
        q.dead_letter(&got[0], &why("boom"), BASE.plus(secs(5)))
            .await
            .unwrap()
    );
    assert!(
        q.dead_letter(&got[1], &why("bang"), BASE.plus(secs(6)))
            .await
            .unwrap()
    );
    assert!(
        !q.dead_letter(&got[0], &why("twice"), BASE.plus(secs(7)))
            .await
            .unwrap()
    );
    assert!(!q.ack(&got[0]).await.unwrap());
    assert!(receive(q, &name, BASE.plus(mins(10)), 10).await.is_empty());
    assert_eq!(
        counts(q, &name, BASE.plus(mins(10))).await,
        QueueCounts {
            dead: 2,
            ..QueueCounts::default()
        }
    );

    let dead = q.dead_letters(&name, 10).await.unwrap();
    assert_eq!(dead.len(), 2);
    assert_eq!(
        (
            dead[0].key.as_str(),
            dead[0].payload.as_str(),
            dead[0].reason.clone()
        ),
        ("k2", "p2", why("bang"))
    );
    assert_eq!(
        (dead[0].attempts, dead[0].failed_at),
        (1, BASE.plus(secs(6)))
    );
    assert_eq!(
        (
            dead[1].key.as_str(),
            dead[1].reason.clone(),
            dead[1].failed_at
        ),
        ("k1", why("boom"), BASE.plus(secs(5)))
    );
    let newest = q.dead_letters(&name, 1).await.unwrap();
    assert_eq!(newest.len(), 1);
    assert_eq!(newest[0].key, "k2");

    // The key can be queued again.
    assert_eq!(enqueue(q, &name, "k1", "p1", BASE).await, Enqueued::New);
}

pub async fn a_message_given_up_elsewhere_joins_the_dead_letters(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("given-up"));
    let letter = DeadLetter {
        key: "m1".into(),
        payload: "{\"not\": \"a task\"}".into(),
        attempts: 3,
        reason: Reason::new(Reason::FORBIDDEN, "sender x may not act for client y"),
        failed_at: BASE.plus(secs(2)),
    };
    q.add_dead_letter(&name, &letter).await.unwrap();
    assert_eq!(
        q.dead_letters(&name, 10).await.unwrap(),
        std::slice::from_ref(&letter)
    );
    assert_eq!(counts(q, &name, BASE).await.dead, 1);
    // A routine redrive leaves it: a forbidden letter goes back only when asked for by kind,
    // and then like any dead letter: its payload becomes a task, with attempts reset.
    let later = BASE.plus(mins(1));
    assert_eq!(
        q.redrive(&name, 10, &RedriveKinds::Routine, later)
            .await
            .unwrap(),
        0
    );
    let only_forbidden = RedriveKinds::Only(vec![Reason::FORBIDDEN.to_owned()]);
    assert_eq!(
        q.redrive(&name, 10, &only_forbidden, later).await.unwrap(),
        1
    );
    let again = receive_one(q, &name, BASE.plus(mins(1))).await;
    assert_eq!(
        (again.key.as_str(), again.payload.as_str(), again.attempts),
        ("m1", letter.payload.as_str(), 1)
    );
}

pub async fn redrive_puts_dead_letters_back_oldest_first(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("redrive"));
    for (i, key) in ["k1", "k2", "k3"].iter().enumerate() {
        enqueue(q, &name, key, &format!("p{i}"), BASE).await;
    }
    let got = receive(q, &name, BASE, 3).await;
    for (i, d) in got.iter().enumerate() {
        let at = BASE.plus(secs(10 + i as u64));
        assert!(q.dead_letter(d, &why("boom"), at).await.unwrap());
    }
    // k3 is queued again meanwhile: its dead letter is superseded, not redriven.
    enqueue(q, &name, "k3", "fresh", BASE.plus(mins(1))).await;
    let now = BASE.plus(mins(5));
    assert_eq!(
        q.redrive(&name, 1, &RedriveKinds::Routine, now)
            .await
            .unwrap(),
        1,
        "the oldest"
    );
    // Earliest run-at first: k3 was due at its enqueue, k1 at the redrive.
    assert_eq!(keys(&receive(q, &name, now, 10).await), ["k3", "k1"]);
    assert_eq!(
        q.redrive(&name, 10, &RedriveKinds::Routine, now)
            .await
            .unwrap(),
        1,
        "k2; k3's is dropped"
    );
    assert!(q.dead_letters(&name, 10).await.unwrap().is_empty());
    let again = receive_one(q, &name, now).await;
    assert_eq!(
        (again.key.as_str(), again.payload.as_str(), again.attempts),
        ("k2", "p1", 1)
    );
    assert_eq!(
        q.redrive(&name, 10, &RedriveKinds::Routine, now)
            .await
            .unwrap(),
        0
    );
}

pub async fn counts_sort_tasks_into_categories(queue: Arc<dyn TaskQueue>) {
    let (q, name) = (queue.as_ref(), unique_name("counts"));
    assert_eq!(counts(q, &name, BASE).await, QueueCounts::default());
    for key in ["a", "b", "c", "d"] {
        enqueue(q, &name, key, "p", BASE).await;
    }
    enqueue(q, &name, "later", "p", BASE.plus(mins(60))).await;
    let got = receive(q, &name, BASE, 2).await;
    assert_eq!(got.len(), 2);
    assert!(q.dead_letter(&got[1], &why("failed"), BASE).await.unwrap());
    let now = BASE.plus(secs(1));
    assert_eq!(
        counts(q, &name, now).await,
        QueueCounts {
            ready: 2,
            delayed: 1,
            in_flight: 1,
            dead: 1
        }
    );
    // An ended lease counts as ready again; a task past its run-at too.
    let after_lease = BASE.plus(VISIBILITY);
    assert_eq!(
        counts(q, &name, after_lease).await,
        QueueCounts {
            ready: 3,
            delayed: 1,
            in_flight: 0,
            dead: 1
        }
    );
    assert_eq!(
        counts(q, &name, BASE.plus(mins(60))).await,
        QueueCounts {
            ready: 4,
            delayed: 0,
            in_flight: 0,
            dead: 1
        }
    );
}

pub async fn queues_are_independent(queue: Arc<dyn TaskQueue>) {
    let q = queue.as_ref();
    let (one, two) = (unique_name("one"), unique_name("two"));
    assert_eq!(enqueue(q, &one, "k", "in one", BASE).await, Enqueued::New);
    assert_eq!(enqueue(q, &two, "k", "in two", BASE).await, Enqueued::New);
    let d = receive_one(q, &one, BASE).await;
    assert_eq!(d.payload, "in one");
    assert!(receive(q, &one, BASE, 10).await.is_empty());
    assert!(q.dead_letter(&d, &why("x"), BASE).await.unwrap());
    assert_eq!(
        counts(q, &two, BASE).await,
        QueueCounts {
            ready: 1,
            ..QueueCounts::default()
        }
    );
    assert!(q.dead_letters(&two, 10).await.unwrap().is_empty());
    assert_eq!(receive_one(q, &two, BASE).await.payload, "in two");
}

pub async fn concurrent_receivers_never_share_a_task(queue: Arc<dyn TaskQueue>) {
    const TASKS: usize = 12;
    let name = unique_name("concurrent");
    for i in 0..TASKS {
        enqueue(queue.as_ref(), &name, &format!("k{i:02}"), "p", BASE).await;
    }
    let receivers: Vec<_> = (0..8)
        .map(|_| {
            let (queue, name) = (queue.clone(), name.clone());
            tokio::spawn(async move { queue.receive(&name, BASE, 3, VISIBILITY).await.unwrap() })
        })
        .collect();
    let mut seen = HashSet::new();
    for receiver in receivers {
        for d in receiver.await.unwrap() {
            assert_eq!(d.attempts, 1);
            assert!(seen.insert(d.key), "a task was delivered twice");
        }
    }
    assert_eq!(seen.len(), TASKS);
}
