//! Application buffers lent to the engine for a zero-copy send.
//!
//! A `SENDTO` hands the engine a view of the application's buffer instead
//! of a copy. The engine puts its headers in front (in its own memory) and
//! queues the frame; the buffer must go back to the application only when
//! nothing refers to it any more. Two ways that happens:
//!
//! - the frame goes to a driver: the driver region cannot hold the
//!   application's bytes, so the transmit descriptor names them in place
//!   (`TX_CLIENT_PIECE`) and the entry is marked handed to that driver;
//!   when the engine lets go, netd queues a `RETURN` behind the frame and
//!   the driver posts the completion straight to the application;
//! - otherwise (a device inside netd, a dropped frame, a driver that died):
//!   netd posts the completion itself when the engine lets go.
//!
//! The engine lets go by dropping the last handle of the buffer, whose
//! view (`crate::view::View`) records the release; netd settles releases after each
//! turn, never inside the drop.

use crate::view::{Release, View};
use nagare_core::buf::PacketBuf;
use nagare_ipc::{Descriptor, Pool};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A client's buffer and the completion it is lent for.
pub(crate) struct Lent {
    /// Which lending this is (a buffer is lent again after it returns).
    serial: u64,
    /// The completion to post when the buffer comes back.
    pub completion: Descriptor,
    /// The driver generation the frame went to, if it went to one.
    pub handed: Option<u64>,
    /// A traced send's times (ns, `CLOCK_MONOTONIC`): the client's post,
    /// netd taking the request, the engine done, the frame handed to the
    /// driver.
    pub trace: Option<[u64; 4]>,
}

/// Where one client's buffers lie in netd's address space.
#[derive(Clone, Copy)]
struct Span {
    key: u64,
    base: usize,
    end: usize,
    size: usize,
}

/// Lent buffers, shared by netd and its link to the driver.
#[derive(Default)]
pub(crate) struct Lending {
    spans: RefCell<Vec<Span>>,
    lent: RefCell<HashMap<(u64, u32), Lent>>,
    released: Rc<RefCell<Vec<(u64, u32, u64)>>>,
    serial: std::cell::Cell<u64>,
}

/// The engine's hold on a lent buffer: its release is recorded.
struct LentPayload {
    key: u64,
    index: u32,
    serial: u64,
    released: Rc<RefCell<Vec<(u64, u32, u64)>>>,
}

impl Release for LentPayload {
    fn release(&mut self) {
        self.released.borrow_mut().push((self.key, self.index, self.serial));
    }
}

impl Lending {
    /// Registers client `key`'s buffer area (`pool`'s).
    pub fn add_client(&self, key: u64, pool: &Pool) {
        let size = pool.buffer_size() as usize;
        let base = pool.area_base();
        let end = base + size * pool.len() as usize;
        self.spans.borrow_mut().push(Span { key, base, end, size });
    }

    /// Forgets client `key`'s area (its lent buffers stay mapped through
    /// their views until the engine lets go).
    pub fn remove_client(&self, key: u64) {
        self.spans.borrow_mut().retain(|s| s.key != key);
    }

    /// Lends `len` bytes at `offset` of buffer `index` (which netd holds) of
    /// client `key` to the engine, to be completed with `completion`.
    pub fn lend(
        &self,
        key: u64,
        pool: &Pool,
        index: u32,
        offset: u32,
        len: u32,
        completion: Descriptor,
    ) -> Option<PacketBuf> {
        let bytes = pool.shared(index, offset, len).ok()?;
        let serial = self.serial.get() + 1;
        self.serial.set(serial);
        let lent = LentPayload { key, index, serial, released: self.released.clone() };
        let packet = View::packet(bytes, lent, 0, len as usize)?;
        self.lent.borrow_mut().insert((key, index), Lent { serial, completion, handed: None, trace: None });
        Some(packet)
    }

    /// Records a traced send's first three times.
    pub fn trace(&self, key: u64, index: u32, posted: u64, taken: u64, engine_done: u64) {
        if let Some(l) = self.lent.borrow_mut().get_mut(&(key, index)) {
            l.trace = Some([posted, taken, engine_done, 0]);
        }
    }

    /// Takes back a lending the engine refused (the request fails and is
    /// completed as usual); its release, whenever it comes, is ignored.
    pub fn unlend(&self, key: u64, index: u32) {
        self.lent.borrow_mut().remove(&(key, index));
    }

    /// The client buffer a slice of a frame lies in, if it is a lent one:
    /// `(key, buffer, offset)`.
    pub fn locate(&self, addr: usize, len: usize) -> Option<(u64, u32, u32)> {
        let span = self.spans.borrow().iter().copied().find(|s| addr >= s.base && addr < s.end)?;
        let (index, offset) = ((addr - span.base) / span.size, (addr - span.base) % span.size);
        if offset + len > span.size {
            return None;
        }
        let (index, offset) = (index as u32, offset as u32);
        self.lent.borrow().contains_key(&(span.key, index)).then_some((span.key, index, offset))
    }

    /// Marks a lent buffer handed to driver `generation`; the hand-over
    /// time (ns) for a traced send, else 0.
    pub fn mark_handed(&self, key: u64, index: u32, generation: u64) -> u64 {
        let mut lent = self.lent.borrow_mut();
        let Some(entry) = lent.get_mut(&(key, index)) else { return 0 };
        entry.handed = Some(generation);
        match entry.trace.as_mut() {
            Some(t) => {
                t[3] = nagare_ipc::monotonic_ns();
                t[3]
            }
            None => 0,
        }
    }

    /// The buffers the engine let go of since the last call, with their
    /// entries.
    pub fn take_released(&self) -> Vec<(u64, u32, Lent)> {
        let released: Vec<(u64, u32, u64)> = std::mem::take(&mut *self.released.borrow_mut());
        let mut lent = self.lent.borrow_mut();
        let mut out = Vec::with_capacity(released.len());
        for (k, i, serial) in released {
            if lent.get(&(k, i)).is_some_and(|l| l.serial == serial) {
                if let Some(l) = lent.remove(&(k, i)) {
                    out.push((k, i, l));
                }
            }
        }
        out
    }

    /// Buffers of client `key` the engine still holds.
    pub fn lent_by(&self, key: u64) -> usize {
        self.lent.borrow().keys().filter(|(k, _)| *k == key).count()
    }
}
