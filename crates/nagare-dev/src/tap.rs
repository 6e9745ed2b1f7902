//! A Linux TAP device: Ethernet frames to and from the kernel's own stack.
//!
//! The kernel side of the TAP is an ordinary network interface (give it an
//! address with `ip addr add`, and `ping`, `curl` and friends talk to
//! nagare through it); this side reads and writes whole Ethernet frames.
//! This is the edge where bytes enter and leave the process, so each
//! received frame is copied once, by `read`, straight into a pool buffer at
//! [`RX_HEADROOM`]; transmitted frames are handed to the kernel slice by
//! slice with `writev`, without gathering them first.
//!
//! By default the TAP is opened with `IFF_VNET_HDR` and asked for checksum
//! and TCP segmentation offload over IPv4 and IPv6 (`TUNSETOFFLOAD`), as a
//! virtio NIC would be: the kernel then sends and takes TCP super-segments
//! of up to 64 KiB with checksums left partial, so a bulk transfer costs
//! one system call and no checksum pass per 64 KiB instead of per 1.5 KiB.
//! A super-segment is read straight into a chain of pool buffers. Where
//! the kernel refuses IPv6 segmentation, it is asked for IPv4's alone;
//! where it refuses that too, the device falls back to plain frames.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nagare_core::buf::{Buffer, BufferPool, Offload, PacketBuf, TxOffloads};
use nagare_core::tcp::syn_guard::SynFilter;
use nagare_core::{Capabilities, Instant};

use crate::device::UdpShed;
use crate::device::{frame_fits, Device, DeviceStats, RX_HEADROOM};
use crate::tap_filter;
use crate::vnet::{self, VNET_HDR_LEN};
use nagare_wire::ETHERNET_HEADER_LEN;

/// Longest interface name Linux accepts (`IFNAMSIZ` less the NUL).
pub const MAX_IFNAME_LEN: usize = libc::IFNAMSIZ - 1;

/// Chunks of a frame passed to `writev` from the stack; longer chains use
/// a heap array.
const INLINE_IOVECS: usize = 48;
/// Slices of a frame written as they are: one `writev` takes at most
/// `IOV_MAX` (1024 on Linux) iovecs, the virtio header one of them.
const MAX_IOVECS: usize = 1023;

/// Largest frame the kernel hands over with segmentation offload on: an
/// IP packet of 64 KiB and an Ethernet header with a VLAN tag.
const MAX_OFFLOADED_FRAME: usize = 65535 + ETHERNET_HEADER_LEN + 4;

/// Receive buffers in one read with offload on: the first, then spares
/// for the rest of a super-segment.
const MAX_RX_IOVECS: usize = 64;
/// Receive buffers in one read that the common case fits in.
const FEW_RX_IOVECS: usize = 8;

/// A TAP interface opened through `/dev/net/tun`, in non-blocking mode.
#[derive(Debug)]
pub struct TapDevice {
    file: File,
    name: String,
    /// Attached with `IFF_MULTI_QUEUE`.
    multi_queue: bool,
    created: bool,
    mtu: usize,
    /// Every frame is preceded by a `virtio_net_hdr` (`IFF_VNET_HDR`).
    vnet_header: bool,
    offloads: TxOffloads,
    /// Pool buffers kept ready for the tail of a super-segment; only the
    /// ones a frame fills leave this list.
    spares: Vec<Buffer>,
    /// The filter attached to every queue of the TAP ([`tap_filter`]:
    /// the SYN filter and the UDP shed in one program). The kernel keeps
    /// its address and reads it again to filter a queue that attaches
    /// later (with TUNSETQUEUE, or TUNSETIFF without IFF_NO_PI), so it
    /// stays here, unchanged, for as long as it is attached; dropping the
    /// device detaches it. A queue opened with
    /// [`open_queue`](Self::open_queue) gets it from here too.
    syn_filter: Option<Vec<libc::sock_filter>>,
    /// What the program was made from: the SYN filter and the UDP shed
    /// last set.
    syn: SynFilter,
    shed: UdpShed,
    stats: DeviceStats,
}

fn validate_name(name: &str) -> io::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_IFNAME_LEN
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "invalid interface name {name:?}: 1 to {MAX_IFNAME_LEN} printable characters, no '/', ':' or spaces"
            ),
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

/// A fresh non-blocking `/dev/net/tun` file.
fn open_tun() -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| {
            let hint = match e.kind() {
                io::ErrorKind::NotFound => " (the kernel's tun driver is not there: load it with `modprobe tun`)",
                io::ErrorKind::PermissionDenied => " (run as root, or let this user read and write /dev/net/tun)",
                _ => "",
            };
            io::Error::new(e.kind(), format!("opening /dev/net/tun: {e}{hint}"))
        })
}

/// Attaches the open tun file to TAP `name` (TUNSETIFF).
fn attach(file: &File, name: &str, vnet_header: bool, multi_queue: bool) -> io::Result<()> {
    let mut ifr = ifreq_for(name);
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if vnet_header {
        flags |= libc::IFF_VNET_HDR;
    }
    if multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `ifreq`; `ifr` is valid and
    // exclusively borrowed for the call, and `file` is an open tun fd.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut ifr as *mut libc::ifreq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the virtio header length the kernel reads and writes.
fn set_vnet_header_len(file: &File) -> io::Result<()> {
    let len = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one int through the pointer, which
    // points to `len`, alive and unchanged for the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETVNETHDRSZ as _, &len as *const libc::c_int) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The offloads asked of the kernel (TUNSETOFFLOAD), first to last until
/// one is granted: partial checksums and TCP super-segments over IPv4 and
/// IPv6, else over IPv4 alone. They say what the kernel may hand us: it
/// takes super-segments of either family from us with any of them.
const OFFLOAD_REQUESTS: [libc::c_uint; 2] =
    [libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6, libc::TUN_F_CSUM | libc::TUN_F_TSO4];

/// Tells the kernel we take partial checksums and TCP super-segments, the
/// most of [`OFFLOAD_REQUESTS`] it grants; the error of the last request
/// when it grants none.
fn request_offloads(file: &File) -> io::Result<()> {
    let mut refused = io::Error::from_raw_os_error(libc::EINVAL);
    for features in OFFLOAD_REQUESTS {
        // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned
        // long); no memory is passed.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETOFFLOAD as _, libc::c_ulong::from(features)) };
        if rc == 0 {
            return Ok(());
        }
        refused = io::Error::last_os_error();
    }
    Err(refused)
}

/// Clears the offloads a persistent TAP kept from its last user
/// (TUNSETOFFLOAD 0): without the virtio header a frame cannot say its
/// checksum is partial or that it is a super-segment, so the kernel must
/// complete and cut every one before handing it over.
fn clear_offloads(file: &File) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value; no memory is
    // passed.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETOFFLOAD as _, 0 as libc::c_ulong) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

/// Sets how many frames each queue of TAP interface `name` holds for its
/// reader (`tx_queue_len`: the kernel's side transmits into them, and
/// drops past them, so the length is how long a reader may be away
/// without a loss). Needs `CAP_NET_ADMIN`.
pub fn set_queue_len(name: &str, frames: u32) -> io::Result<()> {
    validate_name(name)?;
    let mut ifr = ifreq_for(name);
    // `ifr_qlen` is the union's int, as the MTU is.
    ifr.ifr_ifru.ifru_mtu = libc::c_int::try_from(frames)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("queue length {frames} out of range")))?;
    interface_ioctl(libc::SIOCSIFTXQLEN, &mut ifr).map_err(|e| with_context(e, "SIOCSIFTXQLEN", name))
}

impl TapDevice {
    /// Opens TAP interface `name`: attaches to it if it exists (a
    /// persistent TAP made with `ip tuntap add`), or creates it, in which
    /// case it disappears when this device is dropped. Brings the link up.
    /// Needs `CAP_NET_ADMIN` (root) unless the TAP was made for this user.
    /// Checksum and segmentation offload are on where the kernel allows.
    pub fn open(name: &str) -> io::Result<TapDevice> {
        Self::open_with(name, true)
    }

    /// Like [`open`](Self::open), with offloads on or off: off, every
    /// frame is within the MTU and carries complete checksums.
    pub fn open_with(name: &str, offload: bool) -> io::Result<TapDevice> {
        Self::open_inner(name, offload, false)
    }

    /// Like [`open_with`](Self::open_with), as the first queue of a
    /// multi-queue TAP, so that [`open_queue`](Self::open_queue) can add
    /// more. An existing single-queue TAP is opened as it is (then
    /// [`multi_queue`](Self::multi_queue) says false).
    pub fn open_multi_queue(name: &str, offload: bool) -> io::Result<TapDevice> {
        match Self::open_inner(name, offload, true) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Self::open_inner(name, offload, false),
            other => other,
        }
    }

    /// Attaches the program for the SYN filter and the UDP shed last set,
    /// or detaches the one attached when they drop nothing.
    fn apply_filter(&mut self) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        match tap_filter::program_for(&self.syn, &self.shed) {
            Some(program) => {
                if let Err(e) = tap_filter::attach(fd, &program) {
                    // Some queues may keep the filter before and some
                    // none: remove it from all, so that the kernel drops
                    // nothing the engine does not know of. The engine
                    // filters by itself.
                    let _ = tap_filter::detach(fd);
                    self.syn_filter = None;
                    return Err(with_context(e, "TUNATTACHFILTER", &self.name));
                }
                // The kernel holds the new program's address from here:
                // the one before may go.
                self.syn_filter = Some(program);
            }
            None if self.syn_filter.is_some() => {
                tap_filter::detach(fd).map_err(|e| with_context(e, "TUNDETACHFILTER", &self.name))?;
                self.syn_filter = None;
            }
            None => {}
        }
        Ok(())
    }

    /// Another queue of this multi-queue TAP, attached with the same flags:
    /// the kernel hands each frame to one queue (the one a steering program
    /// picks), and it is read from that queue's descriptor. The SYN filter
    /// attached to this device ([`Device::set_syn_filter`]) filters it too.
    pub fn open_queue(&self) -> io::Result<OwnedFd> {
        if !self.multi_queue {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("{} is a single-queue TAP", self.name)));
        }
        let file = open_tun()?;
        attach(&file, &self.name, self.vnet_header, true)
            .map_err(|e| with_context(e, "TUNSETIFF (queue)", &self.name))?;
        if let Some(program) = &self.syn_filter {
            // The kernel gives a queue attached with TUNSETIFF the TAP's
            // filter only without IFF_NO_PI (the flag shares its bit with
            // IFF_NOFILTER): attach it again, to every queue. On failure
            // the new queue closes with `file`.
            tap_filter::attach(self.file.as_raw_fd(), program)
                .map_err(|e| with_context(e, "TUNATTACHFILTER (queue)", &self.name))?;
        }
        Ok(OwnedFd::from(file))
    }

    /// Whether the TAP has (or may have) more than one queue.
    pub fn multi_queue(&self) -> bool {
        self.multi_queue
    }

    /// Queues attached to the TAP now, by anyone (its `queues/tx-*` in
    /// sysfs). A queue's number is its place in the order of attaching,
    /// so queues opened here are numbered 0, 1, ... only if this count
    /// says nobody else holds one.
    pub fn queue_count(&self) -> io::Result<usize> {
        let dir = Path::new("/sys/class/net").join(&self.name).join("queues");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir)? {
            if entry?.file_name().to_string_lossy().starts_with("tx-") {
                n += 1;
            }
        }
        Ok(n)
    }

    fn open_inner(name: &str, offload: bool, multi_queue: bool) -> io::Result<TapDevice> {
        validate_name(name)?;
        let existed = Path::new("/sys/class/net").join(name).exists();
        let file = open_tun()?;
        let mut vnet_header = offload;
        let mut attached = attach(&file, name, vnet_header, multi_queue);
        if offload && attached.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL)) {
            // A kernel (or an existing TAP) without virtio headers.
            vnet_header = false;
            attached = attach(&file, name, false, multi_queue);
        }
        if let Err(e) = &attached {
            if multi_queue && e.raw_os_error() == Some(libc::EINVAL) {
                // Perhaps an existing single-queue TAP: the caller retries.
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
        }
        if let Err(e) = attached {
            let hint = if e.raw_os_error() == Some(libc::EPERM) {
                format!(
                    " (creating a TAP, or attaching to one made for another user, needs root or CAP_NET_ADMIN: run \
                     as root, or have root make one for this user first with `ip tuntap add dev {name} mode tap \
                     user {}` and `ip link set {name} up`)",
                    // SAFETY: geteuid has no preconditions and touches no memory.
                    unsafe { libc::geteuid() }
                )
            } else if e.raw_os_error() == Some(libc::EINVAL) && existed {
                String::from(" (an interface of that name exists and is not a TAP: choose another name)")
            } else if e.raw_os_error() == Some(libc::EBUSY) {
                String::from(" (the TAP is already attached to another process: stop it, or use another TAP)")
            } else {
                String::new()
            };
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}{hint}")));
        }
        if vnet_header {
            // A persistent TAP keeps the header size its last user set
            // (QEMU uses 12 bytes); ours is the 10-byte legacy header.
            set_vnet_header_len(&file).map_err(|e| with_context(e, "TUNSETVNETHDRSZ", name))?;
        } else {
            clear_offloads(&file).map_err(|e| with_context(e, "TUNSETOFFLOAD", name))?;
        }
        let offloads = if vnet_header && request_offloads(&file).is_ok() {
            TxOffloads { checksum: true, tcp_segmentation: usize::from(u16::MAX), udp_segmentation: 0 }
        } else {
            TxOffloads::NONE
        };
        let mut dev = TapDevice {
            file,
            name: name.to_owned(),
            multi_queue,
            created: !existed,
            mtu: 0,
            vnet_header,
            offloads,
            spares: Vec::new(),
            syn_filter: None,
            syn: SynFilter::default(),
            shed: UdpShed::default(),
            stats: DeviceStats::default(),
        };
        dev.set_up(true)?;
        dev.mtu = dev.read_mtu()?;
        Ok(dev)
    }

    /// A device over a tun file already attached to TAP `name` (by
    /// [`TapDevice::open_with`] in another process or thread, passed on as
    /// a descriptor): netd's driver process works on the TAP netd opened, so
    /// the interface outlives the driver. `vnet_header` must say how the
    /// file was attached. The interface is never removed by this device.
    pub fn from_fd(fd: OwnedFd, name: &str, vnet_header: bool) -> io::Result<TapDevice> {
        validate_name(name)?;
        let file = File::from(fd);
        // SAFETY: fcntl on a descriptor we own, with integer arguments.
        let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if !vnet_header {
            clear_offloads(&file).map_err(|e| with_context(e, "TUNSETOFFLOAD", name))?;
        }
        let offloads = if vnet_header && request_offloads(&file).is_ok() {
            TxOffloads { checksum: true, tcp_segmentation: usize::from(u16::MAX), udp_segmentation: 0 }
        } else {
            TxOffloads::NONE
        };
        let mut dev = TapDevice {
            file,
            name: name.to_owned(),
            multi_queue: false,
            created: false,
            mtu: 0,
            vnet_header,
            offloads,
            spares: Vec::new(),
            syn_filter: None,
            syn: SynFilter::default(),
            shed: UdpShed::default(),
            stats: DeviceStats::default(),
        };
        dev.mtu = dev.read_mtu()?;
        Ok(dev)
    }

    /// The tun file, to hand to a driver process ([`TapDevice::from_fd`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Whether frames carry a virtio-net header (offloads possible).
    pub fn vnet_header(&self) -> bool {
        self.vnet_header
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Pool buffers held ready for the tail of a super-segment (with
    /// offload on): they count as in use in their pool.
    pub fn spare_buffers(&self) -> usize {
        self.spares.len()
    }

    /// What the kernel agreed to: checksum and segmentation offload, or
    /// nothing (plain frames).
    pub fn offloads(&self) -> TxOffloads {
        self.offloads
    }

    /// Whether this device created the interface (it then vanishes when
    /// the device is dropped) rather than attaching to an existing one.
    pub fn created(&self) -> bool {
        self.created
    }

    fn read_mtu(&self) -> io::Result<usize> {
        let mut ifr = ifreq_for(&self.name);
        interface_ioctl(libc::SIOCGIFMTU, &mut ifr).map_err(|e| with_context(e, "SIOCGIFMTU", &self.name))?;
        // SAFETY: SIOCGIFMTU filled in the `ifru_mtu` member of the union.
        let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
        Ok(usize::try_from(mtu).unwrap_or(0))
    }

    /// Sets the interface's MTU (the kernel side sends IP packets up to
    /// this size).
    pub fn set_mtu(&mut self, mtu: usize) -> io::Result<()> {
        let mut ifr = ifreq_for(&self.name);
        ifr.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("MTU {mtu} out of range")))?;
        interface_ioctl(libc::SIOCSIFMTU, &mut ifr).map_err(|e| with_context(e, "SIOCSIFMTU", &self.name))?;
        self.mtu = self.read_mtu()?;
        Ok(())
    }

    /// Brings the interface up or down.
    pub fn set_up(&self, up: bool) -> io::Result<()> {
        let mut ifr = ifreq_for(&self.name);
        interface_ioctl(libc::SIOCGIFFLAGS, &mut ifr).map_err(|e| with_context(e, "SIOCGIFFLAGS", &self.name))?;
        // SAFETY: SIOCGIFFLAGS filled in the `ifru_flags` member.
        let flags = unsafe { ifr.ifr_ifru.ifru_flags };
        let up_flag = libc::IFF_UP as libc::c_short;
        if (flags & up_flag != 0) == up {
            // Already so: changing flags needs CAP_NET_ADMIN, which the
            // user a TAP was made for may not have.
            return Ok(());
        }
        ifr.ifr_ifru.ifru_flags = if up { flags | up_flag } else { flags & !up_flag };
        interface_ioctl(libc::SIOCSIFFLAGS, &mut ifr).map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                let name = &self.name;
                let state = if up { "up" } else { "down" };
                io::Error::new(
                    e.kind(),
                    format!(
                        "SIOCSIFFLAGS on {name}: {e} (setting a TAP {state} needs root or CAP_NET_ADMIN: run as \
                         root, or set it {state} as root first with `ip link set {name} {state}`)"
                    ),
                )
            } else {
                with_context(e, "SIOCSIFFLAGS", &self.name)
            }
        })
    }

    /// The MAC address of the kernel's side of the TAP. The stack on this
    /// side must use a different one.
    pub fn kernel_mac(&self) -> io::Result<[u8; 6]> {
        let mut ifr = ifreq_for(&self.name);
        interface_ioctl(libc::SIOCGIFHWADDR, &mut ifr).map_err(|e| with_context(e, "SIOCGIFHWADDR", &self.name))?;
        // SAFETY: SIOCGIFHWADDR filled in the `ifru_hwaddr` member.
        let data = unsafe { ifr.ifr_ifru.ifru_hwaddr.sa_data };
        let mut mac = [0u8; 6];
        for (dst, src) in mac.iter_mut().zip(data.iter()) {
            *dst = *src as u8;
        }
        Ok(mac)
    }

    /// One `readv` into `iovs`; the frame's full length, or `Ok(None)`
    /// when no frame is waiting.
    fn read_iov(&self, iovs: &[libc::iovec]) -> io::Result<Option<usize>> {
        let count = libc::c_int::try_from(iovs.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many iovecs"))?;
        loop {
            // SAFETY: every iovec points into a buffer its caller borrows
            // exclusively for the duration of the call, with its exact
            // length; the fd is the open tun file.
            let n = unsafe { libc::readv(self.file.as_raw_fd(), iovs.as_ptr(), count) };
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

    /// Reads one frame into `space`, with one spare byte after it so that a
    /// frame too long for `space` is recognised (the kernel discards what
    /// does not fit and reports the full length). `Ok(None)` when no frame
    /// is waiting. Without a virtio header only.
    fn read_frame(&self, space: &mut [u8]) -> io::Result<Option<usize>> {
        let mut spare = [0u8; 1];
        self.read_iov(&[iovec_mut(space), iovec_mut(&mut spare)])
    }

    /// Takes one frame off the kernel's queue and drops it (no buffer).
    fn discard_frame(&self) -> io::Result<Option<usize>> {
        let mut scratch = [0u8; VNET_HDR_LEN + 1];
        self.read_iov(&[iovec_mut(&mut scratch)])
    }

    /// [`Device::receive_into`] with an iovec array of `N` entries: the
    /// virtio header (when on), as many of `bufs` as fit, and one spare
    /// byte past the caller's room, which tells a frame that did not fit
    /// (the kernel drops what a read has no room for).
    fn read_into<const N: usize>(&mut self, bufs: &mut [&mut [u8]]) -> io::Result<Option<(usize, Offload)>> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut spare = [0u8; 1];
        let mut iovs = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; N];
        let mut used = 0;
        if self.vnet_header {
            iovs[0] = iovec_mut(&mut hdr);
            used = 1;
        }
        let mut capacity = 0;
        for b in bufs.iter_mut() {
            if used + 1 >= N {
                break;
            }
            capacity += b.len();
            iovs[used] = iovec_mut(b);
            used += 1;
        }
        iovs[used] = iovec_mut(&mut spare);
        used += 1;
        let Some(n) = self.read_iov(&iovs[..used])? else {
            return Ok(None);
        };
        let hdr_len = if self.vnet_header { VNET_HDR_LEN } else { 0 };
        let Some(frame_len) = n.checked_sub(hdr_len) else {
            self.stats.rx_errors += 1;
            return Ok(Some((0, Offload::NONE)));
        };
        if frame_len > capacity {
            self.stats.rx_dropped_oversize += 1;
            return Ok(Some((0, Offload::NONE)));
        }
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += frame_len as u64;
        let offload = if self.vnet_header { vnet::offload_of(&hdr) } else { Offload::NONE };
        Ok(Some((frame_len, offload)))
    }

    /// Keeps enough spare buffers for the largest super-segment after a
    /// first buffer, as far as the pool allows.
    fn refill_spares(&mut self, pool: &BufferPool) {
        if self.spares.first().is_some_and(|b| !b.belongs_to(pool)) {
            // Frames must come from the pool the caller gives.
            self.spares.clear();
        }
        let size = pool.buf_size().max(1);
        let wanted = MAX_OFFLOADED_FRAME.div_ceil(size).min(MAX_RX_IOVECS - 2);
        while self.spares.len() < wanted {
            match pool.alloc() {
                Ok(buf) => self.spares.push(buf),
                Err(_) => break,
            }
        }
    }

    /// Reads one frame with its virtio header into `first` (after the
    /// headroom) and as many spares as it needs, and returns it as a chain.
    /// `Ok(None)` when no frame is waiting; `Ok(Some(None))` when one was
    /// read but dropped (counted).
    fn read_offloaded(&mut self, mut first: Buffer) -> io::Result<Option<Option<PacketBuf>>> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut iovs = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_RX_IOVECS];
        iovs[0] = iovec_mut(&mut hdr);
        let Some(first_space) = first.as_mut_slice().and_then(|b| b.get_mut(RX_HEADROOM..)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pool buffers must be larger than the {RX_HEADROOM}-byte receive headroom"),
            ));
        };
        let first_len = first_space.len();
        iovs[1] = iovec_mut(first_space);
        let mut used = 2;
        let mut capacity = first_len;
        for (slot, spare) in iovs[2..].iter_mut().zip(self.spares.iter_mut()) {
            // Spares are held by this device alone, so they are writable.
            let Some(bytes) = spare.as_mut_slice() else { break };
            capacity += bytes.len();
            *slot = iovec_mut(bytes);
            used += 1;
        }
        let Some(n) = self.read_iov(&iovs[..used])? else {
            return Ok(None);
        };
        let Some(frame_len) = n.checked_sub(VNET_HDR_LEN) else {
            self.stats.rx_errors += 1;
            return Ok(Some(None));
        };
        if frame_len > capacity {
            if frame_len <= MAX_OFFLOADED_FRAME {
                // A super-segment the pool had no spares left for.
                self.stats.rx_dropped_no_buffer += 1;
            } else {
                self.stats.rx_dropped_oversize += 1;
            }
            return Ok(Some(None));
        }
        let in_first = frame_len.min(first_len);
        let Some(mut frame) = PacketBuf::from_buffer(first, RX_HEADROOM, RX_HEADROOM + in_first) else {
            return Ok(Some(None));
        };
        let mut rest = frame_len - in_first;
        let mut taken = 0;
        for spare in &self.spares {
            if rest == 0 {
                break;
            }
            let here = rest.min(spare.capacity());
            if let Some(piece) = PacketBuf::from_buffer(spare.clone(), 0, here) {
                frame.append(piece);
            }
            rest -= here;
            taken += 1;
        }
        // The filled spares now belong to the frame alone.
        self.spares.drain(..taken);
        frame.set_offload(vnet::offload_of(&hdr));
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += frame_len as u64;
        Ok(Some(Some(frame)))
    }

    /// Writes one frame (after its virtio header, if the TAP takes one)
    /// with `writev`; returns the frame bytes written.
    fn write_frame(&self, frame: &PacketBuf) -> io::Result<usize> {
        let iovec_of =
            |chunk: &[u8]| libc::iovec { iov_base: chunk.as_ptr() as *mut libc::c_void, iov_len: chunk.len() };
        let hdr = vnet::header_for(frame);
        let hdr_len = if self.vnet_header { VNET_HDR_LEN } else { 0 };
        let head = &hdr[..hdr_len];
        let mut inline = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; INLINE_IOVECS];
        let heap: Vec<libc::iovec>;
        // More slices than one writev takes (IOV_MAX, 1024 on Linux: a
        // super-segment of many small sends): copied flat, which is rare,
        // rather than refused on every retransmission.
        let flat: Vec<u8>;
        let flat_chunks: [&[u8]; 1];
        let chunks: Box<dyn Iterator<Item = &[u8]>> = if frame.slice_count() >= MAX_IOVECS {
            flat = frame.to_vec();
            flat_chunks = [&flat];
            Box::new(flat_chunks.into_iter())
        } else {
            Box::new(frame.chunks())
        };
        let pieces = std::iter::once(head).filter(|h| !h.is_empty()).chain(chunks);
        let iovs: &[libc::iovec] = if frame.slice_count() < INLINE_IOVECS {
            let mut n = 0;
            for (slot, chunk) in inline.iter_mut().zip(pieces) {
                *slot = iovec_of(chunk);
                n += 1;
            }
            &inline[..n]
        } else {
            heap = pieces.map(iovec_of).collect();
            &heap
        };
        let count = libc::c_int::try_from(iovs.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame has too many slices"))?;
        loop {
            // SAFETY: every iovec points into `hdr` or a slice of `frame`,
            // both borrowed (and so kept alive and unchanged) for the
            // duration of the call; writev only reads through them.
            let n = unsafe { libc::writev(self.file.as_raw_fd(), iovs.as_ptr(), count) };
            if n >= 0 {
                return Ok((n as usize).saturating_sub(hdr_len));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Reads one plain frame into `buf` after the headroom, with the same
    /// outcomes as [`read_offloaded`](Self::read_offloaded).
    fn read_plain(&mut self, mut buf: Buffer) -> io::Result<Option<Option<PacketBuf>>> {
        let Some(bytes) = buf.as_mut_slice() else {
            // A fresh pool buffer is never shared; be safe anyway.
            return Ok(Some(None));
        };
        let space = bytes.get_mut(RX_HEADROOM..).unwrap_or_default();
        let capacity = space.len();
        match self.read_frame(space)? {
            None | Some(0) => Ok(None),
            Some(n) if n > capacity => {
                self.stats.rx_dropped_oversize += 1;
                Ok(Some(None))
            }
            Some(n) => {
                let frame = PacketBuf::from_buffer(buf, RX_HEADROOM, RX_HEADROOM + n);
                if frame.is_some() {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += n as u64;
                }
                Ok(Some(frame))
            }
        }
    }

    /// Takes up to `max` frames off the kernel's queue, plain or with
    /// their virtio headers; dropped ones count too, so that a stream of
    /// frames the pool cannot hold does not keep the caller (and the engine
    /// that would free buffers) waiting.
    fn receive_frames(&mut self, pool: &BufferPool, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        let mut received = 0;
        for _ in 0..max {
            let outcome = match pool.alloc() {
                // No buffer: take the frame off the kernel's queue anyway
                // (as a NIC without receive descriptors drops), so that the
                // fd does not stay readable forever.
                Err(_) => match self.discard_frame() {
                    Ok(Some(_)) => {
                        self.stats.rx_dropped_no_buffer += 1;
                        Ok(Some(None))
                    }
                    other => other.map(|_| None),
                },
                Ok(first) if self.vnet_header => {
                    self.refill_spares(pool);
                    self.read_offloaded(first)
                }
                Ok(buf) => self.read_plain(buf),
            };
            match outcome {
                Ok(Some(Some(frame))) => {
                    out.push(frame);
                    received += 1;
                }
                Ok(Some(None)) => {}
                Ok(None) => break,
                Err(e) => {
                    self.stats.rx_errors += 1;
                    return if received > 0 { Ok(received) } else { Err(e) };
                }
            }
        }
        Ok(received)
    }
}

impl Drop for TapDevice {
    /// Detaches the filter before its program is freed: the kernel
    /// would read that memory again for a queue attached later, by a
    /// holder of another descriptor of the TAP.
    fn drop(&mut self) {
        if self.syn_filter.is_some() {
            // Nothing to do about a failure here; the descriptor closes next.
            let _ = tap_filter::detach(self.file.as_raw_fd());
        }
    }
}

/// An iovec over `bytes`, for reading into them.
fn iovec_mut(bytes: &mut [u8]) -> libc::iovec {
    libc::iovec { iov_base: bytes.as_mut_ptr().cast(), iov_len: bytes.len() }
}

impl Device for TapDevice {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        _now: Instant,
    ) -> io::Result<usize> {
        self.receive_frames(pool, out, max)
    }

    fn receive_into(&mut self, bufs: &mut [&mut [u8]], _now: Instant) -> io::Result<Option<(usize, Offload)>> {
        // A read into a few buffers (the common case) fills a short iovec
        // array, not one sized for a whole super-segment.
        if bufs.len() + 2 <= FEW_RX_IOVECS {
            self.read_into::<FEW_RX_IOVECS>(bufs)
        } else {
            self.read_into::<MAX_RX_IOVECS>(bufs)
        }
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, _now: Instant) -> io::Result<usize> {
        let mut taken = 0;
        while let Some(frame) = frames.front() {
            let len = frame.len();
            if !frame_fits(frame, self.mtu, self.offloads) {
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
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EMSGSIZE)) => {
                    // The kernel refused this frame: drop it, go on.
                    self.stats.tx_errors += 1;
                }
                Err(e) => {
                    self.stats.tx_errors += 1;
                    return if taken > 0 { Ok(taken) } else { Err(with_context(e, "writev", &self.name)) };
                }
            }
            frames.pop_front();
            taken += 1;
        }
        Ok(taken)
    }

    fn rx_queue(&self, fd: OwnedFd) -> io::Result<Box<dyn Device>> {
        Ok(Box::new(TapDevice::from_fd(fd, &self.name, self.vnet_header)?))
    }

    fn queue_capacity(&self) -> Option<usize> {
        // Each queue's ring holds `tx_queue_len` frames; tun drops beyond
        // it rather than stopping the queue, so no backlog builds behind.
        let text = std::fs::read_to_string(format!("/sys/class/net/{}/tx_queue_len", self.name)).ok()?;
        text.trim().parse().ok()
    }

    fn set_syn_filter(&mut self, filter: &SynFilter) -> io::Result<()> {
        self.syn = filter.clone();
        self.apply_filter()
    }

    fn set_udp_shed(&mut self, shed: &UdpShed) -> io::Result<()> {
        if *shed == self.shed {
            return Ok(());
        }
        self.shed = shed.clone();
        let applied = self.apply_filter();
        if applied.is_err() {
            // The SYN filter alone again, as it was given: a failed shed
            // must not leave the engine believing the device guards SYNs.
            self.shed = UdpShed::default();
            let _ = self.apply_filter();
        }
        applied
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { mtu: self.mtu, tx_offloads: self.offloads }
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
        for bad in ["", "abcdefghijklmnop", "a/b", "a b", "a:1", ".", "..", "tab\t"] {
            let e = validate_name(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        let e = TapDevice::open("no/such").unwrap_err();
        assert!(e.to_string().contains("invalid interface name"));
    }
}
