//! The controller's reconcile slots, shared fairly between namespaces (security review F-10):
//! at most `concurrency` runs are reconciled at once, and one namespace holds at most its
//! [`share`] of them, so a namespace with a thousand runs (or runs whose API calls hang) cannot
//! keep another namespace's run waiting for a slot. A run of a namespace at its share waits
//! for that namespace's next free slot without holding one of the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many of `concurrency` slots one namespace may hold: half, at least one.
pub(crate) fn share(concurrency: usize) -> usize {
    (concurrency / 2).max(1)
}

/// The slots.
pub(crate) struct FairSlots {
    total: Arc<Semaphore>,
    share: usize,
    namespaces: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A slot held: the namespace's and the whole controller's.
pub(crate) struct Slot {
    _namespace: OwnedSemaphorePermit,
    _total: OwnedSemaphorePermit,
}

impl FairSlots {
    /// `concurrency` slots in all.
    pub(crate) fn new(concurrency: usize) -> FairSlots {
        let concurrency = concurrency.max(1);
        FairSlots {
            total: Arc::new(Semaphore::new(concurrency)),
            share: share(concurrency),
            namespaces: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a slot for a run of `namespace`: first one of its namespace's share, then one
    /// of the controller's.
    pub(crate) async fn acquire(&self, namespace: &str) -> Slot {
        let mine = {
            let mut map = self.namespaces.lock().unwrap_or_else(|p| p.into_inner());
            // A namespace's semaphore nobody holds or waits on (only the map has it: every
            // holder and waiter keeps a clone) is forgotten, so the map stays as small as the
            // set of namespaces with runs in flight, and never gets a second one for a namespace
            // whose runs still hold or wait for the first.
            map.retain(|_, s| Arc::strong_count(s) > 1);
            map.entry(namespace.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.share)))
                .clone()
        };
        // Neither semaphore is ever closed, so the acquires always succeed.
        let namespace = mine.acquire_owned().await.expect("never closed");
        let total = self
            .total
            .clone()
            .acquire_owned()
            .await
            .expect("never closed");
        Slot {
            _namespace: namespace,
            _total: total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_namespace_gets_half_of_the_slots_and_at_least_one() {
        assert_eq!(share(8), 4);
        assert_eq!(share(1), 1);
        assert_eq!(share(3), 1);
    }

    #[tokio::test]
    async fn a_busy_namespace_cannot_take_the_slots_another_namespace_needs() {
        let slots = Arc::new(FairSlots::new(4));
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(slots.acquire("noisy").await);
        }
        // The noisy namespace is at its share: a third run waits...
        let third = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire("noisy").await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!third.is_finished(), "a namespace holds at most its share");
        // ...while another namespace's run gets a slot at once.
        let quiet = tokio::time::timeout(Duration::from_millis(100), slots.acquire("quiet"))
            .await
            .expect("the quiet namespace is not starved");
        drop(held.pop());
        let _third = tokio::time::timeout(Duration::from_millis(100), third)
            .await
            .expect("a freed slot goes to the waiting run")
            .unwrap();
        drop(quiet);
    }

    #[tokio::test]
    async fn a_namespace_never_gets_more_than_its_share_while_others_come_and_go() {
        let slots = Arc::new(FairSlots::new(4));
        let first = slots.acquire("noisy").await;
        let second = slots.acquire("noisy").await;
        // Other namespaces come and go (each acquire tidies the map) while noisy holds its two.
        for i in 0..10 {
            drop(slots.acquire(&format!("ns-{i}")).await);
        }
        let third = tokio::time::timeout(Duration::from_millis(50), slots.acquire("noisy")).await;
        assert!(third.is_err(), "a third noisy slot");
        drop((first, second));
    }
}
