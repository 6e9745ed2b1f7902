//! Sockets across `fork` and `exec`, as the kernel's are: a child holds
//! its parent's sockets, and so does a program it runs.
//!
//! - **Before a `fork`** (a `pthread_atfork` handler in the parent), every
//!   TCP connection, listener and UDP socket this process holds in netd
//!   is shared
//!   (`TcpStream::share`, `TcpListener::share`: netd ends our waiting
//!   receives and accepts, and bytes that arrived unread go back to it),
//!   and its placeholder descriptor is named for its token (the abstract
//!   `AF_UNIX` address `nagare-shared-TOKEN`) and connected to netd's
//!   watch socket with the token: netd keeps the socket open while any
//!   process holds that descriptor, also after every holder let go. A UDP
//!   socket's placeholder (an `AF_UNIX` datagram socket, which cannot
//!   connect to the watch socket's stream) is named but not watched: the
//!   socket stays open while a session holds it (the child's made ahead
//!   holds it until the child closes it, exits or runs a program).
//! - **A session for the child** is made before the fork too, with every
//!   shared socket adopted in it: the child takes it as its own, so that
//!   it holds its sockets even once it has changed its user or root
//!   directory (as `sshd`'s and `nginx`'s children do before their first
//!   call), and the parent abandons its copy (`Session::abandon`).
//! - **In the child**, the first call on an inherited socket takes what
//!   that session adopted, or adopts it by its token ([`take_over`]); the
//!   parent's objects for it, copied by the fork, are never used or
//!   dropped.
//! - **After `exec`**, the preload library looks for named placeholders
//!   when it starts ([`inherit`]) and puts them in the table, to be
//!   adopted on first use.
//! - **`posix_spawn` and `vfork`** run no fork handlers: the preload
//!   library shares the sockets first for `posix_spawn` ([`before_spawn`];
//!   its child runs a program, which finds them after `exec`), and makes a
//!   `vfork` a `fork` (which POSIX allows), so that its handlers run.
//! - A socket still fresh (no `listen`, `connect` or `bind` in netd) is
//!   simply the child's too. One that was connecting is not shared: in
//!   the child it fails with `EBADF`.
//! - **Each process's own placeholder.** In the child's fork handler, and
//!   after `exec` in [`inherit`], each inherited watched placeholder is
//!   replaced by one of the process's own ([`own_placeholder`]: named
//!   `nagare-shared-TOKEN-PID`, connected to the watch socket), so that
//!   netd counts the processes that may use a socket by their watch
//!   connections.
//! - **Taken back.** The preload library reports the pid of each child
//!   its `fork`, `vfork` and `posix_spawn` make ([`forked`]); once every
//!   child a socket was handed to is gone, a call on the socket asks netd
//!   to take it back ([`reclaim_if_alone`]), and on a grant it reads ahead
//!   again and has no token, as a socket never shared. A process that was
//!   handed a socket asks too: netd grants it once no other process holds
//!   it.

use crate::errors::{errno, say_once};
use crate::session::{netd_path, session};
use crate::sock::{apply_datagram_options, apply_own_stream_options, Inner, Proto, Sock, State};
use crate::{table, Entered, Res};
use nagare::share::{adopt_via, Adopted};
use nagare::Session;
use nagare_ipc::unix_addr;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

/// The session made for the child of the `fork` under way, with what it
/// adopted by token; `pid` is the child's once it took it (0 before).
struct ForChild {
    session: Session,
    adopted: HashMap<u64, Adopted>,
    pid: u32,
}

/// The sessions made ahead: `mine`, the one this process's parent made
/// for it (`pid` this process's), `next`, the one being made for the
/// child of the `fork` under way, and `spare`, one connected to netd
/// after a `fork` that shared sockets, for the next such `fork`
/// ([`Spare`]).
struct MadeAhead {
    mine: Option<ForChild>,
    next: Option<ForChild>,
    spare: Option<Spare>,
}

/// A session connected for the next `fork`'s child, with who connected
/// it: the process, and its real and effective user then (netd knows a
/// session's user from its connection, and a child of another user may
/// not take it).
struct Spare {
    session: Session,
    pid: u32,
    users: (u32, u32),
}

/// The real and effective user of this process.
fn users() -> (u32, u32) {
    // SAFETY: plain queries of this process.
    unsafe { (libc::getuid(), libc::geteuid()) }
}

/// The `fork`s of this process that shared sockets: a spare session is
/// connected after the second, as a process that forks with sockets
/// twice is likely to fork again (a server forking for each connection),
/// and one that forks once (to become a daemon) is not.
static SHARING_FORKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

static FOR_CHILD: Mutex<MadeAhead> = Mutex::new(MadeAhead { mine: None, next: None, spare: None });

/// The locks the fork handlers hold from `prepare` to `in_parent` and
/// `in_child` (on the forking thread), so that the child never starts
/// with one of them held by a thread it does not have.
struct Held {
    table: table::Held,
    session: crate::session::Held,
    for_child: std::sync::MutexGuard<'static, MadeAhead>,
    others: std::sync::MutexGuard<'static, Option<HashMap<u64, Others>>>,
}

thread_local! {
    static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
    /// The tokens of the sockets shared for the `fork` or `posix_spawn`
    /// under way on this thread, whose child's pid [`forked`] records.
    static PENDING: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What this process knows of the other holders of a shared socket, by
/// its token: the children it handed the socket to (those not known to
/// be gone), when it last asked netd to take the socket back, and how
/// long it waits before it asks again.
#[derive(Default)]
struct Others {
    pids: Vec<u32>,
    asked: Option<Instant>,
    wait: Duration,
}

static OTHERS: Mutex<Option<HashMap<u64, Others>>> = Mutex::new(None);

fn others() -> std::sync::MutexGuard<'static, Option<HashMap<u64, Others>>> {
    OTHERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// How often a socket is asked back at most (a refusal costs a request);
/// each refusal doubles the wait, up to [`ASK_AT_LEAST_EVERY`].
const ASK_EVERY: Duration = Duration::from_millis(100);
/// The longest wait between two asks of one socket.
const ASK_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

fn for_child() -> std::sync::MutexGuard<'static, MadeAhead> {
    FOR_CHILD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The abstract address a shared socket's placeholder is named by, before
/// its token in hexadecimal.
const NAME_PREFIX: &[u8] = b"nagare-shared-";

/// Registers the `fork` handler, once per process.
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers are `extern "C" fn()`s that live as long as
        // the process.
        unsafe { libc::pthread_atfork(Some(prepare), Some(in_parent), Some(in_child)) };
    });
}

/// Shares every socket this process holds, before a `fork`, and makes the
/// child's session with them adopted: the spare one an earlier `fork`
/// left ([`in_parent`]), or one connected now.
extern "C" fn prepare() {
    let _in = Entered::new();
    let tokens = share_all(|_| true);
    PENDING.with(|p| *p.borrow_mut() = tokens.clone());
    if !tokens.is_empty() {
        let me = crate::pid::current();
        let spare = for_child().spare.take().and_then(|s| {
            if s.pid != me {
                // SAFETY: another process's spare, copied by a fork it ran
                // without handlers: nothing of it is used here.
                unsafe { s.session.let_go_copy() };
                return None;
            }
            // One of this process's, unless its user changed since or netd
            // went away (dropped: it is ours).
            (s.users == users() && !s.session.netd_gone()).then_some(s.session)
        });
        if let Some(session) = spare.map_or_else(|| Session::connect(netd_path()).ok(), Some) {
            session.set_spin_yields(false);
            let adopted = tokens.into_iter().filter_map(|t| adopt_via(&session, t).ok().map(|a| (t, a))).collect();
            for_child().next = Some(ForChild { session, adopted, pid: 0 });
        }
    }
    // In this order everywhere: the table, the session slot, the child's,
    // the other holders.
    let held = Held { table: table::hold(), session: crate::session::hold(), for_child: for_child(), others: others() };
    HELD.with(|h| *h.borrow_mut() = Some(held));
}

/// Shares every socket this process holds under descriptors `pick`
/// takes, and names and watches its placeholder: their tokens.
fn share_all(pick: impl Fn(&[i32]) -> bool) -> Vec<u64> {
    let mut tokens = Vec::new();
    for (fds, sock) in table::groups() {
        if !sock.is_here() || !pick(&fds) {
            continue;
        }
        let Ok(token) = share(&sock) else { continue };
        if let Some(&fd) = fds.first() {
            watch(&sock, fd, token);
        }
        tokens.push(token);
    }
    tokens
}

/// Before `posix_spawn`, which runs no fork handlers and whose child runs
/// a program at once: the sockets the program may inherit are shared, and
/// their placeholders named and watched, as before a `fork`, so that the
/// program finds them ([`inherit`]). With `file_actions` (which may give
/// the program any descriptor, close-on-exec or not) that is every
/// socket; without, those with a descriptor that is not close-on-exec. No
/// session is made ahead: the program makes its own. The socket is taken
/// back once the child is gone ([`forked`], [`reclaim_if_alone`]), as
/// after a `fork`.
pub fn before_spawn(file_actions: bool) {
    let _in = Entered::new();
    let tokens = share_all(|fds| file_actions || fds.iter().any(|&fd| !close_on_exec(fd)));
    PENDING.with(|p| *p.borrow_mut() = tokens);
}

/// After a `fork` or `posix_spawn` on this thread (the preload library
/// stands in for both): `pid`, the child's (0 or less: none was made),
/// holds the sockets shared for it, which this process takes back only
/// once that child is gone ([`reclaim_if_alone`]).
pub fn forked(pid: i32) {
    let tokens = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let Ok(pid) = u32::try_from(pid) else { return };
    if pid == 0 || tokens.is_empty() {
        return;
    }
    let mut o = others();
    let map = o.get_or_insert_with(HashMap::new);
    for t in tokens {
        map.entry(t).or_default().pids.push(pid);
    }
}

/// Whether descriptor `fd` has close-on-exec.
fn close_on_exec(fd: i32) -> bool {
    // SAFETY: a flag query on a descriptor number; no memory passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    flags >= 0 && flags & libc::FD_CLOEXEC != 0
}

/// In the parent after the `fork`: the child's session is the child's.
/// From its second `fork` that handed sockets to a child on
/// ([`SHARING_FORKS`]), a spare session is connected for the next one: a
/// process that forks a child for each connection (PostgreSQL's
/// postmaster, a forking server) connects it while its last child runs,
/// not while its next child waits to start.
extern "C" fn in_parent() {
    let _in = Entered::new();
    let Some(mut held) = HELD.with(|h| h.borrow_mut().take()) else { return };
    let taken = held.for_child.next.take();
    drop(held);
    if let Some(c) = taken {
        c.session.abandon();
        let forks = SHARING_FORKS.fetch_add(1, Ordering::Relaxed) + 1;
        if forks >= 2 && for_child().spare.is_none() {
            if let Ok(session) = Session::connect(netd_path()) {
                session.set_spin_yields(false);
                for_child().spare = Some(Spare { session, pid: crate::pid::current(), users: users() });
            }
        }
    }
}

/// In the child after the `fork`: the session made for it is its own,
/// and each watched placeholder it inherited is replaced by one of its
/// own, watched too ([`own_placeholder`]). It has forked no child yet:
/// the other holders of its sockets are netd's to know.
extern "C" fn in_child() {
    Entered::leave_in_child();
    nagare::signals::forget_holds_in_child();
    let _in = Entered::new();
    let me = crate::pid::current();
    PENDING.with(|p| p.borrow_mut().clear());
    let Some(mut held) = HELD.with(|h| h.borrow_mut().take()) else { return };
    *held.others = None;
    // The parent's sessions, copied by the fork (its own, the one its
    // parent made for it, its spare), are the parent's: this process lets
    // go of its copies, so that netd sees each end with the parent.
    let mut parents: Vec<Session> = Vec::new();
    if let Some((_, s)) = held.session.take() {
        parents.push(s);
    }
    if let Some(ForChild { session, adopted, .. }) = held.for_child.mine.take() {
        // Its sockets' objects are the parent's too.
        std::mem::forget(adopted);
        parents.push(session);
    }
    if let Some(s) = held.for_child.spare.take() {
        parents.push(s.session);
    }
    SHARING_FORKS.store(0, Ordering::Relaxed);
    let_go_copies(parents);
    let mut shared: HashMap<*const Sock, (Vec<i32>, Arc<Sock>)> = HashMap::new();
    for (&fd, sock) in held.table.iter().flatten() {
        if sock.token.load(Ordering::Acquire) != 0 {
            shared.entry(Arc::as_ptr(sock)).or_insert_with(|| (Vec::new(), sock.clone())).0.push(fd);
        }
    }
    for (fds, sock) in shared.values() {
        let token = sock.token.load(Ordering::Acquire);
        if sock.watched.load(Ordering::Acquire) && sock.proto == Proto::Tcp {
            own_placeholder(fds, libc::SOCK_STREAM, Some(token));
        }
    }
    let Some(mut c) = held.for_child.next.take() else { return };
    c.pid = me;
    // netd is told which process holds the session now (one request
    // posted, its answer not awaited).
    let _ = c.session.moved_here();
    let session = c.session.clone();
    crate::session::adopt_session(&mut held.session, me, session);
    held.for_child.mine = Some(c);
}

/// Lets go of this process's copies of sessions other processes keep
/// (`Session::let_go_copy`), each once: `sessions` are a parent's,
/// copied by the fork, which this process never uses.
fn let_go_copies(sessions: Vec<Session>) {
    let mut unique: Vec<Session> = Vec::new();
    for s in sessions {
        if unique.iter().any(|u| u.same_as(&s)) {
            std::mem::forget(s);
        } else {
            unique.push(s);
        }
    }
    for s in unique {
        // SAFETY: another process's session, copied by the fork: nothing
        // of it (its clones in the copied sockets included) is used here.
        unsafe { s.let_go_copy() };
    }
}

/// The descriptors of the sessions made ahead that are this process's:
/// the one its parent made for it, the one made for its next child while
/// a `fork` is under way, and its spare.
pub(crate) fn made_ahead_descriptors() -> Vec<i32> {
    let slot = for_child();
    let me = crate::pid::current();
    let mine = slot.mine.as_ref().filter(|c| c.pid == me);
    let spare = slot.spare.as_ref().filter(|s| s.pid == me).map(|s| &s.session);
    mine.into_iter().chain(slot.next.as_ref()).map(|c| &c.session).chain(spare).flat_map(Session::descriptors).collect()
}

/// What the session made for this process (a child) adopted by `token`.
fn made_for_me(token: u64) -> Option<Adopted> {
    let mut slot = for_child();
    let c = slot.mine.as_mut().filter(|c| c.pid == crate::pid::current())?;
    c.adopted.remove(&token)
}

/// This process closes the last number of `sock`, a socket another
/// process holds that it never used: what the session made for it holds
/// goes too (a close in netd), and the rest is the placeholder's close.
pub(crate) fn let_go_unused(sock: Arc<Sock>) {
    let token = sock.token.load(Ordering::Acquire);
    if token != 0 && Arc::strong_count(&sock) == 1 {
        drop(made_for_me(token));
    }
    // What its state holds is the other process's: never dropped here.
    std::mem::forget(sock);
}

/// Shares `sock` (again: netd gives the same token, and ends the receives
/// this process posted since): its token. A listener shared before keeps
/// its token and has nothing of netd's to give back (a shared listener
/// accepts nothing ahead), so it is not asked again.
fn share(sock: &Sock) -> Res<u64> {
    let g = sock.lock()?;
    let token = match &g.state {
        State::Listener(_) if sock.token.load(Ordering::Acquire) != 0 => return Ok(sock.token.load(Ordering::Acquire)),
        State::Listener(l) => l.share(),
        State::Stream(s) => s.share(),
        State::Datagram(d) => d.share(),
        _ => return Err(libc::EOPNOTSUPP),
    }
    .map_err(|e| errno(&e))?;
    sock.token.store(token, Ordering::Release);
    Ok(token)
}

/// Names placeholder `fd` for `token` and connects it to netd's watch
/// socket (once per placeholder).
fn watch(sock: &Sock, fd: i32, token: u64) {
    if sock.watched.load(Ordering::Acquire) {
        return;
    }
    let name = format!("{}{token:016x}", String::from_utf8_lossy(NAME_PREFIX));
    let _ = bind_abstract(fd, name.as_bytes());
    let path = nagare_request::share_watch_path(&netd_path());
    let Some(addr) = unix_addr(path.as_os_str().as_encoded_bytes(), false) else { return };
    // Never waits, for a fork must not hang on netd: a watch socket whose
    // backlog is full is tried again at the next fork.
    // SAFETY: flag calls on a descriptor of ours; `addr` is a whole
    // sockaddr_un of the length given; the word is 8 readable bytes.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        let connected = libc::connect(fd, &addr.0 as *const libc::sockaddr_un as *const libc::sockaddr, addr.1) == 0;
        let word = token.to_le_bytes();
        if connected && libc::write(fd, word.as_ptr().cast(), word.len()) == 8 {
            sock.watched.store(true, Ordering::Release);
        }
        libc::fcntl(fd, libc::F_SETFL, flags);
    }
}

/// Puts a fresh `AF_UNIX` socket of type `ty` under every number of
/// `fds` (the numbers of one placeholder), each number keeping its
/// close-on-exec. With `watched`, the fresh one is first named for the
/// token and this process (`nagare-shared-TOKEN-PID`, so that a program
/// run by `exec` finds it) and connected to netd's watch socket with the
/// token sent, so that netd counts this process's descriptor apart from
/// the others'; if that cannot be done without waiting, the numbers keep
/// the placeholder they have. Whether they were replaced.
fn own_placeholder(fds: &[i32], ty: libc::c_int, watched: Option<u64>) -> bool {
    if fds.is_empty() {
        return false;
    }
    // SAFETY: plain socket calls on descriptors of this process; the
    // addresses are whole sockaddr_uns of the lengths given; the word is 8
    // readable bytes.
    unsafe {
        let fresh = libc::socket(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0);
        if fresh < 0 {
            return false;
        }
        if let Some(token) = watched {
            let name = format!("{}{token:016x}-{:x}", String::from_utf8_lossy(NAME_PREFIX), crate::pid::current());
            let path = nagare_request::share_watch_path(&netd_path());
            let addr = unix_addr(path.as_os_str().as_encoded_bytes(), false);
            let flags = libc::fcntl(fresh, libc::F_GETFL);
            libc::fcntl(fresh, libc::F_SETFL, flags | libc::O_NONBLOCK);
            let word = token.to_le_bytes();
            let connected = bind_abstract(fresh, name.as_bytes()).is_ok()
                && addr.is_some_and(|a| {
                    libc::connect(fresh, &a.0 as *const libc::sockaddr_un as *const libc::sockaddr, a.1) == 0
                })
                && libc::write(fresh, word.as_ptr().cast(), word.len()) == 8;
            libc::fcntl(fresh, libc::F_SETFL, flags);
            if !connected {
                libc::close(fresh);
                return false;
            }
        }
        for &fd in fds {
            let cloexec = close_on_exec(fd);
            libc::dup3(fresh, fd, if cloexec { libc::O_CLOEXEC } else { 0 });
        }
        libc::close(fresh);
    }
    true
}

/// Whether process `pid` is gone: no such process, or one that exited
/// and was not reaped yet (state `Z` or `X` in `/proc/PID/stat`); one of
/// another user, which `kill` may not signal, counts as there.
fn gone(pid: u32) -> bool {
    let Ok(p) = i32::try_from(pid) else { return true };
    // SAFETY: signal 0 only asks whether the process exists.
    if unsafe { libc::kill(p, 0) } != 0 {
        return crate::calls::last_errno() == libc::ESRCH;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command's closing parenthesis.
    let state = stat.rfind(')').and_then(|at| stat[at + 1..].trim_start().chars().next());
    matches!(state, Some('Z' | 'X'))
}

/// A call of this process on shared socket `sock` (`g`, its state, here):
/// once every child this process handed it to (`fork`, `posix_spawn`) is
/// gone, netd is asked to take it back (`reclaim`), at most every
/// [`ASK_EVERY`], and less often after each refusal (up to every
/// [`ASK_AT_LEAST_EVERY`]); on a grant its placeholders are unnamed
/// sockets again and it has no token, so that it reads ahead again and a
/// later `fork` shares it afresh. netd refuses while another process
/// still holds it: the parent that handed it to this one, a sibling, a
/// grandchild, a program a child ran. So a process that was handed a
/// socket (a child, a program run by `exec`) asks too, and has it back
/// once the others let go (a daemon whose parent exited, a connection
/// whose listener's process closed its copy). Only the pids of children
/// this process made are looked at here (`kill` with signal 0, `/proc`):
/// a process without such children makes no other system call than the
/// request, so one whose system calls are filtered (as `sshd`'s
/// unprivileged child) may ask too.
pub(crate) fn reclaim_if_alone(sock: &Sock, g: &Inner) {
    let token = sock.token.load(Ordering::Acquire);
    if token == 0 {
        return;
    }
    {
        let mut o = others();
        let entry = o.get_or_insert_with(HashMap::new).entry(token).or_default();
        let wait = entry.wait.max(ASK_EVERY);
        if entry.asked.is_some_and(|at| at.elapsed() < wait) {
            return;
        }
        entry.asked = Some(Instant::now());
        entry.pids.retain(|&p| !gone(p));
        if !entry.pids.is_empty() {
            return;
        }
    }
    let _in = Entered::new();
    let granted = match &g.state {
        State::Listener(l) => l.reclaim(),
        State::Stream(s) => s.reclaim(),
        State::Datagram(d) => d.reclaim(),
        _ => return,
    };
    if !matches!(granted, Ok(true)) {
        if let Some(entry) = others().as_mut().and_then(|m| m.get_mut(&token)) {
            entry.wait = (entry.wait.max(ASK_EVERY) * 2).min(ASK_AT_LEAST_EVERY);
        }
        return;
    }
    let ty = match sock.proto {
        Proto::Tcp => libc::SOCK_STREAM,
        Proto::Udp => libc::SOCK_DGRAM,
    };
    let fds: Vec<i32> =
        table::groups().into_iter().find(|(_, s)| std::ptr::eq(Arc::as_ptr(s), sock)).map_or(Vec::new(), |(f, _)| f);
    own_placeholder(&fds, ty, None);
    sock.token.store(0, Ordering::Release);
    sock.watched.store(false, Ordering::Release);
    if let Some(map) = others().as_mut() {
        map.remove(&token);
    }
}

/// Binds `fd` to the abstract `AF_UNIX` address `name`.
fn bind_abstract(fd: i32, name: &[u8]) -> Res<()> {
    let addr = unix_addr(name, true).ok_or(libc::ENAMETOOLONG)?;
    // SAFETY: `addr` is a whole sockaddr_un of the length given.
    let r = unsafe { libc::bind(fd, &addr.0 as *const libc::sockaddr_un as *const libc::sockaddr, addr.1) };
    if r != 0 {
        return Err(crate::calls::last_errno());
    }
    Ok(())
}

/// A call of this process on `sock`, whose state another process holds:
/// adopts it by its token in this process's session, or takes a fresh
/// one over. `EBADF` for a socket held without a token, or whose socket
/// netd no longer has.
pub(crate) fn take_over(sock: &Sock, g: &mut Inner) -> Res<()> {
    let me = crate::pid::current();
    let token = sock.token.load(Ordering::Acquire);
    if token == 0 {
        if matches!(g.state, State::Fresh) {
            sock.pid.store(me, Ordering::Release);
            return Ok(());
        }
        say_once("a socket still connecting at fork is not usable in the child");
        return Err(libc::EBADF);
    }
    let adopted = match made_for_me(token) {
        Some(a) => a,
        None => adopt_via(&session()?, token).map_err(|e| match errno(&e) {
            libc::ENOENT => {
                say_once("an inherited socket was closed before this process used it");
                libc::EBADF
            }
            other => other,
        })?,
    };
    // What the state held is the other process's (its session's objects,
    // copied by the fork): never dropped here.
    std::mem::forget(std::mem::replace(&mut g.state, State::Fresh));
    // The other process may have set its keepalive since.
    g.keepalive_in_netd = false;
    let nonblocking = sock.is_nonblocking();
    // A socket found after `exec` learns its family from its addresses
    // (one after `fork` knows it already).
    let local = match &adopted {
        Adopted::Stream(s) => s.local_addr(),
        Adopted::Listener(l) => l.local_addr(),
        Adopted::Datagram(d) => d.local_addr(),
    };
    if local.is_ok_and(|a| a.is_ipv6()) {
        sock.six.store(true, Ordering::Relaxed);
    }
    g.state = match adopted {
        Adopted::Stream(s) => {
            // netd has the connection's own options from the process that
            // set them up.
            apply_own_stream_options(&s, &g.options, nonblocking)?;
            State::Stream(Arc::new(s))
        }
        Adopted::Listener(l) => {
            l.set_nonblocking(nonblocking).map_err(|e| errno(&e))?;
            State::Listener(Arc::new(l))
        }
        Adopted::Datagram(d) => {
            apply_datagram_options(&d, &g.options, nonblocking)?;
            State::Datagram(Arc::new(d))
        }
    };
    sock.pid.store(me, Ordering::Release);
    Ok(())
}

/// Puts the shared sockets' placeholders this process inherited across
/// `exec` in the table, to be adopted on first use (the preload library
/// calls it when it starts).
pub fn inherit() {
    let _in = Entered::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let mut found: HashMap<u64, (Vec<i32>, Arc<Sock>, bool)> = HashMap::new();
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Some((token, owner)) = placeholder_name(fd) else { continue };
        let proto = placeholder_proto(fd);
        let (fds, sock, mine) =
            found.entry(token).or_insert_with(|| (Vec::new(), Arc::new(Sock::inherited(proto, token)), false));
        fds.push(fd);
        // Made this process's own before `exec`, in its `fork` handler.
        *mine |= owner == Some(crate::pid::current());
        table::insert(fd, sock.clone());
    }
    if found.is_empty() {
        return;
    }
    for (&token, (fds, sock, mine)) in &found {
        // A stream's placeholder, watched, becomes this process's own: a
        // UDP one is a datagram socket, never watched.
        if sock.proto == Proto::Tcp && !mine {
            own_placeholder(fds, libc::SOCK_STREAM, Some(token));
        }
    }
    register();
}

/// The protocol placeholder `fd` was made for: a datagram socket's is a
/// datagram socket (`crate::calls`), the others' a stream.
fn placeholder_proto(fd: i32) -> Proto {
    let mut ty: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `ty` has `len` writable bytes.
    let r = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, (&mut ty as *mut libc::c_int).cast(), &mut len)
    };
    if r == 0 && ty == libc::SOCK_DGRAM {
        Proto::Udp
    } else {
        Proto::Tcp
    }
}

/// The token a named placeholder `fd` carries, if it is one.
#[cfg(test)]
fn placeholder_token(fd: i32) -> Option<u64> {
    placeholder_name(fd).map(|(token, _)| token)
}

/// The token a named placeholder `fd` carries, if it is one, and the
/// process it was made its own by, if one was (`own_placeholder`).
fn placeholder_name(fd: i32) -> Option<(u64, Option<u32>)> {
    // SAFETY: all zeros is a valid sockaddr_un.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `addr` has `len` writable bytes.
    let r = unsafe { libc::getsockname(fd, &mut addr as *mut libc::sockaddr_un as *mut libc::sockaddr, &mut len) };
    if r != 0 || i32::from(addr.sun_family) != libc::AF_UNIX {
        return None;
    }
    let used = (len as usize).checked_sub(std::mem::size_of::<libc::sa_family_t>())?;
    let path = addr.sun_path.get(..used)?;
    let (first, name) = path.split_first()?;
    if *first != 0 {
        return None;
    }
    let name: Vec<u8> = name.iter().map(|&c| c as u8).collect();
    let rest = std::str::from_utf8(name.strip_prefix(NAME_PREFIX)?).ok()?;
    // `TOKEN`, or `TOKEN-PID` for one process's own (`own_placeholder`).
    let (hex, owner) = match rest.split_once('-') {
        Some((token, pid)) => (token, Some(u32::from_str_radix(pid, 16).ok()?)),
        None => (rest, None),
    };
    let token = u64::from_str_radix(hex, 16).ok().filter(|&t| t != 0)?;
    Some((token, owner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_forked_inside_a_call_starts_outside_the_layer_and_without_a_hold() {
        register();
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        let (held, inside) = {
            // As a signal handler that forks while a wait of the layer
            // sleeps with its signals held.
            let _held = nagare::signals::hold(None).expect("hold");
            let _in = Entered::new();
            // SAFETY: the child only writes to the pipe and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let report = [u8::from(nagare::signals::is_held()), u8::from(Entered::inside())];
                // SAFETY: a write of two bytes from this stack, then exit.
                unsafe {
                    libc::write(pipe[1], report.as_ptr().cast(), 2);
                    libc::_exit(0);
                }
            }
            assert!(pid > 0, "fork");
            let mut report = [9u8; 2];
            // SAFETY: room for two bytes; the child is reaped.
            unsafe {
                assert_eq!(libc::read(pipe[0], report.as_mut_ptr().cast(), 2), 2);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            (report[0], report[1])
        };
        // SAFETY: this test's descriptors.
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        assert_eq!((held, inside), (0, 0), "the child holds no signals and is outside the layer");
    }

    #[test]
    fn a_named_placeholder_gives_its_token_and_others_none() {
        // SAFETY: plain socket calls on descriptors this test owns.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        assert_eq!(placeholder_token(fd), None, "unnamed");
        let token = 0x0123_4567_89ab_cdefu64 ^ u64::from(std::process::id());
        bind_abstract(fd, format!("nagare-shared-{token:016x}").as_bytes()).expect("bind");
        assert_eq!(placeholder_token(fd), Some(token));
        let own = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        bind_abstract(own, format!("nagare-shared-{token:016x}-{:x}", std::process::id()).as_bytes()).expect("bind");
        assert_eq!(placeholder_token(own), Some(token), "one process's own");
        let bad = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        bind_abstract(bad, format!("nagare-shared-{token:016x}-x{}", std::process::id()).as_bytes()).expect("bind");
        assert_eq!(placeholder_token(bad), None, "no pid after the dash");
        unsafe {
            libc::close(own);
            libc::close(bad);
        }
        let other = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        bind_abstract(other, format!("something-else-{}", std::process::id()).as_bytes()).expect("bind");
        assert_eq!(placeholder_token(other), None, "another name");
        let pipe = {
            let mut fds = [0; 2];
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            fds
        };
        assert_eq!(placeholder_token(pipe[0]), None, "not a socket");
        assert_eq!(placeholder_token(-1), None, "no descriptor");
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        unsafe {
            libc::close(fd);
            libc::close(other);
        }
    }
}
