//! Non-panicking big-endian field access shared by the packet views.
//!
//! Views built with `new_unchecked` may wrap buffers shorter than their header,
//! so every access is bounds-checked: reads past the end yield zero and writes
//! past the end are dropped rather than panicking.

use core::net::{Ipv4Addr, Ipv6Addr};

#[inline]
pub(crate) fn u8_at(buf: &[u8], off: usize) -> u8 {
    buf.get(off).copied().unwrap_or(0)
}

#[inline]
pub(crate) fn u16_at(buf: &[u8], off: usize) -> u16 {
    match buf.get(off..).and_then(|s| s.first_chunk::<2>()) {
        Some(b) => u16::from_be_bytes(*b),
        None => 0,
    }
}

#[inline]
pub(crate) fn u32_at(buf: &[u8], off: usize) -> u32 {
    match buf.get(off..).and_then(|s| s.first_chunk::<4>()) {
        Some(b) => u32::from_be_bytes(*b),
        None => 0,
    }
}

#[inline]
pub(crate) fn ipv4_at(buf: &[u8], off: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32_at(buf, off))
}

#[inline]
pub(crate) fn ipv6_at(buf: &[u8], off: usize) -> Ipv6Addr {
    match buf.get(off..).and_then(|s| s.first_chunk::<16>()) {
        Some(b) => Ipv6Addr::from(*b),
        None => Ipv6Addr::UNSPECIFIED,
    }
}

#[inline]
pub(crate) fn set_u8(buf: &mut [u8], off: usize, v: u8) {
    if let Some(b) = buf.get_mut(off) {
        *b = v;
    }
}

#[inline]
pub(crate) fn set_u16(buf: &mut [u8], off: usize, v: u16) {
    if let Some(b) = buf.get_mut(off..).and_then(|s| s.first_chunk_mut::<2>()) {
        *b = v.to_be_bytes();
    }
}

#[inline]
pub(crate) fn set_u32(buf: &mut [u8], off: usize, v: u32) {
    if let Some(b) = buf.get_mut(off..).and_then(|s| s.first_chunk_mut::<4>()) {
        *b = v.to_be_bytes();
    }
}

#[inline]
pub(crate) fn set_bytes(buf: &mut [u8], off: usize, v: &[u8]) {
    if let Some(b) = buf.get_mut(off..).and_then(|s| s.get_mut(..v.len())) {
        b.copy_from_slice(v);
    }
}

/// `buf[start..end]`, or empty if that range is not inside `buf`.
#[inline]
pub(crate) fn slice(buf: &[u8], start: usize, end: usize) -> &[u8] {
    buf.get(start..end).unwrap_or(&[])
}

/// `buf[start..end]`, or empty if that range is not inside `buf`.
#[inline]
pub(crate) fn slice_mut(buf: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    buf.get_mut(start..end).unwrap_or(&mut [])
}
