//! A Linux TAP device: Ethernet frames to and from the kernel's own stack.
//!
//! The kernel side of the TAP is an ordinary network interface (give it an
//! address with `ip addr add`, and `ping`, `curl` and friends talk to
//! nagare through it); this side reads and writes whole Ethernet frames.
//! This is the edge where bytes enter and leave the process, so each
//! received frame is copied once, by `read`, straight into a pool buffer at
//! [`RX_HEADROOM`]; transmitted frames are handed to the kernel slice by
//! slice with `writev`, without gathering them first.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::Instant;

use crate::device::{Device, DeviceStats, ETHERNET_HEADER_LEN, RX_HEADROOM};

/// Longest interface name Linux accepts (`IFNAMSIZ` less the NUL).
pub const MAX_IFNAME_LEN: usize = libc::IFNAMSIZ - 1;

/// Chunks of a frame passed to `writev` from the stack; longer chains use
/// a heap array.
const INLINE_IOVECS: usize = 16;

/// A TAP interface opened through `/dev/net/tun`, in non-blocking mode.
#[derive(Debug)]
pub struct TapDevice {
    file: File,
    name: String,
    created: bool,
    mtu: usize,
    stats: DeviceStats,
}

fn validate_name(name: &str) -> io::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_IFNAME_LEN
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?}: 1 to {MAX_IFNAME_LEN} printable characters, no '/', ':' or spaces"),
        ))
    }
}

fn with_context(e: io::Error, what: &str, name: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what} on {name}: {e}"))
}

/// An `ifreq` naming interface `name` (already validated), all else zero.
fn ifreq_for(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is a plain C struct (a name array and a union of
    // integers, sockaddrs and a pointer); all-zero bytes are a valid value
    // of every field.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    ifr
}

/// An `AF_INET` datagram socket, the handle Linux takes interface ioctls on.
fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments; no memory is
    // passed.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody
    // else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Runs interface ioctl `request` on a control socket.
fn interface_ioctl(request: libc::c_ulong, ifr: &mut libc::ifreq) -> io::Result<()> {
    let sock = control_socket()?;
    // SAFETY: `request` is one of the SIOC[GS]IF* requests, which read and
    // write exactly one `ifreq`; `ifr` is a valid, exclusively borrowed
    // `ifreq` for the duration of the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, ifr as *mut libc::ifreq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl TapDevice {
    /// Opens TAP interface `name`: attaches to it if it exists (a
    /// persistent TAP made with `ip tuntap add`), or creates it, in which
    /// case it disappears when this device is dropped. Brings the link up.
    /// Needs `CAP_NET_ADMIN` (root) unless the TAP was made for this user.
    pub fn open(name: &str) -> io::Result<TapDevice> {
        validate_name(name)?;
        let existed = Path::new("/sys/class/net").join(name).exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .map_err(|e| io::Error::new(e.kind(), format!("opening /dev/net/tun: {e}")))?;
        let mut ifr = ifreq_for(name);
        ifr.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one `ifreq`; `ifr` is valid and
        // exclusively borrowed for the call, and `file` is an open tun fd.
        let rc = unsafe {
            libc::ioctl(
                file.as_raw_fd(),
                libc::TUNSETIFF as _,
                &mut ifr as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            let hint = if e.raw_os_error() == Some(libc::EPERM) {
                " (needs root or CAP_NET_ADMIN)"
            } else if e.raw_os_error() == Some(libc::EINVAL) && existed {
                " (an interface of that name exists and is not a TAP)"
            } else if e.raw_os_error() == Some(libc::EBUSY) {
                " (the TAP is already attached to another process)"
            } else {
                ""
            };
            return Err(io::Error::new(
                e.kind(),
                format!("TUNSETIFF {name}: {e}{hint}"),
            ));
        }
        let mut dev = TapDevice {
            file,
            name: name.to_owned(),
            created: !existed,
            mtu: 0,
            stats: DeviceStats::default(),
        };
        dev.set_up(true)?;
        dev.mtu = dev.read_mtu()?;
        Ok(dev)
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this device created the interface (it then vanishes when
    /// the device is dropped) rather than attaching to an existing one.
    pub fn created(&self) -> bool {
        self.created
    }

    fn read_mtu(&self) -> io::Result<usize> {
        let mut ifr = ifreq_for(&self.name);
        interface_ioctl(libc::SIOCGIFMTU, &mut ifr)
            .map_err(|e| with_context(e, "SIOCGIFMTU", &self.name))?;
        // SAFETY: SIOCGIFMTU filled in the `ifru_mtu` member of the union.
        let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
        Ok(usize::try_from(mtu).unwrap_or(0))
    }

    /// Sets the interface's MTU (the kernel side sends IP packets up to
    /// this size).
    pub fn set_mtu(&mut self, mtu: usize) -> io::Result<()> {
        let mut ifr = ifreq_for(&self.name);
        ifr.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {mtu} out of range"),
            )
        })?;
        interface_ioctl(libc::SIOCSIFMTU, &mut ifr)
            .map_err(|e| with_context(e, "SIOCSIFMTU", &self.name))?;
        self.mtu = self.read_mtu()?;
        Ok(())
    }

    /// Brings the interface up or down.
    pub fn set_up(&self, up: bool) -> io::Result<()> {
        let mut ifr = ifreq_for(&self.name);
        interface_ioctl(libc::SIOCGIFFLAGS, &mut ifr)
            .map_err(|e| with_context(e, "SIOCGIFFLAGS", &self.name))?;
        // SAFETY: SIOCGIFFLAGS filled in the `ifru_flags` member.
        let flags = unsafe { ifr.ifr_ifru.ifru_flags };
        let up_flag = libc::IFF_UP as libc::c_short;
        ifr.ifr_ifru.ifru_flags = if up {
            flags | up_flag
        } else {
            flags & !up_flag
        };
        interface_ioctl(libc::SIOCSIFFLAGS, &mut ifr)
            .map_err(|e| with_context(e, "SIOCSIFFLAGS", &self.name))
    }

    /// The MAC address of the kernel's side of the TAP. The stack on this
    /// side must use a different one.
    pub fn kernel_mac(&self) -> io::Result<[u8; 6]> {
        let mut ifr = ifreq_for(&self.name);
        interface_ioctl(libc::SIOCGIFHWADDR, &mut ifr)
            .map_err(|e| with_context(e, "SIOCGIFHWADDR", &self.name))?;
        // SAFETY: SIOCGIFHWADDR filled in the `ifru_hwaddr` member.
        let data = unsafe { ifr.ifr_ifru.ifru_hwaddr.sa_data };
        let mut mac = [0u8; 6];
        for (dst, src) in mac.iter_mut().zip(data.iter()) {
            *dst = *src as u8;
        }
        Ok(mac)
    }

    /// Reads one frame into `space`, with one spare byte after it so that a
    /// frame too long for `space` is recognised (the kernel discards what
    /// does not fit and reports the full length). `Ok(None)` when no frame
    /// is waiting.
    fn read_frame(&self, space: &mut [u8]) -> io::Result<Option<usize>> {
        let mut spare = [0u8; 1];
        let iov = [
            libc::iovec {
                iov_base: space.as_mut_ptr().cast(),
                iov_len: space.len(),
            },
            libc::iovec {
                iov_base: spare.as_mut_ptr().cast(),
                iov_len: spare.len(),
            },
        ];
        loop {
            // SAFETY: both iovecs point into buffers exclusively borrowed for
            // the duration of the call (`space` and `spare`), with their
            // exact lengths; the fd is the open tun file.
            let n = unsafe {
                libc::readv(
                    self.file.as_raw_fd(),
                    iov.as_ptr(),
                    iov.len() as libc::c_int,
                )
            };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => return Ok(None),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(e),
            }
        }
    }

    /// Writes one frame with `writev`; returns the bytes written.
    fn write_frame(&self, frame: &PacketBuf) -> io::Result<usize> {
        let iovec_of = |chunk: &[u8]| libc::iovec {
            iov_base: chunk.as_ptr() as *mut libc::c_void,
            iov_len: chunk.len(),
        };
        let mut inline = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; INLINE_IOVECS];
        let heap: Vec<libc::iovec>;
        let iovs: &[libc::iovec] = if frame.slice_count() <= INLINE_IOVECS {
            let mut n = 0;
            for (slot, chunk) in inline.iter_mut().zip(frame.chunks()) {
                *slot = iovec_of(chunk);
                n += 1;
            }
            &inline[..n]
        } else {
            heap = frame.chunks().map(iovec_of).collect();
            &heap
        };
        let count = libc::c_int::try_from(iovs.len()).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "frame has too many slices")
        })?;
        loop {
            // SAFETY: every iovec points into a slice of `frame`, which is
            // borrowed (and so kept alive and unchanged) for the duration of
            // the call; writev only reads through them.
            let n = unsafe { libc::writev(self.file.as_raw_fd(), iovs.as_ptr(), count) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Device for TapDevice {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        _now: Instant,
    ) -> io::Result<usize> {
        let mut received = 0;
        while received < max {
            let Ok(mut buf) = pool.alloc() else {
                // No buffer: take the frame off the kernel's queue anyway
                // (as a NIC without receive descriptors drops), so that the
                // fd does not stay readable forever.
                let mut discard = [0u8; 1];
                match self.read_frame(&mut discard) {
                    Ok(Some(_)) => {
                        self.stats.rx_dropped_no_buffer += 1;
                        continue;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.stats.rx_errors += 1;
                        return if received > 0 { Ok(received) } else { Err(e) };
                    }
                }
            };
            let Some(bytes) = buf.as_mut_slice() else {
                // A fresh pool buffer is never shared; be safe anyway.
                break;
            };
            let space = bytes.get_mut(RX_HEADROOM..).unwrap_or_default();
            let capacity = space.len();
            match self.read_frame(space) {
                Ok(Some(n)) if n > capacity => self.stats.rx_dropped_oversize += 1,
                Ok(Some(0)) => break,
                Ok(Some(n)) => {
                    if let Some(frame) = PacketBuf::from_buffer(buf, RX_HEADROOM, RX_HEADROOM + n) {
                        self.stats.rx_frames += 1;
                        self.stats.rx_bytes += n as u64;
                        out.push(frame);
                        received += 1;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.stats.rx_errors += 1;
                    return if received > 0 { Ok(received) } else { Err(e) };
                }
            }
        }
        Ok(received)
    }

    fn transmit_batch(
        &mut self,
        frames: &mut VecDeque<PacketBuf>,
        _now: Instant,
    ) -> io::Result<usize> {
        let mut taken = 0;
        while let Some(frame) = frames.front() {
            let len = frame.len();
            if len < ETHERNET_HEADER_LEN || len > self.mtu + ETHERNET_HEADER_LEN {
                frames.pop_front();
                self.stats.tx_errors += 1;
                taken += 1;
                continue;
            }
            match self.write_frame(frame) {
                Ok(n) => {
                    if n == len {
                        self.stats.tx_frames += 1;
                        self.stats.tx_bytes += len as u64;
                    } else {
                        self.stats.tx_errors += 1;
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => {
                    break
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EMSGSIZE)) => {
                    // The kernel refused this frame: drop it, go on.
                    self.stats.tx_errors += 1;
                }
                Err(e) => {
                    self.stats.tx_errors += 1;
                    return if taken > 0 {
                        Ok(taken)
                    } else {
                        Err(with_context(e, "writev", &self.name))
                    };
                }
            }
            frames.pop_front();
            taken += 1;
        }
        Ok(taken)
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(validate_name("tap0").is_ok());
        assert!(validate_name("abcdefghijklmno").is_ok());
        for bad in [
            "",
            "abcdefghijklmnop",
            "a/b",
            "a b",
            "a:1",
            ".",
            "..",
            "tab\t",
        ] {
            let e = validate_name(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        let e = TapDevice::open("no/such").unwrap_err();
        assert!(e.to_string().contains("invalid interface name"));
    }
}
