//! Reading header fields out of received packets, which may be chains of
//! slices and are hostile: nothing here indexes past what it was given.

use crate::buf::PacketBuf;

/// Reads the first `len` bytes of `packet` as one slice, copying into
/// `scratch` only when they straddle buffers.
pub(crate) fn linear_prefix<'a>(packet: &'a PacketBuf, len: usize, scratch: &'a mut [u8]) -> Option<&'a [u8]> {
    if let Some(bytes) = packet.contiguous_prefix(len) {
        return Some(bytes);
    }
    let out = scratch.get_mut(..len)?;
    (packet.copy_out(0, out) == len).then_some(&*out)
}

/// The big-endian `u16` at `at`, or 0 past the end of `bytes`.
pub(crate) fn be16(bytes: &[u8], at: usize) -> u16 {
    match bytes.get(at..at + 2) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => 0,
    }
}
