//! UDP request/response, its two ends: the client sends one tagged request
//! of `len` bytes and waits for the same bytes back, or for the response
//! timeout, before the next; the server sends back what its client sends.
//! The control connection carries Done and Result as in the other UDP
//! tests.

use super::net::Net;
use super::protocol::{rr_tag, rr_tag_len, Done, Message, TestResult, DATAGRAM_HEADER_LEN};
use super::report::{Latency, Side};
use super::roles::{micros, Ctl, Limit, Outcome, Poll, MAX_CALLS_PER_TICK, UDP_BACKOFF};
use anyhow::{bail, Result};
use nagare_core::Instant;
use std::net::SocketAddr;
use std::time::Duration;

/// How long the client waits for a response before it counts the request
/// as lost and sends the next.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_millis(200);

/// The request in flight.
struct InFlight {
    /// When it went, for its latency.
    sent_at: std::time::Instant,
    /// When it is given up on.
    deadline: Instant,
}

/// The asking side: one request at a time, timed; then Done and the
/// server's Result.
pub struct UdpRrClient<U> {
    udp: U,
    to: SocketAddr,
    start: Instant,
    limit: Limit,
    cookie: u32,
    request: Vec<u8>,
    in_flight: Option<InFlight>,
    /// Requests sent and answered; the others were given up on.
    requests: u64,
    pub(super) transactions: u64,
    latency: Latency,
    done_at: Option<Instant>,
    result: Option<TestResult>,
}

impl<U: Copy> UdpRrClient<U> {
    pub fn new(udp: U, to: SocketAddr, len: u32, limit: Limit, cookie: u32, now: Instant) -> UdpRrClient<U> {
        UdpRrClient {
            udp,
            to,
            start: now,
            limit,
            cookie,
            request: (0..len).map(|i| i as u8).collect(),
            in_flight: None,
            requests: 0,
            transactions: 0,
            latency: Latency::default(),
            done_at: None,
            result: None,
        }
    }

    pub fn request_len(&self) -> u64 {
        self.request.len() as u64
    }

    fn finished(&self, now: Instant) -> bool {
        match self.limit {
            Limit::Bytes(total) => self.requests * self.request_len() >= total,
            Limit::Time(d) => now.saturating_since(self.start) >= d,
        }
    }

    /// Takes the datagrams that have come back; returns whether any did,
    /// and settles the request in flight when its response is among them.
    fn receive<N: Net<Udp = U>>(&mut self, net: &mut N) -> Result<bool> {
        let tag = rr_tag_len(self.request.len());
        let mut response = [0u8; DATAGRAM_HEADER_LEN];
        let mut any = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            let Some((len, from)) = net.udp_recv(self.udp, &mut response)? else {
                break;
            };
            any = true;
            // A late response to a request already given up on, or a
            // datagram from anyone else, is dropped.
            let ours = from == self.to && len == self.request.len() && response.get(..tag) == self.request.get(..tag);
            if let Some(in_flight) = self.in_flight.take_if(|_| ours) {
                self.transactions += 1;
                self.latency.record(in_flight.sent_at.elapsed());
                break;
            }
        }
        Ok(any)
    }

    pub fn tick<N: Net<Udp = U>>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.done_at.is_some() {
            ctl.flush(net)?;
            // Stray responses are read and dropped while the Result comes.
            self.receive(net)?;
            return match ctl.poll(net)? {
                Some(Message::Result(r)) => {
                    self.result = Some(r);
                    Ok(Poll::Finished)
                }
                Some(other) => bail!("unexpected message after Done: {other:?}"),
                None if ctl.eof => bail!("the server closed the connection before reporting"),
                None => Ok(Poll::Idle(None)),
            };
        }
        if let Some(message) = ctl.poll(net)? {
            bail!("unexpected message during UDP request/response: {message:?}");
        }
        if ctl.eof {
            bail!("the server closed the connection during the test");
        }
        let mut busy = false;
        for _ in 0..MAX_CALLS_PER_TICK {
            if self.in_flight.is_none() {
                if self.finished(now) {
                    ctl.queue(&Message::Done(Done {
                        packets: self.requests,
                        bytes: self.requests * self.request_len(),
                        micros: micros(now.saturating_since(self.start)),
                    }));
                    ctl.flush(net)?;
                    self.done_at = Some(now);
                    return Ok(Poll::Busy);
                }
                rr_tag(&mut self.request, self.cookie, self.requests);
                if !net.udp_send(self.udp, &self.request, self.to)? {
                    return Ok(if busy { Poll::Busy } else { Poll::Idle(Some(now + UDP_BACKOFF)) });
                }
                self.requests += 1;
                self.in_flight =
                    Some(InFlight { sent_at: std::time::Instant::now(), deadline: now + RESPONSE_TIMEOUT });
                busy = true;
            }
            busy |= self.receive(net)?;
            if let Some(in_flight) = &self.in_flight {
                if now < in_flight.deadline {
                    break;
                }
                self.in_flight = None;
                busy = true;
            }
        }
        Ok(match &self.in_flight {
            _ if busy => Poll::Busy,
            Some(in_flight) => Poll::Idle(Some(in_flight.deadline)),
            None => Poll::Busy,
        })
    }

    pub fn outcome(&self, now: Instant) -> Outcome {
        let end = self.done_at.unwrap_or(now);
        let secs = end.saturating_since(self.start).as_secs_f64();
        Outcome {
            sent: Side { bytes: self.requests * self.request_len(), packets: self.requests, secs },
            received: Side { bytes: self.transactions * self.request_len(), packets: self.transactions, secs },
            latency: Some(self.latency.clone()),
            ..Outcome::default()
        }
    }

    /// Requests the server answered, if it reported.
    pub fn server_transactions(&self) -> Option<u64> {
        self.result.map(|r| r.packets)
    }
}

/// The answering side: every datagram of the test's length from the
/// client's port goes back as it came, until the client's Done.
pub struct UdpRrServer<U> {
    udp: U,
    client: SocketAddr,
    start: Instant,
    /// Room for one request (its length plus one, to tell a longer
    /// datagram from one of the right length).
    request: Vec<u8>,
    /// A response the stack had no room for yet.
    pending: bool,
    pub(super) transactions: u64,
    last: Instant,
    reported: bool,
}

impl<U: Copy> UdpRrServer<U> {
    pub fn new(udp: U, client: SocketAddr, len: u32, now: Instant) -> UdpRrServer<U> {
        UdpRrServer {
            udp,
            client,
            start: now,
            request: vec![0; len as usize + 1],
            pending: false,
            transactions: 0,
            last: now,
            reported: false,
        }
    }

    pub fn request_len(&self) -> u64 {
        self.request.len() as u64 - 1
    }

    /// Sends the request back; returns whether the stack took it.
    fn answer<N: Net<Udp = U>>(&mut self, net: &mut N, now: Instant) -> Result<bool> {
        let len = self.request.len() - 1;
        if !net.udp_send(self.udp, &self.request[..len], self.client)? {
            self.pending = true;
            return Ok(false);
        }
        self.pending = false;
        self.transactions += 1;
        self.last = now;
        Ok(true)
    }

    pub fn tick<N: Net<Udp = U>>(&mut self, net: &mut N, ctl: &mut Ctl<N::Conn>, now: Instant) -> Result<Poll> {
        if self.reported {
            return Ok(if ctl.flush(net)? { Poll::Finished } else { Poll::Idle(None) });
        }
        let mut busy = false;
        if self.pending && !self.answer(net, now)? {
            return Ok(Poll::Idle(Some(now + UDP_BACKOFF)));
        }
        let len = self.request.len() - 1;
        for _ in 0..MAX_CALLS_PER_TICK {
            let Some((got, from)) = net.udp_recv(self.udp, &mut self.request)? else {
                break;
            };
            busy = true;
            // Only the test's client is answered, and only with requests
            // of the agreed length: anything else is dropped.
            if from != self.client || got != len {
                continue;
            }
            if !self.answer(net, now)? {
                return Ok(Poll::Idle(Some(now + UDP_BACKOFF)));
            }
        }
        match ctl.poll(net)? {
            Some(Message::Done(_)) => {
                ctl.queue(&Message::Result(TestResult {
                    bytes: self.transactions * self.request_len(),
                    packets: self.transactions,
                    micros: micros(self.last.saturating_since(self.start)),
                    out_of_order: 0,
                }));
                self.reported = true;
                return Ok(Poll::Busy);
            }
            Some(other) => bail!("unexpected message during UDP request/response: {other:?}"),
            None if ctl.eof => bail!("the client closed the connection during the test"),
            None => {}
        }
        Ok(if busy { Poll::Busy } else { Poll::Idle(None) })
    }

    pub fn outcome(&self) -> Outcome {
        let answered = Side {
            bytes: self.transactions * self.request_len(),
            packets: self.transactions,
            secs: self.last.saturating_since(self.start).as_secs_f64(),
        };
        Outcome { sent: answered, received: answered, ..Outcome::default() }
    }
}
