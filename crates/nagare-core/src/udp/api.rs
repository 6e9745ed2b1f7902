//! The UDP socket calls.

use super::output6::udp6_header;
use super::socket::{UdpDatagram, UdpDatagram6};
use super::sockets::UdpHandle;
use super::{UDP6_MAX_PAYLOAD, UDP_MAX_PAYLOAD, UDP_MAX_SEGMENTS};
use crate::buf::{ChecksumState, Offload, PacketBuf};
use crate::icmp::IcmpError;
use crate::iface::{Error, Interface, HEADROOM};
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use nagare_wire::{Checksum, IpProtocol, Ipv4Repr, IPV4_HEADER_LEN, UDP_HEADER_LEN};

/// The UDP socket calls of one interface, borrowed from it
/// ([`Interface::udp`]) for as long as the calls take. To look at a
/// socket without changing anything, see [`Interface::udp_ref`].
#[derive(Debug)]
pub struct Udp<'a> {
    iface: &'a mut Interface,
}

impl<'a> Udp<'a> {
    pub(crate) fn new(iface: &'a mut Interface) -> Self {
        Udp { iface }
    }

    /// Binds a UDP socket to `local`, whose address is local (ours or one
    /// of 127.0.0.0/8); port 0 picks a free ephemeral port, address
    /// 0.0.0.0 receives on every local address.
    pub fn bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, Error> {
        let ip = *local.ip();
        if !ip.is_unspecified() && !self.iface.is_local(ip) {
            return Err(Error::AddrNotAvailable);
        }
        let config = &self.iface.config;
        let (packets, bytes) = (config.udp_rx_queue_packets, config.udp_rx_queue_bytes);
        self.iface.udp.bind(IpAddr::V4(ip), local.port(), packets, bytes)
    }

    /// Binds a UDP socket over IPv6 to `local`, whose address is one of
    /// the interface's IPv6 addresses, `::1`, or `::` (every one of them,
    /// `::1` too); port 0
    /// picks a free ephemeral port. The port is bound apart from IPv4's:
    /// an IPv4 socket may hold the same one. The queue bounds are those of
    /// IPv4 sockets.
    pub fn bind6(&mut self, local: SocketAddrV6) -> Result<UdpHandle, Error> {
        let ip = *local.ip();
        let ours = self.iface.ipv6_address_state(ip).is_some() || self.iface.is_local6(ip);
        if !ip.is_unspecified() && !ours {
            return Err(Error::AddrNotAvailable);
        }
        let config = &self.iface.config;
        let (packets, bytes) = (config.udp_rx_queue_packets, config.udp_rx_queue_bytes);
        self.iface.udp.bind(IpAddr::V6(ip), local.port(), packets, bytes)
    }

    /// Binds a UDP socket over IPv6 to `::` and `port` (0: an ephemeral
    /// port free in both families) that takes IPv4 datagrams to its port
    /// too, as a Linux socket without `IPV6_V6ONLY` does: the port is held
    /// in both families, its IPv4 datagrams are read with
    /// [`recv_any`](Self::recv_any) beside the IPv6 ones, and it sends to
    /// IPv4 destinations with [`send_buf`](Self::send_buf).
    pub fn bind6_dual_stack(&mut self, port: u16) -> Result<UdpHandle, Error> {
        let config = &self.iface.config;
        let (packets, bytes) = (config.udp_rx_queue_packets, config.udp_rx_queue_bytes);
        self.iface.udp.bind_dual_stack(port, packets, bytes)
    }

    /// Sets the most payload bytes a socket's receive queue holds
    /// (SO_RCVBUF): no lower than what it holds now. Returns the limit in
    /// force.
    pub fn set_recv_queue_limit(&mut self, handle: UdpHandle, bytes: usize) -> Result<usize, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        socket.rx_limit_bytes = bytes.max(socket.rx_bytes);
        Ok(socket.rx_limit_bytes)
    }

    /// Closes a UDP socket, dropping what it had not read.
    pub fn close(&mut self, handle: UdpHandle) -> Result<(), Error> {
        self.iface.udp.close(handle)
    }

    /// Sends `data` to `dst`, copying it once into packet buffers.
    pub fn send_to(&mut self, handle: UdpHandle, data: &[u8], dst: SocketAddrV4, now: Instant) -> Result<(), Error> {
        if data.len() > UDP_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        let payload = PacketBuf::from_slice(&self.iface.pool, HEADROOM, data)?;
        self.send_buf(handle, payload, dst, now)
    }

    /// Sends a payload that is already in packet buffers, without copying.
    pub fn send_buf(
        &mut self,
        handle: UdpHandle,
        mut payload: PacketBuf,
        dst: SocketAddrV4,
        now: Instant,
    ) -> Result<(), Error> {
        // Whatever a chain promised before, this datagram's checksum is
        // computed here, in full.
        payload.set_offload(Offload::NONE);
        if payload.len() > UDP_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        let (src, local_port) = self.endpoints(handle, dst)?;
        self.emit(src, local_port, payload, dst, 0, now)?;
        self.iface.counters.udp_sent += 1;
        Ok(())
    }

    /// Sends `data` to `dst` as datagrams of `segment_size` bytes each, the
    /// last one shorter if the size does not divide it, as a Linux socket
    /// with `UDP_SEGMENT` does; copies it once into packet buffers. See
    /// [`send_buf_segmented`](Self::send_buf_segmented).
    pub fn send_to_segmented(
        &mut self,
        handle: UdpHandle,
        data: &[u8],
        segment_size: usize,
        dst: SocketAddrV4,
        now: Instant,
    ) -> Result<(), Error> {
        if data.len() > UDP_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        let payload = PacketBuf::from_slice(&self.iface.pool, HEADROOM, data)?;
        self.send_buf_segmented(handle, payload, segment_size, dst, now)
    }

    /// Sends `payload` to `dst` as datagrams of `segment_size` bytes each
    /// (the last may be shorter), without copying. On a device that cuts
    /// UDP super-frames ([`TxOffloads::udp_segmentation`]) this is one
    /// frame: one IPv4 and UDP header over the whole payload, its checksum
    /// partial and its offload saying the segment size; otherwise the
    /// engine cuts it into ordinary datagrams, each with its own IP
    /// identification, length and checksum, the same datagrams on the
    /// wire. A segment size of 0, or one the payload does not exceed,
    /// sends one datagram as [`send_buf`](Self::send_buf). Refused with
    /// `MessageTooLong` when a datagram of `segment_size` bytes would not
    /// fit the MTU, or the payload stands for more than
    /// [`UDP_MAX_SEGMENTS`] datagrams. If the engine cuts and runs out of
    /// buffers part-way, the datagrams before the failure are sent.
    ///
    /// [`TxOffloads::udp_segmentation`]: crate::buf::TxOffloads::udp_segmentation
    pub fn send_buf_segmented(
        &mut self,
        handle: UdpHandle,
        mut payload: PacketBuf,
        segment_size: usize,
        dst: SocketAddrV4,
        now: Instant,
    ) -> Result<(), Error> {
        let len = payload.len();
        if segment_size == 0 || len <= segment_size {
            return self.send_buf(handle, payload, dst, now);
        }
        let caps = self.iface.caps;
        if len > UDP_MAX_PAYLOAD
            || segment_size + UDP_HEADER_LEN + IPV4_HEADER_LEN > caps.mtu
            || len.div_ceil(segment_size) > UDP_MAX_SEGMENTS
        {
            return Err(Error::MessageTooLong);
        }
        let (src, local_port) = self.endpoints(handle, dst)?;
        let datagrams = len.div_ceil(segment_size) as u64;
        let offloads = caps.tx_offloads;
        if offloads.checksum && len + UDP_HEADER_LEN + IPV4_HEADER_LEN <= offloads.udp_segmentation {
            let size = u16::try_from(segment_size).map_err(|_| Error::MessageTooLong)?;
            self.emit(src, local_port, payload, dst, size, now)?;
            self.iface.counters.udp_sent += datagrams;
            self.iface.counters.udp_super_frames_sent += 1;
            return Ok(());
        }
        payload.set_offload(Offload::NONE);
        while !payload.is_empty() {
            let rest = payload.split_off(segment_size);
            self.emit(src, local_port, payload, dst, 0, now)?;
            self.iface.counters.udp_sent += 1;
            payload = rest;
        }
        Ok(())
    }

    /// Sends `data` over IPv6 to `dst` from an IPv6 socket, copying it
    /// once into packet buffers.
    pub fn send_to6(&mut self, handle: UdpHandle, data: &[u8], dst: SocketAddrV6, now: Instant) -> Result<(), Error> {
        if data.len() > UDP6_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        let payload = PacketBuf::from_slice(&self.iface.pool, HEADROOM, data)?;
        self.send_buf6(handle, payload, dst, now)
    }

    /// Sends a payload that is already in packet buffers over IPv6 to
    /// `dst`, without copying. The source is the socket's address, or for
    /// a socket bound to `::` a preferred address of `dst`'s scope; the
    /// next hop is resolved through the neighbour cache, and a datagram
    /// past the MTU goes in fragments. Multicast destinations are refused.
    pub fn send_buf6(
        &mut self,
        handle: UdpHandle,
        mut payload: PacketBuf,
        dst: SocketAddrV6,
        now: Instant,
    ) -> Result<(), Error> {
        payload.set_offload(Offload::NONE);
        if payload.len() > UDP6_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        let (src, src_port) = self.endpoints6(handle, dst)?;
        let payload_len = payload.len();
        let payload_sum = payload.checksum();
        let udp = udp6_header((src, src_port), (*dst.ip(), dst.port()), payload_len, payload_sum)
            .ok_or(Error::MessageTooLong)?;
        let iface = &mut *self.iface;
        let Ok(header) = payload.prepend(&iface.pool, UDP_HEADER_LEN) else {
            iface.counters.drop_no_buffer += 1;
            return Err(Error::NoBuffer);
        };
        header.copy_from_slice(&udp);
        iface.send_ipv6(Some(src), *dst.ip(), IpProtocol::Udp, payload, None, now)?;
        iface.counters.udp6_sent += 1;
        Ok(())
    }

    /// The source address and port of a datagram over IPv6 from `handle`
    /// to `dst`, if `dst` can be sent to.
    fn endpoints6(&self, handle: UdpHandle, dst: SocketAddrV6) -> Result<(Ipv6Addr, u16), Error> {
        let iface = &*self.iface;
        let SocketAddr::V6(local) = iface.udp.socket(handle).ok_or(Error::InvalidHandle)?.local else {
            return Err(Error::Unaddressable);
        };
        if dst.port() == 0 || dst.ip().is_unspecified() || dst.ip().is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src = if local.ip().is_unspecified() {
            iface.ipv6_source_for(*dst.ip()).ok_or(Error::AddrNotAvailable)?
        } else {
            *local.ip()
        };
        Ok((src, local.port()))
    }

    /// The source address and port of a datagram from `handle` (an IPv4
    /// socket, or a dual-stack IPv6 one) to `dst`, if `dst` can be sent to.
    fn endpoints(&self, handle: UdpHandle, dst: SocketAddrV4) -> Result<(Ipv4Addr, u16), Error> {
        let iface = &*self.iface;
        let socket = iface.udp.socket(handle).ok_or(Error::InvalidHandle)?;
        let local = match socket.local {
            SocketAddr::V4(local) => local,
            SocketAddr::V6(local) if socket.dual_stack => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, local.port()),
            SocketAddr::V6(_) => return Err(Error::Unaddressable),
        };
        if dst.port() == 0 || dst.ip().is_unspecified() || dst.ip().is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src =
            if local.ip().is_unspecified() { iface.source_for(*dst.ip()).ok_or(Error::NoRoute)? } else { *local.ip() };
        Ok((src, local.port()))
    }

    /// Puts a UDP header in front of `payload` and hands it to IP. With a
    /// `segment_size`, `payload` is a super-frame's: the header covers all
    /// of it and the device cuts it into datagrams of that size.
    fn emit(
        &mut self,
        src: Ipv4Addr,
        src_port: u16,
        mut payload: PacketBuf,
        dst: SocketAddrV4,
        segment_size: u16,
        now: Instant,
    ) -> Result<(), Error> {
        let iface = &mut *self.iface;
        let payload_len = payload.len();
        // A device that completes checksums gets the datagram's partial,
        // unless it will be cut into IP fragments (a device completes the
        // checksum of a whole transport segment only).
        let offload = iface.caps.tx_offloads.checksum
            && (segment_size != 0
                || payload_len + UDP_HEADER_LEN + IPV4_HEADER_LEN <= iface.path_mtu(IpAddr::V4(*dst.ip()), now));
        let payload_sum = if offload { Checksum::default() } else { payload.checksum() };
        let header = payload.prepend(&iface.pool, UDP_HEADER_LEN)?;
        let repr = nagare_wire::UdpRepr { src_port, dst_port: dst.port() };
        if offload {
            repr.emit_header_partial(header, payload_len, src, *dst.ip())
        } else {
            repr.emit_header(header, payload_len, src, *dst.ip(), payload_sum)
        }
        .map_err(|_| Error::MessageTooLong)?;
        if segment_size != 0 {
            payload.set_offload(Offload::udp_segments(segment_size));
        } else if offload {
            payload.set_offload(Offload::checksum(ChecksumState::Partial));
        }
        let ip = Ipv4Repr::new(src, *dst.ip(), IpProtocol::Udp, payload.len(), iface.config.ttl);
        iface.send_ip(ip, payload, now)
    }

    /// The next datagram received on `handle` (an IPv4 socket), without
    /// copying its payload. An IPv6 socket's datagrams are read with
    /// [`recv6`](Self::recv6): here it has none.
    pub fn recv(&mut self, handle: UdpHandle) -> Result<Option<UdpDatagram>, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.dequeue())
    }

    /// Copies the next datagram into `buf`; returns its length (truncated
    /// to `buf`, as `recv_from` does) and sender.
    pub fn recv_from(&mut self, handle: UdpHandle, buf: &mut [u8]) -> Result<Option<(usize, SocketAddrV4)>, Error> {
        Ok(self.recv(handle)?.map(|d| (d.payload.copy_out(0, buf), d.source)))
    }

    /// The next datagram received over IPv6 on `handle` (an IPv6 socket),
    /// without copying its payload.
    pub fn recv6(&mut self, handle: UdpHandle) -> Result<Option<UdpDatagram6>, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.dequeue6())
    }

    /// Copies the next datagram received over IPv6 into `buf`; returns its
    /// length (truncated to `buf`) and sender.
    pub fn recv_from6(&mut self, handle: UdpHandle, buf: &mut [u8]) -> Result<Option<(usize, SocketAddrV6)>, Error> {
        Ok(self.recv6(handle)?.map(|d| (d.payload.copy_out(0, buf), d.source)))
    }

    /// The next datagram received on `handle`, of either family (a
    /// dual-stack socket receives both): its sender and payload, without
    /// copying.
    pub fn recv_any(&mut self, handle: UdpHandle) -> Result<Option<(SocketAddr, PacketBuf)>, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.dequeue_any())
    }

    /// Connects a socket to `peer` (`None`: no peer, as `AF_UNSPEC`
    /// does), as a Linux socket's `connect`: from then on only an ICMP
    /// error about a datagram to the peer is kept for it. The peer must be
    /// of the socket's family (an IPv4 one, IPv4-mapped or not, for a
    /// dual-stack socket too) and have an address and a port. Sends and
    /// receives are not changed: the caller names the peer.
    pub fn connect(&mut self, handle: UdpHandle, peer: Option<SocketAddr>) -> Result<(), Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        let Some(peer) = peer.map(super::socket::canonical) else {
            socket.peer = None;
            return Ok(());
        };
        let fits = match (socket.local, peer) {
            (SocketAddr::V4(_), SocketAddr::V4(_)) | (SocketAddr::V6(_), SocketAddr::V6(_)) => true,
            (SocketAddr::V6(_), SocketAddr::V4(_)) => socket.dual_stack,
            (SocketAddr::V4(_), SocketAddr::V6(_)) => false,
        };
        if !fits || peer.port() == 0 || peer.ip().is_unspecified() {
            return Err(Error::Unaddressable);
        }
        socket.peer = Some(peer);
        Ok(())
    }

    /// Takes the last ICMP error reported for this socket's datagrams.
    pub fn take_error(&mut self, handle: UdpHandle) -> Result<Option<IcmpError>, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.error.take())
    }

    /// Appends to `out` every socket a datagram or an ICMP error came to
    /// since the last call, each once (as `Tcp::take_events` does for
    /// TCP): a reader can look at those sockets alone. Sockets closed
    /// since are left out.
    pub fn take_events(&mut self, out: &mut Vec<UdpHandle>) {
        self.iface.udp.take_events(out);
    }
}
