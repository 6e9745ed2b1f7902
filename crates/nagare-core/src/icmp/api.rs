//! The ICMP socket calls.

use super::socket::{Echo6Event, EchoEvent};
use super::sockets::EchoHandle;
use crate::buf::PacketBuf;
use crate::iface::{Error, Interface, HEADROOM};
use crate::time::Instant;
use core::net::{Ipv4Addr, Ipv6Addr};
use nagare_wire::{
    Icmpv6EchoHeader, IpProtocol, Ipv4Repr, ICMPV4_HEADER_LEN, ICMPV6_HEADER_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN,
};

/// The ICMP socket calls of one interface, borrowed from it
/// ([`Interface::icmp`]) for as long as the calls take. To look at a
/// socket without changing anything, see [`Interface::icmp_ref`].
#[derive(Debug)]
pub struct Icmp<'a> {
    iface: &'a mut Interface,
}

impl<'a> Icmp<'a> {
    pub(crate) fn new(iface: &'a mut Interface) -> Self {
        Icmp { iface }
    }

    /// Opens an echo socket with ICMP identifier `ident`.
    pub fn echo_open(&mut self, ident: u16) -> Result<EchoHandle, Error> {
        self.iface.icmp.open(ident)
    }

    /// Closes an echo socket.
    pub fn echo_close(&mut self, handle: EchoHandle) -> Result<(), Error> {
        self.iface.icmp.close(handle)
    }

    /// Sends an echo request with `data` as its payload.
    pub fn echo_send(
        &mut self,
        handle: EchoHandle,
        dst: Ipv4Addr,
        seq_no: u16,
        data: &[u8],
        now: Instant,
    ) -> Result<(), Error> {
        let iface = &mut *self.iface;
        let ident = iface.icmp.echo_socket(handle).ok_or(Error::InvalidHandle)?.ident;
        if data.len() > 65535 - IPV4_HEADER_LEN - ICMPV4_HEADER_LEN {
            return Err(Error::MessageTooLong);
        }
        if dst.is_unspecified() || dst.is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src = iface.source_for(dst).ok_or(Error::NoRoute)?;
        let mut payload = PacketBuf::from_slice(&iface.pool, HEADROOM, data)?;
        let data_sum = payload.checksum();
        let header = payload.prepend(&iface.pool, ICMPV4_HEADER_LEN)?;
        let echo = nagare_wire::Icmpv4EchoHeader { reply: false, ident, seq_no };
        echo.emit(header, data_sum).map_err(|_| Error::MessageTooLong)?;
        let ip = Ipv4Repr::new(src, dst, IpProtocol::Icmp, payload.len(), iface.config.ttl);
        iface.send_ip(ip, payload, now)
    }

    /// The next reply or error received on an echo socket.
    pub fn echo_recv(&mut self, handle: EchoHandle) -> Result<Option<EchoEvent>, Error> {
        let socket = self.iface.icmp.echo_socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.events.pop_front())
    }

    /// Sends an ICMPv6 echo request with `data` as its payload, from our
    /// preferred address of `dst`'s scope, resolving `dst` through the
    /// neighbour cache. Fails with [`Error::AddrNotAvailable`] while no
    /// address of that scope has passed duplicate address detection.
    pub fn echo6_send(
        &mut self,
        handle: EchoHandle,
        dst: Ipv6Addr,
        seq_no: u16,
        data: &[u8],
        now: Instant,
    ) -> Result<(), Error> {
        let iface = &mut *self.iface;
        let ident = iface.icmp.echo_socket(handle).ok_or(Error::InvalidHandle)?.ident;
        if data.len() > 65535 - IPV6_HEADER_LEN - ICMPV6_HEADER_LEN {
            return Err(Error::MessageTooLong);
        }
        if dst.is_unspecified() || dst.is_multicast() {
            return Err(Error::Unaddressable);
        }
        let src = iface.ipv6_source_for(dst).ok_or(Error::AddrNotAvailable)?;
        let mut payload = PacketBuf::from_slice(&iface.pool, HEADROOM, data)?;
        let data_sum = payload.checksum();
        let header = payload.prepend(&iface.pool, ICMPV6_HEADER_LEN)?;
        let echo = Icmpv6EchoHeader { reply: false, ident, seq_no };
        echo.emit(header, data.len(), src, dst, data_sum).map_err(|_| Error::MessageTooLong)?;
        iface.send_ipv6(Some(src), dst, IpProtocol::Icmpv6, payload, None, now)?;
        iface.counters.icmp6_echo_requests_sent += 1;
        Ok(())
    }

    /// The next ICMPv6 reply received on an echo socket.
    pub fn echo6_recv(&mut self, handle: EchoHandle) -> Result<Option<Echo6Event>, Error> {
        let socket = self.iface.icmp.echo_socket_mut(handle).ok_or(Error::InvalidHandle)?;
        Ok(socket.events6.pop_front())
    }
}
