//! This process's id without a system call per ask. Every call of the
//! layer asks it (whose session is this, whose socket), and `getpid` is a
//! system call: a tenth of a busy server's time here.
//!
//! The id is kept in a page of its own that the kernel zeroes in a child
//! made by any `fork` (`MADV_WIPEONFORK`), with fork handlers or without
//! (`_Fork`, a raw `clone`), so a child never reads its parent's id: it
//! finds 0 and asks the kernel once. Children that share the parent's
//! memory (`vfork`, `posix_spawn`) run none of this layer's calls: the
//! preload makes `vfork` a `fork`, and `posix_spawn`'s child only runs
//! libc's own file actions before `exec`. Where the kernel has no
//! `MADV_WIPEONFORK` every ask is a `getpid`.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// The page's id, once mapped; [`NONE`] where it could not be.
static PAGE: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());

/// What [`PAGE`] holds where no page could be kept.
const NONE: *mut AtomicU32 = std::ptr::dangling_mut::<AtomicU32>();

/// This process's id (`getpid`).
pub(crate) fn current() -> u32 {
    let page = match PAGE.load(Ordering::Acquire) {
        p if p.is_null() => map(),
        p => p,
    };
    if page == NONE {
        return std::process::id();
    }
    // SAFETY: a page mapped for this alone and never unmapped (`map`),
    // aligned for a u32; in a child the kernel zeroed it.
    let kept = unsafe { &*page };
    match kept.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            kept.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// Maps the page (once: a thread that loses the race unmaps its own) and
/// returns what [`PAGE`] holds.
fn map() -> *mut AtomicU32 {
    const SIZE: usize = 4096;
    // SAFETY: an anonymous private mapping of our own; no memory of
    // anyone else's is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    let mine = if p == libc::MAP_FAILED {
        NONE
    // SAFETY: the mapping just made, of SIZE bytes.
    } else if unsafe { libc::madvise(p, SIZE, libc::MADV_WIPEONFORK) } != 0 {
        // SAFETY: the mapping just made, used by nobody.
        unsafe { libc::munmap(p, SIZE) };
        NONE
    } else {
        p.cast::<AtomicU32>()
    };
    match PAGE.compare_exchange(std::ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => mine,
        Err(theirs) => {
            if mine != NONE {
                // SAFETY: ours, never published.
                unsafe { libc::munmap(mine.cast(), SIZE) };
            }
            theirs
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_getpid_here() {
        assert_eq!(current(), std::process::id());
        assert_eq!(current(), std::process::id(), "asked again, from the page");
    }

    /// A child made without fork handlers (a raw `clone`, as `_Fork`
    /// makes one) reads its own id, not the one its parent kept.
    #[test]
    fn a_child_forked_without_handlers_reads_its_own_id() {
        let parent = current();
        // SAFETY: a fork of this process; the child only reads an atomic,
        // calls getpid and `_exit`s.
        let child = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) };
        assert!(child >= 0, "{}", std::io::Error::last_os_error());
        if child == 0 {
            // SAFETY: getpid and _exit only.
            let own = unsafe { libc::getpid() } as u32;
            unsafe { libc::_exit(if current() == own && own != parent { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: our child's pid and a status word.
        assert_eq!(unsafe { libc::waitpid(child as libc::pid_t, &mut status, 0) }, child as libc::pid_t);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child read its parent's id");
        assert_eq!(current(), parent);
    }
}
