//! Socket handles and the table that holds sockets.
//!
//! A handle is an index plus a generation, so a handle kept after its socket
//! closed can never reach the socket that later reuses the slot.

use alloc::vec::Vec;
use core::ops::RangeInclusive;

/// Ephemeral ports as IANA and RFC 6335 define them, for UDP binds and TCP
/// active opens that name no port.
pub(crate) const EPHEMERAL_PORTS: RangeInclusive<u16> = 49152..=65535;

/// Names one socket of one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketHandle {
    index: u32,
    generation: u32,
}

impl SocketHandle {
    /// The slot index, for display.
    pub fn index(&self) -> u32 {
        self.index
    }
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A table of `T` indexed by [`SocketHandle`], reusing freed slots.
#[derive(Debug)]
pub struct SocketTable<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for SocketTable<T> {
    fn default() -> Self {
        SocketTable { slots: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> SocketTable<T> {
    /// Stores `value` and returns its handle.
    pub fn insert(&mut self, value: T) -> SocketHandle {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            if let Some(slot) = self.slots.get_mut(index as usize) {
                slot.generation = slot.generation.wrapping_add(1);
                slot.value = Some(value);
                return SocketHandle { index, generation: slot.generation };
            }
        }
        let index = self.slots.len() as u32;
        self.slots.push(Slot { generation: 0, value: Some(value) });
        SocketHandle { index, generation: 0 }
    }

    /// The socket named by `handle`, if it still exists.
    pub fn get(&self, handle: SocketHandle) -> Option<&T> {
        self.slots
            .get(handle.index as usize)
            .filter(|s| s.generation == handle.generation)
            .and_then(|s| s.value.as_ref())
    }

    /// The socket named by `handle`, for changing.
    pub fn get_mut(&mut self, handle: SocketHandle) -> Option<&mut T> {
        self.slots
            .get_mut(handle.index as usize)
            .filter(|s| s.generation == handle.generation)
            .and_then(|s| s.value.as_mut())
    }

    /// Removes and returns the socket named by `handle`.
    pub fn remove(&mut self, handle: SocketHandle) -> Option<T> {
        let slot = self.slots.get_mut(handle.index as usize).filter(|s| s.generation == handle.generation)?;
        let value = slot.value.take()?;
        self.free.push(handle.index);
        self.len -= 1;
        Some(value)
    }

    /// Every socket with its handle, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (SocketHandle, &T)> + '_ {
        self.slots.iter().enumerate().filter_map(|(index, slot)| {
            slot.value.as_ref().map(|v| (SocketHandle { index: index as u32, generation: slot.generation }, v))
        })
    }

    /// Number of sockets held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_miss_reused_slots() {
        let mut t = SocketTable::default();
        let a = t.insert("a");
        assert_eq!(t.remove(a), Some("a"));
        let b = t.insert("b");
        assert_eq!(a.index(), b.index());
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(b), Some(&"b"));
        assert_eq!(t.remove(a), None);
        assert_eq!(t.len(), 1);
    }
}
