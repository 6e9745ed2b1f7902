//! What a device has done, or is asked to do, for one packet: the few bits
//! a NIC descriptor carries beside the bytes (Linux keeps them in the skb,
//! virtio in `virtio_net_hdr`).
//!
//! They travel with a [`PacketBuf`](super::PacketBuf) rather than beside
//! it, so that every device, in-memory ones included, passes them on
//! without an API of its own. A packet built from slices of another
//! (`slice`, `split_off`, a copy) starts with [`Offload::NONE`]: the
//! promise was about the bytes of the whole frame.

/// State of a packet's TCP or UDP checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChecksumState {
    /// The checksum field is complete and must be verified on receipt.
    #[default]
    Complete,
    /// The field holds only the pseudo-header sum; whoever puts the frame
    /// on a wire completes it (checksum offload). A receiver in the same
    /// memory may trust the bytes, which never crossed a wire.
    Partial,
    /// A device already verified it.
    Verified,
}

impl ChecksumState {
    /// Whether a receiver may skip verifying the transport checksum.
    #[inline]
    pub fn trusted(self) -> bool {
        !matches!(self, ChecksumState::Complete)
    }
}

/// What a super-frame stands for: the packets its payload is cut into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Segmentation {
    /// TCP segments, each with the next sequence numbers (TCP segmentation
    /// offload; Linux's `SKB_GSO_TCPV4`).
    #[default]
    Tcp,
    /// UDP datagrams, each of its own with its own length and checksum
    /// (UDP segmentation offload; Linux's `SKB_GSO_UDP_L4`).
    Udp,
}

/// Offload metadata of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offload {
    /// The transport checksum's state.
    pub checksum: ChecksumState,
    /// Non-zero on a super-frame larger than the link MTU: the device (or
    /// the kernel behind it) cuts its payload into pieces of this many
    /// bytes, each with a copy of the headers, into the packets
    /// `segmentation` names.
    pub segment_size: u16,
    /// What the pieces of a super-frame are; [`Segmentation::Tcp`] on a
    /// frame that is not one (`segment_size` 0).
    pub segmentation: Segmentation,
}

impl Offload {
    /// Nothing offloaded: checksums complete, frame within the MTU.
    pub const NONE: Offload =
        Offload { checksum: ChecksumState::Complete, segment_size: 0, segmentation: Segmentation::Tcp };

    /// A TCP super-segment cut into segments of `segment_size` payload
    /// bytes, its checksum partial.
    pub const fn tcp_segments(segment_size: u16) -> Offload {
        Offload { checksum: ChecksumState::Partial, segment_size, segmentation: Segmentation::Tcp }
    }

    /// A UDP super-frame cut into datagrams of `segment_size` payload bytes
    /// (the last may be shorter), its checksum partial.
    pub const fn udp_segments(segment_size: u16) -> Offload {
        Offload { checksum: ChecksumState::Partial, segment_size, segmentation: Segmentation::Udp }
    }

    /// Only the checksum's state: a frame that is not a super-frame.
    pub const fn checksum(checksum: ChecksumState) -> Offload {
        Offload { checksum, segment_size: 0, segmentation: Segmentation::Tcp }
    }

    /// Whether the frame is a UDP super-frame.
    #[inline]
    pub fn is_udp_segmented(self) -> bool {
        self.segment_size != 0 && self.segmentation == Segmentation::Udp
    }
}

/// What the device under an interface completes on transmit, so that the
/// engine can leave it undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxOffloads {
    /// The device completes TCP and UDP checksums the engine leaves
    /// [`ChecksumState::Partial`] (UDP only in datagrams that are not
    /// cut into IP fragments).
    pub checksum: bool,
    /// Largest IP packet (header included) the device accepts as a TCP
    /// super-segment and cuts into MTU-sized ones; 0 when it does not.
    /// Requires `checksum`.
    pub tcp_segmentation: usize,
    /// Largest IP packet (header included) the device accepts as a UDP
    /// super-frame and cuts into MTU-sized datagrams; 0 when it does not.
    /// Requires `checksum`.
    pub udp_segmentation: usize,
}

impl TxOffloads {
    /// A device that completes nothing.
    pub const NONE: TxOffloads = TxOffloads { checksum: false, tcp_segmentation: 0, udp_segmentation: 0 };

    /// Largest IP packet the device takes whole as a super-frame with
    /// `offload`: 0 for a frame that is not one.
    pub fn super_frame_limit(self, offload: Offload) -> usize {
        match offload.segmentation {
            _ if offload.segment_size == 0 => 0,
            Segmentation::Tcp => self.tcp_segmentation,
            Segmentation::Udp => self.udp_segmentation,
        }
    }
}
