//! Per-socket TCP settings, with the defaults a Linux user would expect.

use super::congestion::CongestionAlgorithm;
use super::rtt::RttConfig;
use core::time::Duration;

/// How a TCP socket behaves. Every connection carries its own copy, so
/// options like Nagle or the congestion controller are per socket.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Send buffer in bytes: the most queued (sent or not, unacknowledged),
    /// or with `send_autotune` the size a connection starts with.
    pub send_buffer: usize,
    /// Grow a connection's send buffer to twice its congestion window
    /// while the buffer holds its sender back, up to `send_buffer_max`
    /// (Linux's send buffer autotuning). [`TcpConfig::set_send_buffer`]
    /// turns it off.
    pub send_autotune: bool,
    /// Largest send buffer autotuning may grow to (Linux's `tcp_wmem`
    /// maximum).
    pub send_buffer_max: usize,
    /// Receive buffer in bytes: the largest window offered, or with
    /// `recv_autotune` the size a connection starts with.
    pub recv_buffer: usize,
    /// Grow a connection's receive buffer with what the application
    /// reads per round trip, up to `recv_buffer_max` (Linux's receive
    /// buffer autotuning). [`TcpConfig::set_recv_buffer`] turns it off.
    pub recv_autotune: bool,
    /// Largest receive buffer autotuning may grow to (Linux's
    /// `tcp_rmem` maximum); the window scale is chosen for it.
    pub recv_buffer_max: usize,
    /// Offer window scaling (RFC 7323).
    pub window_scaling: bool,
    /// Offer timestamps (RFC 7323).
    pub timestamps: bool,
    /// Offer selective acknowledgements (RFC 2018).
    pub sack: bool,
    /// Nagle's algorithm (off is TCP_NODELAY).
    pub nagle: bool,
    /// A close resets the connection and drops what was queued
    /// (`SO_LINGER` with a zero time) instead of sending it and a FIN.
    pub reset_on_close: bool,
    /// Longest an acknowledgement may be delayed; `None` acknowledges
    /// every segment at once.
    pub delayed_ack: Option<Duration>,
    /// Time spent in TIME-WAIT (Linux: 60 s; RFC 9293: 2 MSL).
    pub time_wait: Duration,
    /// Longest a connection the application closed waits in FIN-WAIT-2
    /// for the peer's FIN before it is dropped (Linux's `tcp_fin_timeout`,
    /// 60 s): nobody can read or write it any more, and a peer that never
    /// closes would otherwise keep it for ever.
    pub fin_timeout: Duration,
    /// Idle time before keepalive probes start; `None` disables them.
    pub keepalive: Option<Duration>,
    /// Time between keepalive probes.
    pub keepalive_interval: Duration,
    /// Unanswered keepalive probes before the connection is dropped.
    pub keepalive_probes: u32,
    /// Time data may stay unacknowledged before the connection is dropped
    /// (RFC 5482); when set it replaces `max_retransmissions` for data,
    /// `None` leaves the count alone.
    pub user_timeout: Option<Duration>,
    /// Retransmissions of a SYN before connect fails.
    pub syn_retries: u32,
    /// Retransmissions of data before the connection is dropped (R2).
    pub max_retransmissions: u32,
    /// Congestion controller.
    pub congestion: CongestionAlgorithm,
    /// Retransmission timer limits.
    pub rtt: RttConfig,
    /// Out-of-order segments held per connection.
    pub max_ooo_segments: usize,
    /// Duplicate ACKs (or SACKed segments) that signal a loss.
    pub dup_thresh: usize,
    /// Largest payload of one segment handed to a device that segments
    /// TCP itself (TSO); 0 keeps every segment within the MSS. The
    /// interface sets it from its device, so a socket inherits it.
    pub segmentation_offload: usize,
    /// RACK-TLP (RFC 8985): losses detected by time as well as by count
    /// of SACKed segments, and tail loss probes, so that a lost last
    /// segment is repaired after about two round trips instead of a
    /// retransmission timeout.
    pub rack_tlp: bool,
}

impl TcpConfig {
    /// Sets the send buffer as SO_SNDBUF does: a fixed size, so
    /// autotuning is off for sockets made with this configuration.
    pub fn set_send_buffer(&mut self, bytes: usize) {
        self.send_buffer = bytes;
        self.send_autotune = false;
    }

    /// The largest send buffer a connection may come to have.
    pub fn send_buffer_limit(&self) -> usize {
        if self.send_autotune {
            self.send_buffer.max(self.send_buffer_max)
        } else {
            self.send_buffer
        }
    }

    /// Sets the receive buffer as SO_RCVBUF does: a fixed size, so
    /// autotuning is off for sockets made with this configuration.
    pub fn set_recv_buffer(&mut self, bytes: usize) {
        self.recv_buffer = bytes;
        self.recv_autotune = false;
    }

    /// The largest receive buffer a connection may come to have: what the
    /// window scale must be able to express.
    pub fn recv_buffer_limit(&self) -> usize {
        if self.recv_autotune {
            self.recv_buffer.max(self.recv_buffer_max)
        } else {
            self.recv_buffer
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            send_buffer: 256 * 1024,
            send_autotune: true,
            send_buffer_max: 4 * 1024 * 1024,
            recv_buffer: 256 * 1024,
            recv_autotune: true,
            recv_buffer_max: 6 * 1024 * 1024,
            window_scaling: true,
            timestamps: true,
            sack: true,
            nagle: true,
            reset_on_close: false,
            delayed_ack: Some(Duration::from_millis(40)),
            time_wait: Duration::from_secs(60),
            fin_timeout: Duration::from_secs(60),
            keepalive: None,
            keepalive_interval: Duration::from_secs(75),
            keepalive_probes: 9,
            user_timeout: None,
            syn_retries: 6,
            max_retransmissions: 15,
            congestion: CongestionAlgorithm::default(),
            rtt: RttConfig::default(),
            max_ooo_segments: 64,
            dup_thresh: 3,
            segmentation_offload: 0,
            rack_tlp: true,
        }
    }
}
