//! Zero-copy calls: the application writes its data straight into a
//! buffer of its region and reads received data where netd put it, as the
//! AnT application works in its data area (`alloc_tx`, `send_buf`,
//! `recv_buf`); and asynchronous sends, several in flight at once.
//!
//! A [`TxBuf`] or [`RxBuf`] is a region buffer this application holds; netd
//! does not touch a buffer its client holds, so the slice views are
//! ordinary memory while the value lives. Dropping either hands the buffer
//! back to the pool.

use crate::net::{sent_count, v4, TcpStream, UdpSocket};
use crate::{request, set_wait_limit, Data, Session, Ticket};
use nagare_ipc::SharedBytes;
use nagare_request::{encode_addr, Op};
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
    /// A region buffer to write data into and send with `send_buf`
    /// (`ENOBUFS` when all are in use or in flight).
    pub fn alloc_tx(&self) -> io::Result<TxBuf> {
        let mut c = self.lock()?;
        let size = c.pool.buffer_size();
        let index = c.pool.alloc().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOBUFS))?;
        match c.pool.shared(index, 0, size) {
            Ok(bytes) => Ok(TxBuf { netd: self.clone(), index, bytes, sent: false }),
            Err(e) => {
                let _ = c.pool.release(index);
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
    /// Sends the first `len` bytes of `buf` to `addr` without copying them
    /// (netd lends them to the engine, the driver names them in place).
    /// Returns when the datagram is on the device: after the next hop's
    /// address is resolved, the first time (up to about 3 s when it does
    /// not answer).
    pub fn send_buf_to(&self, buf: TxBuf, len: usize, addr: impl ToSocketAddrs) -> io::Result<usize> {
        let mut r = self.mode.apply(request(Op::SendTo, self.h.id));
        r.flags |= nagare_request::LEND;
        r.aux[0] = encode_addr(v4(addr)?);
        let (index, len) = buf.hand_over(len)?;
        let (c, _) = self.h.netd.call(r, Data::Owned { index, len })?;
        sent_count(c.aux[0], len as usize)
    }

    /// [`UdpSocket::send_buf_to`] without waiting: the request is posted
    /// and the ticket takes its completion later, so many sends can be in
    /// flight at once.
    pub fn send_buf_to_async(&self, buf: TxBuf, len: usize, addr: impl ToSocketAddrs) -> io::Result<Ticket> {
        let mut r = request(Op::SendTo, self.h.id);
        r.flags |= nagare_request::LEND;
        r.aux[0] = encode_addr(v4(addr)?);
        let (index, len) = buf.hand_over(len)?;
        self.h.netd.submit_owned(r, index, len)
    }

    /// Posts a receive and returns at once: the ticket's
    /// [`RecvTicket::wait`] gives the datagram where netd put it. Several
    /// may be posted, as a NIC's receive ring is filled ahead.
    pub fn recv_buf_from_async(&self) -> io::Result<RecvTicket> {
        let mut r = request(Op::RecvFrom, self.h.id);
        set_wait_limit(&mut r, self.read_limit.get());
        let size = self.h.netd.max_chunk();
        Ok(RecvTicket(self.h.netd.submit_async(r, Data::Keep { len: size })?))
    }

    /// Receives a datagram where netd puts it, without copying it out:
    /// the data, the datagram's whole length and the sender.
    pub fn recv_buf_from(&self) -> io::Result<(RxBuf, usize, SocketAddr)> {
        let mut r = self.mode.apply(request(Op::RecvFrom, self.h.id));
        set_wait_limit(&mut r, self.read_limit.get());
        let size = self.h.netd.max_chunk();
        let (c, _, kept) = self.h.netd.call_keep(r, Data::Keep { len: size })?;
        let b = kept.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "netd kept the buffer"))?;
        let rx = self.h.netd.rx_buf(b)?;
        let whole = usize::try_from(c.aux[0]).unwrap_or(usize::MAX).max(rx.len());
        Ok((rx, whole, crate::net::addr_of(c.aux[1])))
    }
}

impl TcpStream {
    /// Sends the first `len` bytes of `buf` without copying them: the
    /// buffer is lent to the stack, which sends from it (and retransmits
    /// from it) in place. Waits until all of it fits in the send buffer,
    /// and returns when the stack no longer holds it (its bytes are
    /// acknowledged; if the connection failed meanwhile, the next call
    /// says so). Use [`TcpStream::send_buf_async`] to keep several in
    /// flight.
    pub fn send_buf(&self, buf: TxBuf, len: usize) -> io::Result<usize> {
        let mut r = self.mode.apply(request(Op::Send, self.h.id));
        r.flags |= nagare_request::LEND;
        set_wait_limit(&mut r, self.write_limit.get());
        let (index, len) = buf.hand_over(len)?;
        let (c, _) = self.h.netd.call(r, Data::Owned { index, len })?;
        sent_count(c.aux[0], len as usize)
    }

    /// [`TcpStream::send_buf`] without waiting: the ticket completes when
    /// the bytes are acknowledged. Requests complete in order of the
    /// stream, so a window of tickets keeps the connection busy.
    pub fn send_buf_async(&self, buf: TxBuf, len: usize) -> io::Result<Ticket> {
        let mut r = request(Op::Send, self.h.id);
        r.flags |= nagare_request::LEND;
        let (index, len) = buf.hand_over(len)?;
        self.h.netd.submit_owned(r, index, len)
    }

    /// Posts a receive of up to `max` bytes and returns at once: the
    /// ticket's [`StreamRecvTicket::wait`] gives them where netd put them
    /// (empty at the end of the stream). Several may be posted; they take
    /// the stream's bytes in the order they were posted.
    pub fn recv_buf_async(&self, max: usize) -> io::Result<StreamRecvTicket> {
        let mut r = request(Op::Recv, self.h.id);
        set_wait_limit(&mut r, self.read_limit.get());
        let len = max.min(self.h.netd.max_chunk());
        Ok(StreamRecvTicket(self.h.netd.submit_async(r, Data::Keep { len })?))
    }

    /// Receives up to `max` bytes where netd puts them (empty at the end
    /// of the stream).
    pub fn recv_buf(&self, max: usize) -> io::Result<RxBuf> {
        let mut r = self.mode.apply(request(Op::Recv, self.h.id));
        set_wait_limit(&mut r, self.read_limit.get());
        let (_, _, kept) = self.h.netd.call_keep(r, Data::Keep { len: max.min(self.h.netd.max_chunk()) })?;
        let b = kept.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "netd kept the buffer"))?;
        self.h.netd.rx_buf(b)
    }
}

/// A receive posted with [`TcpStream::recv_buf_async`].
pub struct StreamRecvTicket(Ticket);

impl StreamRecvTicket {
    /// Waits for the bytes (empty at the end of the stream).
    pub fn wait(mut self) -> io::Result<RxBuf> {
        let taken = self.0.take_keep(true, true)?;
        self.finish(taken)
    }

    /// The bytes if they have arrived, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<RxBuf>> {
        match self.0.take_keep(false, true)? {
            None => Ok(None),
            taken => self.finish(taken).map(Some),
        }
    }

    fn finish(&self, taken: Option<(nagare_request::Completion, Option<nagare_ipc::BufRef>)>) -> io::Result<RxBuf> {
        let (_, kept) = taken.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no completion"))?;
        let b = kept.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "netd kept the buffer"))?;
        self.0.netd().rx_buf(b)
    }
}

/// A receive posted with [`UdpSocket::recv_buf_from_async`].
pub struct RecvTicket(Ticket);

impl RecvTicket {
    /// Waits for the datagram: its bytes, its whole length and its sender.
    pub fn wait(mut self) -> io::Result<(RxBuf, usize, SocketAddr)> {
        let taken = self.0.take_keep(true, true)?;
        self.finish(taken)
    }

    /// The datagram if it has arrived, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<(RxBuf, usize, SocketAddr)>> {
        match self.0.take_keep(false, true)? {
            None => Ok(None),
            taken => self.finish(taken).map(Some),
        }
    }

    fn finish(
        &self,
        taken: Option<(nagare_request::Completion, Option<nagare_ipc::BufRef>)>,
    ) -> io::Result<(RxBuf, usize, SocketAddr)> {
        let (c, kept) = taken.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no completion"))?;
        let b = kept.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "netd kept the buffer"))?;
        let rx = self.0.netd().rx_buf(b)?;
        let whole = usize::try_from(c.aux[0]).unwrap_or(usize::MAX).max(rx.len());
        Ok((rx, whole, crate::net::addr_of(c.aux[1])))
    }
}
