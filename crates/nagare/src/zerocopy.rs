//! Zero-copy calls: the application writes its data straight into a
//! buffer of its region and reads received data where netd put it, as the
//! AnT application works in its data area (`alloc_tx`, `send_buf`,
//! `recv_buf`); and asynchronous sends, several in flight at once.
//!
//! A [`TxBuf`] or [`RxBuf`] is a region buffer this application holds; netd
//! does not touch a buffer its client holds, so the slice views are
//! ordinary memory while the value lives. Dropping either hands the buffer
//! back to the pool.

use crate::net::{TcpStream, UdpSocket};
use crate::{request, Session, Ticket};
use nagare_ipc::SharedBytes;
use nagare_request::Op;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::{Deref, DerefMut};

/// A buffer of our region to fill and send without a copy.
pub struct TxBuf {
    netd: Session,
    index: u32,
    bytes: SharedBytes,
    /// Handed to netd with a request: no longer ours to release.
    sent: bool,
}

/// Received bytes, where netd put them in our region.
pub struct RxBuf {
    netd: Session,
    index: u32,
    bytes: SharedBytes,
}

impl Session {
    /// A region buffer to write data into and send with `send_buf`. When
    /// the buffers a send may take are all queued, waits for one to come
    /// back; `ENOBUFS` when none is on its way (the caller holds them).
    pub fn alloc_tx(&self) -> io::Result<TxBuf> {
        self.alloc_tx_with(true)
    }

    /// [`Session::alloc_tx`] that gives `WouldBlock` instead of waiting
    /// when `may_wait` is false.
    pub fn alloc_tx_with(&self, may_wait: bool) -> io::Result<TxBuf> {
        let index = self.until(!may_wait, None, |c| c.wait_for_send_buffer())?;
        let c = self.lock()?;
        let size = c.pool.buffer_size();
        match c.pool.shared(index, 0, size) {
            Ok(bytes) => Ok(TxBuf { netd: self.clone(), index, bytes, sent: false }),
            Err(e) => {
                drop(c);
                release(self, index);
                Err(io::Error::other(e))
            }
        }
    }

    fn rx_buf(&self, b: nagare_ipc::BufRef) -> io::Result<RxBuf> {
        let c = self.lock()?;
        match c.pool.shared(b.index, b.offset, b.len) {
            Ok(bytes) => Ok(RxBuf { netd: self.clone(), index: b.index, bytes }),
            Err(e) => {
                drop(c);
                release(self, b.index);
                Err(io::Error::other(e))
            }
        }
    }
}

fn release(netd: &Session, index: u32) {
    if netd.is_abandoned() {
        return;
    }
    if let Ok(mut c) = netd.lock() {
        let _ = c.pool.release(index);
    }
}

impl TxBuf {
    /// Hands the buffer over for a request of `len` bytes.
    fn hand_over(mut self, len: usize) -> io::Result<(u32, u32)> {
        let len = u32::try_from(len)
            .ok()
            .filter(|&l| l as usize <= self.bytes.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "more bytes than the buffer holds"))?;
        self.sent = true;
        Ok((self.index, len))
    }
}

impl Deref for TxBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the buffer is ours (allocated, not handed over): netd
        // does not read or write a buffer its client holds.
        unsafe { self.bytes.as_slice() }
    }
}

impl DerefMut for TxBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; `&mut self` makes this the only view.
        unsafe { self.bytes.as_mut_slice() }
    }
}

impl Drop for TxBuf {
    fn drop(&mut self) {
        if !self.sent {
            release(&self.netd, self.index);
        }
    }
}

impl Deref for RxBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: netd handed the buffer back with its completion; it does
        // not touch it again until we give it to another request.
        unsafe { self.bytes.as_slice() }
    }
}

impl Drop for RxBuf {
    fn drop(&mut self) {
        release(&self.netd, self.index);
    }
}

impl UdpSocket {
    /// Sends the first `len` bytes of `buf` to `addr` without copying them:
    /// the datagram is queued on the socket's path (netd lends the buffer
    /// to the engine, the driver names it in place) and the call returns;
    /// the buffer comes back once the datagram is on the device.
    pub fn send_buf_to(&self, buf: TxBuf, len: usize, addr: impl ToSocketAddrs) -> io::Result<usize> {
        let template = self.send_request(addr)?;
        let mut c = self.h.netd.lock()?;
        c.send_check(self.h.id)?;
        let (index, len) = buf.hand_over(len)?;
        c.queue_owned(self.h.id, index, len as usize, template)?;
        c.publish(self.h.id);
        Ok(len as usize)
    }

    /// [`UdpSocket::send_buf_to`] with a ticket that completes when the
    /// datagram is on the device, so that a sender can pace itself by its
    /// completions; several may be in flight.
    pub fn send_buf_to_async(&self, buf: TxBuf, len: usize, addr: impl ToSocketAddrs) -> io::Result<Ticket> {
        let mut r = self.send_request(addr)?;
        r.flags |= nagare_request::LEND;
        let (index, len) = buf.hand_over(len)?;
        self.h.netd.submit_owned(r, index, len)
    }

    /// The next datagram netd delivered, where it put it (no copy out):
    /// the data, the datagram's whole length and the sender. Waits for one
    /// unless non-blocking.
    pub fn recv_buf_from(&self) -> io::Result<(RxBuf, usize, SocketAddr)> {
        let id = self.h.id;
        let (nonblocking, mut ask) = self.read_mode(true)?;
        let (b, whole, from) = self
            .h
            .settle(self.h.netd.until(nonblocking, self.read_limit.get(), |c| c.take_datagram_buf(id, &mut ask)))?;
        let rx = self.h.netd.rx_buf(b)?;
        Ok((rx, whole, crate::net::in_family(from, self.local_addr()?.is_ipv6())))
    }
}

impl TcpStream {
    /// Sends the first `len` bytes of `buf` without copying them: the
    /// buffer is queued on the stream's path and lent to the stack, which
    /// sends (and retransmits) from it in place; it comes back once its
    /// bytes are acknowledged. Returns at once; an error met later is
    /// returned by the next call.
    pub fn send_buf(&self, buf: TxBuf, len: usize) -> io::Result<usize> {
        let mut c = self.h.netd.lock()?;
        c.send_check(self.h.id)?;
        let (index, len) = buf.hand_over(len)?;
        c.queue_owned(self.h.id, index, len as usize, request(Op::Send, self.h.id))?;
        c.publish(self.h.id);
        Ok(len as usize)
    }

    /// [`TcpStream::send_buf`] with a ticket that completes when the bytes
    /// are acknowledged. Requests complete in order of the stream, so a
    /// window of tickets keeps the connection busy.
    pub fn send_buf_async(&self, buf: TxBuf, len: usize) -> io::Result<Ticket> {
        let mut r = request(Op::Send, self.h.id);
        r.flags |= nagare_request::LEND;
        let (index, len) = buf.hand_over(len)?;
        self.h.netd.submit_owned(r, index, len)
    }

    /// Up to `max` bytes netd delivered, where it put them when they fill
    /// one of its buffers whole (copied into a buffer of their own
    /// otherwise); empty at the end of the stream. Waits for data unless
    /// non-blocking.
    pub fn recv_buf(&self, max: usize) -> io::Result<RxBuf> {
        let id = self.h.id;
        let max = max.max(1);
        let (nonblocking, mut ask) = self.read_mode(true)?;
        let taken = self
            .h
            .settle(self.h.netd.until(nonblocking, self.read_limit.get(), |c| c.take_stream(id, max, &mut ask)))?;
        match taken {
            Some(b) => self.h.netd.rx_buf(b),
            None => {
                // The end of the stream: an empty buffer.
                let index =
                    self.h.netd.lock()?.pool.alloc().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOBUFS))?;
                self.h.netd.rx_buf(nagare_ipc::BufRef { index, offset: 0, len: 0 })
            }
        }
    }
}
