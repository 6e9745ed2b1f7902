//! Signals held back while a call that a handler must end decides to
//! sleep, as the kernel's `poll(2)` is ended by one.
//!
//! A call that looks at readiness in user space and then sleeps in the
//! kernel would miss a signal whose handler runs between the look and the
//! sleep: the handler runs, and the sleep that follows knows nothing of
//! it. So once such a call finds nothing ready, it blocks the signals it
//! may block ([`hold`]), looks once more, and sleeps in `ppoll` with the
//! call's mask ([`Held::mask`]: the caller's own for `ppoll`, else the
//! thread's from before the hold): a signal that came meanwhile is
//! pending, and the sleep ends at once with `EINTR`. The thread's mask
//! comes back when the [`Held`] is dropped, and a signal still pending is
//! handled then, as one that came after the call. Holds nest within a
//! thread: an inner one changes nothing.
//!
//! Waits inside a hold that go on after a handler (for a free buffer, for
//! room in a ring) sleep with the call's mask too (`nap`,
//! `note_handled`): the handler runs then (a thread waiting on its
//! session behind another one, at the end of its 100 ms slice at the
//! latest), and the call ends with `EINTR` at its next sleep
//! ([`take_handled`]).
//!
//! Only this thread's signals are held. A signal sent to the process goes
//! to any thread that does not block it, as under the kernel's `poll`;
//! the library's own threads block them all (`spawn_quiet`), so only
//! the application's other threads may take one.

use std::cell::Cell;
use std::io;
use std::marker::PhantomData;
use std::time::Duration;

/// Signals the kernel raises for the faulting instruction itself: blocked,
/// they would kill the process instead of reaching its handler.
const SYNCHRONOUS: [libc::c_int; 6] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGTRAP, libc::SIGSYS];

/// The masks of a thread's outermost hold.
#[derive(Clone, Copy)]
struct Masks {
    /// The thread's mask from before it, which comes back after it.
    before: libc::sigset_t,
    /// The mask its sleeps install.
    sleep: libc::sigset_t,
}

thread_local! {
    /// The masks of the thread's outermost hold, while one is on.
    static HELD: Cell<Option<Masks>> = const { Cell::new(None) };
    /// A handler ran inside the hold, in a wait that went on after it.
    static HANDLED: Cell<bool> = const { Cell::new(false) };
}

/// Signals held back on this thread until dropped. Not `Send`: the mask
/// is the thread's.
pub struct Held {
    masks: Masks,
    outermost: bool,
    _thread: PhantomData<*const ()>,
}

/// Every signal that may be blocked: all but the synchronous ones
/// (`SIGKILL` and `SIGSTOP` never are).
fn blockable() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by the calls given it.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        for s in SYNCHRONOUS {
            libc::sigdelset(&mut all, s);
        }
        all
    }
}

/// Blocks every signal that may be blocked on this thread until the
/// returned [`Held`] is dropped. `sleep`: the mask the call's sleeps
/// install (a `ppoll` caller's); `None`, the thread's own from before.
/// Inside another hold, that hold's masks stand.
pub fn hold(sleep: Option<&libc::sigset_t>) -> io::Result<Held> {
    if let Some(masks) = HELD.with(Cell::get) {
        return Ok(Held { masks, outermost: false, _thread: PhantomData });
    }
    let all = blockable();
    // SAFETY: a zeroed sigset_t is a valid set for the call to fill.
    let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets live on this stack for the call.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    let masks = Masks { before, sleep: sleep.copied().unwrap_or(before) };
    HELD.with(|h| h.set(Some(masks)));
    HANDLED.with(|h| h.set(false));
    Ok(Held { masks, outermost: true, _thread: PhantomData })
}

/// Whether a hold is on on this thread.
pub fn is_held() -> bool {
    HELD.with(Cell::get).is_some()
}

/// In a child just forked: no hold is on. A child forked by a signal
/// handler that ran while a call of the parent's thread held signals and
/// slept starts its own life there (PostgreSQL's auxiliary processes
/// never return from the handler): its own calls hold and sleep afresh.
pub fn forget_holds_in_child() {
    HELD.with(|h| h.set(None));
    HANDLED.with(|h| h.set(false));
}

impl Held {
    /// The mask the call's sleeps install so that a held signal ends them.
    pub fn mask(&self) -> &libc::sigset_t {
        &self.masks.sleep
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.outermost {
            HELD.with(|h| h.set(None));
            HANDLED.with(|h| h.set(false));
            // SAFETY: restores the mask saved by `hold` on this same thread.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.masks.before, std::ptr::null_mut()) };
        }
    }
}

/// The mask a sleep on this thread installs while a hold is on (`None`
/// without one): a wait that goes on after a handler sleeps with it, and
/// notes a handler that ran with [`note_handled`].
pub(crate) fn held_mask() -> Option<libc::sigset_t> {
    HELD.with(Cell::get).map(|m| m.sleep)
}

/// A handler ran inside this thread's hold, in a wait that went on.
pub(crate) fn note_handled() {
    if HELD.with(Cell::get).is_some() {
        HANDLED.with(|h| h.set(true));
    }
}

/// Whether a handler ran inside this thread's hold since it was last
/// asked: the call that holds then ends with `EINTR`.
pub fn take_handled() -> bool {
    HANDLED.with(|h| h.replace(false))
}

/// Sleeps `time`; inside a hold, with its sleep mask, so that a pending
/// signal's handler runs (noted, [`note_handled`]) and ends the nap.
pub(crate) fn nap(time: Duration) {
    let Some(mask) = held_mask() else {
        std::thread::sleep(time);
        return;
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(time.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(time.subsec_nanos() as i32),
    };
    // SAFETY: no descriptors; the timespec and mask live on this stack.
    let r = unsafe { libc::ppoll(std::ptr::null_mut(), 0, &ts, &mask) };
    if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
        note_handled();
    }
}

/// Starts a thread of the library's own with every signal it may block
/// blocked (it inherits the mask it starts with), so that a signal sent
/// to the process goes to one of the application's threads.
pub(crate) fn spawn_quiet<F, T>(builder: std::thread::Builder, f: F) -> io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let all = blockable();
    // SAFETY: a zeroed sigset_t is a valid set for the call to fill.
    let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets live on this stack for the call.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    let spawned = builder.spawn(f);
    // SAFETY: restores the mask saved just above, on this same thread.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut()) };
    spawned
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
            let outer = hold(None).unwrap();
            assert!(blocked(libc::SIGUSR1) && blocked(libc::SIGINT));
            assert!(!blocked(libc::SIGSEGV) && !blocked(libc::SIGBUS));
            // SAFETY: the set the hold saved.
            assert_eq!(unsafe { libc::sigismember(outer.mask(), libc::SIGUSR1) }, 0);
            {
                let inner = hold(None).unwrap();
                // SAFETY: as above.
                assert_eq!(unsafe { libc::sigismember(inner.mask(), libc::SIGUSR1) }, 0);
            }
            assert!(blocked(libc::SIGUSR1), "an inner hold leaves the outer one on");
        }
        assert!(!blocked(libc::SIGUSR1));
    }

    /// Installs `handler` for `sig`, without `SA_RESTART`: each test here
    /// takes a signal no other test of this crate uses.
    fn handle(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
        // SAFETY: a sigaction on the stack; the handler only touches
        // atomics, if anything.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
        }
    }

    /// A hold's sleeps install the caller's mask when one is given, also
    /// for holds inside it; without one, the thread's own from before.
    #[test]
    fn a_hold_sleeps_with_the_callers_mask_and_inner_holds_keep_it() {
        // SAFETY: sets on the stack, filled by the calls.
        let only_usr1 = unsafe {
            let mut m: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut m);
            libc::sigaddset(&mut m, libc::SIGUSR1);
            m
        };
        let outer = hold(Some(&only_usr1)).unwrap();
        let inner = hold(None).unwrap();
        for h in [&outer, &inner] {
            // SAFETY: the sets the holds keep.
            unsafe {
                assert_eq!(libc::sigismember(h.mask(), libc::SIGUSR1), 1);
                assert_eq!(libc::sigismember(h.mask(), libc::SIGINT), 0);
            }
        }
        drop(inner);
        drop(outer);
        assert!(!blocked(libc::SIGUSR1));
        assert!(held_mask().is_none());
    }

    /// A nap inside a hold lets a pending signal's handler run, ends, and
    /// leaves the note that ends the call holding; outside a hold there
    /// is no note.
    #[test]
    fn a_nap_in_a_hold_runs_a_pending_handler_and_notes_it() {
        use std::sync::atomic::{AtomicU32, Ordering};
        static RAN: AtomicU32 = AtomicU32::new(0);
        extern "C" fn on_signal(_: libc::c_int) {
            RAN.fetch_add(1, Ordering::Relaxed);
        }
        handle(libc::SIGWINCH, on_signal);
        let held = hold(None).unwrap();
        // SAFETY: this thread, a signal with a handler.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGWINCH) };
        assert_eq!(RAN.load(Ordering::Relaxed), 0, "held back");
        let started = std::time::Instant::now();
        nap(Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(4), "the nap went on");
        assert_eq!(RAN.load(Ordering::Relaxed), 1);
        assert!(take_handled());
        assert!(!take_handled(), "told once");
        drop(held);
        note_handled();
        assert!(!take_handled(), "no hold, no note");
    }

    /// A thread the library starts blocks every signal it may, and the
    /// thread that started it keeps its own mask.
    #[test]
    fn a_quiet_thread_blocks_signals_and_its_starter_does_not() {
        let h = spawn_quiet(std::thread::Builder::new(), || (blocked(libc::SIGINT), blocked(libc::SIGSEGV))).unwrap();
        assert_eq!(h.join().unwrap(), (true, false));
        assert!(!blocked(libc::SIGINT));
    }

    /// A signal whose handler would run after a call has looked at
    /// readiness and before it sleeps (raised here from the look itself)
    /// ends the sleep at once.
    #[test]
    fn a_signal_between_the_look_and_the_sleep_ends_the_sleep() {
        use std::time::{Duration, Instant};
        extern "C" fn on_signal(_: libc::c_int) {}
        handle(libc::SIGUSR2, on_signal);
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
