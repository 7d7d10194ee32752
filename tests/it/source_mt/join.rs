//! A source on the feed, driven through the library against the emulator (the feed's watch, the
//! source's lists and the changes race for real):
//! - joining while its namespace changes: its own list and the feed's changes queued meanwhile
//!   overlap, and the source must see each state once, in order, never an older one after a
//!   newer (the changes its list holds already are dropped by their resourceVersion);
//! - when the feed's watch cannot resume (410) it starts from a new point, and what changed
//!   while it was out reaches the source only through the source's new list;
//! - a source past its bound takes nothing from the feed (its channel stays empty however much
//!   changes) until its queue drains, then lists again and sees the newest state.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use imagegate::adapter::feed::Feed;
use imagegate::adapter::join::{self, Lister, Room};
use imagegate::runtime::admin::Health;
use imagegate::runtime::watch_errors::Refusals;
use imagegate::source::metrics::Metrics;
use imagegate::source::watch::Seen;
use imagegate::source::watch::decode::TagsAndLabels;
use imagegate_emulator::control::Fault;
use tokio::sync::Semaphore;

use crate::support::mt::cluster;

/// The `n`th digest of the race.
fn digest(n: usize) -> String {
    format!("sha256:{n:064x}")
}

/// Which digest of the race `seen` shows the candidate tag of ds/nb at, if it is one.
fn round(seen: &Seen) -> Option<usize> {
    let Seen::Applied { stream, .. } = seen else {
        return None;
    };
    let latest = stream.history("candidate").first()?;
    (1..=ROUNDS).find(|n| latest.image == digest(*n))
}

const ROUNDS: usize = 60;

/// A bound no test here reaches, unless it sets `depth` itself.
fn room(bound: usize) -> Room {
    Room {
        id: ("ds".into(), "s".into()),
        depth: Default::default(),
        bound,
        shedding: Default::default(),
        sheds: Default::default(),
    }
}

/// A feed of tags and labels, and a lister, as the adapter starts them.
fn feed_and_lister(client: &kube::Client) -> (Feed, Arc<Lister>) {
    let metrics = Metrics::register(&mut Default::default());
    let refusals = Refusals::new(Health::new(), "ImageStream");
    let feed = Feed::start(client, false, metrics.clone(), refusals.clone());
    let lister = Arc::new(Lister {
        client: client.clone(),
        permits: Arc::new(Semaphore::new(join::LISTS_IN_FLIGHT)),
        metrics,
        refusals,
    });
    (feed, lister)
}

#[tokio::test]
async fn a_source_joining_while_its_namespace_changes_sees_each_state_once_and_in_order() {
    let emu = Arc::new(cluster().await);
    let (feed, lister) = feed_and_lister(&emu.client());

    // Changes one after the other; the source joins a third of the way in, and lists only
    // after a pause, so the feed queues for it changes its list will hold too.
    let (third, mut joined_at) = tokio::sync::oneshot::channel();
    let changes = {
        let emu = emu.clone();
        tokio::spawn(async move {
            let mut third = Some(third);
            for n in 1..=ROUNDS {
                emu.import("ds", "nb", "candidate", &digest(n)).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
                if n == ROUNDS / 3
                    && let Some(t) = third.take()
                {
                    let _ = t.send(());
                }
            }
        })
    };
    (&mut joined_at).await.unwrap();
    let fed = feed.join(("ds".into(), "s".into()), Some(vec!["ds".into()]));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut seen =
        join::follow::<TagsAndLabels>(fed, room(1_000), vec![Some("ds".into())], lister).boxed();

    let mut rounds = Vec::new();
    let mut listed = false;
    let mut take = |next: Seen, rounds: &mut Vec<usize>| {
        if let Seen::Listed { .. } = next {
            listed = true;
        }
        if let Some(n) = round(&next) {
            rounds.push(n);
        }
        listed
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let next = seen.next().await.expect("the feed lets the source go");
            if take(next, &mut rounds) && rounds.last() == Some(&ROUNDS) {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the list or the last change never came: {rounds:?}"));
    // Anything still queued comes now (an older state replayed after the list would).
    while let Ok(Some(next)) = tokio::time::timeout(Duration::from_millis(500), seen.next()).await {
        take(next, &mut rounds);
    }
    changes.await.unwrap();
    // From the state the list found, every later one, once, in order: none older, none lost.
    let from_the_list: Vec<usize> = (rounds[0]..=ROUNDS).collect();
    assert_eq!(
        rounds, from_the_list,
        "each state once, never an older one after a newer"
    );
    assert!(
        rounds[0] > ROUNDS / 3,
        "the list came after the changes queued before it: {rounds:?}"
    );
}

#[tokio::test]
async fn after_the_feed_starts_over_a_source_lists_again_and_gets_what_changed_meanwhile() {
    let emu = cluster().await;
    let (feed, lister) = feed_and_lister(&emu.client());
    let fed = feed.join(("ds".into(), "s".into()), Some(vec!["ds".into()]));
    let mut seen =
        join::follow::<TagsAndLabels>(fed, room(1_000), vec![Some("ds".into())], lister).boxed();
    while !matches!(next(&mut seen).await, Seen::Listed { .. }) {}

    // The feed's watch ends, and resuming it is refused with 410: it waits its backoff (0.8 s),
    // then starts from a new point. A change made meanwhile is behind that point. The new
    // watch is held 2 s more, so that a loaded machine (a 200 ms sleep that takes a second)
    // cannot let the change reach the new watch instead.
    emu.inject_fault(Fault {
        verb: Some("watch".into()),
        resource: Some("imagestreams".into()),
        count: 1,
        status: Some(410),
        message: Some("too old resource version".into()),
        ..Fault::default()
    })
    .await;
    emu.inject_fault(Fault {
        verb: Some("watch".into()),
        resource: Some("imagestreams".into()),
        count: 1,
        delay_ms: Some(2_000),
        ..Fault::default()
    })
    .await;
    emu.drop_watches().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    emu.import("ds", "nb", "candidate", &digest(1)).await;

    // It comes as part of the source's new list of ds, then the list ends.
    let mut relisted = false;
    loop {
        let got = next(&mut seen).await;
        match &got {
            Seen::Applied { listing, .. } if round(&got) == Some(1) => {
                assert!(listing, "the change came from the new list, not the watch");
                relisted = true;
            }
            Seen::Listed { .. } if relisted => break,
            _ => {}
        }
    }
    emu.import("ds", "nb", "candidate", &digest(2)).await;
    let after = next(&mut seen).await;
    assert_eq!(
        round(&after),
        Some(2),
        "the watch goes on from its new point"
    );
}

/// What the source sees next, within 10 s.
async fn next(seen: &mut futures::stream::BoxStream<'static, Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(10), seen.next())
        .await
        .expect("the source sees something")
        .expect("the feed lets the source go")
}

#[tokio::test]
async fn a_source_past_its_bound_takes_nothing_from_the_feed_then_lists_once_drained() {
    let emu = cluster().await;
    let (feed, lister) = feed_and_lister(&emu.client());
    let fed = feed.join(("ds".into(), "s".into()), Some(vec!["ds".into()]));
    let shed = fed.shed.clone();
    let room = room(4);
    let (depth, shedding, sheds) = (
        room.depth.clone(),
        room.shedding.clone(),
        room.sheds.clone(),
    );
    let mut seen =
        join::follow::<TagsAndLabels>(fed, room, vec![Some("ds".into())], lister).boxed();
    while !matches!(next(&mut seen).await, Seen::Listed { .. }) {}

    // Its queue holds its bound: asked for more, it sheds, and the feed sends it nothing.
    depth.set(4);
    let waiting = tokio::spawn(async move {
        let got = next(&mut seen).await;
        (got, seen)
    });
    tokio::time::timeout(Duration::from_secs(5), async {
        while !shed.load(std::sync::atomic::Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the source sheds");
    assert_eq!((shedding.get(), sheds.get()), (1, 1));
    for n in 1..=ROUNDS {
        emu.import("ds", "nb", "candidate", &digest(n)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "nothing passes while it sheds");
    // Drained to above half its bound: still shedding.
    depth.set(3);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "still past half its bound");

    // Drained: it lists ds again, and the list shows the newest state, which the changes it did
    // not take led to.
    depth.set(2);
    let (got, mut seen) = waiting.await.unwrap();
    let mut got = vec![got];
    while !matches!(got.last(), Some(Seen::Listed { .. })) {
        got.push(next(&mut seen).await);
    }
    let listed: Vec<(bool, Option<usize>)> = got
        .iter()
        .filter_map(|s| match s {
            Seen::Applied { listing, .. } => Some((*listing, round(s))),
            _ => None,
        })
        .collect();
    assert_eq!(listed, [(true, Some(ROUNDS))], "one state, from the list");
    assert_eq!(shedding.get(), 0, "the shed ended");
    assert!(!shed.load(std::sync::atomic::Ordering::Acquire));
    emu.import("ds", "nb", "candidate", &digest(1)).await;
    assert_eq!(
        round(&next(&mut seen).await),
        Some(1),
        "and takes changes again"
    );
}
