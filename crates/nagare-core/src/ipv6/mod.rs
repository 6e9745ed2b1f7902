//! IPv6 state of an interface that needs no link to test: its addresses
//! and their duplicate address detection (`addr.rs`), and the neighbour
//! cache (`neighbor.rs`). The interface drives both (`crate::iface`).

pub mod addr;
pub mod neighbor;
