//! IPv6 reassembly (RFC 8200 4.5) over the table IPv4 uses too
//! (`crate::reassembly`), with its bounds: an overlap discards the whole
//! datagram (RFC 5722), one that would end past 65535 bytes discards it
//! too, and every partial datagram is bounded in time, in fragments and in
//! the memory its buffers pin, one source holding at most a quarter of
//! the table.
//!
//! Datagrams are keyed by source, destination and identification. What
//! comes back whole is the fragmentable part, under a header made from
//! the first fragment's (its hop limit, traffic class and flow label, and
//! its fragment header's Next Header): the unfragmentable part's
//! extension headers were walked in each fragment and are not kept.
//!
//! A first fragment must hold the whole header chain up to and including
//! the upper-layer header (RFC 7112); [`holds_header_chain`] is the check.

use crate::buf::PacketBuf;
use crate::config::ReassemblyConfig;
use crate::reassembly::{FragmentIn, FragmentKey, FragmentTable, Verdict};
use crate::time::Instant;
use alloc::vec::Vec;
use core::net::Ipv6Addr;
use nagare_wire::{
    IpProtocol, Ipv6ExtChain, Ipv6ExtError, Ipv6FragmentRepr, Ipv6Repr, ICMPV6_HEADER_LEN, IPV6_EXT_HEADER_MAX_LEN,
    IPV6_EXT_MAX_LEN, IPV6_FRAGMENT_HEADER_LEN, IPV6_MAX_PAYLOAD_LEN,
};

pub use crate::reassembly::DropReason;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    ident: u32,
}

impl FragmentKey for Key {
    type Source = Ipv6Addr;
    fn source(&self) -> Ipv6Addr {
        self.src
    }
}

/// What became of a fragment.
#[derive(Debug)]
pub enum Outcome {
    /// The datagram is whole: its header (Next Header and payload length
    /// those of the fragmentable part) and the fragmentable part.
    Complete(Ipv6Repr, PacketBuf),
    /// Held until the rest arrives.
    Held,
    /// Dropped, and why.
    Dropped(DropReason),
}

/// The first fragment of a datagram that timed out: its IPv6 header (Next
/// Header: fragment), its fragment header and its data, what an ICMPv6
/// Time Exceeded quotes (RFC 8200 4.5).
#[derive(Debug)]
pub struct TimedOut {
    /// The fragment's IPv6 header.
    pub header: Ipv6Repr,
    /// Its fragment header.
    pub fragment: Ipv6FragmentRepr,
    /// Its data.
    pub data: PacketBuf,
}

/// Partial IPv6 datagrams waiting for their fragments.
#[derive(Debug)]
pub struct Reassembler {
    /// Beside each datagram, the header of its first fragment with the
    /// fragment header's Next Header.
    table: FragmentTable<Key, Ipv6Repr>,
}

impl Reassembler {
    /// An empty reassembler with the given limits.
    pub fn new(config: ReassemblyConfig) -> Self {
        Reassembler { table: FragmentTable::new(config, IPV6_MAX_PAYLOAD_LEN) }
    }

    /// Partial datagrams discarded to make room since the last call.
    pub fn take_evictions(&mut self) -> usize {
        self.table.take_evictions()
    }

    /// Partial datagrams held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Bytes of buffer pinned by held fragments.
    pub fn footprint_bytes(&self) -> usize {
        self.table.footprint_bytes()
    }

    /// Takes one fragment: `repr` its IPv6 header, `fragment` its fragment
    /// header, `data` what follows the fragment header.
    pub fn input(&mut self, repr: &Ipv6Repr, fragment: &Ipv6FragmentRepr, data: PacketBuf, now: Instant) -> Outcome {
        let key = Key { src: repr.src_addr, dst: repr.dst_addr, ident: fragment.ident };
        let meta = Ipv6Repr { next_header: fragment.next_header, payload_len: 0, ..*repr };
        let piece = FragmentIn { offset: usize::from(fragment.frag_offset), more: fragment.more_frags, meta };
        match self.table.input(key, piece, data, now) {
            Verdict::Complete(meta, payload) => {
                Outcome::Complete(Ipv6Repr { payload_len: payload.len(), ..meta }, payload)
            }
            Verdict::Held => Outcome::Held,
            Verdict::Dropped(reason) => Outcome::Dropped(reason),
        }
    }

    /// Discards partial datagrams whose time ran out. Returns how many, and
    /// the first fragments of those whose first fragment had arrived.
    pub fn poll(&mut self, now: Instant) -> (usize, Vec<TimedOut>) {
        let (expired, firsts) = self.table.poll(now);
        let firsts = firsts
            .into_iter()
            .map(|(key, meta, data)| TimedOut {
                header: Ipv6Repr {
                    next_header: IpProtocol::Ipv6Frag,
                    payload_len: IPV6_FRAGMENT_HEADER_LEN + data.len(),
                    ..meta
                },
                fragment: Ipv6FragmentRepr {
                    next_header: meta.next_header,
                    frag_offset: 0,
                    more_frags: true,
                    ident: key.ident,
                },
                data,
            })
            .collect();
        (expired, firsts)
    }

    /// When the earliest partial datagram times out.
    pub fn poll_at(&self) -> Option<Instant> {
        self.table.poll_at()
    }
}

/// Bytes of the upper-layer header a first fragment must hold: ICMPv6's
/// and UDP's 8, TCP's 20 without options; none for others.
fn upper_header_len(upper: IpProtocol) -> usize {
    match upper {
        IpProtocol::Icmpv6 | IpProtocol::Udp => ICMPV6_HEADER_LEN,
        IpProtocol::Tcp => 20,
        _ => 0,
    }
}

/// Extension header bytes looked at in a first fragment: as far as the
/// walk goes, and one whole header more.
const CHAIN_LEN: usize = IPV6_EXT_MAX_LEN + IPV6_EXT_HEADER_MAX_LEN;

/// Whether `data`, what follows the fragment header of a first fragment
/// whose Next Header is `next_header`, holds the extension headers after
/// it and the upper-layer header whole (RFC 7112 5). A chain the walk
/// refuses for another reason passes here: reassembly's own walk of the
/// whole datagram refuses it.
pub fn holds_header_chain(next_header: IpProtocol, data: &PacketBuf) -> bool {
    let check = |bytes: &[u8]| match Ipv6ExtChain::walk(next_header, bytes) {
        Ok(chain) => chain.offset + upper_header_len(chain.upper) <= data.len(),
        Err(Ipv6ExtError::Truncated) => false,
        Err(_) => true,
    };
    let len = data.len().min(CHAIN_LEN);
    match data.contiguous_prefix(len) {
        Some(bytes) => check(bytes),
        None => {
            let mut scratch = [0u8; CHAIN_LEN];
            let out = scratch.get_mut(..len).unwrap_or(&mut []);
            let n = data.copy_out(0, out);
            check(out.get(..n).unwrap_or(&[]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferPool;
    use core::time::Duration;

    const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

    fn config() -> ReassemblyConfig {
        ReassemblyConfig { timeout: Duration::from_secs(60), ..ReassemblyConfig::default() }
    }

    fn ip(src: Ipv6Addr) -> Ipv6Repr {
        Ipv6Repr::new(src, DST, IpProtocol::Ipv6Frag, 0, 64)
    }

    fn frag(offset: usize, more: bool, ident: u32) -> Ipv6FragmentRepr {
        Ipv6FragmentRepr { next_header: IpProtocol::Icmpv6, frag_offset: offset as u16, more_frags: more, ident }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    fn feed(r: &mut Reassembler, pool: &BufferPool, whole: &[u8], offset: usize, len: usize, more: bool) -> Outcome {
        let p = PacketBuf::from_slice(pool, 0, &whole[offset..offset + len]).unwrap();
        r.input(&ip(SRC), &frag(offset, more, 9), p, Instant::ZERO)
    }

    #[test]
    fn reassembles_in_any_order_under_the_first_fragments_header() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(5000);
        let mut r = Reassembler::new(config());
        assert!(matches!(feed(&mut r, &pool, &whole, 4416, 584, false), Outcome::Held));
        assert!(matches!(feed(&mut r, &pool, &whole, 1448, 1448, true), Outcome::Held));
        assert!(matches!(feed(&mut r, &pool, &whole, 0, 1448, true), Outcome::Held));
        match feed(&mut r, &pool, &whole, 2896, 1520, true) {
            Outcome::Complete(header, payload) => {
                assert_eq!(payload.to_vec(), whole);
                assert_eq!((header.payload_len, header.next_header), (5000, IpProtocol::Icmpv6));
                assert_eq!((header.src_addr, header.dst_addr), (SRC, DST));
            }
            other => panic!("not complete: {other:?}"),
        }
        assert!(r.is_empty());
        assert_eq!(r.footprint_bytes(), 0);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn an_overlap_discards_the_datagram() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(3000);
        let mut r = Reassembler::new(config());
        feed(&mut r, &pool, &whole, 0, 1448, true);
        assert!(matches!(feed(&mut r, &pool, &whole, 1440, 1560, false), Outcome::Dropped(DropReason::Overlap)));
        assert!(r.is_empty());
        assert_eq!(pool.in_use(), 0);
        // What would have completed it starts a datagram of its own.
        assert!(matches!(feed(&mut r, &pool, &whole, 1448, 1552, false), Outcome::Held));
    }

    #[test]
    fn past_65535_bytes_is_refused() {
        let pool = BufferPool::new(2048, 64);
        let mut r = Reassembler::new(config());
        let p = PacketBuf::from_slice(&pool, 0, &[0u8; 16]).unwrap();
        let out = r.input(&ip(SRC), &frag(65528, false, 1), p, Instant::ZERO);
        assert!(matches!(out, Outcome::Dropped(DropReason::Oversize)));
    }

    #[test]
    fn times_out_after_sixty_seconds_with_the_first_fragment_to_quote() {
        let pool = BufferPool::new(2048, 64);
        let whole = data(3000);
        let mut r = Reassembler::new(config());
        feed(&mut r, &pool, &whole, 0, 1448, true);
        assert_eq!(r.poll_at(), Some(Instant::from_secs(60)));
        assert_eq!(r.poll(Instant::from_secs(59)).0, 0);
        let (expired, firsts) = r.poll(Instant::from_secs(60));
        assert_eq!((expired, firsts.len()), (1, 1));
        let first = &firsts[0];
        assert_eq!((first.header.next_header, first.header.payload_len), (IpProtocol::Ipv6Frag, 1456));
        assert_eq!(first.fragment, frag(0, true, 9));
        assert_eq!(first.data.to_vec(), whole[..1448]);
        drop(firsts);
        assert_eq!(pool.in_use(), 0);
        // A datagram whose first fragment never came is dropped silently.
        feed(&mut r, &pool, &whole, 1448, 1552, false);
        let (expired, firsts) = r.poll(Instant::from_secs(120));
        assert_eq!((expired, firsts.len()), (1, 0));
    }

    #[test]
    fn one_source_holds_a_quarter_of_the_datagrams() {
        let pool = BufferPool::new(64, 2048);
        let mut r = Reassembler::new(config());
        let flooder = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 6);
        for ident in 0..1000u32 {
            let p = PacketBuf::from_slice(&pool, 0, &[0u8; 8]).unwrap();
            r.input(&ip(flooder), &frag(0, true, ident), p, Instant::from_millis(u64::from(ident)));
        }
        assert_eq!(r.len(), 64);
        assert_eq!(r.take_evictions(), 1000 - 64);
        let whole = data(2000);
        feed(&mut r, &pool, &whole, 0, 1448, true);
        assert!(matches!(feed(&mut r, &pool, &whole, 1448, 552, false), Outcome::Complete(..)));
    }

    #[test]
    fn the_memory_cap_holds() {
        let pool = BufferPool::new(2048, 64);
        let mut r = Reassembler::new(ReassemblyConfig { max_bytes: 5000, ..config() });
        let whole = data(8000);
        feed(&mut r, &pool, &whole, 0, 1448, true);
        feed(&mut r, &pool, &whole, 1448, 1448, true);
        assert!(matches!(feed(&mut r, &pool, &whole, 2896, 1448, true), Outcome::Dropped(DropReason::Memory)));
        assert!(r.footprint_bytes() <= 5000);
    }

    #[test]
    fn a_first_fragment_must_hold_the_header_chain() {
        let pool = BufferPool::new(2048, 64);
        let buf = |bytes: &[u8]| PacketBuf::from_slice(&pool, 0, bytes).unwrap();
        assert!(holds_header_chain(IpProtocol::Icmpv6, &buf(&[128, 0, 0, 0, 0, 1, 0, 1])));
        assert!(!holds_header_chain(IpProtocol::Icmpv6, &buf(&[128, 0, 0, 0])));
        assert!(!holds_header_chain(IpProtocol::Tcp, &buf(&[0; 16])));
        // Destination options cut short, and whole with nothing after.
        assert!(!holds_header_chain(IpProtocol::Ipv6Opts, &buf(&[58, 1, 1, 4, 0, 0, 0, 0])));
        let opts = [58, 0, 1, 4, 0, 0, 0, 0];
        assert!(!holds_header_chain(IpProtocol::Ipv6Opts, &buf(&opts)));
        let with_echo: Vec<u8> = opts.iter().chain(&[128, 0, 0, 0, 0, 1, 0, 1]).copied().collect();
        assert!(holds_header_chain(IpProtocol::Ipv6Opts, &buf(&with_echo)));
        // Spread over buffers, the chain is copied out and read the same.
        let mut spread = buf(&with_echo[..5]);
        spread.append(buf(&with_echo[5..]));
        assert!(holds_header_chain(IpProtocol::Ipv6Opts, &spread));
        assert!(holds_header_chain(IpProtocol::Ipv6NoNxt, &buf(&[])));
    }
}
