//! `nagare bench handover`: what it costs to hand a data buffer from one
//! process to another, in the form of Table 3 of the AnT MMU paper, every
//! figure measured on this machine in one run.
//!
//! - **Remap** (what the AnT papers do per transfer): the buffer lives in a
//!   memfd; *attach* is `mmap(MAP_SHARED)` of its range into the receiver,
//!   *first access* reads one byte of each page of the fresh mapping (one
//!   page fault per page), *detach* is `munmap`. Every mapping is of the
//!   same range, whose pages exist already, as the sender's data would.
//! - **Premapped** (what `nagare-ipc` does): the region is mapped once by
//!   each side and a hand-over is a change of owner in two private tables.
//!   *Attach* is the sender's [`Pool::give`] plus the receiver's
//!   [`Pool::take`] of the descriptor; *first access* reads one byte of each
//!   page (already mapped: no fault, at most a TLB miss); *detach* hands the
//!   buffer back (receiver's `give`, sender's `take`).
//! - **References**: one system call (`getppid`) and one process switch
//!   (two processes ping-ponging a byte over two pipes; a round trip is two
//!   switches).
//!
//! Each stage is timed around a batch of operations (up to [`MAX_CHUNK`] at
//! a time: all the `mmap`s, then all the touches, then all the `munmap`s),
//! because one operation is too short for the clock. A run is `iterations`
//! hand-overs; the median of `runs` runs is reported.
//!
//! Both premapped views live in this process, each with a mapping of its
//! own, as two processes would have: what a hand-over costs does not depend
//! on whether the two tables are in one process or two. The remap rows map
//! into this process too; a receiving process would pay the same.

use anyhow::{bail, ensure, Context, Result};
use nagare_ipc::{Descriptor, Pool, Region, RegionConfig};
use std::hint::black_box;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// The most hand-overs in flight in one timed batch: bounds the number of
/// live mappings (far below `vm.max_map_count`) and the region's size.
const MAX_CHUNK: usize = 1024;
/// The most buffer memory one batch holds.
const MAX_CHUNK_BYTES: usize = 64 << 20;
/// Untimed round trips before the process-switch runs, so that both
/// processes are running and their pipes warm.
const PING_WARMUP: usize = 100;

/// Arguments of `nagare bench handover`.
#[derive(Debug, Clone)]
pub struct HandoverBenchArgs {
    /// Bytes per buffer handed over (rounded up to whole pages).
    pub size: usize,
    /// Hand-overs per timed batch.
    pub iterations: usize,
    /// Timed batches; the median is reported.
    pub runs: usize,
}

/// Nanoseconds per hand-over, by stage (each the median over the runs;
/// `total` is the median of the runs' sums, so it need not equal the sum
/// of the stage medians).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageFigures {
    /// Making the buffer the receiver's.
    pub attach: f64,
    /// Reading one byte of each page of the buffer right after attaching.
    pub first_access: f64,
    /// Giving the buffer up again.
    pub detach: f64,
    /// The three together.
    pub total: f64,
}

/// Everything `nagare bench handover` measures, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HandoverFigures {
    /// Bytes per buffer, after rounding up to whole pages.
    pub size: usize,
    /// Pages per buffer.
    pub pages: usize,
    /// Hand-overs per run.
    pub iterations: usize,
    /// Runs the medians are taken over.
    pub runs: usize,
    /// `mmap` / touch / `munmap` of a memfd range per transfer.
    pub remap: StageFigures,
    /// Ownership transfer in a region mapped once.
    pub premapped: StageFigures,
    /// The sender's `give`, part of `premapped.attach`.
    pub premapped_give: f64,
    /// The receiver's `take`, part of `premapped.attach`.
    pub premapped_take: f64,
    /// One `getppid` system call.
    pub syscall: f64,
    /// One process switch (half a pipe round trip between two processes).
    pub process_switch: f64,
}

/// Measures and prints the table.
pub fn run(args: HandoverBenchArgs) -> Result<()> {
    let f = measure(&args)?;
    print!("{}", format_table(&f));
    Ok(())
}

/// Measures every figure of the table.
pub fn measure(args: &HandoverBenchArgs) -> Result<HandoverFigures> {
    ensure!(args.size > 0, "--size must be at least 1");
    ensure!(args.iterations > 0, "--iterations must be at least 1");
    ensure!(args.runs > 0, "--runs must be at least 1");
    let page = page_size();
    let pages = args.size.div_ceil(page);
    let size = pages.checked_mul(page).context("--size too large")?;
    let max = nagare_ipc::region::MAX_BUFFER_SIZE as usize;
    ensure!(size <= max, "--size {} rounds to {size} bytes, more than a pool buffer holds ({max})", args.size);
    let chunk = args.iterations.min(MAX_CHUNK).min((MAX_CHUNK_BYTES / size).max(1));
    let shape = Shape { size, pages, page, chunk, iterations: args.iterations };

    let remap = measure_remap(&shape, args.runs).context("remap hand-over")?;
    let pre = measure_premapped(&shape, args.runs).context("premapped hand-over")?;
    let syscall = measure_syscall(args.iterations, args.runs);
    let process_switch = measure_process_switch(args.iterations, args.runs).context("process switch")?;

    let premapped = StageFigures {
        attach: median(pre.iter().map(|r| r.give + r.take)),
        first_access: median(pre.iter().map(|r| r.first_access)),
        detach: median(pre.iter().map(|r| r.detach)),
        total: median(pre.iter().map(|r| r.give + r.take + r.first_access + r.detach)),
    };
    Ok(HandoverFigures {
        size,
        pages,
        iterations: args.iterations,
        runs: args.runs,
        remap: stage_medians(&remap),
        premapped,
        premapped_give: median(pre.iter().map(|r| r.give)),
        premapped_take: median(pre.iter().map(|r| r.take)),
        syscall,
        process_switch,
    })
}

/// The table `run` prints.
pub fn format_table(f: &HandoverFigures) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let row = |s: &mut String, name: &str, st: &StageFigures| {
        let _ =
            writeln!(s, "{name:<22}{:>10.1}{:>16.1}{:>10.1}{:>10.1}", st.attach, st.first_access, st.detach, st.total);
    };
    let _ = writeln!(
        s,
        "hand-over of a {}-byte buffer ({} page{}), median of {} run{} of {}, ns per operation",
        f.size,
        f.pages,
        if f.pages == 1 { "" } else { "s" },
        f.runs,
        if f.runs == 1 { "" } else { "s" },
        f.iterations
    );
    let _ = writeln!(s, "{:<22}{:>10}{:>16}{:>10}{:>10}", "", "attach", "first access", "detach", "total");
    row(&mut s, "remap (mmap/munmap)", &f.remap);
    row(&mut s, "premapped (nagare)", &f.premapped);
    let _ = writeln!(s, "ratio remap/premapped total: {:.1}x", f.remap.total / f.premapped.total);
    let _ = writeln!(
        s,
        "system call (getppid): {:.1} ns;  process switch (pipe ping-pong): {:.1} ns",
        f.syscall, f.process_switch
    );
    let _ = writeln!(
        s,
        "  remap: attach = mmap(MAP_SHARED) of a memfd range, first access = one byte read per page \
         (a page fault each), detach = munmap"
    );
    let _ = writeln!(
        s,
        "  premapped: attach = sender's give {:.1} + receiver's take {:.1}, first access = one byte read \
         per page (already mapped), detach = give back + take back",
        f.premapped_give, f.premapped_take
    );
    let _ = writeln!(
        s,
        "  both premapped views (each with its own mapping of one region) and the remap receiver are in this \
         one process; the mapping costs are those of two processes"
    );
    let _ = writeln!(s, "  process switch = pipe round trip / 2, nothing pinned (the two may run on different CPUs)");
    s
}

/// The sizes every measurement shares.
struct Shape {
    /// Bytes per buffer (whole pages).
    size: usize,
    pages: usize,
    page: usize,
    /// Hand-overs in flight in one timed batch.
    chunk: usize,
    iterations: usize,
}

impl Shape {
    /// The batch sizes that add up to one run.
    fn batches(&self) -> impl Iterator<Item = usize> + '_ {
        let full = self.iterations / self.chunk;
        let rest = self.iterations % self.chunk;
        std::iter::repeat_n(self.chunk, full).chain((rest > 0).then_some(rest))
    }
}

/// One run's time per hand-over, in nanoseconds, by stage.
#[derive(Clone, Copy, Default)]
struct Stages {
    attach: f64,
    first_access: f64,
    detach: f64,
}

/// One premapped run; attach is split in its two halves.
#[derive(Clone, Copy, Default)]
struct PremappedStages {
    give: f64,
    take: f64,
    first_access: f64,
    detach: f64,
}

fn stage_medians(runs: &[Stages]) -> StageFigures {
    StageFigures {
        attach: median(runs.iter().map(|r| r.attach)),
        first_access: median(runs.iter().map(|r| r.first_access)),
        detach: median(runs.iter().map(|r| r.detach)),
        total: median(runs.iter().map(|r| r.attach + r.first_access + r.detach)),
    }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

fn per_op(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// Reads one byte of each page, through volatile loads so that the reads
/// (and the faults they cause) cannot be optimised away or merged.
///
/// # Safety
///
/// `base..base + pages * page` must be mapped and readable.
unsafe fn touch_pages(base: *const u8, pages: usize, page: usize) -> u8 {
    let mut acc = 0u8;
    for k in 0..pages {
        // SAFETY: page `k` lies inside the range the caller vouches for.
        acc ^= unsafe { std::ptr::read_volatile(base.add(k * page)) };
    }
    acc
}

// ---------------------------------------------------------------- remap

/// Live mappings of one batch, unmapped on drop so that an error half-way
/// through a batch leaks none.
struct Mappings {
    ptrs: Vec<*mut u8>,
    len: usize,
}

impl Drop for Mappings {
    fn drop(&mut self) {
        for p in self.ptrs.drain(..) {
            // SAFETY: every pointer in `ptrs` came from a successful mmap of
            // `len` bytes that nothing else unmaps, and no reference into it
            // outlives the batch.
            unsafe { libc::munmap(p.cast(), self.len) };
        }
    }
}

fn memfd(name: &std::ffi::CStr, len: usize) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and outlives the call.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned `fd` as a new descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let off = libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain system call on an open descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), off) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The pages must exist before the first hand-over, as the sender's data
    // would: otherwise the first access would also pay for allocating them.
    let data = vec![0xa5u8; len];
    let mut done = 0;
    while done < len {
        // SAFETY: `data[done..]` is readable for `len - done` bytes.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), data[done..].as_ptr().cast(), len - done, done as libc::off_t) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            _ => return Err(io::Error::last_os_error()),
        }
    }
    Ok(fd)
}

/// One batch of `n` remap hand-overs: the time of all the `mmap`s, of all
/// the touches and of all the `munmap`s.
fn remap_batch(fd: RawFd, shape: &Shape, n: usize, maps: &mut Mappings) -> Result<[Duration; 3]> {
    let t0 = Instant::now();
    for _ in 0..n {
        // SAFETY: a fresh mapping at an address the kernel chooses aliases no
        // Rust object; the memfd is `size` bytes long and nobody truncates
        // it, so every page of the mapping stays backed.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), shape.size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("mmap");
        }
        maps.ptrs.push(p.cast());
    }
    let t1 = Instant::now();
    let mut acc = 0u8;
    for &p in &maps.ptrs {
        // SAFETY: `p` is a live mapping of `pages` readable pages.
        acc ^= unsafe { touch_pages(p, shape.pages, shape.page) };
    }
    black_box(acc);
    let t2 = Instant::now();
    let mut failed = 0usize;
    for p in maps.ptrs.drain(..) {
        // SAFETY: `p` came from the mmap above, nothing else unmaps it, and
        // no reference into it exists.
        failed += usize::from(unsafe { libc::munmap(p.cast(), shape.size) } != 0);
    }
    let t3 = Instant::now();
    ensure!(failed == 0, "munmap failed {failed} times");
    Ok([t1 - t0, t2 - t1, t3 - t2])
}

fn remap_run(fd: RawFd, shape: &Shape) -> Result<Stages> {
    let mut maps = Mappings { ptrs: Vec::with_capacity(shape.chunk), len: shape.size };
    let mut t = [Duration::ZERO; 3];
    for n in shape.batches() {
        for (sum, d) in t.iter_mut().zip(remap_batch(fd, shape, n, &mut maps)?) {
            *sum += d;
        }
    }
    let n = shape.iterations;
    Ok(Stages { attach: per_op(t[0], n), first_access: per_op(t[1], n), detach: per_op(t[2], n) })
}

fn measure_remap(shape: &Shape, runs: usize) -> Result<Vec<Stages>> {
    let fd = memfd(c"nagare-bench-remap", shape.size).context("memfd")?;
    let warm = Shape { iterations: shape.chunk, ..*shape };
    remap_run(fd.as_raw_fd(), &warm)?;
    (0..runs).map(|_| remap_run(fd.as_raw_fd(), shape)).collect()
}

// ------------------------------------------------------------ premapped

/// The two ends of one region: the sender (the attacher, as an application
/// sending to netd) starts owning every buffer, the receiver none.
struct PremappedPair {
    // The regions hold the memfd and keep the mappings the pools use alive.
    _creator: Region,
    _attacher: Region,
    sender: Pool,
    receiver: Pool,
    /// The sender's buffers, all allocated (owned and in use) between batches.
    buffers: Vec<u32>,
    descs: Vec<Descriptor>,
    taken: Vec<u32>,
}

impl PremappedPair {
    fn new(shape: &Shape) -> Result<PremappedPair> {
        let count = u32::try_from(shape.chunk).context("too many buffers")?;
        let buffer_size = u32::try_from(shape.size).context("buffer too large")?;
        // No ring is used (the descriptors travel in a Vec): the ring's cost
        // is the message's, which the remap rows do not count either.
        let config = RegionConfig {
            rings: 1,
            attacher_produces: 1,
            ring_slots: 2,
            buffers: count,
            buffer_size,
            creator_buffers: 0,
        };
        let creator = Region::create("nagare-bench-handover", config)?;
        let attacher = Region::attach(creator.fd().try_clone_to_owned()?)?;
        let mut sender = attacher.pool()?;
        let receiver = creator.pool()?;
        // As in the remap case, the pages hold data before the first hand-over.
        let fill = vec![0xa5u8; shape.size];
        let mut buffers = Vec::with_capacity(shape.chunk);
        while let Some(i) = sender.alloc() {
            sender.write(i, 0, &fill)?;
            buffers.push(i);
        }
        ensure!(buffers.len() == shape.chunk, "pool holds {} buffers, expected {}", buffers.len(), shape.chunk);
        Ok(PremappedPair {
            _creator: creator,
            _attacher: attacher,
            sender,
            receiver,
            buffers,
            descs: Vec::with_capacity(shape.chunk),
            taken: Vec::with_capacity(shape.chunk),
        })
    }

    /// One batch of `n` hand-overs and back: the time of all the gives, of
    /// all the takes, of all the touches and of handing all back.
    fn batch(&mut self, shape: &Shape, n: usize) -> Result<[Duration; 4]> {
        let len = shape.size as u32;
        self.descs.clear();
        self.taken.clear();
        let t0 = Instant::now();
        for &i in &self.buffers[..n] {
            self.sender.give(i)?;
            self.descs.push(Descriptor { buffer: i, offset: 0, len, ..Default::default() });
        }
        let t1 = Instant::now();
        for d in &self.descs {
            let b = self.receiver.take(d)?.context("descriptor without a buffer")?;
            self.taken.push(b.index);
        }
        let t2 = Instant::now();
        let mut acc = 0u8;
        for &i in &self.taken {
            let p = self.receiver.buffer_ptr(i)?;
            // SAFETY: the receiver owns buffer `i` (buffer_ptr checked it),
            // which spans `pages` whole pages of the mapped region.
            acc ^= unsafe { touch_pages(p, shape.pages, shape.page) };
        }
        black_box(acc);
        let t3 = Instant::now();
        for (d, &i) in self.descs.iter_mut().zip(&self.taken) {
            self.receiver.give(i)?;
            *d = Descriptor { buffer: i, offset: 0, len, ..Default::default() };
        }
        for d in &self.descs {
            self.sender.take(d)?.context("descriptor without a buffer")?;
        }
        let t4 = Instant::now();
        Ok([t1 - t0, t2 - t1, t3 - t2, t4 - t3])
    }

    fn run(&mut self, shape: &Shape) -> Result<PremappedStages> {
        let mut t = [Duration::ZERO; 4];
        for n in shape.batches() {
            for (sum, d) in t.iter_mut().zip(self.batch(shape, n)?) {
                *sum += d;
            }
        }
        let n = shape.iterations;
        Ok(PremappedStages {
            give: per_op(t[0], n),
            take: per_op(t[1], n),
            first_access: per_op(t[2], n),
            detach: per_op(t[3], n),
        })
    }
}

fn measure_premapped(shape: &Shape, runs: usize) -> Result<Vec<PremappedStages>> {
    let mut pair = PremappedPair::new(shape)?;
    // "Mapped once": the receiver's page tables are filled before timing,
    // as they would be after the first hand-over of every buffer.
    let warm = Shape { iterations: shape.chunk, ..*shape };
    pair.run(&warm)?;
    (0..runs).map(|_| pair.run(shape)).collect()
}

// ----------------------------------------------------------- references

fn measure_syscall(iterations: usize, runs: usize) -> f64 {
    let one_run = || {
        let t = Instant::now();
        for _ in 0..iterations {
            // SAFETY: getppid takes no arguments and cannot fail. The raw
            // syscall makes sure no libc cache answers instead of the kernel.
            black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
        per_op(t.elapsed(), iterations)
    };
    one_run();
    median((0..runs).map(|_| one_run()))
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is writable for two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both are new descriptors nobody else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes or reads exactly one byte, retrying on EINTR.
fn one_byte(fd: RawFd, write: bool) -> io::Result<()> {
    let mut b = 0u8;
    loop {
        // SAFETY: `b` is a valid one-byte buffer for the call's duration.
        let n = unsafe {
            if write {
                libc::write(fd, (&raw const b).cast(), 1)
            } else {
                libc::read(fd, (&raw mut b).cast(), 1)
            }
        };
        match n {
            1 => return Ok(()),
            0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// The echoing child: after `fork` in a possibly multithreaded process it
/// may only make async-signal-safe calls, so raw system calls and `_exit`
/// (no allocation, no destructors, no panics).
fn child_echo(from_parent: RawFd, to_parent: RawFd, parent_ends: [RawFd; 2], parent: libc::pid_t, rounds: usize) -> ! {
    // SAFETY: prctl, getppid, close, read, write and _exit are
    // async-signal-safe system calls on descriptors this process holds.
    unsafe {
        // Die with the parent, whatever happens to it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        // Without our copies of the parent's ends, its exit or close is EOF here.
        libc::close(parent_ends[0]);
        libc::close(parent_ends[1]);
        let mut b = 0u8;
        for _ in 0..rounds {
            let n = loop {
                let n = libc::read(from_parent, (&raw mut b).cast(), 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if n != 1 {
                libc::_exit(if n == 0 { 0 } else { 1 });
            }
            let n = loop {
                let n = libc::write(to_parent, (&raw const b).cast(), 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if n != 1 {
                libc::_exit(1);
            }
        }
        libc::_exit(0)
    }
}

/// The parent's side of the ping-pong. Dropping it closes the pipes, kills
/// the child and reaps it, so the child never outlives the measurement,
/// whatever path leaves it.
struct Echo {
    pid: libc::pid_t,
    to_child: Option<OwnedFd>,
    from_child: Option<OwnedFd>,
}

impl Echo {
    fn round_trip(&self) -> io::Result<()> {
        let (to, from) = match (&self.to_child, &self.from_child) {
            (Some(t), Some(f)) => (t.as_raw_fd(), f.as_raw_fd()),
            _ => return Err(io::Error::from(io::ErrorKind::BrokenPipe)),
        };
        one_byte(to, true)?;
        one_byte(from, false)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.to_child.take();
        self.from_child.take();
        // SAFETY: `pid` is our child and not yet reaped, so it names no other
        // process; killing a child that already exited is harmless. waitpid
        // writes only `status`.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            while libc::waitpid(self.pid, &mut status, 0) < 0 && *libc::__errno_location() == libc::EINTR {}
        }
    }
}

fn measure_process_switch(round_trips: usize, runs: usize) -> Result<f64> {
    let (to_child_r, to_child_w) = pipe().context("pipe")?;
    let (from_child_r, from_child_w) = pipe().context("pipe")?;
    let rounds = round_trips.checked_mul(runs).and_then(|n| n.checked_add(PING_WARMUP)).context("too many rounds")?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the child runs only `child_echo`, which makes async-signal-safe
    // calls and leaves through `_exit`, as a child of a possibly
    // multithreaded process must.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        child_echo(
            to_child_r.as_raw_fd(),
            from_child_w.as_raw_fd(),
            [to_child_w.as_raw_fd(), from_child_r.as_raw_fd()],
            parent,
            rounds,
        );
    }
    let echo = Echo { pid, to_child: Some(to_child_w), from_child: Some(from_child_r) };
    // Our copies of the child's ends go, so that its death reads as EOF here.
    drop(to_child_r);
    drop(from_child_w);
    for _ in 0..PING_WARMUP {
        echo.round_trip().context("ping-pong")?;
    }
    let mut per_switch = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..round_trips {
            echo.round_trip().context("ping-pong")?;
        }
        per_switch.push(per_op(t.elapsed(), 2 * round_trips));
    }
    drop(echo);
    let m = median(per_switch.into_iter());
    if !m.is_finite() {
        bail!("no process-switch figure");
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finite_positive(name: &str, v: f64) {
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
    }

    #[test]
    fn bench_handover_tiny_configuration() {
        let args = HandoverBenchArgs { size: 4096, iterations: 50, runs: 1 };
        let f = measure(&args).unwrap();
        assert_eq!((f.size, f.pages, f.iterations, f.runs), (page_size(), 1, 50, 1));
        for (name, st) in [("remap", f.remap), ("premapped", f.premapped)] {
            finite_positive(&format!("{name} attach"), st.attach);
            finite_positive(&format!("{name} first access"), st.first_access);
            finite_positive(&format!("{name} detach"), st.detach);
            finite_positive(&format!("{name} total"), st.total);
        }
        finite_positive("give", f.premapped_give);
        finite_positive("take", f.premapped_take);
        finite_positive("syscall", f.syscall);
        finite_positive("process switch", f.process_switch);
        let table = format_table(&f);
        assert!(table.contains("remap (mmap/munmap)") && table.contains("premapped (nagare)"));
        print!("{table}");
    }

    #[test]
    fn bench_handover_sizes_and_batches() {
        // Rounded to pages; a run larger than a batch is split in whole batches.
        let shape = Shape { size: 8192, pages: 2, page: 4096, chunk: 3, iterations: 7 };
        assert_eq!(shape.batches().collect::<Vec<_>>(), [3, 3, 1]);
        let shape = Shape { iterations: 6, ..shape };
        assert_eq!(shape.batches().collect::<Vec<_>>(), [3, 3]);
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
        assert!(median(std::iter::empty()).is_nan());
        assert!(measure(&HandoverBenchArgs { size: 0, iterations: 1, runs: 1 }).is_err());
        assert!(measure(&HandoverBenchArgs { size: 2 << 20, iterations: 1, runs: 1 }).is_err());
    }

    /// The full default configuration, in release mode:
    /// `cargo test --release -p nagare-cli --bin nagare bench_handover_default -- --ignored --nocapture`.
    #[test]
    #[ignore = "takes a few seconds; run by hand for the table"]
    fn bench_handover_default() {
        let args = HandoverBenchArgs { size: 16384, iterations: 2000, runs: 5 };
        print!("{}", format_table(&measure(&args).unwrap()));
    }
}
