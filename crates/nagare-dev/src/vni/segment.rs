//! The segment file: creating, opening (with validation) and mapping it,
//! and the only place that turns offsets into pointers.
//!
//! A segment is `/dev/shm/nagare-vni-<NAME>`, mapped once, shared and
//! writable. Its geometry is read and checked once, when it is opened, and
//! kept in this process: a peer that later scribbles over the header
//! cannot move a ring or a slot. Every access goes through [`Segment`]'s
//! methods, which check offsets against the mapping's length (the
//! mapping and its checked accessors are `nagare_ipc::Mapping`, the same
//! as under the inet server's regions).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nagare_ipc::Mapping;

use super::layout::*;

/// Where segments live.
pub const SEGMENT_DIR: &str = "/dev/shm";
/// Prefix of a segment's file name.
pub const SEGMENT_PREFIX: &str = "nagare-vni-";
/// Longest segment name.
pub const MAX_NAME_LEN: usize = 32;

/// Checks a segment name: 1 to 32 of `[A-Za-z0-9_-]`.
pub fn validate_name(name: &str) -> io::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid VNI name {name:?}: 1 to {MAX_NAME_LEN} of A-Z a-z 0-9 _ -"),
        ))
    }
}

/// The file of segment `name` (validated).
pub fn segment_path(name: &str) -> io::Result<PathBuf> {
    validate_name(name)?;
    Ok(PathBuf::from(SEGMENT_DIR).join(format!("{SEGMENT_PREFIX}{name}")))
}

/// Removes segment `name`. Processes that have it mapped keep their
/// mapping until they let go.
pub fn destroy(name: &str) -> io::Result<()> {
    let path = segment_path(name)?;
    std::fs::remove_file(&path).map_err(|e| io::Error::new(e.kind(), format!("removing {}: {e}", path.display())))
}

/// A mapped segment.
#[derive(Debug)]
pub struct Segment {
    name: String,
    map: Mapping,
    geo: Geometry,
    _file: File,
}

fn map(file: &File, len: usize) -> io::Result<Mapping> {
    Mapping::map(file.as_fd(), len as u64)
}

/// Gives the segment's file its pages now: a sparse file on a full
/// /dev/shm would fault (SIGBUS) at the first write to a page instead.
fn reserve(file: &std::fs::File, len: usize) -> io::Result<()> {
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
    // SAFETY: plain system call on our open file; no memory is passed.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc != 0 {
        let e = io::Error::from_raw_os_error(rc);
        return Err(io::Error::new(e.kind(), format!("reserving {len} bytes in /dev/shm: {e}")));
    }
    Ok(())
}

impl Segment {
    /// Creates segment `name` for `ports` ports, IP MTU `mtu` and rings of
    /// `slots` slots. Fails if it exists.
    pub fn create(name: &str, ports: usize, mtu: usize, slots: usize) -> io::Result<Segment> {
        let geo = Geometry::new(ports, mtu, slots)?;
        let path = segment_path(name)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", path.display())))?;
        let made = (|| {
            file.set_len(geo.total as u64)?;
            reserve(&file, geo.total)?;
            let map = map(&file, geo.total)?;
            Ok::<_, io::Error>(Segment { name: name.to_owned(), map, geo, _file: file })
        })();
        let seg = match made {
            Ok(seg) => seg,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(io::Error::new(e.kind(), format!("creating {}: {e}", path.display())));
            }
        };
        // The file is zero-filled: every port free, every ring empty. The
        // magic goes last, so nobody opens a half-written header.
        seg.u32_at(H_VERSION).store(VERSION, Ordering::Relaxed);
        seg.u32_at(H_PORTS).store(ports as u32, Ordering::Relaxed);
        seg.u32_at(H_MTU).store(mtu as u32, Ordering::Relaxed);
        seg.u32_at(H_SLOT_SIZE).store(geo.slot_size as u32, Ordering::Relaxed);
        seg.u32_at(H_SLOT_COUNT).store(geo.slot_count as u32, Ordering::Relaxed);
        seg.u64_at(H_RING_OFFSET).store(geo.ring_offset as u64, Ordering::Relaxed);
        seg.u64_at(H_RING_STRIDE).store(geo.ring_stride as u64, Ordering::Relaxed);
        seg.u64_at(H_TOTAL).store(geo.total as u64, Ordering::Relaxed);
        seg.u64_at(H_MAGIC).store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// Opens existing segment `name`, checking its header.
    pub fn open(name: &str) -> io::Result<Segment> {
        let path = segment_path(name)?;
        let context = |e: io::Error| io::Error::new(e.kind(), format!("VNI segment {}: {e}", path.display()));
        let file =
            OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open(&path).map_err(context)?;
        let file_len = file.metadata().map_err(context)?.len();
        if file_len < HEADER_LEN as u64 || file_len > MAX_SEGMENT_BYTES {
            return Err(context(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{file_len} bytes is not the size of a segment"),
            )));
        }
        let len = file_len as usize;
        let map = map(&file, len).map_err(context)?;
        // A provisional segment over the header only, to read it.
        let mut seg = Segment {
            name: name.to_owned(),
            map,
            geo: Geometry { ports: 0, mtu: 0, slot_size: 0, slot_count: 0, ring_offset: 0, ring_stride: 0, total: len },
            _file: file,
        };
        let magic = seg.u64_at(H_MAGIC).load(Ordering::Acquire);
        seg.geo = Geometry::from_header(
            magic,
            seg.u32_at(H_VERSION).load(Ordering::Relaxed),
            seg.u32_at(H_PORTS).load(Ordering::Relaxed),
            seg.u32_at(H_MTU).load(Ordering::Relaxed),
            seg.u32_at(H_SLOT_SIZE).load(Ordering::Relaxed),
            seg.u32_at(H_SLOT_COUNT).load(Ordering::Relaxed),
            seg.u64_at(H_RING_OFFSET).load(Ordering::Relaxed),
            seg.u64_at(H_RING_STRIDE).load(Ordering::Relaxed),
            seg.u64_at(H_TOTAL).load(Ordering::Relaxed),
            file_len,
        )
        .map_err(context)?;
        Ok(seg)
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its shape, as validated when it was opened.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Never true: a segment has at least a header.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The 32-bit atomic word at `off`. Offsets come from this process's
    /// geometry, never from shared memory; the check (a panic) is against
    /// our own mistakes.
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        self.map.u32_at(off)
    }

    /// The 64-bit atomic word at `off` (see [`u32_at`](Self::u32_at)).
    pub(crate) fn u64_at(&self, off: usize) -> &AtomicU64 {
        self.map.u64_at(off)
    }

    /// Copies `dst.len()` bytes from the segment at `off` into `dst`;
    /// `false` (nothing copied) if that range is not inside the mapping.
    /// The bytes may change while they are copied (another process owns
    /// them); nothing is derived from them before the engine validates the
    /// private copy like any frame from a wire.
    pub(crate) fn read_bytes(&self, off: usize, dst: &mut [u8]) -> bool {
        self.map.read_bytes(off, dst)
    }

    /// Copies `src` into the segment at `off`; `false` (nothing copied)
    /// if that range is not inside the mapping. Nobody in this process
    /// holds a reference to slot bytes: they are only reached through this
    /// method and `read_bytes`.
    pub(crate) fn write_bytes(&self, off: usize, src: &[u8]) -> bool {
        self.map.write_bytes(off, src)
    }

    /// Overwrites `len` bytes at `off` with `fill(index)`, for tests that
    /// play a hostile peer. Out-of-range parts are ignored.
    #[doc(hidden)]
    pub fn scribble(&self, off: usize, len: usize, mut fill: impl FnMut(usize) -> u8) {
        let end = off.saturating_add(len).min(self.len());
        let bytes: Vec<u8> = (off..end).map(&mut fill).collect();
        self.write_bytes(off.min(end), &bytes);
    }

    /// What is in port `i`'s record now (racy: a snapshot).
    pub fn port_info(&self, i: usize) -> Option<PortInfo> {
        if i >= self.geo.ports {
            return None;
        }
        let base = self.geo.port_offset(i);
        let (state, pid) = split_owner(self.u64_at(base + P_OWNER).load(Ordering::Acquire));
        let mac = self.u64_at(base + P_MAC).load(Ordering::Relaxed).to_le_bytes();
        Some(PortInfo {
            index: i,
            state,
            pid,
            generation: self.u32_at(base + P_GENERATION).load(Ordering::Relaxed),
            mac: [mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]],
            polling: self.u32_at(base + P_POLLING).load(Ordering::Relaxed) != 0,
        })
    }

    /// Slots in use in the ring from `from` to `to` (a frame fills one, a
    /// super-segment several), as the ring's words say now (a hostile
    /// peer can make this anything up to 2^32 - 1).
    pub fn ring_backlog(&self, from: usize, to: usize) -> Option<u32> {
        if from >= self.geo.ports || to >= self.geo.ports || from == to {
            return None;
        }
        let ring = self.geo.ring_offset_of(from, to);
        let head = self.u32_at(ring + R_HEAD).load(Ordering::Acquire);
        let tail = self.u32_at(ring + R_TAIL).load(Ordering::Acquire);
        Some(head.wrapping_sub(tail))
    }
}

/// A snapshot of one port record, for `nagare vni info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    pub index: usize,
    /// [`STATE_FREE`], [`STATE_CLAIMING`], [`STATE_ATTACHED`] or garbage.
    pub state: u32,
    pub pid: u32,
    pub generation: u32,
    pub mac: [u8; 6],
    pub polling: bool,
}

impl PortInfo {
    /// Attached, by a process that is still alive.
    pub fn is_live(&self) -> bool {
        self.state == STATE_ATTACHED && super::doorbell::process_alive(self.pid)
    }
}
