//! One client's turn: its waiting requests run again first when the
//! engine may have what they wait for (one of its sockets had an event,
//! `crate::wakes`; a receive or accept whose socket has nothing waits
//! parked on its socket, out of the list a turn walks, until that socket
//! had an event, a close, shutdown or connect of it was taken or ended,
//! its time limit passed, or housekeeping runs every wait again:
//! `Session::begin_retry`), then new ones are taken, as many as its
//! completion ring has room for; and, once every client
//! has had its turn, waiting `STAT` requests are answered. A client that
//! went away has its last requests taken and run once, on the turn that
//! lets it go: what a program wrote before it exited is sent, as the
//! kernel sends what a process wrote before its exit closed the socket.
//!
//! What becomes of a request after it ran is decided in one place
//! ([`attempt`]), for a new request and a waiting one alike:
//!
//! - order: a stream's sends, its shutdown and its close go in the order
//!   they came; one waits (without running) while an earlier send on its
//!   socket waits;
//! - waiting: a new request may wait if it holds a buffer (bounded by the
//!   client's pool), is a close or a connect (bounded by the client's
//!   sockets: each names one), or there is room among the `max_pending`
//!   other waiting requests that hold no buffer; otherwise it fails with
//!   `ENOBUFS`. A waiting request fails once its time limit has
//!   passed (`EAGAIN`; a connect `ETIMEDOUT`, its half-open connection
//!   reset);
//! - lending: a request whose buffer the engine now holds completes when
//!   the engine lets go (`crate::returns`); one that completes on accept
//!   also completes now, without its buffer;
//! - sharing: a share first completes the client's receives and accepts
//!   waiting on its socket, with `ECANCELED`;
//! - binds: a bind or listen on a port that left another client is
//!   answered only once the driver can no longer steer that port's frames
//!   to the other client.

use crate::ops::{execute, make_room_for_sends, may_progress, Context, Done, Outcome};
use crate::session::{Pending, Session, GONE};
use crate::stats::NetdStats;
use nagare_ipc::Descriptor;
use nagare_request::{Op, Request};

/// Requests taken from one client per turn (twice as many from a client
/// PacketFlow's scheduler boosted).
pub(crate) const REQ_BATCH: usize = 64;

/// Where a request is in its life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Age {
    /// Just taken from the ring.
    New,
    /// Waiting since an earlier turn.
    Waiting,
}

/// Runs one client's waiting requests (if `had_event`, one of its sockets
/// had an event, or they need it regardless: `Session::waits_need_retry`) and
/// up to `batch` new ones (at most `2 * REQ_BATCH`), and posts
/// completions. A receive or accept parked on its socket
/// (`Pending::parked`) runs again only if that socket had an event, a
/// request that changes it without one named it
/// ([`changes_without_event`]), its time limit passed, or `every`
/// (housekeeping, or `Context::wake_all`).
/// Returns whether anything happened.
pub(crate) fn serve_client(s: &mut Session, cx: &mut Context<'_>, batch: usize, had_event: bool, every: bool) -> bool {
    match s.doomed {
        Some(GONE) => return serve_last_requests(s, cx),
        Some(_) => return false,
        None => {}
    }
    s.release_settled(cx.steering);
    let mut work = false;
    let retry = had_event || s.waits_need_retry(cx.now);
    // The receives and accepts parked on idle sockets stay out of the
    // list: nothing they wait for can have come.
    let mut waiting = if retry { s.begin_retry(cx.now, every) } else { Vec::new() };
    // The socket a receive or accept of this pass last found with
    // nothing for it, until a request ends: the later ones waiting there
    // find the same (a stream's receives are taken in order).
    let mut dry = None;
    for mut p in waiting.drain(..) {
        p.parked = None;
        let (socket, op) = (p.req.socket, p.req.op);
        let ended = if dry == Some(socket) && parks(op) {
            p.parked = parkable(cx, s, &p.req);
            wait(s, cx, p, Age::Waiting)
        } else {
            cx.stats.waits_checked += 1;
            match may_progress(cx, s.key(), &s.sockets, &p.req) {
                true => {
                    cx.stats.waits_rerun += 1;
                    attempt(s, cx, p, Age::Waiting)
                }
                false => {
                    p.parked = parkable(cx, s, &p.req);
                    if parks(op) {
                        dry = Some(socket);
                    }
                    wait(s, cx, p, Age::Waiting)
                }
            }
        };
        if ended {
            dry = None;
            // The others run again next turn; a close, or a connect that
            // failed, leaves no event, so the receives parked on its
            // socket do too.
            s.note_wait_ended();
            if changes_without_event(op) {
                s.note_named(socket);
            }
        }
        work |= ended;
    }
    if retry {
        s.end_retry(waiting);
    }
    let Some(budget) = s.request_budget(batch.min(2 * REQ_BATCH)) else { return true };
    if budget == 0 {
        if s.requests_broken() {
            return true;
        }
    } else {
        let Some(n) = run_new_requests(s, cx, budget) else { return true };
        work |= n > 0;
    }
    s.flush(cx.stats);
    work
}

/// Whether a request of `op`, taken or ended, may change what a receive
/// or accept parked on its socket gets without an event of the engine's
/// (a closed socket has none left; a shutdown ends its reads; a connect
/// that failed drops its connection). Shares, adoptions, give-backs and
/// reclaims run every client's waits again instead (`Context::wake_all`).
fn changes_without_event(op: Op) -> bool {
    matches!(op, Op::Close | Op::Shutdown | Op::Connect | Op::Connect6 | Op::UdpConnect)
}

/// The socket waiting request `req` parks on (`Pending::parked`): a
/// receive's or an accept's, whose progress only an event of that socket
/// or a request naming it can bring (`ops::may_progress`); not a shared
/// socket's, to which bytes given back come without an event.
fn parkable(cx: &Context<'_>, s: &Session, req: &Request) -> Option<crate::sockets::Sock> {
    if !parks(req.op) || cx.sharing.shares.is_shared(s.key(), req.socket) {
        return None;
    }
    s.sockets.get(req.socket)
}

/// Whether a waiting request of `op` waits only for its socket to have
/// something for it: a receive or an accept.
fn parks(op: Op) -> bool {
    matches!(op, Op::Recv | Op::RecvFrom | Op::Accept)
}

/// A client that went away: its waiting requests run once more (a send
/// that waited for room may fit now), then every request it posted before
/// it went is taken and run once (at most a ring's worth: a process that
/// lives on after closing its session cannot keep netd at it), whatever
/// room its completion ring has, since nobody reads the completions. A
/// client found breaking the protocol meanwhile is left alone from there.
/// Sends that still wait for room in their connection's send buffer get
/// it, as far as the client's budget goes, and run: its program's writes
/// returned once they were queued, so their bytes go before the FIN its
/// exit sends, as a process's queued bytes do on Linux.
fn serve_last_requests(s: &mut Session, cx: &mut Context<'_>) -> bool {
    let mut work = retry_last_waiting(s, cx);
    let mut left = s.request_capacity();
    while left > 0 && s.doomed == Some(GONE) {
        match run_new_requests(s, cx, left.min(2 * REQ_BATCH)) {
            Some(n) if n > 0 => {
                cx.stats.last_requests += n as u64;
                work = true;
                left -= n;
            }
            _ => break,
        }
    }
    if s.doomed == Some(GONE) && make_room_for_waiting_sends(s, cx) {
        work |= retry_last_waiting(s, cx);
    }
    work
}

/// A gone client's waiting requests, run once more each.
fn retry_last_waiting(s: &mut Session, cx: &mut Context<'_>) -> bool {
    let mut work = false;
    let mut waiting = s.begin_retry(cx.now, true);
    for mut p in waiting.drain(..) {
        p.parked = None;
        if may_progress(cx, s.key(), &s.sockets, &p.req) {
            work |= attempt(s, cx, p, Age::Waiting);
        } else {
            wait(s, cx, p, Age::Waiting);
        }
    }
    s.end_retry(waiting);
    work
}

/// Room in each connection's send buffer for the sends of a gone client
/// that wait on it ([`make_room_for_sends`]): whether any connection got
/// room.
fn make_room_for_waiting_sends(s: &mut Session, cx: &mut Context<'_>) -> bool {
    let mut waiting: Vec<(u32, usize)> = Vec::new();
    for p in s.pending.iter().filter(|p| p.req.op == Op::Send) {
        let len = p.buf.map_or(0, |b| b.len as usize);
        match waiting.iter_mut().find(|(socket, _)| *socket == p.req.socket) {
            Some((_, bytes)) => *bytes = bytes.saturating_add(len),
            None => waiting.push((p.req.socket, len)),
        }
    }
    let mut made = false;
    for (socket, bytes) in waiting {
        made |= make_room_for_sends(cx, &mut s.caller(), socket, bytes);
    }
    made
}

/// Takes up to `budget` new requests off the client's ring and runs each;
/// how many it took (`None`: the client broke its ring, and is doomed).
fn run_new_requests(s: &mut Session, cx: &mut Context<'_>, budget: usize) -> Option<usize> {
    let descs = &mut *cx.descriptors;
    descs.resize(2 * REQ_BATCH, Descriptor::default());
    let n = s.take_requests(&mut descs[..budget.min(2 * REQ_BATCH)])?;
    for i in 0..n {
        let d = cx.descriptors[i];
        let req = match Request::decode(&d) {
            Ok(req) => req,
            Err(e) => {
                cx.stats.bad_descriptors += 1;
                s.refuse(&d, e);
                continue;
            }
        };
        cx.stats.requests += 1;
        if let Some(n) = cx.stats.requests_by_op.get_mut(req.op as usize) {
            *n += 1;
        }
        if matches!(req.op, Op::Recv | Op::RecvFrom) {
            s.sockets.note_consumed(req.socket, req.aux[0]);
        }
        let Ok(buf) = s.pool.take(&d) else {
            cx.stats.bad_buffers += 1;
            s.refuse_buffer(&req);
            continue;
        };
        let deadline = req.wait_limit().map(|w| cx.now + w);
        if changes_without_event(req.op) {
            s.note_named(req.socket);
        }
        let seq = s.next_seq();
        attempt(s, cx, Pending { req, buf, deadline, parked: None, seq }, Age::New);
    }
    if s.bad > cx.config.max_bad {
        s.doomed = Some("too many bad descriptors");
    }
    Some(n)
}

/// Runs request `p` (unless it must keep its place behind a send) and
/// decides what becomes of it. Returns whether it is done with (completed,
/// lent, held or failed) rather than waiting.
fn attempt(s: &mut Session, cx: &mut Context<'_>, mut p: Pending, age: Age) -> bool {
    if stream_ordered(&p.req) && s.send_waits(p.req.socket) {
        // Behind an earlier send of its stream.
        if age == Age::New && p.req.nonblocking() {
            s.finish(&p.req, p.buf, Err(libc::EAGAIN));
            return true;
        }
        return wait(s, cx, p, age);
    }
    if p.req.op == Op::Share {
        s.cancel_receives(p.req.socket);
    }
    let r = execute(cx, &mut s.caller(), &mut p.req, p.buf);
    // A socket now on a port another client had: the bind returns once no
    // frame sent to it can be steered into that client's region.
    if let Some(port) = unsettled_port(s, cx, &p.req, &r) {
        let c = s.completion(&p.req, p.buf, r);
        s.hold(port, c);
        cx.stats.binds_held += 1;
        return true;
    }
    match r {
        // Lent to the engine: completed when it lets go.
        Ok(Some(Done { lent: true, value, .. })) => {
            s.accepted(&p.req, value);
            true
        }
        Ok(None) => wait(s, cx, p, age),
        r => {
            s.finish(&p.req, p.buf, r);
            true
        }
    }
}

/// `p` has nothing yet: it waits if it may (see the module's comment),
/// else fails. Returns whether it failed.
fn wait(s: &mut Session, cx: &mut Context<'_>, p: Pending, age: Age) -> bool {
    match age {
        // A request holding a buffer is bounded by the client's pool; a
        // close (which waits only behind its stream's sends, and which a
        // client that closes must not see fail) by the completion ring's
        // room, as every request is; a connect by the client's sockets
        // (it names the one it made); the others by `max_pending`.
        Age::New
            if p.buf.is_some()
                || matches!(p.req.op, Op::Close | Op::Connect | Op::Connect6)
                || s.waiting_without_buffer() < cx.config.max_pending =>
        {
            s.wait(p);
            false
        }
        Age::New => {
            s.finish(&p.req, p.buf, Err(libc::ENOBUFS));
            true
        }
        Age::Waiting if p.deadline.is_some_and(|d| cx.now >= d) => {
            let errno = if matches!(p.req.op, Op::Connect | Op::Connect6) {
                let key = s.key();
                crate::ops::drop_failed_connect(cx, &mut s.sockets, key, p.req.socket);
                libc::ETIMEDOUT
            } else {
                libc::EAGAIN
            };
            s.finish(&p.req, p.buf, Err(errno));
            true
        }
        Age::Waiting => {
            s.wait(p);
            false
        }
    }
}

/// The port of the socket a bind or listen just made, if the driver may
/// still steer that port's frames to the client that had it before.
fn unsettled_port(s: &Session, cx: &Context<'_>, req: &Request, r: &Outcome) -> Option<(u8, u16)> {
    match (r, req.op) {
        (Ok(Some(done)), Op::UdpBind | Op::UdpBind6 | Op::Listen | Op::Listen6) => u32::try_from(done.value)
            .ok()
            .and_then(|id| s.sockets.port(id))
            .filter(|&(proto, port)| !cx.steering.settled(proto, port)),
        _ => None,
    }
}

/// Requests that must not overtake a waiting send on their socket: more
/// data, and the end of the stream (a shutdown of the sending side, a
/// close): a client queues its sends without waiting for them, so what it
/// wrote before closing is sent before the FIN.
fn stream_ordered(req: &Request) -> bool {
    match req.op {
        Op::Send | Op::Close => true,
        Op::Shutdown => req.aux[0] & nagare_request::SHUT_WRITE != 0,
        _ => false,
    }
}

/// Completes every waiting `STAT` request with `text` (the report, made
/// once for all of them after every session was served: it needs them
/// all). Returns whether any was waiting.
pub(crate) fn answer_stat_requests<'a>(
    sessions: impl Iterator<Item = &'a mut Session>,
    text: &str,
    stats: &mut NetdStats,
) {
    for s in sessions.filter(|s| waits_for_stat(s)) {
        let (asked, rest): (Vec<Pending>, Vec<Pending>) =
            std::mem::take(&mut s.pending).into_iter().partition(|p| p.req.op == Op::Stat);
        s.pending = rest;
        for p in asked {
            let r = match p.buf {
                Some(b) => {
                    let n = text.len().min(b.len as usize);
                    match s.pool.write(b.index, b.offset, &text.as_bytes()[..n]) {
                        Ok(()) => Ok(Some(Done::received(n as u64, 0, n as u32))),
                        Err(_) => Err(libc::EFAULT),
                    }
                }
                None => Err(libc::EFAULT),
            };
            s.finish(&p.req, p.buf, r);
        }
        s.flush(stats);
    }
}

/// Whether `s` has a `STAT` request waiting.
pub(crate) fn waits_for_stat(s: &Session) -> bool {
    s.pending.iter().any(|p| p.req.op == Op::Stat)
}
