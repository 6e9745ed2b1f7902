//! Names to IPv4 addresses, and addresses to names, without the kernel's
//! stack: numeric forms, `/etc/hosts`, then DNS through netd (a UDP socket of this session to
//! the name servers `NAGARE_DNS` or `/etc/resolv.conf` names). glibc's own
//! resolver sends its queries from inside libc, where no preload library
//! can reach them, over the kernel's IPv4: this one is what `getaddrinfo`
//! and `gethostbyname` answer with here (`addrinfo.rs`).

pub(crate) mod addrinfo;
pub mod dns;
mod files;

use crate::session::session;
use dns::{Answer, Ask};
use files::ResolvConf;
use nagare::net::UdpSocket;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Instant;

/// The environment variable naming the name servers to ask (IPv4
/// addresses, comma separated) instead of `/etc/resolv.conf`'s (`nagare run
/// --dns`).
pub const DNS_ENV: &str = "NAGARE_DNS";

extern "C" {
    fn inet_aton(cp: *const libc::c_char, inp: *mut libc::in_addr) -> libc::c_int;
}

const HOSTS: &str = "/etc/hosts";
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The most bytes of an answer read (a UDP answer without EDNS is at most
/// 512; some servers send more).
const ANSWER_MAX: usize = 4096;

/// Why a name has no address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It does not exist (`EAI_NONAME`, `HOST_NOT_FOUND`).
    NoName,
    /// No server answered (`EAI_AGAIN`, `TRY_AGAIN`).
    Again,
    /// netd cannot be reached (`EAI_FAIL`, `NO_RECOVERY`).
    Fail,
}

/// A name's addresses and its canonical name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) canonical: String,
    pub(crate) addrs: Vec<Ipv4Addr>,
}

/// `name` as a numeric IPv4 address, in any form `inet_aton` takes
/// (`10.1`, `0x0a000001`).
pub(crate) fn numeric(name: &str) -> Option<Ipv4Addr> {
    let c = std::ffi::CString::new(name).ok()?;
    let mut a = libc::in_addr { s_addr: 0 };
    (unsafe { inet_aton(c.as_ptr(), &mut a) } != 0).then(|| Ipv4Addr::from(u32::from_be(a.s_addr)))
}

/// The name of `addr`: `/etc/hosts`'s, else DNS's (a `PTR` question).
pub(crate) fn reverse(addr: Ipv4Addr) -> Result<String, Failure> {
    if let Some(name) = files::hosts_reverse(&std::fs::read_to_string(HOSTS).unwrap_or_default(), addr) {
        return Ok(name);
    }
    let (sock, conf) = resolver()?;
    ask(&sock, &conf, &dns::ptr_name(addr), Ask::Ptr).map(|f| f.canonical)
}

/// `name`'s IPv4 addresses: numeric, then `/etc/hosts`, then DNS.
pub(crate) fn lookup(name: &str) -> Result<Found, Failure> {
    if let Some(a) = numeric(name) {
        return Ok(Found { canonical: name.to_string(), addrs: vec![a] });
    }
    if let Some((canonical, addrs)) = files::hosts_lookup(&std::fs::read_to_string(HOSTS).unwrap_or_default(), name) {
        return Ok(Found { canonical, addrs });
    }
    if name.eq_ignore_ascii_case("localhost") {
        return Ok(Found { canonical: "localhost".into(), addrs: vec![Ipv4Addr::LOCALHOST] });
    }
    let (sock, conf) = resolver()?;
    let mut again = false;
    for candidate in files::candidates(name, &conf) {
        match ask(&sock, &conf, &candidate, Ask::A) {
            Ok(found) => return Ok(found),
            Err(Failure::Again) => again = true,
            Err(_) => {}
        }
    }
    Err(if again { Failure::Again } else { Failure::NoName })
}

/// The servers to ask (`NAGARE_DNS`'s, else `/etc/resolv.conf`'s, else
/// the local one, as glibc) and a UDP socket through netd to ask them.
fn resolver() -> Result<(UdpSocket, ResolvConf), Failure> {
    let mut conf = files::resolv_conf(&std::fs::read_to_string(RESOLV_CONF).unwrap_or_default());
    let named = std::env::var(DNS_ENV)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse::<Ipv4Addr>().ok()).collect::<Vec<_>>());
    if let Some(servers) = named.filter(|s| !s.is_empty()) {
        conf.servers = servers;
    }
    if conf.servers.is_empty() {
        conf.servers.push(Ipv4Addr::LOCALHOST);
    }
    let netd = session().map_err(|_| Failure::Fail)?;
    let sock = UdpSocket::bind_via(&netd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(|_| Failure::Fail)?;
    Ok((sock, conf))
}

/// One question asked of each server in turn, `attempts` rounds, each
/// waiting `timeout` for an answer to it from that server.
fn ask(sock: &UdpSocket, conf: &ResolvConf, name: &str, what: Ask) -> Result<Found, Failure> {
    let mut buf = vec![0u8; ANSWER_MAX];
    for _ in 0..conf.attempts {
        for &server in &conf.servers {
            let mut id = [0u8; 2];
            let _ = getrandom::fill(&mut id);
            let id = u16::from_ne_bytes(id);
            let q = dns::query(name, id, what).ok_or(Failure::NoName)?;
            let to = SocketAddrV4::new(server, 53);
            if sock.send_to(&q, to).is_err() {
                continue;
            }
            let deadline = Instant::now() + conf.timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
                    break;
                }
                let Ok((n, from)) = sock.recv_from(&mut buf) else { break };
                if from != SocketAddr::V4(to) {
                    continue;
                }
                match dns::answer(&buf[..n], id, name, what) {
                    Some(Answer::Found(canonical, addrs)) => return Ok(Found { canonical, addrs }),
                    Some(Answer::NoName) => return Err(Failure::NoName),
                    Some(Answer::ServerFailed) => break,
                    None => {}
                }
            }
        }
    }
    Err(Failure::Again)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_forms_are_inet_aton_s() {
        assert_eq!(numeric("10.1.2.3"), Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(numeric("10.1"), Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(numeric("example.com"), None);
        assert_eq!(numeric("10.1\0.2"), None);
    }
}
