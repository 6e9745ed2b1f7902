//! A signal handler never runs while a wait of this layer looks at
//! readiness (under the session's locks, which a handler that calls into
//! the layer would wait on for ever: PostgreSQL's postmaster before
//! version 16 forks in its handlers, around `select`). A helper thread
//! sends the waiting thread signals as fast as it can while the thread
//! polls without waiting, over and over; the handler counts the times it
//! found the thread inside the layer.

use nagare_posix::Entered;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sets its flag when dropped: the helper stops even if the test's
/// thread panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

static RAN: AtomicU64 = AtomicU64::new(0);
static INSIDE: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    RAN.fetch_add(1, Ordering::Relaxed);
    if Entered::inside() {
        INSIDE.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn no_handler_runs_while_poll_select_or_epoll_wait_looks() {
    // SAFETY: a handler that only touches atomics and a thread-local flag,
    // installed with a zeroed sigaction filled in here.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()), 0);
    }
    let mut pipe = [0; 2];
    // SAFETY: `pipe` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: a new epoll set, with the pipe's read end in it.
    let epfd = unsafe { libc::epoll_create1(0) };
    assert!(epfd >= 0);
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 0 };
    // SAFETY: `ev` is a live event.
    assert_eq!(unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, pipe[0], &mut ev) }, 0);
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the test's thread is alive until `stop` is set.
                unsafe { libc::pthread_kill(me, libc::SIGUSR1) };
                let until = Instant::now() + Duration::from_micros(2);
                while Instant::now() < until {}
            }
        });
        let _stop = StopOnDrop(&stop);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut rounds = 0;
        // At least 30 000 rounds, and on until 1000 signals came (a
        // helper kept off the CPU for a while sends fewer), within 20 s.
        while (rounds < 30_000 || RAN.load(Ordering::Relaxed) <= 1000) && Instant::now() < deadline {
            let mut fds = [libc::pollfd { fd: pipe[0], events: libc::POLLIN, revents: 0 }];
            // SAFETY: one live pollfd; no signal mask.
            let polled = unsafe { nagare_posix::poll(fds.as_mut_ptr(), 1, Some(Duration::ZERO), std::ptr::null()) };
            assert_eq!(polled, Ok(0));
            // SAFETY: a zeroed fd_set with the pipe's read end set.
            let selected = unsafe {
                let mut read: libc::fd_set = std::mem::zeroed();
                libc::FD_SET(pipe[0], &mut read);
                let null = std::ptr::null_mut();
                nagare_posix::select(pipe[0] + 1, &mut read, null, null, Some(Duration::ZERO), std::ptr::null())
            };
            assert_eq!(selected, Ok(0));
            let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
            // SAFETY: room for four events; no signal mask.
            let waited =
                unsafe { nagare_posix::epoll_wait(epfd, out.as_mut_ptr(), 4, Some(Duration::ZERO), std::ptr::null()) };
            assert_eq!(waited, Ok(0));
            rounds += 1;
        }
    });
    let (ran, inside) = (RAN.load(Ordering::Relaxed), INSIDE.load(Ordering::Relaxed));
    assert!(ran > 1000, "only {ran} signals came: the test proves nothing");
    assert_eq!(inside, 0, "{inside} of {ran} handlers ran inside a wait's look");
}
