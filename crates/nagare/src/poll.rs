//! Readiness of several sockets at once, as `poll(2)`: one request to netd
//! with the list in a region buffer; it answers when any is ready.

use crate::{set_wait_limit, Data, Session};
use nagare_request::{Op, Request, MAX_POLL};
pub use nagare_request::{PollEntry, CLOSED, INVALID, READABLE, WRITABLE};
use std::io;
use std::time::Duration;

/// Fills in `ready` of every entry and returns how many are nonzero.
/// Waits until one is, at most `limit` (`None`: as long as it takes;
/// `Some(ZERO)`: not at all). Sockets must be of this `netd`.
pub fn poll(netd: &Session, entries: &mut [PollEntry], limit: Option<Duration>) -> io::Result<usize> {
    if entries.is_empty() || entries.len() > MAX_POLL as usize || entries.len() * PollEntry::SIZE > netd.max_chunk() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("poll takes 1 to {MAX_POLL} sockets")));
    }
    let mut bytes: Vec<u8> = entries.iter().flat_map(|e| PollEntry { ready: 0, ..*e }.to_bytes()).collect();
    let mut r = Request::new(Op::Poll, 0);
    match limit {
        Some(Duration::ZERO) => r.flags |= nagare_request::NONBLOCK,
        l => set_wait_limit(&mut r, l),
    }
    let (c, got) = match netd.call(r, Data::InOut(&mut bytes)) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            entries.iter_mut().for_each(|e| e.ready = 0);
            return Ok(0);
        }
        Err(e) => return Err(e),
    };
    if got != bytes.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "netd answered a poll with a short list"));
    }
    for (e, chunk) in entries.iter_mut().zip(bytes.chunks_exact(PollEntry::SIZE)) {
        let mut b = [0u8; PollEntry::SIZE];
        b.copy_from_slice(chunk);
        e.ready = PollEntry::from_bytes(b).ready;
    }
    Ok(usize::try_from(c.aux[0]).unwrap_or(usize::MAX).min(entries.len()))
}
