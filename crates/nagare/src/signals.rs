//! Signals held back while a call that a handler must end decides to
//! sleep, as the kernel's `poll(2)` is ended by one.
//!
//! A call that looks at readiness in user space and then sleeps in the
//! kernel would miss a signal whose handler runs between the look and the
//! sleep: the handler runs, and the sleep that follows knows nothing of
//! it. So once such a call finds nothing ready, it blocks the signals it
//! may block ([`hold`]), looks once more, and sleeps in `ppoll` with the
//! mask from before ([`Held::mask`], or the caller's own for `ppoll`): a
//! signal that came meanwhile is pending, and the sleep ends at once with
//! `EINTR`. The mask comes back when the [`Held`] is dropped, and a signal
//! still pending is handled then, as one that came after the call.
//! Holds nest within a thread: an inner one changes nothing.

use std::cell::Cell;
use std::io;
use std::marker::PhantomData;

/// Signals the kernel raises for the faulting instruction itself: blocked,
/// they would kill the process instead of reaching its handler.
const SYNCHRONOUS: [libc::c_int; 6] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGTRAP, libc::SIGSYS];

thread_local! {
    /// The thread's mask from before its outermost hold, while one is on.
    static BEFORE: Cell<Option<libc::sigset_t>> = const { Cell::new(None) };
}

/// Signals held back on this thread until dropped. Not `Send`: the mask
/// is the thread's.
pub struct Held {
    before: libc::sigset_t,
    outermost: bool,
    _thread: PhantomData<*const ()>,
}

/// Blocks every signal that may be blocked (all but the synchronous ones;
/// `SIGKILL` and `SIGSTOP` never are) on this thread until the returned
/// [`Held`] is dropped.
pub fn hold() -> io::Result<Held> {
    if let Some(before) = BEFORE.with(Cell::get) {
        return Ok(Held { before, outermost: false, _thread: PhantomData });
    }
    // SAFETY: sigset_t is plain data; the calls fill the sets they are
    // given, which live on this stack.
    let before = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        for s in SYNCHRONOUS {
            libc::sigdelset(&mut all, s);
        }
        let mut before: libc::sigset_t = std::mem::zeroed();
        let r = libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        before
    };
    BEFORE.with(|b| b.set(Some(before)));
    Ok(Held { before, outermost: true, _thread: PhantomData })
}

impl Held {
    /// The thread's mask from before the hold: the one a sleep installs
    /// (`ppoll`'s mask) so that a held signal ends it.
    pub fn mask(&self) -> &libc::sigset_t {
        &self.before
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.outermost {
            BEFORE.with(|b| b.set(None));
            // SAFETY: restores the mask saved by `hold` on this same thread.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.before, std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(s: libc::c_int) -> bool {
        // SAFETY: reads this thread's mask into a set on the stack.
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, s) == 1
        }
    }

    #[test]
    fn a_hold_blocks_all_but_synchronous_signals_and_nests() {
        assert!(!blocked(libc::SIGUSR1));
        {
            let outer = hold().unwrap();
            assert!(blocked(libc::SIGUSR1) && blocked(libc::SIGINT));
            assert!(!blocked(libc::SIGSEGV) && !blocked(libc::SIGBUS));
            // SAFETY: the set the hold saved.
            assert_eq!(unsafe { libc::sigismember(outer.mask(), libc::SIGUSR1) }, 0);
            {
                let inner = hold().unwrap();
                // SAFETY: as above.
                assert_eq!(unsafe { libc::sigismember(inner.mask(), libc::SIGUSR1) }, 0);
            }
            assert!(blocked(libc::SIGUSR1), "an inner hold leaves the outer one on");
        }
        assert!(!blocked(libc::SIGUSR1));
    }

    /// A signal whose handler would run after a call has looked at
    /// readiness and before it sleeps (raised here from the look itself)
    /// ends the sleep at once.
    #[test]
    fn a_signal_between_the_look_and_the_sleep_ends_the_sleep() {
        use std::time::{Duration, Instant};
        extern "C" fn on_signal(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, without SA_RESTART, for a
        // signal no other test of this crate uses.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        let socket = std::env::temp_dir().join(format!("nagare-signals-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = {
            let (socket, stop) = (socket.clone(), stop.clone());
            std::thread::spawn(move || -> io::Result<()> {
                let device = nagare_dev::Loopback::new(1500, 64);
                let addr = "10.93.0.1/24".parse().map_err(|_| io::Error::other("bad address"))?;
                let config = nagare_core::InterfaceConfig::new(nagare_wire::EthernetAddress([2, 0, 0, 0, 0, 1]), addr);
                let iface = nagare_core::Interface::new(
                    config,
                    nagare_dev::Device::capabilities(&device),
                    nagare_core::buf::BufferPool::new(2048, 256),
                );
                let config = nagare_netd::NetdConfig { socket, ..nagare_netd::NetdConfig::default() };
                nagare_netd::Netd::new(iface, Box::new(device), nagare_dev::MonotonicClock::new(), config)?.run(&stop)
            })
        };
        let waited = Instant::now();
        let session = loop {
            match crate::Session::connect(&socket) {
                Ok(s) => break s,
                Err(e) if waited.elapsed() > Duration::from_secs(10) => panic!("netd did not start: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        let mut looks = 0;
        let started = Instant::now();
        let r = session.until_or_signal(Some(Duration::from_secs(2)), None, |_| {
            looks += 1;
            if looks == 2 {
                // SAFETY: this thread, a signal with a handler.
                unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2) };
            }
            Ok(None::<()>)
        });
        assert_eq!(r.map_err(|e| e.kind()), Err(io::ErrorKind::Interrupted), "after {:?}", started.elapsed());
        assert!(!blocked(libc::SIGUSR2), "the mask came back");
        drop(session);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        server.join().unwrap().unwrap();
        let _ = std::fs::remove_file(&socket);
    }
}
