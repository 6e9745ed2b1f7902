//! A hostile client's script against an inet server in this process: the
//! input is the script (see the harness, shared with the property test
//! `crates/nagare/tests/hostile_requests.rs`). A panic in netd, a client
//! netd does not let go, a next client it does not serve, or a buffer or
//! port left behind fails it.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/nagare/tests/support/hostile_session.rs"]
mod hostile_session;

fuzz_target!(|data: &[u8]| {
    hostile_session::run(data);
});
