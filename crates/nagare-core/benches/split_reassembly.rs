//! Table 1 of the Java TCP/IP paper (004): a 5000-byte packet split into
//! three 1500-byte pieces and one 500-byte piece, and the four pieces joined
//! back, with buffer chains (references) beside a single contiguous buffer
//! per packet (copies), measured in the same run. Also the same work as the
//! IPv4 layer really does it: fragmentation with headers, and reassembly.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::config::ReassemblyConfig;
use nagare_core::ipv4::fragment::fragment;
use nagare_core::ipv4::reassembly::{Outcome, Reassembler};
use nagare_core::Instant;
use nagare_wire::{IpProtocol, Ipv4Addr, Ipv4Repr};
use std::hint::black_box;

const PACKET: usize = 5000;
const PIECES: [usize; 4] = [1500, 1500, 1500, 500];

fn data() -> Vec<u8> {
    (0..PACKET).map(|i| (i * 13) as u8).collect()
}

fn split_chain(packet: &PacketBuf) -> [PacketBuf; 4] {
    let mut offset = 0;
    PIECES.map(|len| {
        let piece = packet.slice(offset, len).unwrap_or_default();
        offset += len;
        piece
    })
}

fn split_copy(packet: &[u8]) -> [Vec<u8>; 4] {
    let mut offset = 0;
    PIECES.map(|len| {
        let piece = packet[offset..offset + len].to_vec();
        offset += len;
        piece
    })
}

fn join_chain(pieces: [PacketBuf; 4]) -> PacketBuf {
    let mut whole = PacketBuf::new();
    for piece in pieces {
        whole.append(piece);
    }
    whole
}

fn join_copy(pieces: &[Vec<u8>; 4]) -> Vec<u8> {
    let mut whole = Vec::with_capacity(PACKET);
    for piece in pieces {
        whole.extend_from_slice(piece);
    }
    whole
}

fn table1(c: &mut Criterion) {
    let pool = BufferPool::new(8192, 64);
    let bytes = data();
    let packet = PacketBuf::from_slice(&pool, 128, &bytes).unwrap();
    assert_eq!(join_chain(split_chain(&packet)).to_vec(), bytes);
    assert_eq!(join_copy(&split_copy(&bytes)), bytes);

    let mut group = c.benchmark_group("table1");
    group.bench_function("split/chain", |b| b.iter(|| split_chain(black_box(&packet))));
    group.bench_function("split/copy", |b| b.iter(|| split_copy(black_box(&bytes))));
    let chain_pieces = split_chain(&packet);
    group.bench_function("reassemble/chain", |b| {
        b.iter_batched(|| chain_pieces.clone(), |p| join_chain(black_box(p)), BatchSize::SmallInput)
    });
    let copy_pieces = split_copy(&bytes);
    group.bench_function("reassemble/copy", |b| b.iter(|| join_copy(black_box(&copy_pieces))));
    group.finish();
}

fn ipv4(c: &mut Criterion) {
    let pool = BufferPool::new(2048, 4096);
    let bytes = data();
    let payload = PacketBuf::from_slice(&pool, 128, &bytes).unwrap();
    let repr = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 1),
        dst_addr: Ipv4Addr::new(10, 0, 0, 2),
        protocol: IpProtocol::Udp,
        payload_len: PACKET,
        ttl: 64,
        ident: 1,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        dscp_ecn: 0,
    };
    let mut group = c.benchmark_group("ipv4");
    group.bench_function("fragment_with_headers", |b| {
        b.iter(|| {
            let pieces = fragment(&repr, black_box(&payload), 1500).unwrap_or_default();
            let mut frames = 0;
            for (r, mut p) in pieces {
                if let Ok(h) = p.prepend(&pool, 20) {
                    let _ = r.emit(h);
                    frames += 1;
                }
            }
            frames
        })
    });
    let fragments = fragment(&repr, &payload, 1500).unwrap();
    let mut reassembler = Reassembler::new(ReassemblyConfig::default());
    let mut ident = 0u16;
    group.bench_function("reassemble_fragments", |b| {
        b.iter_batched(
            || fragments.clone(),
            |frags| {
                ident = ident.wrapping_add(1);
                let mut done = None;
                for (mut r, p) in frags {
                    r.ident = ident;
                    if let Outcome::Complete(h, p, _) = reassembler.input(&r, p, Instant::ZERO) {
                        done = Some((h, p));
                    }
                }
                done
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, table1, ipv4);
criterion_main!(benches);
