//! A capture written by `PcapDevice` parses back (with a small reader
//! here) and, when tshark is installed, decodes without malformed packets
//! or bad checksums.

use std::collections::VecDeque;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nagare_core::buf::{BufferPool, PacketBuf};
use nagare_core::Instant;
use nagare_dev::{Device, Loopback, PcapDevice, PcapWriter, LINKTYPE_ETHERNET, PCAP_MAGIC, PCAP_SNAPLEN};

const EPOCH: u64 = 1_700_000_000_000_000; // 2023-11-14, in microseconds
const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for pair in data.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ethernet(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut h = dst.to_vec();
    h.extend_from_slice(&MAC_A);
    h.extend_from_slice(&ethertype.to_be_bytes());
    h
}

fn ipv4_header(protocol: u8, payload_len: usize) -> Vec<u8> {
    let total = (20 + payload_len) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, protocol, 0, 0]);
    h.extend_from_slice(&[10, 213, 0, 1, 10, 213, 0, 2]);
    let c = internet_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// Ethernet + IPv4 + UDP with correct checksums, as a chain of three slices.
fn udp_frame(pool: &BufferPool, payload: &[u8]) -> PacketBuf {
    let udp_len = (8 + payload.len()) as u16;
    let mut udp = Vec::new();
    udp.extend_from_slice(&4000u16.to_be_bytes());
    udp.extend_from_slice(&5000u16.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    let mut pseudo = vec![10, 213, 0, 1, 10, 213, 0, 2, 0, 17];
    pseudo.extend_from_slice(&udp_len.to_be_bytes());
    pseudo.extend_from_slice(&udp);
    pseudo.extend_from_slice(payload);
    let c = internet_checksum(&pseudo);
    udp[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    let mut headers = ethernet(MAC_B, 0x0800);
    headers.extend_from_slice(&ipv4_header(17, udp.len() + payload.len()));
    let mut frame = PacketBuf::from_slice(pool, 0, &headers).unwrap();
    frame.append(PacketBuf::from_slice(pool, 0, &udp).unwrap());
    frame.append(PacketBuf::from_slice(pool, 0, payload).unwrap());
    frame
}

/// An ICMP echo request, in one slice.
fn ping_frame(pool: &BufferPool, seq: u16) -> PacketBuf {
    let mut icmp = vec![8, 0, 0, 0, 0x4e, 0x47];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(b"nagare ping payload");
    let c = internet_checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut bytes = ethernet(MAC_B, 0x0800);
    bytes.extend_from_slice(&ipv4_header(1, icmp.len()));
    bytes.extend_from_slice(&icmp);
    PacketBuf::from_slice(pool, 0, &bytes).unwrap()
}

fn arp_frame(pool: &BufferPool) -> PacketBuf {
    let mut bytes = ethernet([0xff; 6], 0x0806);
    bytes.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    bytes.extend_from_slice(&MAC_A);
    bytes.extend_from_slice(&[10, 213, 0, 1]);
    bytes.extend_from_slice(&[0; 6]);
    bytes.extend_from_slice(&[10, 213, 0, 2]);
    PacketBuf::from_slice(pool, 0, &bytes).unwrap()
}

struct Record {
    ts_sec: u32,
    ts_usec: u32,
    orig_len: u32,
    data: Vec<u8>,
}

/// A tiny reader for little-endian classic pcap.
fn read_pcap(bytes: &[u8]) -> (Vec<u32>, Vec<Record>) {
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u16_at = |b: &[u8], at: usize| u32::from(u16::from_le_bytes(b[at..at + 2].try_into().unwrap()));
    assert!(bytes.len() >= 24, "file header");
    let header = vec![
        u32_at(bytes, 0),
        u16_at(bytes, 4),
        u16_at(bytes, 6),
        u32_at(bytes, 8),
        u32_at(bytes, 12),
        u32_at(bytes, 16),
        u32_at(bytes, 20),
    ];
    let mut records = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        assert!(at + 16 <= bytes.len(), "truncated record header");
        let incl = u32_at(bytes, at + 8) as usize;
        assert!(at + 16 + incl <= bytes.len(), "truncated record data");
        records.push(Record {
            ts_sec: u32_at(bytes, at),
            ts_usec: u32_at(bytes, at + 4),
            orig_len: u32_at(bytes, at + 12),
            data: bytes[at + 16..at + 16 + incl].to_vec(),
        });
        at += 16 + incl;
    }
    (header, records)
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn capture_parses_back_and_tshark_finds_nothing_malformed() {
    let pool = BufferPool::new(2048, 64);
    let path = TempFile(std::env::temp_dir().join(format!("nagare-dev-pcap-{}.pcap", std::process::id())));
    let file = std::fs::File::create(&path.0).unwrap();
    let writer = PcapWriter::new(BufWriter::new(file), EPOCH).unwrap();
    let mut dev = PcapDevice::new(Loopback::default(), writer);

    let frames = vec![arp_frame(&pool), udp_frame(&pool, b"hello over a chain of slices"), ping_frame(&pool, 1)];
    let sent: Vec<Vec<u8>> = frames.iter().map(PacketBuf::to_vec).collect();
    let t_tx = Instant::from_secs(3) + Duration::from_micros(250);
    let t_rx = t_tx + Duration::from_micros(1_000_001);
    let mut q: VecDeque<PacketBuf> = frames.into();
    assert_eq!(dev.transmit_batch(&mut q, t_tx).unwrap(), 3);
    let mut out = Vec::new();
    assert_eq!(dev.receive_batch(&pool, &mut out, 16, t_rx).unwrap(), 3);
    assert!(dev.capture_error().is_none());
    let (_, writer) = dev.into_parts();
    let mut file = writer.into_inner();
    std::io::Write::flush(&mut file).unwrap();
    drop(file);
    drop(out);
    assert_eq!(pool.in_use(), 0);

    let bytes = std::fs::read(&path.0).unwrap();
    let (header, records) = read_pcap(&bytes);
    assert_eq!(header, [PCAP_MAGIC, 2, 4, 0, 0, PCAP_SNAPLEN, LINKTYPE_ETHERNET]);
    assert_eq!(records.len(), 6, "three transmitted and three received");
    for (i, r) in records.iter().enumerate() {
        let (t, expected) = if i < 3 { (t_tx, &sent[i]) } else { (t_rx, &sent[i - 3]) };
        let micros = EPOCH + t.total_micros();
        assert_eq!(r.ts_sec as u64, micros / 1_000_000, "record {i}");
        assert_eq!(r.ts_usec as u64, micros % 1_000_000, "record {i}");
        assert_eq!(r.orig_len as usize, expected.len());
        assert_eq!(&r.data, expected, "record {i} bytes");
    }

    let have_tshark =
        Command::new("sh").args(["-c", "command -v tshark"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !have_tshark {
        // Straight to the terminal: the test harness captures eprintln!, and a
        // skip must be seen even when the test passes.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("\n******** SKIPPED tshark check: tshark not installed ********\n\n"),
        );
        return;
    }
    let file = path.0.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("tshark").args(args).output().expect("run tshark");
        assert!(out.status.success(), "tshark {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let protocols = run(&["-r", file, "-T", "fields", "-e", "frame.protocols"]);
    let lines: Vec<&str> = protocols.lines().collect();
    assert_eq!(lines.len(), 6, "tshark sees six frames: {protocols}");
    for (i, expected) in
        ["eth:ethertype:arp", "eth:ethertype:ip:udp:data", "eth:ethertype:ip:icmp:data"].iter().enumerate()
    {
        assert_eq!(lines[i], *expected);
        assert_eq!(lines[i + 3], *expected);
    }
    let problems = run(&[
        "-r",
        file,
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-Y",
        "_ws.malformed || _ws.expert.severity >= warning || ip.checksum.status == 0 || udp.checksum.status == 0 || icmp.checksum.status == 0",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert!(problems.trim().is_empty(), "tshark flags frames {problems:?}");
    let years = run(&["-r", file, "-T", "fields", "-e", "frame.time_epoch"]);
    let first: f64 = years.lines().next().unwrap().trim().parse().unwrap();
    assert!((first - (EPOCH + t_tx.total_micros()) as f64 / 1e6).abs() < 1e-3, "{first}");
}
