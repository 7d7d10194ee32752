//! `SinkClient::shared`: one client per configuration while it is in use, none after.

use std::time::Duration;

use super::super::client::{SinkClient, shared_configurations};

// Timeouts no other test asks for, so the tests running beside this one (the registry is the
// process's) do not touch these keys.
const A: Duration = Duration::from_millis(987_601);
const B: Duration = Duration::from_millis(987_602);
const C: Duration = Duration::from_millis(987_603);

fn kept(timeout: Duration) -> bool {
    shared_configurations().contains(&(Some(timeout), None, None))
}

#[test]
fn one_client_per_configuration_while_used_and_dropped_once_nobody_uses_it() {
    let first = SinkClient::shared(Some(A), None).unwrap();
    let second = SinkClient::shared(Some(A), None).unwrap();
    let other = SinkClient::shared(Some(B), None).unwrap();
    assert!(
        first.shares_client_with(&second),
        "the same configuration shares one client"
    );
    assert!(
        !first.shares_client_with(&other),
        "another configuration has its own"
    );
    assert!(kept(A) && kept(B));

    drop(first);
    SinkClient::shared(Some(C), None).unwrap();
    assert!(kept(A), "still used by one flow");

    drop(second);
    let c = SinkClient::shared(Some(C), None).unwrap();
    assert!(!kept(A), "no flow uses it: the registry let it go");
    assert!(kept(B) && kept(C));

    let again = SinkClient::shared(Some(A), None).unwrap();
    assert!(kept(A));
    assert!(!again.shares_client_with(&other) && !again.shares_client_with(&c));
}
