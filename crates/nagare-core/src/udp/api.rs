//! The UDP socket calls.

use super::socket::UdpDatagram;
use super::sockets::UdpHandle;
use super::UDP_MAX_PAYLOAD;
use crate::buf::{ChecksumState, Offload, PacketBuf};
use crate::icmp::IcmpError;
use crate::iface::{Error, Interface, HEADROOM};
use crate::time::Instant;
use core::net::SocketAddrV4;
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

    /// Binds a UDP socket to `local`; port 0 picks a free ephemeral port,
    /// address 0.0.0.0 receives on any of ours.
    pub fn bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, Error> {
        let ip = *local.ip();
        if !ip.is_unspecified() && !self.iface.has_address(ip) {
            return Err(Error::AddrNotAvailable);
        }
        let config = &self.iface.config;
        let (packets, bytes) = (config.udp_rx_queue_packets, config.udp_rx_queue_bytes);
        self.iface.udp.bind(ip, local.port(), packets, bytes)
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
        let iface = &mut *self.iface;
        let local = iface.udp.socket(handle).ok_or(Error::InvalidHandle)?.local;
        // Whatever a chain promised before, this datagram's checksum is
        // computed here, in full.
        payload.set_offload(Offload::NONE);
        if payload.len() > UDP_MAX_PAYLOAD {
            return Err(Error::MessageTooLong);
        }
        if dst.port() == 0 || dst.ip().is_unspecified() || dst.ip().is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src =
            if local.ip().is_unspecified() { iface.source_for(*dst.ip()).ok_or(Error::NoRoute)? } else { *local.ip() };
        let payload_len = payload.len();
        // A device that completes checksums gets the datagram's partial,
        // unless it will be cut into IP fragments (a device completes the
        // checksum of a whole transport segment only).
        let offload =
            iface.caps.tx_offloads.checksum && payload_len + UDP_HEADER_LEN + IPV4_HEADER_LEN <= iface.caps.mtu;
        let payload_sum = if offload { Checksum::default() } else { payload.checksum() };
        let header = payload.prepend(&iface.pool, UDP_HEADER_LEN)?;
        let repr = nagare_wire::UdpRepr { src_port: local.port(), dst_port: dst.port() };
        if offload {
            repr.emit_header_partial(header, payload_len, src, *dst.ip())
        } else {
            repr.emit_header(header, payload_len, src, *dst.ip(), payload_sum)
        }
        .map_err(|_| Error::MessageTooLong)?;
        if offload {
            payload.set_offload(Offload { checksum: ChecksumState::Partial, segment_size: 0 });
        }
        let ip = Ipv4Repr::new(src, *dst.ip(), IpProtocol::Udp, payload.len(), iface.config.ttl);
        iface.send_ip(ip, payload, now)?;
        iface.counters.udp_sent += 1;
        Ok(())
    }

    /// The next datagram received on `handle`, without copying its payload.
    pub fn recv(&mut self, handle: UdpHandle) -> Result<Option<UdpDatagram>, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.dequeue())
    }

    /// Copies the next datagram into `buf`; returns its length (truncated
    /// to `buf`, as `recv_from` does) and sender.
    pub fn recv_from(&mut self, handle: UdpHandle, buf: &mut [u8]) -> Result<Option<(usize, SocketAddrV4)>, Error> {
        Ok(self.recv(handle)?.map(|d| (d.payload.copy_out(0, buf), d.source)))
    }

    /// Takes the last ICMP error reported for this socket's datagrams.
    pub fn take_error(&mut self, handle: UdpHandle) -> Result<Option<IcmpError>, Error> {
        let socket = self.iface.udp.socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.error.take())
    }
}
