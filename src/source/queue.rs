//! The queue between the watch and the sink: per-key FIFO order (a tag's changes arrive in the
//! order they happened), many keys in flight at once, and the watch never waiting on a slow
//! sink (jobs move off the bounded channel into per-key queues at once; only delivery waits).
//!
//! Jobs travel boxed on the hand-off channel: a tokio channel allocates its slots 32 at a time,
//! at its creation and for as long as it lives, and a job is a few hundred bytes. Unboxed, the
//! channels of an idle queue allocated some 27 KiB; the multi-tenant adapter runs a queue per
//! source (BENCHMARKS.md, issue 15). Finished jobs go to the owner's [`Finish`], called on
//! the dispatcher's task, rather than back over a channel to a task of their own.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

/// One event on its way to the sink.
pub(crate) struct Job<A> {
    /// The ordering key (`namespace/imagestream/tag`, or `namespace/imagestream`), shared by
    /// the dispatcher's indexes without copies.
    pub key: Arc<str>,
    /// What the owner delivers: the event or what it is built from, and what to record once
    /// it is delivered (or dead-lettered). The queue never looks inside.
    pub item: A,
    /// When the change was seen, for the delivery latency.
    pub seen: Instant,
}

/// What the queue runs for each job: its delivery (the source's is
/// [`crate::source::deliver::job::Sender`]). The job comes back with how its delivery ended.
pub(crate) trait Work<A, O>: Send + Sync + 'static {
    /// Delivers `job`, on a task of its own.
    fn work(self: Arc<Self>, job: Job<A>) -> impl Future<Output = (Job<A>, O)> + Send + 'static;
}

impl<A, O, F, Fut> Work<A, O> for F
where
    F: Fn(Job<A>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (Job<A>, O)> + Send + 'static,
{
    fn work(self: Arc<Self>, job: Job<A>) -> impl Future<Output = (Job<A>, O)> + Send + 'static {
        (self)(job)
    }
}

/// Told of each job whose delivery ended, how, and how many jobs are left undelivered; in
/// completion order, on the dispatcher's task (it must not wait: the acknowledgement step,
/// [`crate::source::ack::Recorder`], records into the checkpoint's memory).
pub(crate) trait Finish<A, O>: Send + 'static {
    /// `job` ended with `outcome`; `left` jobs are still queued or in flight.
    fn finished(&mut self, job: Job<A>, outcome: O, left: usize);
}

impl<A, O, F: FnMut(Job<A>, O, usize) + Send + 'static> Finish<A, O> for F {
    fn finished(&mut self, job: Job<A>, outcome: O, left: usize) {
        self(job, outcome, left)
    }
}

/// A handle to enqueue jobs.
pub(crate) struct Queue<A> {
    tx: mpsc::Sender<Box<Job<A>>>,
    depth: Arc<AtomicUsize>,
}

impl<A> Clone for Queue<A> {
    fn clone(&self) -> Self {
        Queue {
            tx: self.tx.clone(),
            depth: self.depth.clone(),
        }
    }
}

impl<A: Send + 'static> Queue<A> {
    /// Enqueues a job; waits only while the hand-off channel is full (the dispatcher drains
    /// it into per-key queues immediately). Err when the dispatcher is gone.
    pub(crate) async fn push(&self, job: Job<A>) -> Result<(), Job<A>> {
        self.depth.fetch_add(1, Ordering::Relaxed);
        self.tx.send(Box::new(job)).await.map_err(|e| {
            self.depth.fetch_sub(1, Ordering::Relaxed);
            *e.0
        })
    }

    /// Jobs not yet delivered (queued or in flight).
    pub(crate) fn depth(&self) -> usize {
        self.depth.load(Ordering::Relaxed)
    }
}

/// Starts the dispatcher: at most `concurrency` keys in flight, one job per key at a time, each
/// delivered by `work`. Each finished job is handed to `finish`, in completion order. The dispatcher (the returned
/// task) ends when every [`Queue`] handle is dropped and all jobs are done.
///
/// One task per queue, and no channel back: the multi-tenant adapter runs a queue per source
/// (BENCHMARKS.md, issue 15).
pub(crate) fn start<A, O, W, F>(
    capacity: usize,
    concurrency: usize,
    work: Arc<W>,
    finish: F,
) -> (Queue<A>, JoinHandle<()>)
where
    A: Send + 'static,
    O: Send + 'static,
    W: Work<A, O>,
    F: Finish<A, O>,
{
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let depth = Arc::new(AtomicUsize::new(0));
    let dispatcher = tokio::spawn(dispatch(
        rx,
        concurrency.max(1),
        work,
        finish,
        depth.clone(),
    ));
    (Queue { tx, depth }, dispatcher)
}

async fn dispatch<A, O, W, F>(
    mut rx: mpsc::Receiver<Box<Job<A>>>,
    concurrency: usize,
    work: Arc<W>,
    mut finish: F,
    depth: Arc<AtomicUsize>,
) where
    A: Send + 'static,
    O: Send + 'static,
    W: Work<A, O>,
    F: Finish<A, O>,
{
    let mut queues: HashMap<Arc<str>, VecDeque<Box<Job<A>>>> = HashMap::new();
    let mut waiting: VecDeque<Arc<str>> = VecDeque::new();
    let mut in_flight: HashSet<Arc<str>> = HashSet::new();
    let mut running: JoinSet<(Job<A>, O)> = JoinSet::new();
    let mut open = true;
    loop {
        // Start what may start: keys with work, not in flight, while there is room.
        while running.len() < concurrency {
            let Some(key) = waiting.pop_front() else {
                break;
            };
            if in_flight.contains(&key) {
                continue;
            }
            let Some(job) = queues.get_mut(&key).and_then(VecDeque::pop_front) else {
                continue;
            };
            in_flight.insert(key);
            running.spawn(work.clone().work(*job));
        }
        if running.is_empty() && queues.values().all(VecDeque::is_empty) {
            if !open {
                return;
            }
            // Idle: give back the room a burst made (a queue per source, mostly idle).
            queues.clear();
            queues.shrink_to_fit();
            waiting.clear();
            waiting.shrink_to_fit();
            in_flight.shrink_to_fit();
        }
        tokio::select! {
            job = rx.recv(), if open => match job {
                Some(job) => {
                    let key = job.key.clone();
                    // Most keys hold one job at a time: a queue sized for one keeps a
                    // backlog of thousands of keys (a catch-up) from holding room for four.
                    queues
                        .entry(key.clone())
                        .or_insert_with(|| VecDeque::with_capacity(1))
                        .push_back(job);
                    if !in_flight.contains(&key) {
                        waiting.push_back(key);
                    }
                }
                None => open = false,
            },
            Some(finished) = running.join_next(), if !running.is_empty() => {
                // A delivery that panicked is a bug elsewhere; its job is lost to this run
                // but not to the checkpoint, which was not advanced for it.
                if let Ok((job, outcome)) = finished {
                    let key = job.key.clone();
                    in_flight.remove(&key);
                    let left = depth.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
                    if queues.get(&key).is_some_and(|q| !q.is_empty()) {
                        waiting.push_back(key);
                    } else {
                        queues.remove(&key);
                    }
                    finish.finished(job, outcome, left);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    /// A [`Finish`] that records the jobs left as each finished job is told.
    fn recorded<A, O>() -> (impl Finish<A, O>, Arc<Mutex<Vec<usize>>>) {
        let lefts = Arc::new(Mutex::new(Vec::new()));
        let l = lefts.clone();
        let done = move |_: Job<A>, _: O, left: usize| l.lock().unwrap().push(left);
        (done, lefts)
    }

    #[tokio::test]
    async fn each_key_is_delivered_in_order_while_keys_run_in_parallel() {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let l = log.clone();
        let deliver = Arc::new(move |job: Job<u32>| {
            let l = l.clone();
            async move {
                // Key "slow" takes longer: "fast" must not wait for it.
                if &*job.key == "slow" {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                l.lock().unwrap().push((job.key.to_string(), job.item));
                (job, ())
            }
        });
        let (done, lefts) = recorded();
        let (q, dispatcher) = start(4, 8, deliver, done);
        for n in 0..3 {
            q.push(Job {
                key: "slow".into(),
                item: n,
                seen: Instant::now(),
            })
            .await
            .ok()
            .unwrap();
            q.push(Job {
                key: "fast".into(),
                item: n,
                seen: Instant::now(),
            })
            .await
            .ok()
            .unwrap();
        }
        drop(q);
        dispatcher.await.unwrap();
        let lefts = lefts.lock().unwrap().clone();
        assert_eq!(lefts.len(), 6, "each job is told done once");
        // Pushes go on while the first jobs finish: the count left is the gauge's, not a
        // countdown, but it never counts a finished job and ends at none.
        assert!(
            lefts.iter().all(|&left| left < 6) && lefts.last() == Some(&0),
            "each is told with the jobs left, down to none: {lefts:?}"
        );
        let log = log.lock().unwrap();
        let order = |k: &str| {
            log.iter()
                .filter(|(key, _)| key == k)
                .map(|(_, n)| *n)
                .collect::<Vec<_>>()
        };
        assert_eq!(order("slow"), vec![0, 1, 2]);
        assert_eq!(order("fast"), vec![0, 1, 2]);
        let first_slow = log.iter().position(|(k, _)| k == "slow").unwrap();
        let last_fast = log.iter().rposition(|(k, _)| k == "fast").unwrap();
        assert!(
            last_fast < first_slow,
            "fast keys are not held up by a slow one: {log:?}"
        );
    }

    #[tokio::test]
    async fn a_queue_that_went_idle_takes_jobs_again_in_order() {
        // Idle, the dispatcher gives back its per-key room; jobs after that are delivered
        // as before, each key in order.
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let deliver = Arc::new(move |job: Job<u32>| {
            let l = l.clone();
            async move {
                l.lock().unwrap().push((job.key.to_string(), job.item));
                (job, ())
            }
        });
        let (done, lefts) = recorded();
        let (q, dispatcher) = start(8, 4, deliver, done);
        let push = |key: &'static str, item: u32| {
            let q = q.clone();
            async move {
                q.push(Job {
                    key: key.into(),
                    item,
                    seen: Instant::now(),
                })
                .await
                .ok()
                .unwrap();
            }
        };
        for round in 0..3 {
            for n in 0..4 {
                push("a", round * 10 + n).await;
                push("b", round * 10 + n).await;
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while lefts.lock().unwrap().len() < 8 * (round as usize + 1) {
                assert!(Instant::now() < deadline, "round {round} never finished");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(
                q.depth(),
                0,
                "round {round} is all delivered: the queue is idle"
            );
        }
        drop(q);
        dispatcher.await.unwrap();
        let log = log.lock().unwrap();
        for key in ["a", "b"] {
            let items: Vec<u32> = (log.iter())
                .filter(|(k, _)| k == key)
                .map(|(_, n)| *n)
                .collect();
            let expected: Vec<u32> = (0..3)
                .flat_map(|r| (0..4).map(move |n| r * 10 + n))
                .collect();
            assert_eq!(items, expected, "key {key}: every job once, in order");
        }
    }

    #[tokio::test]
    async fn concurrency_bounds_the_keys_in_flight() {
        // Every delivery holds until the gate opens: the keys in flight pile up to the bound,
        // and no further, however long the test waits.
        let current = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (gate, gate_rx) = tokio::sync::watch::channel(false);
        let (c, p) = (current.clone(), peak.clone());
        let deliver = Arc::new(move |job: Job<()>| {
            let (c, p, mut gate) = (c.clone(), p.clone(), gate_rx.clone());
            async move {
                let now = c.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                let _ = gate.wait_for(|open| *open).await;
                c.fetch_sub(1, Ordering::SeqCst);
                (job, ())
            }
        });
        let (done, lefts) = recorded();
        let (q, dispatcher) = start(20, 3, deliver, done);
        for n in 0..20 {
            q.push(Job {
                key: format!("k{n}").into(),
                item: (),
                seen: Instant::now(),
            })
            .await
            .ok()
            .unwrap();
        }
        assert_eq!(q.depth(), 20, "nothing is delivered while the gate is shut");
        let deadline = Instant::now() + Duration::from_secs(10);
        while current.load(Ordering::SeqCst) < 3 {
            assert!(Instant::now() < deadline, "three keys never went in flight");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Room for more to start, had the bound not held.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        gate.send_replace(true);
        drop(q);
        dispatcher.await.unwrap();
        assert_eq!(lefts.lock().unwrap().len(), 20);
        assert_eq!(
            peak.load(Ordering::SeqCst),
            3,
            "never more than three at once"
        );
    }
}
