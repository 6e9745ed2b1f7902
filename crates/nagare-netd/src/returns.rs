//! Lent buffers coming back. When the engine lets go of a client's buffer
//! lent for a send, the completion made when it was lent is posted: by the
//! driver the frame went to, queued behind that frame (direct return), or
//! by netd, when the frame went to no driver or that driver has died since.
//! Completions a dead driver had not confirmed are posted by netd too.
//!
//! Invariant: a lent buffer's completion is posted by one of the two,
//! never both, and names the buffer only once netd has given it back in
//! the pool's table; a client that has left gets none.

use crate::frames::FramePath;
use crate::lending::Lending;
use crate::session::Session;
use crate::stats::NetdStats;
use nagare_request::pack_stages;

/// Posts (or has the driver post) the completion of every buffer the
/// engine let go of since the last call, and the completions a dead driver
/// left. Returns whether there were any.
pub(crate) fn settle(
    lending: &Lending,
    frames: &mut FramePath,
    sessions: &mut [Session],
    stats: &mut NetdStats,
) -> bool {
    let mut work = false;
    for (key, index, lent) in lending.take_released() {
        work = true;
        let Some(s) = sessions.iter_mut().find(|s| s.key() == key) else { continue };
        let mut c = lent.completion;
        if let Some([posted, taken, engine_done, handed]) = lent.trace {
            // Handed to a driver: until then; else until the device
            // (inside netd) was written and the engine let go.
            let sent = if handed != 0 { handed } else { nagare_ipc::monotonic_ns() };
            c.aux[1] = pack_stages(
                taken.saturating_sub(posted),
                engine_done.saturating_sub(taken),
                sent.saturating_sub(engine_done),
            );
        }
        if s.pool.give(index).is_err() {
            c.buffer = nagare_ipc::NO_BUFFER;
            c.offset = 0;
            c.len = 0;
        }
        if !frames.post_return(lent.handed, key, c) {
            s.post(c);
            s.flush(stats);
        }
    }
    for (key, c) in frames.take_orphans() {
        work = true;
        if let Some(s) = sessions.iter_mut().find(|s| s.key() == key) {
            s.post(c);
            s.flush(stats);
        }
    }
    work
}
