//! Descriptor numbers to sockets. A number is ours from the `socket` (or
//! `accept`, `dup`) that reserved it until the `close` that gives it back;
//! the kernel holds a placeholder under it meanwhile, so no file can take
//! it.
//!
//! `is_ours` runs on every `read`, `write` and `close` of the process, so
//! numbers below [`MARKED`] are marked in a flat array that needs no lock.

use crate::sock::Sock;
use hashbrown::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Numbers below this have a mark each.
const MARKED: usize = 1 << 16;

static MARKS: [AtomicBool; MARKED] = [const { AtomicBool::new(false) }; MARKED];
static TABLE: Mutex<Option<HashMap<i32, Arc<Sock>>>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<HashMap<i32, Arc<Sock>>>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The table, held across a `fork` (`crate::fork`), so that no other
/// thread holds it when the child starts.
pub(crate) type Held = MutexGuard<'static, Option<HashMap<i32, Arc<Sock>>>>;

/// Takes the table to hold across a `fork`.
pub(crate) fn hold() -> Held {
    table()
}

/// Whether descriptor `fd` is a nagare socket.
pub fn is_ours(fd: i32) -> bool {
    match usize::try_from(fd) {
        Ok(i) if i < MARKED => MARKS[i].load(Ordering::Acquire),
        Ok(_) => table().as_ref().is_some_and(|t| t.contains_key(&fd)),
        Err(_) => false,
    }
}

/// The socket under `fd`: `EBADF` if none.
pub(crate) fn get(fd: i32) -> crate::Res<Arc<Sock>> {
    if !is_ours(fd) {
        return Err(libc::EBADF);
    }
    table().as_ref().and_then(|t| t.get(&fd).cloned()).ok_or(libc::EBADF)
}

/// Puts `sock` under `fd` (a number the kernel just gave us).
pub(crate) fn insert(fd: i32, sock: Arc<Sock>) {
    table().get_or_insert_with(HashMap::new).insert(fd, sock);
    if let Ok(i) = usize::try_from(fd) {
        if i < MARKED {
            MARKS[i].store(true, Ordering::Release);
        }
    }
}

/// Takes `fd` out of the table (before its number goes back to the
/// kernel); the socket, if it was ours.
pub(crate) fn remove(fd: i32) -> Option<Arc<Sock>> {
    if let Ok(i) = usize::try_from(fd) {
        if i < MARKED {
            MARKS[i].store(false, Ordering::Release);
        }
    }
    table().as_mut().and_then(|t| t.remove(&fd))
}

/// The numbers within `first..=last` that are ours, lowest first.
pub(crate) fn in_range(first: i32, last: i32) -> Vec<i32> {
    let mut fds: Vec<i32> =
        table().iter().flatten().map(|(&fd, _)| fd).filter(|fd| (first..=last).contains(fd)).collect();
    fds.sort_unstable();
    fds
}

/// Every socket with its numbers, each socket once (found by its
/// address, so a fork's cost follows the number of descriptors).
pub(crate) fn groups() -> Vec<(Vec<i32>, Arc<Sock>)> {
    let t = table();
    let mut out: Vec<(Vec<i32>, Arc<Sock>)> = Vec::new();
    let mut index: HashMap<*const Sock, usize> = HashMap::new();
    for (&fd, s) in t.iter().flatten() {
        match index.get(&Arc::as_ptr(s)) {
            Some(&i) => out[i].0.push(fd),
            None => {
                index.insert(Arc::as_ptr(s), out.len());
                out.push((vec![fd], s.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sock::{Proto, State};

    #[test]
    fn a_socket_under_several_numbers_is_one_group() {
        // Numbers far above any this test process opens.
        let (a, b) = (
            Arc::new(Sock::new(Proto::Tcp, State::Fresh, false)),
            Arc::new(Sock::new(Proto::Udp, State::Fresh, false)),
        );
        for fd in [900_001, 900_002, 900_003] {
            insert(fd, a.clone());
        }
        insert(900_004, b.clone());
        let mut mine: Vec<(Vec<i32>, bool)> = groups()
            .into_iter()
            .filter(|(_, s)| Arc::ptr_eq(s, &a) || Arc::ptr_eq(s, &b))
            .map(|(mut fds, s)| {
                fds.sort_unstable();
                (fds, Arc::ptr_eq(&s, &a))
            })
            .collect();
        mine.sort();
        assert_eq!(mine, vec![(vec![900_001, 900_002, 900_003], true), (vec![900_004], false)]);
        for fd in 900_001..=900_004 {
            remove(fd);
        }
    }
}
