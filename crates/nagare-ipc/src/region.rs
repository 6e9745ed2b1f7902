//! A shared region: one `memfd`, created and laid out by the *creator* (the
//! trusted side), mapped once by each side for the whole connection and
//! never remapped per packet.
//!
//! Layout (all offsets from the start of the mapping; see `docs/ipc.md`):
//!
//! ```text
//!   0      header page (4096 bytes): magic, layout version, sizes, offsets
//!   4096   ring 0: head line, tail line, flags line, slots × 64 bytes
//!   ...    ring 1 .. ring n-1 (each 64-byte aligned)
//!   page   buffer area: buffers × buffer_size, page aligned
//! ```
//!
//! The creator writes the header once and never reads it back; it keeps the
//! layout in private memory. The attacher copies the header out once,
//! validates every field against the layout recomputed from the sizes, and
//! from then on uses only its private copy, so a peer that rewrites the
//! header later changes nothing. The creator seals the file's size
//! (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`): a peer holding the memfd
//! cannot truncate it under our mapping (which would turn our accesses into
//! `SIGBUS`), and the attacher refuses a region without those seals.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::mapping::Mapping;
use crate::pool::{Pool, PoolError};
use crate::ring::{ring_len, Consumer, Producer};
use crate::shared::SharedBytes;
use crate::sys;

/// The version of the region layout and of the rendezvous hello. Bumped on
/// any change of the header, the ring control lines or the descriptor format.
pub const LAYOUT_VERSION: u32 = 1;

/// "NAGAREIP", little-endian.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"NAGAREIP");
/// The header occupies the first page.
pub const HEADER_LEN: u64 = 4096;
/// The most rings one region holds.
pub const MAX_RINGS: u32 = 8;
/// The largest number of slots in one ring.
pub const MAX_RING_SLOTS: u32 = 1 << 16;
/// The largest number of buffers in one region.
pub const MAX_BUFFERS: u32 = 1 << 20;
/// The largest buffer size.
pub const MAX_BUFFER_SIZE: u32 = 1 << 20;
/// The largest region.
pub const MAX_REGION_LEN: u64 = 1 << 32;
const PAGE: u64 = 4096;

// Header words (u64 each) and their indices.
const W_MAGIC: usize = 0;
const W_VERSION: usize = 1; // version u32 | header_len u32 << 32
const W_TOTAL: usize = 2;
const W_RINGS: usize = 3; // ring count u32 | ring slots u32 << 32
const W_BUFFERS: usize = 4; // buffers u32 | buffer size u32 << 32
const W_SPLIT: usize = 5; // creator buffers u32 | attacher-produces mask u32 << 32
const W_BUF_OFF: usize = 6;
const W_RING_OFF: usize = 7; // MAX_RINGS words
const W_CHECK: usize = W_RING_OFF + MAX_RINGS as usize; // checksum of the words before
const HEADER_WORDS: usize = W_CHECK + 1;

/// A checksum of the header words before `W_CHECK` (FNV-1a over the words):
/// it catches random damage to fields that a self-consistent layout could
/// not (the ownership split). A peer that forges a consistent header only
/// describes another valid layout, which is safe to use.
fn header_checksum(w: &[u64]) -> u64 {
    w[..W_CHECK].iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Which end of a region this process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Created the memfd and wrote the header (the trusted server).
    Creator,
    /// Received the memfd and validated the header (a client or a driver).
    Attacher,
}

impl Side {
    /// The other end.
    pub fn peer(self) -> Side {
        match self {
            Side::Creator => Side::Attacher,
            Side::Attacher => Side::Creator,
        }
    }
}

/// The direction of one ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingDir {
    /// The attacher produces, the creator consumes (requests to the server).
    AttacherToCreator,
    /// The creator produces, the attacher consumes (completions, received data).
    CreatorToAttacher,
}

impl RingDir {
    /// The side that pushes into a ring of this direction.
    pub fn producer(self) -> Side {
        match self {
            RingDir::AttacherToCreator => Side::Attacher,
            RingDir::CreatorToAttacher => Side::Creator,
        }
    }
}

/// The sizes a creator chooses. Every ring has the same number of slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionConfig {
    /// Number of rings (1..=8).
    pub rings: u32,
    /// Bit `i` set: ring `i` is produced by the attacher; clear: by the creator.
    pub attacher_produces: u32,
    /// Slots per ring: a power of two in 2..=65536.
    pub ring_slots: u32,
    /// Number of buffers in the buffer area (0..=2^20).
    pub buffers: u32,
    /// Size of one buffer: a multiple of 64 in 64..=1 MiB.
    pub buffer_size: u32,
    /// Buffers `0..creator_buffers` start owned by the creator, the rest by
    /// the attacher.
    pub creator_buffers: u32,
}

impl RegionConfig {
    /// Two rings, ring 0 from the attacher to the creator (requests) and
    /// ring 1 back (completions), and a pool split in halves.
    pub fn pair(ring_slots: u32, buffers: u32, buffer_size: u32) -> Self {
        RegionConfig {
            rings: 2,
            attacher_produces: 0b01,
            ring_slots,
            buffers,
            buffer_size,
            creator_buffers: buffers / 2,
        }
    }

    /// The direction of ring `i`.
    pub fn ring_dir(&self, i: u32) -> RingDir {
        if self.attacher_produces & (1 << (i & 31)) != 0 {
            RingDir::AttacherToCreator
        } else {
            RingDir::CreatorToAttacher
        }
    }
}

/// Where everything is, computed from a [`RegionConfig`] alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The sizes.
    pub config: RegionConfig,
    /// Offset of each ring's control lines (first `config.rings` entries).
    pub ring_offsets: [u64; MAX_RINGS as usize],
    /// Offset of the buffer area.
    pub buffer_offset: u64,
    /// Size of the whole region (a multiple of the page size).
    pub total_len: u64,
}

impl Layout {
    /// Checks the sizes and places the rings and the buffer area.
    pub fn compute(config: RegionConfig) -> Result<Layout, RegionError> {
        let c = &config;
        if c.rings == 0 || c.rings > MAX_RINGS {
            return Err(RegionError::BadConfig("ring count outside 1..=8"));
        }
        if c.rings < 32 && c.attacher_produces >> c.rings != 0 {
            return Err(RegionError::BadConfig("direction bits set for rings that do not exist"));
        }
        if !c.ring_slots.is_power_of_two() || c.ring_slots < 2 || c.ring_slots > MAX_RING_SLOTS {
            return Err(RegionError::BadConfig("ring slots not a power of two in 2..=65536"));
        }
        if c.buffers > MAX_BUFFERS {
            return Err(RegionError::BadConfig("too many buffers"));
        }
        if c.buffer_size < 64 || c.buffer_size > MAX_BUFFER_SIZE || !c.buffer_size.is_multiple_of(64) {
            return Err(RegionError::BadConfig("buffer size not a multiple of 64 in 64..=1 MiB"));
        }
        if c.creator_buffers > c.buffers {
            return Err(RegionError::BadConfig("more creator buffers than buffers"));
        }
        let ring_len = ring_len(c.ring_slots);
        let mut ring_offsets = [0u64; MAX_RINGS as usize];
        let mut at = HEADER_LEN;
        for off in ring_offsets.iter_mut().take(c.rings as usize) {
            *off = at;
            at += ring_len; // a multiple of 64, so every ring stays 64-aligned
        }
        let buffer_offset = at.div_ceil(PAGE) * PAGE;
        let total = buffer_offset + u64::from(c.buffers) * u64::from(c.buffer_size);
        let total_len = total.div_ceil(PAGE) * PAGE;
        if total_len > MAX_REGION_LEN {
            return Err(RegionError::BadConfig("region larger than 4 GiB"));
        }
        Ok(Layout { config, ring_offsets, buffer_offset, total_len })
    }

    fn to_words(self) -> [u64; HEADER_WORDS] {
        let c = &self.config;
        let mut w = [0u64; HEADER_WORDS];
        w[W_MAGIC] = MAGIC;
        w[W_VERSION] = u64::from(LAYOUT_VERSION) | HEADER_LEN << 32;
        w[W_TOTAL] = self.total_len;
        w[W_RINGS] = u64::from(c.rings) | u64::from(c.ring_slots) << 32;
        w[W_BUFFERS] = u64::from(c.buffers) | u64::from(c.buffer_size) << 32;
        w[W_SPLIT] = u64::from(c.creator_buffers) | u64::from(c.attacher_produces) << 32;
        w[W_BUF_OFF] = self.buffer_offset;
        w[W_RING_OFF..W_CHECK].copy_from_slice(&self.ring_offsets);
        w[W_CHECK] = header_checksum(&w);
        w
    }

    /// Validates a header copied out of shared memory: every field must be
    /// exactly what the creator of a region of `file_len` bytes would write.
    pub(crate) fn from_words(w: &[u64; HEADER_WORDS], file_len: u64) -> Result<Layout, RegionError> {
        if w[W_MAGIC] != MAGIC {
            return Err(RegionError::BadMagic(w[W_MAGIC]));
        }
        let version = w[W_VERSION] as u32;
        if version != LAYOUT_VERSION {
            return Err(RegionError::BadVersion { found: version, expected: LAYOUT_VERSION });
        }
        if w[W_CHECK] != header_checksum(w) {
            return Err(RegionError::BadHeader("checksum"));
        }
        if w[W_VERSION] >> 32 != HEADER_LEN {
            return Err(RegionError::BadHeader("header length"));
        }
        let config = RegionConfig {
            rings: w[W_RINGS] as u32,
            ring_slots: (w[W_RINGS] >> 32) as u32,
            buffers: w[W_BUFFERS] as u32,
            buffer_size: (w[W_BUFFERS] >> 32) as u32,
            creator_buffers: w[W_SPLIT] as u32,
            attacher_produces: (w[W_SPLIT] >> 32) as u32,
        };
        let layout = Layout::compute(config)?;
        if w[W_TOTAL] != layout.total_len {
            return Err(RegionError::BadHeader("total length does not match the sizes"));
        }
        if w[W_BUF_OFF] != layout.buffer_offset {
            return Err(RegionError::BadHeader("buffer area offset"));
        }
        if w[W_RING_OFF..W_CHECK] != layout.ring_offsets {
            return Err(RegionError::BadHeader("ring offsets"));
        }
        if layout.total_len != file_len {
            return Err(RegionError::SizeMismatch { header: layout.total_len, file: file_len });
        }
        Ok(layout)
    }
}

/// Why a region could not be created, attached or used.
#[derive(Debug)]
pub enum RegionError {
    /// A system call failed.
    Io(io::Error),
    /// The first header word is not the magic number.
    BadMagic(u64),
    /// The layout version differs from ours.
    BadVersion {
        /// In the header.
        found: u32,
        /// Ours.
        expected: u32,
    },
    /// A header field is inconsistent with the sizes.
    BadHeader(&'static str),
    /// The header's total length differs from the file's size.
    SizeMismatch {
        /// In the header.
        header: u64,
        /// `fstat`.
        file: u64,
    },
    /// The file is smaller than a header or larger than the limit.
    BadFileSize(u64),
    /// The memfd lacks `F_SEAL_SHRINK | F_SEAL_GROW`: it could be truncated under us.
    NotSealed,
    /// The sizes are outside the limits.
    BadConfig(&'static str),
    /// No ring with that index.
    NoSuchRing(u32),
    /// The ring is produced (or consumed) by the other side.
    WrongSide,
    /// This ring end or the pool was already taken from the region.
    AlreadyTaken,
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionError::Io(e) => write!(f, "region: {e}"),
            RegionError::BadMagic(m) => write!(f, "region header: bad magic {m:#018x}"),
            RegionError::BadVersion { found, expected } => {
                write!(f, "region header: layout version {found}, expected {expected}")
            }
            RegionError::BadHeader(what) => write!(f, "region header: bad {what}"),
            RegionError::SizeMismatch { header, file } => {
                write!(f, "region header: total length {header} but the file has {file} bytes")
            }
            RegionError::BadFileSize(n) => write!(f, "region: file size {n} out of range"),
            RegionError::NotSealed => write!(f, "region: memfd size is not sealed"),
            RegionError::BadConfig(what) => write!(f, "region config: {what}"),
            RegionError::NoSuchRing(i) => write!(f, "region: no ring {i}"),
            RegionError::WrongSide => write!(f, "region: that ring end belongs to the other side"),
            RegionError::AlreadyTaken => write!(f, "region: already taken"),
        }
    }
}

impl std::error::Error for RegionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegionError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for RegionError {
    fn from(e: io::Error) -> Self {
        RegionError::Io(e)
    }
}

/// The header as atomic words (page-aligned, inside the mapping, which is
/// at least `HEADER_LEN` bytes long: checked before mapping).
fn header_word(map: &Mapping, i: usize) -> &AtomicU64 {
    assert!(i < HEADER_WORDS);
    map.u64_at(i * 8)
}

/// One process's view of a region: the mapping, the memfd and the private
/// copy of the layout.
#[derive(Debug)]
pub struct Region {
    map: Arc<Mapping>,
    fd: OwnedFd,
    layout: Layout,
    side: Side,
    rings_taken: [AtomicBool; MAX_RINGS as usize],
    pool_taken: AtomicBool,
}

impl Region {
    /// Creates a memfd named `name` (visible in `/proc/PID/fd`), sizes and
    /// seals it, maps it and writes the header.
    pub fn create(name: &str, config: RegionConfig) -> Result<Region, RegionError> {
        let layout = Layout::compute(config)?;
        let cname = CString::new(name).map_err(|_| RegionError::BadConfig("name contains NUL"))?;
        let fd = sys::memfd_create(&cname)?;
        sys::ftruncate(fd.as_fd(), layout.total_len)?;
        sys::add_seals(fd.as_fd(), libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL)?;
        let map = Mapping::map(fd.as_fd(), layout.total_len)?;
        // A fresh memfd reads as zeros: ring indices and flags start at 0.
        for (i, w) in layout.to_words().iter().enumerate() {
            header_word(&map, i).store(*w, Ordering::Relaxed);
        }
        Ok(Self::new(map, fd, layout, Side::Creator))
    }

    /// Maps a region received from its creator and validates its header.
    /// The memfd must be sealed against shrinking and growing.
    pub fn attach(fd: OwnedFd) -> Result<Region, RegionError> {
        let seals = sys::get_seals(fd.as_fd())?;
        let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        if seals & need != need {
            return Err(RegionError::NotSealed);
        }
        let len = sys::file_size(fd.as_fd())?;
        if !(HEADER_LEN..=MAX_REGION_LEN).contains(&len) || !len.is_multiple_of(PAGE) {
            return Err(RegionError::BadFileSize(len));
        }
        let map = Mapping::map(fd.as_fd(), len)?;
        // One copy of the header into private memory; only the copy is checked and used.
        let mut words = [0u64; HEADER_WORDS];
        for (i, w) in words.iter_mut().enumerate() {
            *w = header_word(&map, i).load(Ordering::Relaxed);
        }
        let layout = Layout::from_words(&words, len)?;
        Ok(Self::new(map, fd, layout, Side::Attacher))
    }

    /// Maps a region as a trusted delegate of its creator (netd's driver
    /// process, which posts completions into an application's region on
    /// netd's behalf): validated as [`Region::attach`] does, but the rings
    /// this side may take are the creator's.
    pub fn attach_delegate(fd: OwnedFd) -> Result<Region, RegionError> {
        let mut r = Self::attach(fd)?;
        r.side = Side::Creator;
        Ok(r)
    }

    fn new(map: Mapping, fd: OwnedFd, layout: Layout, side: Side) -> Region {
        Region {
            map: Arc::new(map),
            fd,
            layout,
            side,
            rings_taken: Default::default(),
            pool_taken: AtomicBool::new(false),
        }
    }

    /// The memfd, to pass to the peer.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The layout (the private copy).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Which end this process is.
    pub fn side(&self) -> Side {
        self.side
    }

    fn take_ring(&self, i: u32, producing: bool) -> Result<(u64, u32), RegionError> {
        let c = &self.layout.config;
        if i >= c.rings {
            return Err(RegionError::NoSuchRing(i));
        }
        let we_produce = c.ring_dir(i).producer() == self.side;
        if we_produce != producing {
            return Err(RegionError::WrongSide);
        }
        if self.rings_taken[i as usize].swap(true, Ordering::AcqRel) {
            return Err(RegionError::AlreadyTaken);
        }
        Ok((self.layout.ring_offsets[i as usize], c.ring_slots))
    }

    /// This side's producer end of ring `i` (once per region).
    pub fn producer(&self, i: u32) -> Result<Producer, RegionError> {
        let (off, slots) = self.take_ring(i, true)?;
        Ok(Producer::new(self.map.clone(), off, slots))
    }

    /// This side's producer end of ring `i`, carrying on from the head
    /// and tail in the region rather than from zero: for a delegate that
    /// takes over from one that died (netd's restarted driver).
    pub fn resume_producer(&self, i: u32) -> Result<Producer, RegionError> {
        let (off, slots) = self.take_ring(i, true)?;
        Ok(Producer::resumed(self.map.clone(), off, slots))
    }

    /// This side's consumer end of ring `i` (once per region).
    pub fn consumer(&self, i: u32) -> Result<Consumer, RegionError> {
        let (off, slots) = self.take_ring(i, false)?;
        Ok(Consumer::new(self.map.clone(), off, slots))
    }

    /// This side's view of the buffer pool, with its own ownership table
    /// (once per region).
    pub fn pool(&self) -> Result<Pool, RegionError> {
        if self.pool_taken.swap(true, Ordering::AcqRel) {
            return Err(RegionError::AlreadyTaken);
        }
        let c = &self.layout.config;
        let ours = match self.side {
            Side::Creator => 0..c.creator_buffers,
            Side::Attacher => c.creator_buffers..c.buffers,
        };
        Ok(Pool::new(self.map.clone(), self.layout.buffer_offset, c.buffers, c.buffer_size, ours))
    }

    /// A view of `len` bytes at `offset` of buffer `index`, whoever owns
    /// it: for a trusted delegate that follows its creator's table (the
    /// driver). The extent is checked against the layout.
    pub fn shared_bytes(&self, index: u32, offset: u32, len: u32) -> Result<SharedBytes, PoolError> {
        let c = &self.layout.config;
        if index >= c.buffers {
            return Err(PoolError::OutOfRange(index));
        }
        if offset > c.buffer_size || len > c.buffer_size - offset {
            return Err(PoolError::BadExtent { index, offset, len });
        }
        let at = self.layout.buffer_offset + u64::from(index) * u64::from(c.buffer_size) + u64::from(offset);
        Ok(SharedBytes::new(self.map.clone(), self.map.at(at), len as usize))
    }

    /// Writes one raw header word (tests of a hostile peer only).
    #[doc(hidden)]
    pub fn scribble_header_word(&self, i: usize, v: u64) {
        header_word(&self.map, i % HEADER_WORDS).store(v, Ordering::Relaxed);
    }

    /// Writes `bytes` at `offset` through the mapping, ignoring the layout
    /// (tests of a hostile peer only). Out-of-range writes are clipped.
    #[doc(hidden)]
    pub fn scribble_bytes(&self, offset: u64, bytes: &[u8]) {
        let len = self.map.len() as u64;
        if offset >= len {
            return;
        }
        let n = bytes.len().min((len - offset) as usize);
        self.map.write_bytes(offset as usize, &bytes[..n]);
    }

    /// Reads `len` bytes at `offset` through the mapping, ignoring the
    /// layout (tests of a hostile peer only). Out-of-range reads are
    /// clipped.
    #[doc(hidden)]
    pub fn peek_bytes(&self, offset: u64, len: usize) -> Vec<u8> {
        let size = self.map.len() as u64;
        if offset >= size {
            return Vec::new();
        }
        let mut out = vec![0u8; len.min((size - offset) as usize)];
        self.map.read_bytes(offset as usize, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> RegionConfig {
        RegionConfig::pair(64, 16, 2048)
    }

    #[test]
    fn layout_is_aligned_and_ordered() {
        let l = Layout::compute(cfg()).unwrap();
        assert_eq!(l.ring_offsets[0], HEADER_LEN);
        assert_eq!(l.ring_offsets[1] % 64, 0);
        assert!(l.ring_offsets[1] >= l.ring_offsets[0] + 64 * 64);
        assert_eq!(l.buffer_offset % PAGE, 0);
        assert!(l.total_len >= l.buffer_offset + 16 * 2048);
    }

    #[test]
    fn bad_configs_are_refused() {
        for c in [
            RegionConfig { ring_slots: 3, ..cfg() },
            RegionConfig { ring_slots: 1 << 17, ..cfg() },
            RegionConfig { rings: 0, ..cfg() },
            RegionConfig { rings: 9, ..cfg() },
            RegionConfig { buffer_size: 100, ..cfg() },
            RegionConfig { creator_buffers: 17, ..cfg() },
            RegionConfig { attacher_produces: 0b100, ..cfg() },
            RegionConfig { buffers: MAX_BUFFERS, buffer_size: MAX_BUFFER_SIZE, ..cfg() },
        ] {
            assert!(matches!(Layout::compute(c), Err(RegionError::BadConfig(_))), "{c:?}");
        }
    }

    #[test]
    fn create_then_attach_agree() {
        let r = Region::create("nagare-ipc-test", cfg()).unwrap();
        let fd = r.fd().try_clone_to_owned().unwrap();
        let a = Region::attach(fd).unwrap();
        assert_eq!(a.layout(), r.layout());
        assert_eq!(a.side(), Side::Attacher);
    }

    #[test]
    fn sizes_cannot_change_after_create() {
        let r = Region::create("nagare-ipc-test", cfg()).unwrap();
        assert!(sys::ftruncate(r.fd(), 4096).is_err());
        assert!(sys::ftruncate(r.fd(), r.layout().total_len * 2).is_err());
    }

    #[test]
    fn every_corrupted_header_word_is_refused() {
        let r = Region::create("nagare-ipc-test", cfg()).unwrap();
        let good = r.layout().to_words();
        for (i, &g) in good.iter().enumerate() {
            for v in [g ^ 1, g ^ (1 << 33), 0, u64::MAX] {
                if v == g {
                    continue;
                }
                r.scribble_header_word(i, v);
                let fd = r.fd().try_clone_to_owned().unwrap();
                let res = Region::attach(fd);
                // Ring offsets past the ring count are zero and must stay zero.
                assert!(res.is_err(), "word {i} = {v:#x} was accepted");
                r.scribble_header_word(i, g);
            }
        }
        assert!(Region::attach(r.fd().try_clone_to_owned().unwrap()).is_ok());
    }

    #[test]
    fn forged_headers_are_checked_field_by_field() {
        let l = Layout::compute(cfg()).unwrap();
        let len = l.total_len;
        let forge = |i: usize, v: u64| {
            let mut w = l.to_words();
            w[i] = v;
            w[W_CHECK] = header_checksum(&w);
            Layout::from_words(&w, len)
        };
        assert!(matches!(forge(W_MAGIC, 1), Err(RegionError::BadMagic(1))));
        assert!(matches!(forge(W_VERSION, 2 | HEADER_LEN << 32), Err(RegionError::BadVersion { found: 2, .. })));
        assert!(matches!(forge(W_VERSION, 1 | 8192 << 32), Err(RegionError::BadHeader(_))));
        assert!(matches!(forge(W_TOTAL, len + 4096), Err(RegionError::BadHeader(_))));
        assert!(matches!(forge(W_RINGS, 2 | 3 << 32), Err(RegionError::BadConfig(_))));
        assert!(matches!(forge(W_BUFFERS, 16 | 100 << 32), Err(RegionError::BadConfig(_))));
        assert!(matches!(forge(W_SPLIT, 17 | 1 << 32), Err(RegionError::BadConfig(_))));
        assert!(matches!(forge(W_BUF_OFF, l.buffer_offset + 64), Err(RegionError::BadHeader(_))));
        assert!(matches!(forge(W_RING_OFF + 1, 0), Err(RegionError::BadHeader(_))));
        assert!(matches!(forge(W_RING_OFF + 5, 4096), Err(RegionError::BadHeader(_))));
        // A consistent header for a bigger region than the file.
        let bigger = Layout::compute(RegionConfig { buffers: 64, ..cfg() }).unwrap();
        assert!(matches!(Layout::from_words(&bigger.to_words(), len), Err(RegionError::SizeMismatch { .. })));
        // A forged but consistent split is just another valid layout.
        assert!(forge(W_SPLIT, 3 | 1 << 32).is_ok());
    }

    #[test]
    fn unsealed_memfd_is_refused() {
        let fd = sys::memfd_create(c"plain").unwrap();
        sys::ftruncate(fd.as_fd(), 1 << 20).unwrap();
        assert!(matches!(Region::attach(fd), Err(RegionError::NotSealed)));
    }

    #[test]
    fn each_side_starts_with_its_share_of_the_pool() {
        let r = Region::create("nagare-ipc-test", cfg()).unwrap();
        let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let (mut pc, mut pa) = (r.pool().unwrap(), a.pool().unwrap());
        assert_eq!(pc.counts(), (8, 0, 8));
        assert_eq!(pa.counts(), (8, 0, 8));
        assert_eq!(pc.alloc(), Some(0));
        assert_eq!(pa.alloc(), Some(8));
    }

    #[test]
    fn a_resumed_producer_carries_on_through_a_delegate() {
        let r = Region::create("ring-resume", RegionConfig::pair(8, 0, 64)).unwrap();
        let a = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let mut c = r.consumer(0).unwrap();
        a.producer(0).unwrap().push(&crate::Descriptor { id: 1, ..Default::default() }).unwrap();
        // A second view of the attacher's side takes the ring over.
        let b = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap();
        let mut p = b.resume_producer(0).unwrap();
        assert_eq!(p.free().unwrap(), 7);
        p.push(&crate::Descriptor { id: 2, ..Default::default() }).unwrap();
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(1));
        assert_eq!(c.pop().unwrap().map(|d| d.id), Some(2));
    }

    #[test]
    fn ring_ends_are_taken_once_and_by_the_right_side() {
        let r = Region::create("nagare-ipc-test", cfg()).unwrap();
        assert!(matches!(r.producer(0), Err(RegionError::WrongSide)));
        assert!(r.consumer(0).is_ok());
        assert!(matches!(r.consumer(0), Err(RegionError::AlreadyTaken)));
        assert!(r.producer(1).is_ok());
        assert!(matches!(r.producer(2), Err(RegionError::NoSuchRing(2))));
        assert!(r.pool().is_ok());
        assert!(r.pool().is_err());
    }
}
