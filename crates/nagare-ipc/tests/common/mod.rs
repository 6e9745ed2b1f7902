//! Helpers shared by the integration tests: re-running the test binary as
//! the peer process, and a small deterministic random generator.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command};

/// The environment variable that makes a test body act as the child.
pub const ROLE: &str = "NAGARE_IPC_ROLE";
/// The rendezvous socket path for the child.
pub const SOCK: &str = "NAGARE_IPC_SOCK";
/// The parent's pid, for the child's credential check.
pub const PARENT: &str = "NAGARE_IPC_PARENT";

/// The role this process plays, if it is a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// A socket path unique to this process and tag.
pub fn sock_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nagare-ipc-it-{tag}-{}.sock", std::process::id()))
}

/// Runs the test `test` of this same binary in a new process, as `role`.
pub fn spawn_child(test: &str, role: &str, sock: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(SOCK, sock)
        .env(PARENT, std::process::id().to_string())
        .spawn()
        .expect("spawn the child test process")
}

/// The socket path the parent gave the child.
pub fn child_sock() -> PathBuf {
    PathBuf::from(std::env::var(SOCK).expect("socket path"))
}

/// xorshift64*: deterministic, good enough to make garbage.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
