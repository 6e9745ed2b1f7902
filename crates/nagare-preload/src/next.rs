//! The next definition of a libc call (libc's own), found once by name
//! with `dlsym(RTLD_NEXT)` and kept.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The address of the next definition of `name` (NUL-terminated). A
/// libc without it ends the process with a message: every call here is
/// one libc has.
pub(crate) fn resolve(slot: &AtomicUsize, name: &'static str) -> usize {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if p == 0 {
        let msg = b"nagare preload: libc lacks a call it stands in for\n";
        unsafe {
            libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
            libc::abort();
        }
    }
    slot.store(p, Ordering::Relaxed);
    p
}

/// `next!(name: fn(args) -> ret)`: libc's `name`, as a function pointer
/// of that type (used inside `unsafe`); `next!(name: variadic fn(args) -> ret)` for one whose
/// C declaration ends in `...` after those arguments.
macro_rules! next {
    ($name:ident : variadic fn($($arg:ty),*) -> $ret:ty) => {{
        static SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::next::resolve(&SLOT, concat!(stringify!($name), "\0"));
        std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*, ...) -> $ret>(p)
    }};
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {{
        static SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::next::resolve(&SLOT, concat!(stringify!($name), "\0"));
        std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) -> $ret>(p)
    }};
}
pub(crate) use next;
