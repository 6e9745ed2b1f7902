//! The benchmarks' peers, run small: smoltcp over the in-memory frame
//! queues and as its loopback example ships.

#[path = "../benches/peer/smoltcp.rs"]
mod smoltcp_peer;

use std::time::Duration;

#[test]
fn smoltcp_moves_a_few_megabytes_between_two_interfaces() {
    for quick_ack in [false, true] {
        let r =
            smoltcp_peer::smoltcp_two_interfaces(4 << 20, 1500, 1 << 20, quick_ack, Duration::from_secs(60)).unwrap();
        assert_eq!(r.bytes, 4 << 20);
        assert_eq!(r.max_frame, 1514, "MTU 1500 frames");
        assert!(r.frames_ab >= (4 << 20) / 1460);
        assert!(r.frames_ba >= 1, "the receiver acknowledged");
        assert!(r.elapsed > Duration::ZERO);
    }
}

#[test]
fn smoltcp_loopback_example_runs() {
    let r = smoltcp_peer::smoltcp_loopback_as_shipped(4 << 20, Duration::from_secs(60)).unwrap();
    assert_eq!(r.bytes, 4 << 20);
}
