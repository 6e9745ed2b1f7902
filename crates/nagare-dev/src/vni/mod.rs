//! The VNI (Mint): a shared-memory Ethernet between nagare instances on
//! one machine.
//!
//! A *segment* ([`Segment`]) is a file under `/dev/shm` holding a header,
//! one record per port, and one single-producer single-consumer ring of
//! frame slots per ordered pair of ports (Mint's configuration 2: every
//! ring has one writer and one reader, so no locks). Its memory grows as
//! the square of the ports; [`segment_size`] says how much.
//!
//! A *port* ([`VniPort`]) is a [`crate::Device`] with its own MAC:
//! unicast goes into the ring to the peer with that MAC, broadcast and
//! multicast (and unicast to an unknown MAC) into every attached peer's
//! ring. The sender writes a batch, then publishes it and rings the
//! receiver's eventfd doorbell once, and only if the ring was empty and
//! the receiver is not polling. The receiver copies each frame once, from
//! the slot into a pool buffer. Ports learn the source MACs behind each
//! peer (stations behind a bridge) and send unicast to them through that
//! peer alone. An application can also build a frame in place in a slot
//! ([`VniPort::slot_batch`], [`SlotWriter`]): zero-copy send.
//!
//! Everything read from the segment is treated as hostile: offsets come
//! from the geometry validated when the segment was opened, every head,
//! tail and length from a peer is checked before use, and a bad one is
//! counted and skipped. See `docs/vni.md`.

pub mod doorbell;
pub mod layout;
pub mod meta;
pub mod port;
pub mod ring;
pub mod segment;

pub use layout::{default_slots, format_size, segment_size, slot_size_for, Geometry, MAX_PORTS, MIN_PORTS};
pub use port::{
    derived_mac, format_mac, PeerLink, SlotBatch, SlotWriter, VniPort, VniStats, STATION_AGE, STATION_CAPACITY,
};
pub use segment::{destroy, segment_path, validate_name, PortInfo, Segment};
