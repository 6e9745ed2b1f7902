//! Running hosts on the wall clock: waiting for a device, and stopping
//! cleanly on SIGINT or SIGTERM.

use crate::busy_poll::BusyPoll;
use crate::host::{earliest, Host};
use nagare_core::Instant;
use nagare_dev::{Device, MonotonicClock};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Longest sleep, so a stop request is noticed promptly even when no
/// signal interrupts the wait.
pub const MAX_WAIT: Duration = Duration::from_millis(100);

/// A flag raised by SIGINT or SIGTERM.
pub fn stop_flag() -> io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&flag))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&flag))?;
    Ok(flag)
}

pub fn stopped(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}

/// Sleeps until `fd` is readable (or writable, if asked) or `timeout`
/// passes; a signal ends the wait early.
pub fn wait_for(fd: Option<RawFd>, want_write: bool, timeout: Duration) -> io::Result<()> {
    wait_for_any(&[fd], want_write, timeout)
}

/// Sleeps until one of `fds` is readable (or writable, if asked) or
/// `timeout` passes (at most [`MAX_WAIT`]); a signal ends the wait early.
/// Without any descriptor it just sleeps.
pub fn wait_for_any(fds: &[Option<RawFd>], want_write: bool, timeout: Duration) -> io::Result<()> {
    let timeout = timeout.min(MAX_WAIT);
    // Round up: a timeout just under a millisecond must sleep, not spin.
    let millis = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    let events = if want_write { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
    let mut pollfds = [libc::pollfd { fd: -1, events, revents: 0 }; 4];
    let mut n = 0;
    for (slot, fd) in pollfds.iter_mut().zip(fds.iter().flatten()) {
        slot.fd = *fd;
        n += 1;
    }
    if n == 0 {
        std::thread::sleep(timeout);
        return Ok(());
    }
    // SAFETY: `pollfds` lives on the stack for the duration of the call,
    // and `n` of its entries are given.
    let rc = unsafe { libc::poll(pollfds.as_mut_ptr(), n as libc::nfds_t, millis) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}

/// Steps `host` on the wall clock, calling `tick` after every step, until
/// `tick` says stop or a signal arrives. `tick` returns when it next wants
/// to run (`None`: only on input). With nothing to do, the loop polls on
/// for as long as [`BusyPoll`] says, then sleeps until the device or a
/// timer has something.
pub fn run<D: Device>(
    host: &mut Host<D>,
    clock: &MonotonicClock,
    stop: &AtomicBool,
    mut tick: impl FnMut(&mut Host<D>, Instant) -> std::ops::ControlFlow<(), Option<Instant>>,
) -> io::Result<()> {
    let mut busy = BusyPoll::for_this_process();
    loop {
        if stopped(stop) {
            return Ok(());
        }
        let now = clock.now();
        let report = host.step(now);
        if report.device_error {
            // A failing device (the link went down, the kernel refused a
            // frame) is waited out, not fatal; the host counts and logs it.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let stuck_before_tick = host.has_pending_tx();
        let wake = match tick(host, now) {
            std::ops::ControlFlow::Break(()) => return Ok(()),
            std::ops::ControlFlow::Continue(wake) => wake,
        };
        // Frames `tick` just queued go out at once, not after a wait.
        if report.did_work() || (!stuck_before_tick && host.has_pending_tx()) {
            busy.work(std::time::Instant::now());
            continue;
        }
        if busy.keep_polling(std::time::Instant::now()) {
            // Whoever the frames come from may be waiting for this CPU.
            std::thread::yield_now();
            continue;
        }
        let now = clock.now();
        let next = earliest(host.poll_at(), wake);
        let timeout = next.map_or(MAX_WAIT, |t| t.saturating_since(now));
        if timeout.is_zero() {
            continue;
        }
        // Wait for POLLOUT only if the last transmit made progress: after
        // ENOBUFS a TAP stays writable, and polling for it would spin.
        let pending_tx = host.has_pending_tx();
        if pending_tx && report.transmitted == 0 {
            std::thread::sleep(Duration::from_millis(1).min(timeout));
            continue;
        }
        wait_for(host.device.raw_fd(), pending_tx, timeout)?;
    }
}

/// Longest a tool waits for an IPv6 source address before it gives up
/// (duplicate address detection takes about two seconds).
pub const IPV6_SOURCE_WAIT: Duration = Duration::from_secs(10);

/// Steps `host` until it has a source address for `dst` of `dst`'s scope
/// (one that has passed duplicate address detection, about two seconds
/// after start-up: a global destination is not reached from a link-local
/// address while a global one is still being checked), for at most
/// `limit` or until a signal arrives; says whether it has a source, of
/// that scope or, once `limit` has run, of any.
pub fn wait_for_ipv6_source<D: Device>(
    host: &mut Host<D>,
    clock: &MonotonicClock,
    stop: &AtomicBool,
    dst: std::net::Ipv6Addr,
    limit: Duration,
) -> io::Result<bool> {
    let link_local = |ip: std::net::Ipv6Addr| ip.segments()[0] & 0xffc0 == 0xfe80;
    let fits = |host: &Host<D>| host.iface.ipv6_source_for(dst).is_some_and(|src| link_local(dst) || !link_local(src));
    let deadline = clock.now() + limit;
    run(host, clock, stop, |host, now| {
        if fits(host) || now >= deadline {
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(Some(now + Duration::from_millis(50)))
    })?;
    Ok(host.iface.ipv6_source_for(dst).is_some())
}
