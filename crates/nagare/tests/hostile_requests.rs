//! A hostile client's scripts against an inet server in this process:
//! requests with hostile arguments, raw descriptors, writes anywhere in its
//! region and broken rings. netd must not panic, must let the client go,
//! must serve the next client and must lose no buffer
//! (`support/hostile_session.rs` says what each script step does). The
//! fuzz target `netd_requests` runs the same scripts with coverage
//! guidance.

#[path = "support/hostile_session.rs"]
mod hostile_session;

use proptest::prelude::*;

proptest! {
    // Each case starts an inet server and runs up to 256 steps: a few
    // hundred milliseconds in a debug build.
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_hostile_script_leaves_netd_serving_and_loses_no_buffer(script in proptest::collection::vec(any::<u8>(), 0..1500)) {
        hostile_session::run(&script);
    }
}

/// Scripts that reach the places the random ones rarely do, each checked
/// by netd's counters to have got there (a change of the script encoding
/// must not leave them testing something else). Their client is patient,
/// so a busy machine cannot make a step miss the socket an earlier one
/// made.
#[test]
fn hand_written_scripts() {
    // Empty: connect and go.
    hostile_session::run_patient(&[]);
    // A non-blocking connect to the neighbour that never answers, 200
    // bytes sent on it while it is still opening, then closed (a pause and
    // a drain after each step): the connection and what it holds must go.
    let stats = hostile_session::run_patient(&[
        0, 0, 6, 0, 2, 5, 0, 1, 1, 9, 250, 7, 0, 7, 5, 0, 0, 200, 1, 0, 25, 1, 1, 9, 250, 7, 0, 10, 5, 0, 1, 9, 250, 7,
    ]);
    assert_eq!((stats.bad_descriptors, stats.bad_buffers, stats.clients_broken), (0, 0, 0), "{stats:?}");
    assert_eq!(stats.sockets_reclaimed, 0, "the script closed its connection itself: {stats:?}");
    // A bind, then the request ring's head thrown far off.
    let stats = hostile_session::run_patient(&[0, 0, 1, 5, 2, 0, 1, 9, 50, 6, 0, 255, 255, 255, 255, 9, 200]);
    assert_eq!(stats.clients_broken, 1, "the broken ring disconnects the client: {stats:?}");
    assert_eq!(stats.sockets_reclaimed, 1, "its bound socket is closed: {stats:?}");
    // 40 NOPs never drained fill the completion ring (32), so netd stops
    // taking requests; then the request ring's head is thrown off. netd
    // must still notice and disconnect (it once waited for a drain that
    // never came).
    let mut script = vec![0u8];
    for _ in 0..40 {
        script.extend([0, 14, 5, 1]);
    }
    for _ in 0..5 {
        script.extend([9, 255]);
    }
    script.extend([6, 0, 255, 255, 255, 255]);
    let stats = hostile_session::run_patient(&script);
    assert_eq!(stats.clients_broken, 1, "{stats:?}");
    // UDP over IPv6: a dual-stack bind on [::]:9000, a send to its own
    // port at netd's IPv4-mapped address (over IPv4, delivered here) and
    // its receive, then a lent send to the IPv6 neighbour, which never
    // answers neighbour discovery, and an ICMPv6 echo request to it from
    // an echo socket.
    let stats = hostile_session::run_patient(&[
        0, 0, 225, 2, 2, 3, 1, 1, 7, 0, 226, 5, 0, 0, 20, 1, 0, 3, 2, 5, 1, 7, 0, 3, 5, 0, 0, 0, 1, 4, 1, 1, 7, 0, 226,
        2, 0, 0, 20, 1, 0, 3, 1, 4, 1, 7, 0, 11, 5, 9, 1, 7, 0, 227, 5, 0, 0, 20, 1, 0, 3, 0, 4, 1, 1, 7,
    ]);
    assert_eq!((stats.bad_descriptors, stats.clients_broken), (0, 0), "{stats:?}");
    // 24 bytes (the piece's length) sent and received here, and as many of
    // the well-behaved client's check after it.
    assert_eq!((stats.tx_payload_copied, stats.rx_payload_copied), (48, 48), "sent and received: {stats:?}");
    assert_eq!(stats.sends_in_place, 1, "the lent send to the neighbour: {stats:?}");
    // A UDP socket shared, watched under its token, closed (only the
    // watched descriptor keeps it), adopted again from the token, and
    // left behind with the watch open: netd's accounts must end at 0
    // (checked in `run`), and the adopted socket is the one the
    // departure closes.
    let stats = hostile_session::run_patient(&[
        0, 0, 1, 5, 2, 0, 1, 7, 0, 0xea, 5, 0, 1, 7, 6, 2, 0, 9, 250, 0, 10, 0, 0, 1, 7, 9, 250, 0, 0xe8, 5, 0, 1, 7,
    ]);
    assert_eq!((stats.bad_descriptors, stats.clients_broken), (0, 0), "{stats:?}");
    assert_eq!(stats.sockets_reclaimed, 1, "the socket adopted from the watched token: {stats:?}");
}
