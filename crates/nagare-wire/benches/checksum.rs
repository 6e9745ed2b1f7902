//! Internet checksum throughput: the wide accumulator against a naive
//! byte-pair loop, at minimum, Ethernet, jumbo and maximum IP sizes.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nagare_wire::{checksum, Checksum};

/// The textbook RFC 1071 loop: one 16-bit word at a time.
fn naive(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut pairs = data.chunks_exact(2);
    for p in &mut pairs {
        sum += u32::from(u16::from_be_bytes([p[0], p[1]]));
        // Fold as we go so long inputs cannot overflow.
        if sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    if let [last] = pairs.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for size in [64usize, 1500, 9000, 65535] {
        let data: Vec<u8> = (0..size).map(|i| (i * 131 + 7) as u8).collect();
        assert_eq!(checksum(&data), naive(&data));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("nagare", size), &data, |b, d| b.iter(|| checksum(black_box(d))));
        group.bench_with_input(BenchmarkId::new("naive", size), &data, |b, d| b.iter(|| naive(black_box(d))));
        // Misaligned start and odd pieces: the buffer-chain path.
        group.bench_with_input(BenchmarkId::new("nagare_3_pieces_odd", size), &data, |b, d| {
            b.iter(|| {
                let d = black_box(d);
                let (a, rest) = d.split_at((d.len() / 3) | 1);
                let (m, z) = rest.split_at((rest.len() / 2) | 1);
                let mut c = Checksum::new();
                c.add_bytes(a);
                c.add_bytes(m);
                c.add_bytes(z);
                c.finish()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
