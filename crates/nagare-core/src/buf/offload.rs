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

/// Offload metadata of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offload {
    /// The transport checksum's state.
    pub checksum: ChecksumState,
    /// Non-zero on a TCP super-segment larger than the link MTU: the device
    /// (or the kernel behind it) cuts its payload into pieces of this many
    /// bytes, each with a copy of the headers (TCP segmentation offload).
    pub segment_size: u16,
}

impl Offload {
    /// Nothing offloaded: checksums complete, frame within the MTU.
    pub const NONE: Offload = Offload { checksum: ChecksumState::Complete, segment_size: 0 };
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
}

impl TxOffloads {
    /// A device that completes nothing.
    pub const NONE: TxOffloads = TxOffloads { checksum: false, tcp_segmentation: 0 };
}
