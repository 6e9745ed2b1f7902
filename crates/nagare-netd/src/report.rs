//! The text `nagare stat` shows: what netd is, who its clients are, what
//! each holds, and every counter that is not zero (drops by reason among
//! them). One item per line, `section key value ...`, so scripts can grep.

use crate::priority::Priority;
use crate::stats::NetdStats;
use core::fmt::Write;
use nagare_core::buf::PoolStats;
use nagare_request::Op;
use std::net::SocketAddr;

/// One client as the report shows it.
pub(crate) struct ClientLine {
    pub id: u64,
    pub pid: i32,
    pub uid: u32,
    pub tcp: usize,
    pub listeners: usize,
    pub udp: usize,
    pub echo: usize,
    pub pending: usize,
    /// Region buffers held by the client, by netd (requests in flight),
    /// and in all.
    pub buffers_client: u32,
    pub buffers_netd: u32,
    /// netd's receive pool in the region (steered frames land there).
    pub buffers_receive: u32,
    pub buffers_total: u32,
    pub bad: u64,
    /// Bytes its sockets (and the orphans it left) are charged, and its
    /// budget.
    pub memory_charged: usize,
    pub memory_budget: usize,
    /// Its priority, and the nice value it comes from (if it could be
    /// read).
    pub priority: Priority,
    pub nice: Option<i32>,
    /// Boosted by PacketFlow's scheduler, and the nice value its process
    /// was lifted to (if it was).
    pub boosted: bool,
    pub lifted: Option<i32>,
    /// Its sockets, by id.
    pub sockets: Vec<SocketLine>,
}

/// One socket of a client as the report shows it: what the engine holds
/// for it in each direction, and the requests waiting on it (receives a
/// client keeps posted among them).
pub(crate) struct SocketLine {
    pub id: u32,
    pub kind: &'static str,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub state: &'static str,
    /// Bytes the engine holds to send (sent or not, unacknowledged).
    pub send_queued: usize,
    /// Bytes received that no receive has taken yet.
    pub recv_queued: usize,
    /// Bytes receives delivered into the client's region that it had not
    /// read when it last posted a receive.
    pub client_unread: u64,
    pub waiting: usize,
    /// Its send buffer and receive buffer (a UDP socket: its receive
    /// queue limit), as charged.
    pub send_buffer: usize,
    pub recv_buffer: usize,
    /// The most its receive buffer may grow to (a UDP socket's SB_max
    /// under PacketFlow's memory manager; its size otherwise).
    pub recv_buffer_max: usize,
    pub priority: Priority,
    /// Datagrams PacketFlow's filter dropped for its low priority, and
    /// those dropped for its full queue (by the filter or the engine).
    pub filter_drops: u64,
    pub overflow_drops: u64,
    /// The clients holding it (more than one: shared, `crate::shares`,
    /// shown as `holders N` at the end of its line).
    pub holders: usize,
}

/// Everything the report says.
pub(crate) struct Report<'a> {
    pub pid: u32,
    pub uptime_secs: f64,
    pub placement: &'a str,
    /// The driver's pid (none while it is being started again) and the
    /// link's counters, when frames go through a driver.
    pub driver: Option<(Option<u32>, crate::driver::DriverLinkStats, crate::driver::DriverStats)>,
    /// What steering did, when netd reads a multi-queue TAP itself.
    pub queues: Option<crate::tap_queues::QueueStats>,
    pub link: &'a str,
    pub clients: &'a [ClientLine],
    pub stats: NetdStats,
    /// Memory charged in all, orphans.
    pub memory: crate::memory::MemoryLine,
    /// TCP connections the engine holds, and the most it may.
    pub connections: (usize, usize),
    pub engine: &'a mut dyn Iterator<Item = (&'static str, u64)>,
    pub engine_buffers: PoolStats,
    /// PacketFlow's filter, if it runs: the receive path's drops and the
    /// frames it saw in its last period.
    pub filter: Option<(u64, u64)>,
    /// UDP ports the device sheds datagrams to for the filter, and the
    /// filter's drop probability in percent.
    pub shed_ports: usize,
    pub shed_percent: u64,
    /// PacketFlow's scheduler, if it runs: the clients it boosts now, and
    /// its parameters.
    pub scheduler: Option<(usize, crate::packetflow::BoostConfig)>,
    /// PacketFlow's memory manager, if it runs: its size at nice 0.
    pub mm: Option<usize>,
}

impl Report<'_> {
    /// The text, cut at `limit` bytes on a line boundary (a last line says
    /// so).
    pub fn render(self, limit: usize) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "netd pid {} uptime {:.1}s placement {} link {} clients {}",
            self.pid,
            self.uptime_secs,
            self.placement,
            self.link,
            self.clients.len()
        );
        for c in self.clients {
            let _ = writeln!(
                t,
                "client {} pid {} uid {} sockets {} tcp {} listeners {} udp {} echo {} pending {} buffers client {} netd {} receive {} of {} bad {} memory {} of {} fill {}% filter_drops {} overflow_drops {} prio {} nice {} boosted {}",
                c.id,
                c.pid,
                c.uid,
                c.tcp + c.listeners + c.udp + c.echo,
                c.tcp,
                c.listeners,
                c.udp,
                c.echo,
                c.pending,
                c.buffers_client,
                c.buffers_netd,
                c.buffers_receive,
                c.buffers_total,
                c.bad,
                c.memory_charged,
                c.memory_budget,
                c.sockets.iter().map(|k| fill(k.recv_queued, k.recv_buffer)).max().unwrap_or(0),
                c.sockets.iter().map(|k| k.filter_drops).sum::<u64>(),
                c.sockets.iter().map(|k| k.overflow_drops).sum::<u64>(),
                c.priority.value,
                c.nice.map_or_else(|| String::from("-"), |n| n.to_string()),
                match (c.boosted, c.lifted) {
                    (false, _) => String::from("no"),
                    (true, None) => String::from("yes"),
                    (true, Some(n)) => format!("yes lifted_nice {n}"),
                }
            );
            let addr = |a: Option<SocketAddr>| a.map_or_else(|| String::from("-"), |a| a.to_string());
            for k in &c.sockets {
                let _ = writeln!(
                    t,
                    "socket {} client {} {} local {} remote {} state {} send_queued {} recv_queued {} client_unread {} waiting {} sndbuf {} rcvbuf {} rcvbuf_max {} fill {}% prio {} from {} filter_drops {} overflow_drops {}{}",
                    k.id,
                    c.id,
                    k.kind,
                    addr(k.local),
                    addr(k.remote),
                    k.state,
                    k.send_queued,
                    k.recv_queued,
                    k.client_unread,
                    k.waiting,
                    k.send_buffer,
                    k.recv_buffer,
                    k.recv_buffer_max,
                    fill(k.recv_queued, k.recv_buffer),
                    k.priority.value,
                    k.priority.source.name(),
                    k.filter_drops,
                    k.overflow_drops,
                    if k.holders > 1 { format!(" holders {}", k.holders) } else { String::new() }
                );
            }
        }
        let s = self.stats;
        for (k, v) in [
            ("clients_accepted", s.clients_accepted),
            ("clients_refused", s.clients_refused),
            ("clients_gone", s.clients_gone),
            ("clients_broken", s.clients_broken),
            ("requests", s.requests),
            ("waits_rerun", s.waits_rerun),
            ("waits_checked", s.waits_checked),
            ("completions", s.completions),
            ("bad_descriptors", s.bad_descriptors),
            ("bad_buffers", s.bad_buffers),
            ("sockets_reclaimed", s.sockets_reclaimed),
            ("buffers_reclaimed", s.buffers_reclaimed),
            ("buffers_leaked", s.buffers_leaked),
            ("device_errors", s.device_errors),
            ("sleeps", s.sleeps),
            ("udp_errors_reported", s.udp_errors_reported),
            ("sends_in_place", s.sends_in_place),
            ("tx_payload_copied", s.tx_payload_copied),
            ("tx_payload_in_place", s.tx_payload_in_place),
            ("rx_payload_copied", s.rx_payload_copied),
            ("rx_payload_in_place", s.rx_payload_in_place),
            ("binds_held", s.binds_held),
            ("ports_refused", s.ports_refused),
            ("memory_refused", s.memory_refused),
            ("buffers_shrunk", s.buffers_shrunk),
            ("recv_buffers_grown", s.recv_buffers_grown),
            ("recv_buffer_growth_refused", s.recv_buffer_growth_refused),
            ("send_buffers_grown", s.send_buffers_grown),
            ("send_buffer_growth_refused", s.send_buffer_growth_refused),
            ("orphans_reset", s.orphans_reset),
            ("last_requests", s.last_requests),
            ("connections_refused", s.connections_refused),
            ("filter_dropped_low_priority", s.filter_dropped_low_priority),
            ("filter_dropped_overflow", s.filter_dropped_overflow),
            ("receive_pauses", s.receive_pauses),
            ("queue_holds", s.queue_holds),
            ("boosts", s.boosts),
            ("lifts_refused", s.lifts_refused),
            ("mm_grown", s.mm_grown),
            ("mm_refused", s.mm_refused),
        ] {
            let _ = writeln!(t, "netd {k} {v}");
        }
        let m = self.memory;
        let _ = writeln!(
            t,
            "memory charged {} of {} orphans {} of {} unowned {} connections {} of {}",
            m.charged, m.cap, m.orphans, m.max_orphans, m.unowned, self.connections.0, self.connections.1
        );
        // What the engine holds, beside what the clients are charged: ahead
        // of the driver's counters, so that a report cut short to a small
        // region buffer still says it.
        let b = self.engine_buffers;
        let _ = writeln!(
            t,
            "engine buffers in_use {} of {} size {} exhausted {}",
            b.in_use, b.capacity, b.buf_size, b.exhausted
        );
        match self.filter {
            Some((drops, frames)) => {
                let _ = writeln!(
                    t,
                    "packetflow filter on last_period receive_drops {drops} frames {frames} device_shed_ports {} drop_probability {}%",
                    self.shed_ports, self.shed_percent
                );
            }
            None => {
                let _ = writeln!(t, "packetflow filter off");
            }
        }
        match self.scheduler {
            Some((boosted, b)) => {
                let _ = writeln!(
                    t,
                    "packetflow scheduler on boosted {boosted} threshold {} count {} time_ms {} lift {}",
                    b.threshold,
                    b.count,
                    b.time.as_millis(),
                    b.lift
                );
            }
            None => {
                let _ = writeln!(t, "packetflow scheduler off");
            }
        }
        match self.mm {
            Some(default) => {
                let _ = writeln!(t, "packetflow mm on default {default}");
            }
            None => {
                let _ = writeln!(t, "packetflow mm off");
            }
        }
        if let Some((pid, d, own)) = self.driver {
            let pid = pid.map_or_else(|| String::from("none"), |p| p.to_string());
            let _ = writeln!(t, "driver pid {pid} starts {} deaths {}", d.starts, d.deaths);
            for (k, v) in [
                ("tx_frames", d.tx_frames),
                ("tx_bytes_copied", d.tx_bytes_copied),
                ("tx_bytes_in_place", d.tx_bytes_in_place),
                ("tx_dropped_down", d.tx_dropped_down),
                ("tx_dropped_bad", d.tx_dropped_bad),
                ("rx_frames", d.rx_frames),
                ("rx_bytes_copied", d.rx_bytes_copied),
                ("rx_bytes_in_place", d.rx_bytes_in_place),
                ("rx_steered", d.rx_steered),
                ("rx_steer_refused", d.rx_steer_refused),
                ("rx_bad", d.rx_bad),
                ("returns_posted", d.returns_posted),
                ("returns_confirmed", d.returns_confirmed),
                ("returns_orphaned", d.returns_orphaned),
                ("tap_queues", d.tap_queues),
            ] {
                let _ = writeln!(t, "driver {k} {v}");
            }
            // The driver's own, as it last reported them (every 250 ms).
            for (k, v) in own.named() {
                let _ = writeln!(t, "driver reported {k} {v}");
            }
        }
        if let Some(q) = self.queues {
            for (k, v) in q.named() {
                let _ = writeln!(t, "queues {k} {v}");
            }
        }
        for (k, v) in self.engine.filter(|(_, v)| *v != 0) {
            let _ = writeln!(t, "engine {k} {v}");
        }
        // Last, as the first a report cut short leaves out.
        for (n, &count) in self.stats.requests_by_op.iter().enumerate() {
            let op = u16::try_from(n).ok().and_then(Op::from_u16);
            if let (Some(op), true) = (op, count > 0) {
                let _ = writeln!(t, "netd requests_{} {count}", snake_case(&format!("{op:?}")));
            }
        }
        cut(t, limit)
    }
}

/// `name` (an operation's, `SetOption`) in snake case (`set_option`).
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// How full a buffer of `size` bytes holding `queued` is, in percent.
fn fill(queued: usize, size: usize) -> usize {
    if size == 0 {
        return 0;
    }
    queued.saturating_mul(100) / size
}

const CUT_NOTE: &str = "truncated\n";

fn cut(mut t: String, limit: usize) -> String {
    if t.len() <= limit {
        return t;
    }
    if limit < CUT_NOTE.len() {
        return String::new();
    }
    let room = limit.saturating_sub(CUT_NOTE.len());
    let end = t[..room].rfind('\n').map_or(0, |i| i + 1);
    t.truncate(end);
    t.push_str(CUT_NOTE);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::Source;

    fn client(id: u64) -> ClientLine {
        ClientLine {
            id,
            pid: 100 + id as i32,
            uid: 0,
            tcp: 2,
            listeners: 1,
            udp: 1,
            echo: 0,
            pending: 1,
            buffers_client: 250,
            buffers_netd: 6,
            buffers_receive: 0,
            buffers_total: 256,
            bad: 0,
            memory_charged: 524288,
            memory_budget: 8388608,
            priority: Priority { value: 125, source: Source::Nice },
            nice: Some(5),
            boosted: id == 2,
            lifted: (id == 2).then_some(0),
            sockets: vec![
                SocketLine {
                    id: 3,
                    kind: "tcp",
                    local: Some(SocketAddr::from(([10, 0, 0, 2], 4000))),
                    remote: Some(SocketAddr::from(([10, 0, 0, 1], 7))),
                    state: "established",
                    send_queued: 1000,
                    recv_queued: 65536,
                    client_unread: 4096,
                    waiting: 4,
                    send_buffer: 262144,
                    recv_buffer: 262144,
                    recv_buffer_max: 262144,
                    priority: Priority { value: 100, source: Source::Option },
                    filter_drops: 6,
                    overflow_drops: 2,
                    holders: 1,
                },
                SocketLine {
                    id: 4,
                    kind: "udp",
                    local: Some(SocketAddr::from(([10, 0, 0, 2], 5000))),
                    remote: None,
                    state: "-",
                    send_queued: 0,
                    recv_queued: 98304,
                    client_unread: 0,
                    waiting: 0,
                    send_buffer: 0,
                    recv_buffer: 131072,
                    recv_buffer_max: 393216,
                    priority: Priority { value: 125, source: Source::Nice },
                    filter_drops: 3,
                    overflow_drops: 9,
                    holders: 2,
                },
            ],
        }
    }

    /// Per-operation counts with `counts` set.
    fn by_op(counts: &[(Op, u64)]) -> [u64; crate::stats::OPS] {
        let mut by_op = [0; crate::stats::OPS];
        for &(op, n) in counts {
            by_op[op as usize] = n;
        }
        by_op
    }

    fn report(clients: &[ClientLine], limit: usize) -> String {
        let mut engine = [("rx_frames", 5u64), ("drop_bad_checksum", 0)].into_iter();
        report_parts(clients, &mut engine).render(limit)
    }

    /// A report of `clients` and the engine's counters `engine`.
    fn report_parts<'a>(
        clients: &'a [ClientLine],
        engine: &'a mut dyn Iterator<Item = (&'static str, u64)>,
    ) -> Report<'a> {
        Report {
            pid: 1,
            uptime_secs: 2.0,
            placement: "single",
            driver: None,
            queues: None,
            link: "vni x",
            clients,
            stats: NetdStats {
                requests: 9,
                requests_by_op: by_op(&[(Op::SetOption, 2), (Op::Nop, 7)]),
                filter_dropped_overflow: 7,
                mm_grown: 5,
                ..NetdStats::default()
            },
            memory: crate::memory::MemoryLine {
                charged: 1048576,
                cap: 7340032,
                orphans: 1,
                max_orphans: 1024,
                unowned: 0,
            },
            connections: (3, 16384),
            engine,
            engine_buffers: PoolStats { buf_size: 2048, capacity: 4096, in_use: 3, allocs: 10, exhausted: 0 },
            filter: Some((2, 30)),
            shed_ports: 3,
            shed_percent: 75,
            scheduler: Some((1, crate::packetflow::BoostConfig::default())),
            mm: Some(524288),
        }
    }

    #[test]
    fn every_part_is_there_and_zero_counters_are_not() {
        let t = report(&[client(1), client(2)], 16384);
        assert!(t.starts_with("netd pid 1 uptime 2.0s placement single link vni x clients 2\n"), "{t}");
        assert!(t.contains("client 2 pid 102 uid 0 sockets 4 tcp 2 listeners 1 udp 1 echo 0 pending 1 buffers client 250 netd 6 receive 0 of 256 bad 0 memory 524288 of 8388608 fill 75% filter_drops 9 overflow_drops 11 prio 125 nice 5 boosted yes lifted_nice 0\n"));
        assert!(
            t.contains(" memory 524288 of 8388608 fill 75% filter_drops 9 overflow_drops 11 prio 125 nice 5 boosted no\nsocket 3 client 1 "),
            "{t}"
        );
        assert!(t.contains("\nsocket 3 client 2 tcp local 10.0.0.2:4000 remote 10.0.0.1:7 state established send_queued 1000 recv_queued 65536 client_unread 4096 waiting 4 sndbuf 262144 rcvbuf 262144 rcvbuf_max 262144 fill 25% prio 100 from option filter_drops 6 overflow_drops 2\n"), "{t}");
        assert!(t.contains("\nsocket 4 client 2 udp local 10.0.0.2:5000 remote - state - send_queued 0 recv_queued 98304 client_unread 0 waiting 0 sndbuf 0 rcvbuf 131072 rcvbuf_max 393216 fill 75% prio 125 from nice filter_drops 3 overflow_drops 9 holders 2\n"), "{t}");
        assert!(
            t.contains("\nmemory charged 1048576 of 7340032 orphans 1 of 1024 unowned 0 connections 3 of 16384\n"),
            "{t}"
        );
        assert!(t.contains("netd requests 9\n"));
        assert!(t.contains("\nnetd requests_nop 7\nnetd requests_set_option 2\n"), "{t}");
        assert!(!t.contains("netd requests_share"), "{t}");
        assert!(
            t.contains(
                "packetflow filter on last_period receive_drops 2 frames 30 device_shed_ports 3 drop_probability 75%\n"
            ),
            "{t}"
        );
        assert!(t.contains("packetflow scheduler on boosted 1 threshold 50 count auto time_ms 100 lift 5\n"), "{t}");
        assert!(t.contains("netd filter_dropped_low_priority 0\nnetd filter_dropped_overflow 7\n"), "{t}");
        assert!(t.contains("netd mm_grown 5\nnetd mm_refused 0\n"), "{t}");
        assert!(t.contains("packetflow mm on default 524288\n"), "{t}");
        assert!(t.contains("engine buffers in_use 3 of 4096"));
        assert!(t.contains("engine rx_frames 5\n"));
        assert!(!t.contains("drop_bad_checksum"));
    }

    /// A client whose region buffers are small (2 KiB) reads a cut report:
    /// the memory netd and its engine hold is in it all the same, ahead of
    /// the driver's and the queues' counters.
    #[test]
    fn what_netd_holds_comes_before_the_driver_s_counters() {
        let mut engine = std::iter::empty();
        let driver = Some((Some(7), crate::driver::DriverLinkStats::default(), crate::driver::DriverStats::default()));
        let clients = [client(1)];
        let t = Report {
            driver,
            queues: Some(crate::tap_queues::QueueStats::default()),
            ..report_parts(&clients, &mut engine)
        }
        .render(2048);
        assert!(t.contains("\nengine buffers in_use 3 of 4096"), "{t}");
    }

    #[test]
    fn a_long_report_is_cut_on_a_line_and_says_so() {
        let clients: Vec<ClientLine> = (0..200).map(client).collect();
        let t = report(&clients, 4096);
        assert!(t.len() <= 4096);
        assert!(t.ends_with("\ntruncated\n"), "{}", &t[t.len() - 100..]);
        assert!(t
            .lines()
            .all(|l| l == "truncated" || ["netd ", "client ", "socket ", "memory "].iter().any(|p| l.starts_with(p))));
        assert_eq!(cut("abc\n".into(), 2), "");
        assert_eq!(cut("abcdefghij\nk\n".into(), 12), "truncated\n");
    }
}
