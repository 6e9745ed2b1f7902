//! netd's sizes and policies, and the shape of the region each client
//! gets. Every limit here bounds what one client can make netd hold: ring
//! slots, buffers, waiting requests, sockets and refused descriptors.

use crate::packetflow::{BoostConfig, PacketFlow, MM_DEFAULT};
use nagare_ipc::RegionConfig;
use nagare_request::DEFAULT_SOCKET;
use std::path::PathBuf;
use std::time::Duration;

/// netd's sizes and policies.
#[derive(Clone, Debug)]
pub struct NetdConfig {
    /// The rendezvous socket.
    pub socket: PathBuf,
    /// Permission bits of the rendezvous socket and the watch socket
    /// beside it (`None`: its user's alone, 0700, or with `socket_group`
    /// its group's too, 0660): a client connects only with write permission
    /// (`crate::access`).
    pub socket_mode: Option<u32>,
    /// The group those sockets belong to (`None`: netd's).
    pub socket_group: Option<u32>,
    /// The first port a client may bind without `CAP_NET_BIND_SERVICE`
    /// (`crate::access`; 0: any port is anyone's).
    pub unprivileged_port_start: u16,
    /// Slots per ring of a client region: as many as its buffers, so that
    /// receives posted ahead on every buffer the client may post them on
    /// leave the completion ring room for every other request.
    pub ring_slots: u32,
    /// Buffers per client region (owned by the client at the start, but
    /// for the receive pool): 2048 by default, so that a server's every
    /// socket (`max_sockets`) keeps a receive posted ahead, which takes a
    /// buffer, within the three quarters of the pool receives may take
    /// (`nagare::path`). Only the pages a client uses are touched, so an
    /// idle socket's buffer costs address space, not memory.
    pub buffers: u32,
    /// Buffers of each client region netd keeps for frames steered there
    /// (by the driver, or by netd reading a multi-queue TAP itself; 0 with
    /// any other device inside netd, which cannot steer).
    pub receive_pool: u32,
    /// Size of one buffer: 64 KiB by default, a whole super-segment, so
    /// that a stream's 64 KiB moves with one request and one completion
    /// (its pages are touched only as the buffer is used).
    pub buffer_size: u32,
    /// How long the loop polls after the last work at least before it
    /// sleeps (longer while work keeps coming: `nagare_host::BusyPoll`).
    pub spin: Duration,
    /// Requests holding no buffer one client may have waiting (accepts,
    /// polls); those holding one (posted receives) are bounded by its
    /// region's pool, and connects and closes by its sockets.
    pub max_pending: usize,
    /// Sockets one client may hold.
    pub max_sockets: usize,
    /// Bytes of engine buffers one client's sockets may be charged
    /// (`crate::memory`): past an eighth of it a new connection starts at
    /// the floor, and past it a connect or accept fails with `ENOBUFS`.
    pub client_memory: usize,
    /// Bytes of engine buffers every client's sockets may be charged
    /// together (`crate::memory`), at most the engine's pool less the
    /// eighth kept for frames in flight; `None`: that most.
    pub memory_cap: Option<usize>,
    /// Connections closed by their clients that the engine may keep for
    /// their FIN exchange at once; a close past it resets.
    pub max_orphans: usize,
    /// A new TCP connection's receive buffer, the window it offers first
    /// (a client's `SO_RCVBUF` sets it for good); its client keeps as
    /// much posted for receives.
    pub tcp_recv_buffer: usize,
    /// The largest a TCP connection's receive buffer grows to (receive
    /// buffer autotuning) while its client reads fast enough to use it
    /// and its budget has room for it.
    pub tcp_recv_buffer_max: usize,
    /// TCP connections the engine holds at most, every client's and
    /// every state together: past it a connect fails with `ENFILE` and a
    /// SYN to a listener is not answered.
    pub max_connections: usize,
    /// Refused descriptors after which a client is disconnected.
    pub max_bad: u64,
    /// The link, as `nagare stat` names it (e.g. "vni lab port 2").
    pub link: String,
    /// The PacketFlow modules netd runs (all that are built, by default).
    pub packetflow: PacketFlow,
    /// The PacketFlow scheduler's threshold, count, boost time and lift.
    pub boost: BoostConfig,
    /// The largest receive queue PacketFlow's memory manager grows a UDP
    /// socket of nice 0 to (SB_max at priority 120; 512 KiB, the paper's
    /// 500 KB): others scale by (140 − priority) / 20.
    pub mm_default: usize,
    /// A file holding the link's count of frames it dropped on their way
    /// to netd, read once per housekeeping period as a sign that the
    /// receive path is dropping (for a TAP, the kernel's
    /// `/sys/class/net/NAME/statistics/tx_dropped`; none otherwise).
    pub link_drops: Option<PathBuf>,
    /// Frames each queue of netd's TAP holds while netd (or its driver)
    /// is away from it; set when netd opens the TAP, 0 leaves it as it
    /// is ([`DEFAULT_TAP_QUEUE_LEN`]).
    pub tap_queue_len: u32,
    /// Frames netd takes from its device or driver in one read
    /// (`nagare_host::host::RX_BATCH`, 64): a read that fills it is how
    /// PacketFlow's filter tells that netd is saturated.
    pub rx_batch: usize,
}

/// Frames each queue of netd's TAP holds by default. The kernel's 1000
/// covers a reader away for 3 ms at 300 000 frames a second, less than
/// one time slice of the scheduler that runs netd among its clients on
/// a busy machine, and tun drops what does not fit: a reader that is a
/// process, not an interrupt handler, needs a queue that outlasts its
/// turn off the CPU.
pub const DEFAULT_TAP_QUEUE_LEN: u32 = 4096;

/// The bytes of engine buffers one client may be charged by default: a
/// server's every socket (`max_sockets`, 1024) at the floor, less what
/// its first connections take at full size (`crate::memory`): about 900
/// connections at once.
pub const DEFAULT_CLIENT_MEMORY: usize = 32 << 20;

impl Default for NetdConfig {
    fn default() -> Self {
        NetdConfig {
            socket: PathBuf::from(DEFAULT_SOCKET),
            socket_mode: None,
            socket_group: None,
            unprivileged_port_start: 1024,
            ring_slots: 2048,
            buffers: 2048,
            receive_pool: 64,
            buffer_size: 65536,
            spin: Duration::from_micros(50),
            max_pending: 64,
            max_sockets: 1024,
            client_memory: DEFAULT_CLIENT_MEMORY,
            memory_cap: None,
            max_orphans: 1024,
            tcp_recv_buffer: 256 << 10,
            tcp_recv_buffer_max: 4 << 20,
            max_connections: 16384,
            max_bad: 1024,
            link: String::from("unnamed"),
            packetflow: PacketFlow::default(),
            boost: BoostConfig::default(),
            mm_default: MM_DEFAULT,
            link_drops: None,
            rx_batch: nagare_host::host::RX_BATCH,
            tap_queue_len: DEFAULT_TAP_QUEUE_LEN,
        }
    }
}

impl NetdConfig {
    /// The region every client gets: ring 0 requests (client → netd),
    /// ring 1 completions (netd → client), ring 2 completions the driver
    /// posts directly (driver → client); the first `receive_pool` buffers
    /// netd's, the others the client's.
    pub fn region(&self) -> RegionConfig {
        RegionConfig {
            rings: 3,
            attacher_produces: 0b001,
            creator_buffers: self.receive_pool.min(self.buffers),
            ..RegionConfig::pair(self.ring_slots, self.buffers, self.buffer_size)
        }
    }
}
