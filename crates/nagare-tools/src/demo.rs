//! `nagare demo`: two instances on a simulated link in one process.
//!
//! ARP, ping both ways (small and fragmented), UDP echo of datagrams from
//! 64 bytes to 60 KB (fragmented both ways), then a UDP stream measured on
//! the wall clock. Everything runs in virtual time except that stream, so
//! the protocol figures are the same on every run and every machine.

use anyhow::{bail, ensure, Context, Result};
use nagare_core::Instant;
use nagare_dev::{Device, LinkConfig, PcapDevice, PcapWriter, SimPort};
use nagare_host::sim::{host_config, new_host, sim_ports, udp_stream};
use nagare_host::{Host, SimPair};
use std::fs::File;
use std::io::BufWriter;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ECHO_PORT: u16 = 7;

pub struct DemoArgs {
    pub pcap: Option<PathBuf>,
    pub seed: u64,
    pub stream_datagrams: usize,
}

type Capture = PcapDevice<SimPort, BufWriter<File>>;

pub fn run(args: DemoArgs) -> Result<()> {
    let link =
        LinkConfig { latency: Duration::from_micros(50), bandwidth_bps: Some(10_000_000_000), ..LinkConfig::default() };
    let (port_a, port_b) = sim_ports(link, args.seed);
    let a_config = host_config(0x0a, "10.0.0.1/24".parse()?, args.seed ^ 0xa);
    let b_config = host_config(0x0b, "10.0.0.2/24".parse()?, args.seed ^ 0xb);
    let device_a: Box<dyn Device> = match &args.pcap {
        Some(path) => {
            let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
            // Virtual time starts at the origin; date the capture now.
            let epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros() as u64)
                .unwrap_or(0);
            let capture: Capture = PcapDevice::new(port_a, PcapWriter::new(BufWriter::new(file), epoch)?);
            Box::new(capture)
        }
        None => Box::new(port_a),
    };
    let mut pair = SimPair::new(new_host(a_config, device_a), new_host(b_config, port_b));
    pair.b.services.enable_udp_echo(&mut pair.b.iface).map_err(anyhow::Error::msg)?;
    pair.a.services.enable_udp_echo(&mut pair.a.iface).map_err(anyhow::Error::msg)?;

    println!("nagare demo: host A 10.0.0.1/24 and host B 10.0.0.2/24 on a simulated link");
    println!("             (50 us latency, 10 Gbit/s, MTU 1500, virtual time)\n");

    let mut rows: Vec<(String, String)> = Vec::new();

    let small_ab = ping(&mut pair, Side::A, B_ADDR, 56, 4)?;
    rows.push(("ping A -> B, 56 bytes x4".into(), rtt_summary(&small_ab)));
    let small_ba = ping(&mut pair, Side::B, A_ADDR, 56, 4)?;
    rows.push(("ping B -> A, 56 bytes x4".into(), rtt_summary(&small_ba)));
    let big = ping(&mut pair, Side::A, B_ADDR, 5000, 3)?;
    rows.push(("ping A -> B, 5000 bytes x3 (fragmented)".into(), rtt_summary(&big)));

    let sizes = [64usize, 1472, 1473, 4000, 9000, 30000, 60000];
    let mut echoed_bytes = 0usize;
    for size in sizes {
        echoed_bytes += udp_echo(&mut pair, size)?;
    }
    rows.push((
        format!("UDP echo A -> B:7, sizes {sizes:?}"),
        format!("{} datagrams, {echoed_bytes} bytes, byte-exact", sizes.len()),
    ));

    let stream = udp_stream(&mut pair, B_ADDR, args.stream_datagrams, 1472)?;
    let (gbps, datagrams) = (stream.gbps(), stream.received);
    rows.push((
        format!("UDP stream A -> B, {datagrams} x 1472 bytes"),
        format!("{gbps:.2} Gbit/s (wall clock, one core, both hosts)"),
    ));

    println!("{:<44} result", "step");
    println!("{}", "-".repeat(96));
    for (step, result) in &rows {
        println!("{step:<44} {result}");
    }
    println!();
    print_counters(&pair.a, &pair.b);
    println!(
        "\nbuffers in use after the run: A {} / B {} (of {} each)",
        pair.a.iface.pool().in_use(),
        pair.b.iface.pool().in_use(),
        pair.a.iface.pool().stats().capacity
    );
    if let Some(path) = &args.pcap {
        drop(pair);
        println!("capture of host A's port written to {}", path.display());
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Side {
    A,
    B,
}

fn ping<A: Device, B: Device>(
    pair: &mut SimPair<A, B>,
    side: Side,
    dst: Ipv4Addr,
    size: usize,
    count: u16,
) -> Result<Vec<Duration>> {
    let ident = 0x4e00 + size as u16;
    let data: Vec<u8> = (0..size).map(|i| (i % 256) as u8).collect();
    let handle = match side {
        Side::A => pair.a.iface.icmp().echo_open(ident),
        Side::B => pair.b.iface.icmp().echo_open(ident),
    }
    .map_err(anyhow::Error::msg)?;
    let mut rtts = Vec::new();
    for seq in 1..=count {
        let sent_at = pair.now;
        let iface = match side {
            Side::A => &mut pair.a.iface,
            Side::B => &mut pair.b.iface,
        };
        iface.icmp().echo_send(handle, dst, seq, &data, sent_at).map_err(anyhow::Error::msg)?;
        let mut reply: Option<Instant> = None;
        let answered = pair.run_until(Duration::from_secs(5), |p| {
            let iface = match side {
                Side::A => &mut p.a.iface,
                Side::B => &mut p.b.iface,
            };
            while let Ok(Some(event)) = iface.icmp().echo_recv(handle) {
                if let nagare_core::icmp::EchoEvent::Reply { seq_no, at, data_len, .. } = event {
                    if seq_no == seq && data_len == size {
                        reply = Some(at);
                    }
                }
            }
            reply.is_some()
        })?;
        ensure!(answered, "no reply to ping {seq} of {size} bytes to {dst}");
        if let Some(at) = reply {
            rtts.push(at - sent_at);
        }
        pair.advance(Duration::from_millis(100))?;
    }
    match side {
        Side::A => pair.a.iface.icmp().echo_close(handle),
        Side::B => pair.b.iface.icmp().echo_close(handle),
    }
    .map_err(anyhow::Error::msg)?;
    Ok(rtts)
}

fn rtt_summary(rtts: &[Duration]) -> String {
    let micros: Vec<f64> = rtts.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    let min = micros.iter().copied().fold(f64::INFINITY, f64::min);
    let max = micros.iter().copied().fold(0.0, f64::max);
    let avg = micros.iter().sum::<f64>() / micros.len().max(1) as f64;
    format!("{} replies, rtt min/avg/max = {min:.1}/{avg:.1}/{max:.1} us (virtual; first includes ARP)", rtts.len())
}

fn udp_echo<A: Device, B: Device>(pair: &mut SimPair<A, B>, size: usize) -> Result<usize> {
    let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    let socket = pair.a.iface.udp().bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(anyhow::Error::msg)?;
    let now = pair.now;
    pair.a.iface.udp().send_to(socket, &data, SocketAddrV4::new(B_ADDR, ECHO_PORT), now).map_err(anyhow::Error::msg)?;
    let mut got: Option<Vec<u8>> = None;
    pair.run_until(Duration::from_secs(5), |p| {
        if let Ok(Some(d)) = p.a.iface.udp().recv(socket) {
            got = Some(d.payload.to_vec());
        }
        got.is_some()
    })?;
    pair.a.iface.udp().close(socket).map_err(anyhow::Error::msg)?;
    match got {
        Some(echo) if echo == data => Ok(size),
        Some(echo) => bail!("UDP echo of {size} bytes came back different ({} bytes)", echo.len()),
        None => bail!("no UDP echo of a {size}-byte datagram"),
    }
}

fn print_counters<A: Device, B: Device>(a: &Host<A>, b: &Host<B>) {
    println!("{:<28} {:>12} {:>12}", "counter", "host A", "host B");
    println!("{}", "-".repeat(54));
    for ((name, va), (_, vb)) in a.iface.counters().iter().zip(b.iface.counters().iter()) {
        if va != 0 || vb != 0 {
            println!("{name:<28} {va:>12} {vb:>12}");
        }
    }
    let (sa, sb) = (a.device.stats(), b.device.stats());
    println!("{:<28} {:>12} {:>12}", "device tx_frames", sa.tx_frames, sb.tx_frames);
    println!("{:<28} {:>12} {:>12}", "device rx_frames", sa.rx_frames, sb.rx_frames);
}
