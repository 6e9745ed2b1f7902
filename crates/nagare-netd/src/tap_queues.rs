//! Receive steering without a driver: in inline placement netd reads a
//! multi-queue TAP itself, and each client's flows arrive on a queue of
//! their own, read straight into buffers of that client's region. The
//! kernel's copy of a frame is then the only one inside the instance, as
//! when a driver reads the queues (`crate::steering` says what netd checks
//! and what an application can and cannot do with its frames).
//!
//! The TAP's steering program picks each frame's queue from the port map;
//! [`RxQueues`] gives clients the queues and fences a queue whenever a
//! port leaves it. The first queue, a queue being drained, and a client's
//! queue while it has no spare buffer, are read into the engine's own
//! buffers (copied once more on their way to the application, as without
//! steering); a queue no client has is not read. A frame of at most
//! [`COPY_BELOW`] bytes is copied out of its client's buffer at once,
//! after the checks a steered frame gets, which costs less than lending
//! the buffer to the engine and trading it for the one the application
//! posts.
//!
//! Order of work, each read ([`Device::receive_batch`]):
//! 1. the steering changes netd made since the last read are applied to
//!    the map, in order;
//! 2. one `epoll_wait` says which queues hold frames (a read of each
//!    would cost a system call apiece);
//! 3. those extra queues are read, half the batch at most: by turns, or,
//!    when PacketFlow's scheduler runs, in the order it serves their
//!    clients (by priority, lifted by a boost), so a busy low-priority
//!    queue waits, and overflows in the kernel's ring at no cost to
//!    netd, while a high-priority one is read first each time, and one
//!    that holds frames and went unread for [`OVERDUE`] first of all; a
//!    queue whose client PacketFlow holds (its socket is full) is left
//!    for later, unless it drains;
//! 4. the first queue;
//! 5. every change whose fences have drained is confirmed to netd
//!    ([`Steering::applied`]), so a client that binds a port a client had
//!    before hears of it only once none of the frames steered to the one
//!    before can still reach a region.

use crate::driver::messages::{SteerChange, MAX_PIECES};
use crate::driver::queues::{RxQueues, MAX_RX_QUEUES};
use crate::driver::run::pieces_of;
use crate::steering::{Steered, Steering};
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::tcp::syn_guard::SynFilter;
use nagare_core::{Capabilities, Instant};
use nagare_dev::{Device, DeviceStats, PortMap, PortSteering, TapDevice, UdpShed, RX_HEADROOM};
use nagare_ipc::SharedBytes;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;

/// What steering inline did, for `nagare stat` (`queues NAME VALUE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QueueStats {
    /// The TAP's queues besides the first.
    pub tap_queues: u64,
    /// Frames read into a client's region.
    pub rx_steered: u64,
    /// Their payload bytes, lent to the engine where they lie.
    pub rx_bytes_in_place: u64,
    /// Frames read into the engine's buffers from an extra queue (no
    /// client, draining, or no spare buffer of its client).
    pub rx_copied: u64,
    /// Small frames read into a client's region and copied at once
    /// (at most 1024 bytes: lending costs more than the copy).
    pub rx_small_copied: u64,
    /// Frames read into a client's region whose headers netd refused
    /// (a port of another client, or junk).
    pub rx_steer_refused: u64,
    /// Small frames dropped for want of an engine buffer to copy into.
    pub rx_no_buffer: u64,
    /// Steering changes the port map refused.
    pub map_errors: u64,
}

impl QueueStats {
    /// Name and value of each counter.
    pub fn named(&self) -> [(&'static str, u64); 8] {
        [
            ("tap_queues", self.tap_queues),
            ("rx_steered", self.rx_steered),
            ("rx_bytes_in_place", self.rx_bytes_in_place),
            ("rx_small_copied", self.rx_small_copied),
            ("rx_copied", self.rx_copied),
            ("rx_steer_refused", self.rx_steer_refused),
            ("rx_no_buffer", self.rx_no_buffer),
            ("map_errors", self.map_errors),
        ]
    }
}

/// What [`TapQueues::new`] takes besides the TAP.
pub(crate) struct Prepared {
    program: PortSteering,
    queues: RxQueues,
    epoll: OwnedFd,
}

/// Buffers of one client lent for a queue's next reads.
#[derive(Default)]
struct Held {
    /// The client, and the size of its buffers.
    client: Option<(u64, usize)>,
    buffers: Vec<(u32, SharedBytes)>,
}

impl Held {
    /// Gives every buffer back unread (to a client that may be gone).
    fn give_back(&mut self, steering: &Steering) {
        if let Some((key, _)) = self.client.take() {
            for (index, _) in self.buffers.drain(..) {
                steering.give_back(key, index);
            }
        }
        self.buffers.clear();
    }
}

/// A multi-queue TAP read by netd, each client's queue into its region.
pub(crate) struct TapQueues {
    first: TapDevice,
    queues: RxQueues,
    steering: Rc<Steering>,
    /// Keeps the steering program loaded (the TAP holds it as well).
    _program: PortSteering,
    /// Readable while any queue holds a frame: what netd sleeps on.
    epoll: OwnedFd,
    /// The newest steering change applied to the map.
    applied: u64,
    /// Receive buffers each queue's client lent for its next reads (by
    /// queue): kept while reads find nothing, given back when the queue's
    /// reader changes.
    held: Vec<Held>,
    /// Buffers a top-up borrows.
    scratch: Vec<(u32, SharedBytes)>,
    /// Each client's rank in PacketFlow's scheduler (lowest first), when
    /// it runs: its queue is read before those of clients ranked after it.
    /// Without it, or between clients of one rank, queues take turns.
    ranks: Option<HashMap<u64, (u8, u8)>>,
    /// Clients whose queues are left unread for now (PacketFlow's queue
    /// hold: their frames wait in the kernel's ring).
    held_clients: Vec<u64>,
    /// When each queue was last read, or last found empty: one that
    /// holds frames and was not for [`OVERDUE`] is read first.
    read_at: [Option<Instant>; MAX_RX_QUEUES],
    stats: QueueStats,
}

impl TapQueues {
    /// Steering over `tap` with `parts` made for it ([`TapQueues::prepare`]).
    pub fn new(tap: TapDevice, parts: Prepared, steering: Rc<Steering>) -> TapQueues {
        let Prepared { program, queues, epoll } = parts;
        let stats = QueueStats { tap_queues: queues.queues.len() as u64, ..QueueStats::default() };
        TapQueues {
            first: tap,
            queues,
            steering,
            _program: program,
            epoll,
            applied: 0,
            held: (0..MAX_RX_QUEUES).map(|_| Held::default()).collect(),
            scratch: Vec::with_capacity(MAX_PIECES),
            ranks: None,
            held_clients: Vec::new(),
            read_at: [None; MAX_RX_QUEUES],
            stats,
        }
    }

    /// What steering over `tap` (opened multi-queue) needs, with the extra
    /// queues `extra`, which must be every other queue it has (the program
    /// names queues by their order of attaching): the program, loaded and
    /// attached last, the queues over its map, and a descriptor readable
    /// while any queue holds a frame. Fails without `CAP_BPF`, or if the
    /// TAP will not take the program.
    pub fn prepare(tap: &TapDevice, extra: Vec<OwnedFd>) -> io::Result<Prepared> {
        if extra.is_empty() || extra.len() > MAX_RX_QUEUES {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no extra queues to steer to"));
        }
        let devices = extra.into_iter().map(|fd| tap.rx_queue(fd)).collect::<io::Result<Vec<_>>>()?;
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let program = PortSteering::load()?;
        let map = PortMap::from_fd(program.map().fd().try_clone_to_owned()?);
        let queues = RxQueues::new(Box::new(map), devices);
        // Each queue's event names it: 0 the first, k + 1 extra queue k.
        let fds = std::iter::once(tap.raw_fd()).chain(queues.queues.iter().map(|q| q.device.raw_fd()));
        for (index, q) in fds.enumerate() {
            let q = q.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a TAP queue without a descriptor"))?;
            let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: index as u64 };
            // SAFETY: both descriptors are open; `event` is a live struct.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, q, &mut event) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // Last: from here the kernel puts frames on the extra queues.
        program.attach(tap.fd())?;
        Ok(Prepared { program, queues, epoll })
    }

    /// Reads client queues in the order of `ranks` (client, rank; lowest
    /// first) from now on; a client not named comes last.
    pub fn rank_clients(&mut self, ranks: impl Iterator<Item = (u64, (u8, u8))>) {
        let map = self.ranks.get_or_insert_with(HashMap::new);
        map.clear();
        map.extend(ranks);
    }

    /// Leaves the queues of `clients` unread from now on (a draining one
    /// is still read), until the next call.
    pub fn hold_clients(&mut self, clients: impl Iterator<Item = u64>) {
        self.held_clients.clear();
        self.held_clients.extend(clients);
    }

    /// Its counters.
    pub fn queue_stats(&self) -> QueueStats {
        self.stats
    }

    /// Whether netd must not sleep yet: a steering change waits to be
    /// applied, or a queue is being drained (a read that finds it empty
    /// ends the drain, and confirms what waited on it).
    pub fn busy(&self) -> bool {
        self.steering.has_updates() || self.queues.queues.iter().any(|q| q.draining())
    }

    /// Applies netd's steering changes since the last read, in order.
    fn apply_changes(&mut self) {
        let changes = self.steering.take_updates();
        if changes.is_empty() {
            return;
        }
        let numbered = self.steering.descriptors(&changes);
        for (change, d) in changes.into_iter().zip(numbered) {
            let serial = d.id;
            let done = match change {
                SteerChange::Port { proto, port, key: Some(key) } => self.queues.steer(proto, port, key, serial),
                SteerChange::Port { proto, port, key: None } => self.queues.forget(proto, port, serial),
                SteerChange::Local { ip, slot, ip6, .. } => self.queues.set_local(ip, usize::from(slot), ip6),
            };
            if done.is_err() {
                self.stats.map_errors += 1;
            }
            self.applied = self.applied.max(serial);
        }
    }

    /// Tells netd which changes are in force: those before the oldest
    /// whose fence still drains.
    fn confirm(&self) {
        let in_force = match self.queues.oldest_pending() {
            Some(pending) => self.applied.min(pending.saturating_sub(1)),
            None => self.applied,
        };
        self.steering.applied(in_force);
    }

    /// The queues holding frames now, as bits (bit 0 the first queue, bit
    /// k + 1 extra queue k): one system call instead of a read of each
    /// queue that finds nothing. Every queue, if the kernel will not say.
    fn ready(&self) -> u32 {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX_RX_QUEUES + 1];
        // SAFETY: `events` is a live array of the length passed; a zero
        // timeout does not block.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, 0) };
        if n < 0 {
            return u32::MAX;
        }
        events.iter().take(n as usize).filter(|e| e.u64 < 32).fold(0, |bits, e| bits | 1 << e.u64)
    }

    /// Up to `max` frames from the extra queues that `ready` says hold
    /// some; how many. A draining queue that holds none is drained.
    fn receive_queues(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        ready: u32,
        now: Instant,
    ) -> usize {
        let TapQueues { queues, steering, held, scratch, stats, ranks, held_clients, read_at, .. } = self;
        let count = queues.queues.len().min(MAX_RX_QUEUES);
        let start = queues.next;
        queues.next = (start + 1) % count.max(1);
        let mut overdue = 0u32;
        for (at, last) in read_at.iter_mut().enumerate().take(count) {
            let holds_frames = ready & 1u32.checked_shl(at as u32 + 1).unwrap_or(0) != 0;
            match last {
                Some(t) if holds_frames && now.saturating_since(*t) >= OVERDUE => overdue |= 1 << at,
                Some(_) if holds_frames => {}
                // Nothing waits on it: it is as good as read now.
                _ => *last = Some(now),
            }
        }
        let shape = queues.queues.iter().map(|q| (q.key, q.draining()));
        let order = read_order(shape, start, ranks.as_ref(), overdue);
        let mut frames = 0;
        for at in order.iter() {
            let (Some(q), Some(held)) = (queues.queues.get_mut(at), held.get_mut(at)) else { continue };
            if !q.draining() && q.key.is_some_and(|k| held_clients.contains(&k)) {
                continue;
            }
            if held.client.map(|(key, _)| key) != q.reader() {
                held.give_back(steering);
            }
            if frames < max {
                if let Some(last) = read_at.get_mut(at) {
                    *last = Some(now);
                }
            }
            let was_draining = q.draining();
            let mut emptied = (ready & 1u32.checked_shl(at as u32 + 1).unwrap_or(0)) == 0;
            while frames < max && !emptied {
                let steered = match q.reader() {
                    Some(key) => {
                        let into = Into { steering, key, held, scratch };
                        read_steered(q.device.as_mut(), into, pool, out, stats, now)
                    }
                    None => None,
                };
                let got = match steered {
                    Some(got) => got,
                    None => match q.device.receive_batch(pool, out, 1, now) {
                        Ok(0) | Err(_) => None,
                        Ok(_) => {
                            stats.rx_copied += 1;
                            Some(())
                        }
                    },
                };
                if got.is_none() {
                    emptied = true;
                    break;
                }
                frames += 1;
                if q.draining() && q.drained_one() {
                    emptied = true;
                    break;
                }
            }
            if was_draining && emptied && queues.drained(at).is_err() {
                stats.map_errors += 1;
            }
        }
        frames
    }
}

/// How long a queue that holds frames may go unread before it is read
/// first, whatever its client's rank: every client's queue is read at
/// least this often (unless PacketFlow holds it), for up to half a batch,
/// however many better-ranked clients are flooded.
const OVERDUE: core::time::Duration = core::time::Duration::from_millis(10);

/// The queues to read and their order, given each queue's client and
/// whether it drains (`shape`, at most [`MAX_RX_QUEUES`]) and the turn
/// `start`: a queue nobody has and that does not drain is left out
/// (nothing is steered to it, and what was is drained first: no read, a
/// system call, is spent on it); the others by turns from `start`; with
/// `ranks`, by its client's rank first (lowest first; a draining queue
/// before all, one with no ranked client after all), by turns among
/// equals. A queue in `overdue` (by number) comes right after the
/// draining ones, ranked or not.
fn read_order(
    shape: impl Iterator<Item = (Option<u64>, bool)>,
    start: usize,
    ranks: Option<&HashMap<u64, (u8, u8)>>,
    overdue: u32,
) -> ReadOrder {
    let mut of = [(None, false); MAX_RX_QUEUES];
    let mut count = 0;
    for (slot, queue) in of.iter_mut().zip(shape) {
        *slot = queue;
        count += 1;
    }
    let mut order = ReadOrder { at: [0; MAX_RX_QUEUES], count: 0 };
    // Queues nobody has and none drains are not read at all.
    for at in (0..count).map(|k| (start + k) % count) {
        if matches!(of.get(at), Some((Some(_), _) | (None, true))) {
            if let Some(slot) = order.at.get_mut(order.count) {
                *slot = at;
                order.count += 1;
            }
        }
    }
    let count = order.count;
    if count > 1 && (ranks.is_some() || overdue != 0) {
        // Stable: queues of one class and rank keep their turns.
        let is_overdue = |at: usize| overdue & 1u32.checked_shl(at as u32).unwrap_or(0) != 0;
        order.at[..count].sort_by_key(|&at| match of.get(at) {
            Some(&(_, true)) => (0, (0, 0)),
            _ if is_overdue(at) => (1, (0, 0)),
            Some(&(Some(key), false)) => {
                (2, ranks.map_or((0, 0), |r| r.get(&key).copied().unwrap_or((u8::MAX, u8::MAX))))
            }
            _ => (2, (u8::MAX, u8::MAX)),
        });
    }
    order
}

/// Queue numbers in the order to read them.
struct ReadOrder {
    at: [usize; MAX_RX_QUEUES],
    count: usize,
}

impl ReadOrder {
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.at.iter().take(self.count).copied()
    }
}

/// Where a steered read goes: client `key`'s buffers that `held` keeps
/// for the queue (topped up from its spare ones through `scratch`).
struct Into<'a> {
    steering: &'a Steering,
    key: u64,
    held: &'a mut Held,
    scratch: &'a mut Vec<(u32, SharedBytes)>,
}

/// One frame from `device` (client `key`'s queue) read straight into
/// receive buffers of its region and taken by netd (`Steering::receive`):
/// `Some(Some(()))` a frame read (taken or refused), `Some(None)` the queue
/// is empty, `None` the client has no spare buffers (read it the other
/// way). The buffers a read does not fill stay held for the next.
fn read_steered(
    device: &mut dyn Device,
    into: Into<'_>,
    pool: &BufferPool,
    out: &mut Vec<PacketBuf>,
    stats: &mut QueueStats,
    now: Instant,
) -> Option<Option<()>> {
    let Into { steering, key, held, scratch } = into;
    let size = match held.client {
        Some((_, size)) => size,
        None => {
            let size = steering.buffer_size(key)?;
            held.client = Some((key, size));
            size
        }
    };
    let pieces = pieces_of(device, size)?;
    if held.buffers.len() < pieces {
        steering.lend(key, pieces - held.buffers.len(), scratch)?;
        held.buffers.append(scratch);
    }
    let mut views: [Option<SharedBytes>; MAX_PIECES] = Default::default();
    for (k, (slot, (_, whole))) in views.iter_mut().zip(held.buffers.iter()).take(pieces).enumerate() {
        let offset = if k == 0 { RX_HEADROOM } else { 0 };
        *slot = whole.sub(offset, size - offset);
    }
    let got = if views.iter().take(pieces).all(Option::is_some) {
        let mut slices: [&mut [u8]; MAX_PIECES] = Default::default();
        for (slot, v) in slices.iter_mut().zip(views.iter_mut().flatten()) {
            // SAFETY: buffers lent to this queue alone, each once: nothing
            // else in netd touches them until `receive` or `give_back`;
            // the client writing them spoils only its own frame (netd
            // parses its own copy of the headers).
            *slot = unsafe { v.as_mut_slice() };
        }
        device.receive_into(&mut slices[..pieces], now)
    } else {
        Ok(None)
    };
    let (len, offload) = match got {
        Ok(Some((len, offload))) if len > 0 => (len, offload),
        // A frame the device dropped (too large) was still read; the
        // buffers, unwritten, stay held.
        other => return Some(matches!(other, Ok(Some(_))).then_some(())),
    };
    if len <= COPY_BELOW {
        // Small (an ACK, a request): copied whole into the engine's buffer,
        // which costs less than lending the buffer and trading it for the
        // one the application posts; the buffers stay held for the next.
        let first = held.buffers.first().and_then(|(_, v)| v.sub(RX_HEADROOM, len));
        // SAFETY: copied once into netd's own memory, and parsed only there.
        let copy = first.and_then(|v| PacketBuf::from_slice(pool, RX_HEADROOM, unsafe { v.as_slice() }).ok());
        match copy {
            Some(mut p) if p.chunks().next().is_some_and(|head| steering.admits(key, head)) => {
                stats.rx_small_copied += 1;
                p.set_offload(offload);
                out.push(p);
            }
            Some(_) => stats.rx_steer_refused += 1,
            None => stats.rx_no_buffer += 1,
        }
        return Some(Some(()));
    }
    let used = (RX_HEADROOM + len).div_ceil(size).min(pieces);
    let mut named = [(0u32, 0u32, 0u32); MAX_PIECES];
    for (k, (slot, &(index, _))) in named.iter_mut().zip(held.buffers.iter()).enumerate().take(used) {
        let start = (k * size).saturating_sub(RX_HEADROOM);
        let end = ((k + 1) * size - RX_HEADROOM).min(len);
        let offset = if k == 0 { RX_HEADROOM } else { 0 };
        *slot = (index, offset as u32, (end - start) as u32);
    }
    // Those named are netd's again whatever becomes of the frame.
    held.buffers.drain(..used);
    match steering.receive(pool, key, &named[..used]) {
        Steered::InPlace(mut p) => {
            let headers = p.chunks().next().map_or(0, <[u8]>::len);
            stats.rx_steered += 1;
            stats.rx_bytes_in_place += (p.len() - headers) as u64;
            p.set_offload(offload);
            out.push(p);
        }
        Steered::Copied(mut p) => {
            stats.rx_steered += 1;
            p.set_offload(offload);
            out.push(p);
        }
        Steered::Refused => stats.rx_steer_refused += 1,
    }
    Some(Some(()))
}

/// Frames of at most this many bytes are copied out of their client's
/// buffer at once rather than lent to the engine in place.
const COPY_BELOW: usize = 1024;

impl Device for TapQueues {
    fn receive_batch(
        &mut self,
        pool: &BufferPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        now: Instant,
    ) -> io::Result<usize> {
        self.steering.settle();
        self.apply_changes();
        let ready = self.ready();
        let mut got = self.receive_queues(pool, out, max.div_ceil(2), ready, now);
        if ready & 1 != 0 {
            got += self.first.receive_batch(pool, out, max.saturating_sub(got), now)?;
        }
        self.confirm();
        Ok(got)
    }

    fn transmit_batch(&mut self, frames: &mut VecDeque<PacketBuf>, now: Instant) -> io::Result<usize> {
        self.first.transmit_batch(frames, now)
    }

    /// The TAP's filter covers every queue.
    fn set_syn_filter(&mut self, filter: &SynFilter) -> io::Result<()> {
        self.first.set_syn_filter(filter)
    }

    fn set_udp_shed(&mut self, shed: &UdpShed) -> io::Result<()> {
        self.first.set_udp_shed(shed)
    }

    fn capabilities(&self) -> Capabilities {
        self.first.capabilities()
    }

    /// Readable while any queue holds a frame.
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_fd().as_raw_fd())
    }

    fn poll_at(&self) -> Option<Instant> {
        self.first.poll_at()
    }

    /// Every queue's counters together.
    fn stats(&self) -> DeviceStats {
        let mut all = self.first.stats();
        for q in &self.queues.queues {
            let s = q.device.stats();
            all.rx_frames += s.rx_frames;
            all.rx_bytes += s.rx_bytes;
            all.rx_dropped_no_buffer += s.rx_dropped_no_buffer;
            all.rx_dropped_oversize += s.rx_dropped_oversize;
            all.rx_errors += s.rx_errors;
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_take_turns_unless_ranked_then_the_best_ranked_come_first() {
        let shape = [(Some(1), false), (None, false), (Some(2), false), (Some(3), false), (None, true)];
        let order = |start, ranks| read_order(shape.into_iter(), start, ranks, 0).iter().collect::<Vec<_>>();
        // Queue 1, nobody's, is not read.
        assert_eq!(order(0, None), vec![0, 2, 3, 4]);
        assert_eq!(order(3, None), vec![3, 4, 0, 2]);
        // Client 3 ranked best, 1 and 2 equal: 3, then 1 and 2 by turns;
        // the draining queue before all.
        let ranks: HashMap<u64, (u8, u8)> = [(1, (120, 120)), (2, (120, 120)), (3, (110, 120))].into();
        assert_eq!(order(0, Some(&ranks)), vec![4, 3, 0, 2]);
        assert_eq!(order(2, Some(&ranks)), vec![4, 3, 2, 0]);
        let unranked = [(Some(9), false), (Some(1), false)];
        assert_eq!(read_order(unranked.into_iter(), 0, Some(&ranks), 0).iter().collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(read_order(std::iter::empty(), 5, Some(&ranks), 0).iter().count(), 0);
    }

    #[test]
    fn an_overdue_queue_is_read_first_after_the_draining_ones() {
        let shape = [(Some(1), false), (Some(2), false), (Some(3), false), (None, true)];
        let ranks: HashMap<u64, (u8, u8)> = [(1, (100, 100)), (2, (120, 120)), (3, (139, 139))].into();
        let order = |overdue| read_order(shape.into_iter(), 0, Some(&ranks), overdue).iter().collect::<Vec<_>>();
        assert_eq!(order(0), vec![3, 0, 1, 2]);
        // Client 3, ranked last, waited too long: it comes before the
        // better ranked, never before a drain.
        assert_eq!(order(1 << 2), vec![3, 2, 0, 1]);
        assert_eq!(order(1 << 2 | 1 << 1), vec![3, 1, 2, 0]);
        // Without ranks, an overdue queue leaves its turn for the front.
        let by_turns = read_order(shape.into_iter(), 0, None, 1 << 2).iter().collect::<Vec<_>>();
        assert_eq!(by_turns, vec![3, 2, 0, 1]);
    }
}
