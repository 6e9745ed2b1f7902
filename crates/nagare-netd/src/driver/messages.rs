//! What netd and its driver say to each other: the descriptors of the
//! driver region's two rings and the messages of the control socket.
//!
//! Ring 0 (netd → driver):
//!
//! | kind | meaning | fields |
//! |---|---|---|
//! | `TX_PIECE` | a piece of a frame in a driver-region buffer netd hands over | buffer, offset, len; flags `MORE`; aux0 offload bits on a frame's first piece |
//! | `TX_CLIENT_PIECE` | a piece of a frame in an application's region (its payload, untouched) | aux1 client key; buffer, offset, len; flags `MORE`; aux0 offload bits on the first piece; aux2 hand-over time of a traced send |
//! | `RETURN` | post this completion to the client once every frame before it is on the device (direct return) | aux1 client key; flags socket, id request id, buffer/offset/len the piece, status, aux2 op, aux3 result; aux0 netd's stage times of a traced send |
//! | `RX_FREE` | a receive buffer back to the driver | buffer |
//! | `RX_CLIENT_FREE` | a buffer of an application's region netd keeps for receiving, for that application's steered frames | aux1 client key; buffer |
//! | `STEER` | frames to a local port go to one client's buffers (aux1 its key), or (flags `UNSTEERED`) to the driver region again | aux0 protocol << 16 \| port; id serial |
//! | `LOCAL` | netd's own addresses: only frames to them are steered; one IPv6 slot each | aux0 Ethernet address (bits 0–47) and IPv6 slot (bits 48–55, below `MAX_LOCAL6`), aux2 IPv4 address, aux1 and aux3 the high and low halves of the slot's IPv6 address (0: the slot is empty); id serial |
//!
//! Ring 1 (driver → netd):
//!
//! | kind | meaning | fields |
//! |---|---|---|
//! | `RX_PIECE` | a piece of a received frame in a driver buffer handed over | buffer, offset, len; flags `MORE`; aux0 offload bits on the first piece |
//! | `TX_DONE` | a transmit buffer back to netd (its frames are on the device) | buffer |
//! | `RETURNED` | the completion of a `RETURN` was posted to its client (aux0 0) or could not be (aux0 `UNDELIVERED`: netd posts it) | aux1 client key, id request id |
//! | `RX_CLIENT_PIECE` | a piece of a received frame, steered into a buffer of the application whose port it is for | aux1 client key; buffer, offset, len; flags `MORE`; aux0 offload bits on the first piece |
//! | `STEERED` | every `STEER`/`LOCAL` up to serial aux0 is applied: no frame is steered by the table before them any more | aux0 serial |
//!
//! Steering changes travel on ring 0, in line with frames: a port that
//! changes hands is unsteered before any frame netd sends after the change
//! (a new owner's SYN, say), so a reply to that frame cannot be steered to
//! the old owner. A frame a remote sends unprompted is a different matter:
//! netd holds the completion of a bind to a port that left another client
//! until the driver says (`STEERED`) it applied the change, so nothing sent
//! to the port after the bind returns can land in the old owner's region.
//!
//! Every buffer a descriptor names is checked against the receiver's
//! ownership table, every client key against the attached clients, and a
//! frame of more than [`MAX_PIECES`] pieces is dropped.

use nagare_core::buf::{ChecksumState, Offload, Segmentation};
use nagare_dev::MAX_LOCAL6;
use nagare_ipc::Descriptor;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// A frame piece in a driver-region buffer (netd → driver).
pub const TX_PIECE: u32 = 1;
/// A frame piece in a client's region (netd → driver).
pub const TX_CLIENT_PIECE: u32 = 2;
/// A completion for the driver to post to a client (netd → driver).
pub const RETURN: u32 = 3;
/// A receive buffer handed back (netd → driver).
pub const RX_FREE: u32 = 4;

/// A receive buffer in a client's region (netd → driver).
pub const RX_CLIENT_FREE: u32 = 5;
/// A steering change for one local port (netd → driver).
pub const STEER: u32 = 6;
/// netd's own Ethernet and IPv4 addresses (netd → driver).
pub const LOCAL: u32 = 7;
/// Flag of a `STEER`: the port is steered no more.
pub const UNSTEERED: u32 = 2;

/// A received frame piece (driver → netd).
pub const RX_PIECE: u32 = 1;
/// A transmit buffer handed back (driver → netd).
pub const TX_DONE: u32 = 2;
/// A direct return done (driver → netd); `aux[0]` [`UNDELIVERED`] when
/// the driver did not know the client, so netd must post it.
pub const RETURNED: u32 = 3;
/// A received frame in a client's region (driver → netd).
pub const RX_CLIENT_PIECE: u32 = 4;
/// Steering changes applied up to serial `aux[0]` (driver → netd).
pub const STEERED: u32 = 5;
/// `aux[0]` of a `RETURNED` whose completion was not posted.
pub const UNDELIVERED: u64 = 1;

/// Flag: the frame continues in the next descriptor.
pub const MORE: u32 = 1;

/// Most pieces one frame may have (a 64 KiB super-segment in 16 KiB
/// buffers, headers and an application's payload need far fewer).
pub const MAX_PIECES: usize = 16;

/// The `aux` word that carries a client key.
pub const KEY: usize = 1;
/// `TX_CLIENT_PIECE` of a traced send: when netd handed it over (ns,
/// `CLOCK_MONOTONIC`).
pub const TRACE_AT: usize = 2;
/// `RETURN` of a traced send: netd's stage times, packed (see
/// `nagare_request::pack_stages`); 0 untraced.
pub const STAGES: usize = 0;

/// A frame's offload metadata as one word: the checksum state in bits
/// 0..8, the segment size in 8..24, bit 24 set on a UDP super-frame.
pub fn offload_word(o: Offload) -> u64 {
    let checksum = match o.checksum {
        ChecksumState::Complete => 0u64,
        ChecksumState::Partial => 1,
        ChecksumState::Verified => 2,
    };
    let udp = u64::from(o.segmentation == Segmentation::Udp && o.segment_size != 0);
    checksum | u64::from(o.segment_size) << 8 | udp << 24
}

/// The offload metadata in a word, if it is one [`offload_word`] makes.
pub fn offload_of(w: u64) -> Option<Offload> {
    let checksum = match w & 0xff {
        0 => ChecksumState::Complete,
        1 => ChecksumState::Partial,
        2 => ChecksumState::Verified,
        _ => return None,
    };
    let segment_size = (w >> 8) as u16;
    let segmentation = match w >> 24 {
        0 => Segmentation::Tcp,
        1 if segment_size != 0 => Segmentation::Udp,
        _ => return None,
    };
    Some(Offload { checksum, segment_size, segmentation })
}

/// A control message (one `SOCK_SEQPACKET` datagram, descriptors attached
/// where noted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// netd → driver, first: fds region memfd, netd's eventfd (the driver
    /// signals ring 1 on it), the driver's eventfd (netd signals ring 0),
    /// and the device's descriptor if netd opened it (a TAP).
    Hello,
    /// driver → netd, after the hello: the device is open.
    Ready {
        /// The driver's process id.
        pid: u32,
        /// The device's IP MTU.
        mtu: u32,
        /// What the device completes on transmit: bit 0 checksums; bits
        /// 16.. the largest TCP super-segment (0: none).
        offloads: u64,
    },
    /// netd → driver: client `key`'s region; fds region memfd, the
    /// client's eventfd. The region's shape comes along: the client can
    /// rewrite its region's header, so the driver checks what it maps
    /// against what netd made.
    Attach {
        /// The client's key (netd's client id, never reused).
        key: u64,
        /// Slots per ring.
        ring_slots: u32,
        /// Buffers.
        buffers: u32,
        /// Size of one buffer.
        buffer_size: u32,
    },
    /// netd → driver: client `key` is gone.
    Detach {
        /// The client's key.
        key: u64,
    },
    /// driver → netd: the answer to an `Attach`. Until it comes (and if it
    /// says no), netd copies that client's bytes rather than naming them.
    Attached {
        /// The client's key.
        key: u64,
        /// Whether the driver mapped the region.
        ok: bool,
    },
    /// netd → driver, with descriptors: the port map of the TAP's steering
    /// program, then `count` more queues of the TAP, to read each
    /// client's steered frames from a queue of its own.
    RxQueues {
        /// Queues passed after the map.
        count: u32,
    },
    /// driver → netd, now and then: one of its counters
    /// ([`crate::driver::DriverStats::named`] order).
    Counter {
        /// Which counter.
        id: u32,
        /// Its value.
        value: u64,
    },
}

/// Length of every control message.
pub const CONTROL_LEN: usize = 32;

impl Control {
    /// The message's bytes.
    pub fn encode(&self) -> [u8; CONTROL_LEN] {
        let (kind, a, b, c) = match *self {
            Control::Hello => (1u32, 0u64, 0u64, 0u64),
            Control::Ready { pid, mtu, offloads } => (2, u64::from(pid), u64::from(mtu), offloads),
            Control::Attach { key, ring_slots, buffers, buffer_size } => {
                (3, key, u64::from(ring_slots) << 32 | u64::from(buffers), u64::from(buffer_size))
            }
            Control::Detach { key } => (4, key, 0, 0),
            Control::Counter { id, value } => (5, u64::from(id), value, 0),
            Control::Attached { key, ok } => (6, key, u64::from(ok), 0),
            Control::RxQueues { count } => (9, u64::from(count), 0, 0),
        };
        let mut out = [0u8; CONTROL_LEN];
        out[0..4].copy_from_slice(&kind.to_le_bytes());
        out[8..16].copy_from_slice(&a.to_le_bytes());
        out[16..24].copy_from_slice(&b.to_le_bytes());
        out[24..32].copy_from_slice(&c.to_le_bytes());
        out
    }

    /// Decodes a message; `None` if it is not one [`Control::encode`]
    /// makes.
    pub fn decode(bytes: &[u8]) -> Option<Control> {
        let bytes: &[u8; CONTROL_LEN] = bytes.try_into().ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let mut k = [0u8; 4];
        k.copy_from_slice(&bytes[0..4]);
        let kind = u32::from_le_bytes(k);
        let (a, b, c) = (word(8), word(16), word(24));
        if bytes[4..8] != [0; 4] {
            return None;
        }
        match kind {
            1 if a == 0 && b == 0 && c == 0 => Some(Control::Hello),
            2 => Some(Control::Ready { pid: u32::try_from(a).ok()?, mtu: u32::try_from(b).ok()?, offloads: c }),
            3 => Some(Control::Attach {
                key: a,
                ring_slots: (b >> 32) as u32,
                buffers: b as u32,
                buffer_size: u32::try_from(c).ok()?,
            }),
            4 if b == 0 && c == 0 => Some(Control::Detach { key: a }),
            5 if c == 0 => Some(Control::Counter { id: u32::try_from(a).ok()?, value: b }),
            6 if b <= 1 && c == 0 => Some(Control::Attached { key: a, ok: b == 1 }),
            9 if b == 0 && c == 0 => Some(Control::RxQueues { count: u32::try_from(a).ok()? }),
            _ => None,
        }
    }
}

/// A steering change netd sends the driver on ring 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SteerChange {
    /// Frames to local port `port` of IP protocol `proto` go into receive
    /// buffers of client `key` (`None`: into the driver region).
    Port {
        /// IP protocol number (TCP or UDP).
        proto: u8,
        /// Local (destination) port.
        port: u16,
        /// The client that alone has sockets there, if one does.
        key: Option<u64>,
    },
    /// netd's own addresses: frames to any other are never steered. Each
    /// message says the Ethernet and IPv4 ones and one of the
    /// [`MAX_LOCAL6`] IPv6 slots.
    Local {
        /// Its Ethernet address.
        mac: [u8; 6],
        /// Its IPv4 address.
        ip: [u8; 4],
        /// The IPv6 slot, below [`MAX_LOCAL6`].
        slot: u8,
        /// The IPv6 address in it, if frames to one are steered (never
        /// `::`); `None`: the slot is empty.
        ip6: Option<[u8; 16]>,
    },
}

impl SteerChange {
    /// Its ring-0 descriptor.
    pub fn descriptor(&self) -> Descriptor {
        match *self {
            SteerChange::Port { proto, port, key } => Descriptor {
                kind: STEER,
                flags: if key.is_none() { UNSTEERED } else { 0 },
                aux: [u64::from(proto) << 16 | u64::from(port), key.unwrap_or(0), 0, 0],
                ..Default::default()
            },
            SteerChange::Local { mac, ip, slot, ip6 } => {
                let mut m = [0u8; 8];
                m[..6].copy_from_slice(&mac);
                m[6] = slot;
                let six = ip6.map_or(0, u128::from_be_bytes);
                Descriptor {
                    kind: LOCAL,
                    aux: [u64::from_le_bytes(m), (six >> 64) as u64, u64::from(u32::from_be_bytes(ip)), six as u64],
                    ..Default::default()
                }
            }
        }
    }

    /// The change a `STEER` or `LOCAL` descriptor carries; `None` for
    /// anything else.
    pub fn of(d: &Descriptor) -> Option<SteerChange> {
        match d.kind {
            STEER if d.aux[0] >> 24 == 0 && d.flags & !UNSTEERED == 0 => Some(SteerChange::Port {
                proto: (d.aux[0] >> 16) as u8,
                port: d.aux[0] as u16,
                key: (d.flags & UNSTEERED == 0).then_some(d.aux[KEY]),
            }),
            LOCAL if d.aux[0] >> 56 == 0 && usize::from((d.aux[0] >> 48) as u8) < MAX_LOCAL6 => {
                let m = d.aux[0].to_le_bytes();
                let mut mac = [0u8; 6];
                mac.copy_from_slice(&m[..6]);
                let ip = u32::try_from(d.aux[2]).ok()?.to_be_bytes();
                let six = u128::from(d.aux[1]) << 64 | u128::from(d.aux[3]);
                let ip6 = (six != 0).then(|| six.to_be_bytes());
                Some(SteerChange::Local { mac, ip, slot: m[6], ip6 })
            }
            _ => None,
        }
    }
}

/// Two connected `SOCK_SEQPACKET` Unix sockets (message boundaries kept,
/// close-on-exec): netd's end and the driver's.
pub fn control_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two descriptors into the array we pass.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody
    // else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_junk_is_refused() {
        for m in [
            Control::Hello,
            Control::Ready { pid: 42, mtu: 1500, offloads: 1 | 65535 << 16 },
            Control::Attach { key: 7, ring_slots: 256, buffers: 256, buffer_size: 16384 },
            Control::Detach { key: u64::MAX },
            Control::Counter { id: 3, value: 1 << 40 },
            Control::Attached { key: 9, ok: true },
            Control::Attached { key: 10, ok: false },
            Control::RxQueues { count: 7 },
        ] {
            assert_eq!(Control::decode(&m.encode()), Some(m));
        }
        let mut bad = Control::Detach { key: 1 }.encode();
        bad[16] = 1;
        assert_eq!(Control::decode(&bad), None);
        assert_eq!(Control::decode(&[0u8; 31]), None);
        let mut unknown = Control::Hello.encode();
        unknown[0] = 10;
        assert_eq!(Control::decode(&unknown), None);
        let mut wide = Control::RxQueues { count: 1 }.encode();
        wide[20] = 1;
        assert_eq!(Control::decode(&wide), None);
    }

    #[test]
    fn steering_changes_round_trip_and_junk_is_refused() {
        for c in [
            SteerChange::Port { proto: 17, port: 7000, key: Some(3) },
            SteerChange::Port { proto: 6, port: 65535, key: None },
            SteerChange::Local { mac: [2, 0, 0x5e, 1, 2, 3], ip: [10, 0, 0, 2], slot: 0, ip6: None },
            SteerChange::Local {
                mac: [2, 0, 0x5e, 1, 2, 3],
                ip: [10, 0, 0, 2],
                slot: MAX_LOCAL6 as u8 - 1,
                ip6: Some([0xfd, 0, 0, 0, 0, 0, 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 2]),
            },
        ] {
            assert_eq!(SteerChange::of(&c.descriptor()), Some(c));
        }
        let mut wide = SteerChange::Port { proto: 6, port: 80, key: Some(1) }.descriptor();
        wide.aux[0] |= 1 << 30;
        assert_eq!(SteerChange::of(&wide), None);
        let mut past = SteerChange::Local { mac: [2; 6], ip: [10, 0, 0, 2], slot: 0, ip6: None }.descriptor();
        past.aux[0] |= (MAX_LOCAL6 as u64) << 48;
        assert_eq!(SteerChange::of(&past), None, "no slot past the last");
        let mut flagged = SteerChange::Port { proto: 6, port: 80, key: Some(1) }.descriptor();
        flagged.flags |= MORE << 4;
        assert_eq!(SteerChange::of(&flagged), None);
        assert_eq!(SteerChange::of(&Descriptor { kind: RX_FREE, ..Default::default() }), None);
    }

    #[test]
    fn offload_words_round_trip_and_junk_is_refused() {
        for o in [
            Offload::NONE,
            Offload::tcp_segments(1448),
            Offload::udp_segments(1472),
            Offload::checksum(ChecksumState::Verified),
        ] {
            assert_eq!(offload_of(offload_word(o)), Some(o));
        }
        assert_eq!(offload_of(3), None);
        assert_eq!(offload_of(1 << 24 | 1), None, "UDP segmentation without a segment size");
        assert_eq!(offload_of(2 << 24 | 1448 << 8 | 1), None);
        assert_eq!(offload_of(1 << 30), None);
    }
}
