//! `nagare vni create|info|destroy|bridge`: VNI segments, and a bridge
//! from one to a TAP device.

use anyhow::{Context, Result};
use nagare_dev::vni::layout::{STATE_ATTACHED, STATE_CLAIMING, STATE_FREE};
use nagare_dev::vni::{default_slots, format_mac, format_size, segment_path, segment_size, Segment, VniPort};
use nagare_dev::{Device, DeviceStats, MonotonicClock, TapDevice};
use nagare_host::bridge::{pool_for, Bridge, Direction};
use nagare_host::realtime;
use std::sync::Arc;

/// Creates segment `name`: `ports` ports, IP MTU `mtu`, `slots` slots per
/// ring (the default for the MTU if `None`); prints its shape.
pub fn create(name: &str, ports: usize, mtu: usize, slots: Option<usize>) -> Result<()> {
    let seg = Segment::create(name, ports, mtu, slots.unwrap_or_else(|| default_slots(mtu)))?;
    let geo = seg.geometry();
    println!(
        "nagare vni: created {} ({} ports, MTU {}, {} slots of {} B per ring, {} rings, {})",
        segment_path(name)?.display(),
        geo.ports,
        geo.mtu,
        geo.slot_count,
        geo.slot_size,
        geo.ring_count(),
        format_size(geo.total)
    );
    Ok(())
}

/// Removes segment `name` (processes attached keep their mapping).
pub fn destroy(name: &str) -> Result<()> {
    nagare_dev::vni::destroy(name)?;
    println!("nagare vni: destroyed {name}");
    Ok(())
}

/// Prints segment `name`: its shape, memory, and who is attached.
pub fn info(name: &str) -> Result<()> {
    let seg = Segment::open(name)?;
    let geo = *seg.geometry();
    println!("segment  {}", segment_path(name)?.display());
    println!("ports    {}", geo.ports);
    println!("mtu      {} (slots of {} B, {} per ring)", geo.mtu, geo.slot_size, geo.slot_count);
    println!("rings    {} (one per ordered pair of ports)", geo.ring_count());
    println!("memory   {} ({} B)", format_size(geo.total), geo.total);
    let growth: Vec<String> = [2, 4, 8, 16, 32]
        .iter()
        .filter_map(|&n| segment_size(n, geo.mtu, geo.slot_count).ok().map(|s| format!("{n} ports {}", format_size(s))))
        .collect();
    println!("growth   {} (O(n^2))", growth.join(", "));
    let mut attached = 0;
    println!("port  state      pid       gen  mac                polling  backlog-in");
    for i in 0..geo.ports {
        let Some(p) = seg.port_info(i) else { continue };
        let state = match p.state {
            STATE_FREE => "free",
            STATE_CLAIMING => "claiming",
            STATE_ATTACHED if p.is_live() => {
                attached += 1;
                "attached"
            }
            STATE_ATTACHED => "dead",
            _ => "garbage",
        };
        let backlog: u64 =
            (0..geo.ports).filter(|&j| j != i).filter_map(|j| seg.ring_backlog(j, i)).map(u64::from).sum();
        if p.state == STATE_FREE {
            println!("{i:<5} {state:<10} {:<9} {:<4} {:<18} {:<8} {backlog}", "-", p.generation, "-", "-");
        } else {
            println!(
                "{i:<5} {state:<10} {:<9} {:<4} {:<18} {:<8} {backlog}",
                p.pid,
                p.generation,
                format_mac(p.mac),
                if p.polling { "yes" } else { "no" }
            );
        }
    }
    println!("attached {attached} of {}", geo.ports);
    Ok(())
}

fn print_direction(name: &str, d: &Direction) {
    println!(
        "  {name:<12} received {} forwarded {} ({} B) filtered {} bad {} completed {} uncompletable {} no_buffer {}",
        d.received, d.forwarded, d.bytes, d.filtered, d.bad, d.completed, d.uncompletable, d.no_buffer
    );
}

fn print_device(name: &str, s: &DeviceStats) {
    println!(
        "  {name:<12} rx {} ({} B) tx {} ({} B) rx_no_buffer {} rx_oversize {} rx_errors {} tx_dropped {} tx_errors {}",
        s.rx_frames,
        s.rx_bytes,
        s.tx_frames,
        s.tx_bytes,
        s.rx_dropped_no_buffer,
        s.rx_dropped_oversize,
        s.rx_errors,
        s.tx_dropped,
        s.tx_errors
    );
}

/// Bridges segment `name` to TAP device `tap` until SIGINT or SIGTERM,
/// then prints what crossed.
pub fn bridge(name: &str, tap_name: &str, mac: Option<[u8; 6]>) -> Result<()> {
    let stop = realtime::stop_flag()?;
    let seg = Arc::new(Segment::open(name).with_context(|| format!("opening VNI {name}"))?);
    let mtu = seg.geometry().mtu;
    let mut tap = TapDevice::open_with(tap_name, false).with_context(|| format!("opening TAP device {tap_name}"))?;
    if tap.capabilities().mtu != mtu {
        if let Err(e) = tap.set_mtu(mtu) {
            log::warn!(
                "{} has MTU {} and VNI {} has {mtu}; setting it failed: {e}",
                tap_name,
                tap.capabilities().mtu,
                name
            );
        }
    }
    let mut port = VniPort::attach(seg, mac).with_context(|| format!("attaching to VNI {}", name))?;
    let pool = pool_for(mtu);
    let clock = MonotonicClock::new();
    let mut bridge = Bridge::default();
    println!(
        "nagare vni bridge: VNI {} port {} (mac {}) <-> TAP {} ({} it, MTU {}); Ctrl-C stops",
        name,
        port.index(),
        format_mac(port.mac()),
        tap_name,
        if tap.created() { "created" } else { "attached to" },
        tap.capabilities().mtu
    );
    let result = bridge.run(&mut tap, &mut port, &pool, &clock, &stop);
    println!("nagare vni bridge: stopping");
    print_direction("tap -> vni", &bridge.tap_to_vni);
    print_direction("vni -> tap", &bridge.vni_to_tap);
    println!(
        "  mac table    {} stations (learned {}, moved {}, aged {}, evicted {})",
        bridge.table.len(),
        bridge.table.stats.learned,
        bridge.table.stats.moved,
        bridge.table.stats.aged,
        bridge.table.stats.evicted
    );
    for (mac, side) in bridge.table.stations().iter().take(16) {
        println!("    {} {:?}", format_mac(*mac), side);
    }
    print_device("tap", &tap.stats());
    print_device("vni port", &port.stats());
    println!("  {:?}", port.vni_stats());
    if bridge.device_errors > 0 {
        println!("  device_errors {}", bridge.device_errors);
    }
    Ok(result?)
}
