//! The engine's keys and seed from the operating system's random source
//! (`getrandom(2)` through the `getrandom` crate): the one place where a
//! host on a real network gets them. Each key is a full 128 bits drawn on
//! its own, so the keys of initial sequence numbers and SYN cookies, of the
//! connection table, of stable IPv6 interface identifiers and of IPv6
//! fragment identifications are independent, and nothing in them comes
//! from the clock or the process id, which the network can guess.
//!
//! The interface identifier key alone must outlive the process: RFC 7217
//! addresses are stable only if it is. It is derived from the machine's
//! id (`/etc/machine-id`, a secret 128-bit number made at installation,
//! as systemd-networkd derives its own), through SipHash keyed by that id
//! over a label of nagare's, so the id itself never shows. A machine
//! without one gets a key drawn at each start, and stable addresses that
//! last as long as the process. Simulations and tests use
//! `nagare_core::Secrets::from_seed` instead.

use nagare_core::hash::{siphash, SipKey};
use nagare_core::{InterfaceConfig, Secrets};
use std::io;

fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("reading the operating system's random source: {e}"))
    })?;
    Ok(bytes)
}

/// A 128-bit key from the operating system's random source.
pub fn sip_key() -> io::Result<SipKey> {
    let bytes: [u8; 16] = random_bytes()?;
    let (k0, k1) = bytes.split_at(8);
    let word = |half: &[u8]| half.iter().rev().fold(0u64, |w, &b| (w << 8) | u64::from(b));
    Ok(SipKey(word(k0), word(k1)))
}

/// Independent keys for the engine's keyed hashes; the interface
/// identifier key is the machine's own where it has an id.
pub fn secrets() -> io::Result<Secrets> {
    let stable_iid = match std::fs::read_to_string(MACHINE_ID).ok().and_then(|text| machine_key(&text)) {
        Some(machine) => stable_iid_key(machine),
        None => {
            log::info!("no {MACHINE_ID}: stable IPv6 addresses last as long as this process");
            sip_key()?
        }
    };
    Ok(Secrets { isn: sip_key()?, table: sip_key()?, stable_iid, frag_ident: sip_key()? })
}

/// Where the machine's id is.
const MACHINE_ID: &str = "/etc/machine-id";

/// The 128 bits of a machine id file's text: 32 hexadecimal digits and a
/// line end; anything else (empty, "uninitialized", short) is none.
fn machine_key(text: &str) -> Option<SipKey> {
    let hex = text.trim_end_matches('\n');
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let k0 = u64::from_str_radix(hex.get(..16)?, 16).ok()?;
    let k1 = u64::from_str_radix(hex.get(16..)?, 16).ok()?;
    (k0 | k1 != 0).then_some(SipKey(k0, k1))
}

/// The interface identifier key of a machine whose id is `machine`: two
/// outputs of SipHash keyed by the id, over labels that no other use of
/// the id shares.
fn stable_iid_key(machine: SipKey) -> SipKey {
    SipKey(
        siphash(machine, b"nagare RFC 7217 secret_key, first half"),
        siphash(machine, b"nagare RFC 7217 secret_key, second half"),
    )
}

/// A 64-bit number from the operating system's random source.
pub fn random_u64() -> io::Result<u64> {
    Ok(u64::from_le_bytes(random_bytes()?))
}

/// Gives `config` a seed and secrets from the operating system's random
/// source, in place of the fixed ones `InterfaceConfig::new` starts with.
pub fn randomize(config: &mut InterfaceConfig) -> io::Result<()> {
    config.seed = random_u64()?;
    config.secrets = secrets()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_engines_made_at_once_get_different_keys() {
        // Same process, same microsecond as far as any clock-based seed
        // goes: the keys still differ.
        let (a, b) = (secrets().unwrap(), secrets().unwrap());
        assert_ne!(a, b);
        assert_ne!(a.isn, b.isn);
        assert_ne!(a.table, b.table);
        assert_ne!(a.isn, a.table, "the two keys of one engine are independent");
    }

    #[test]
    fn randomize_replaces_the_fixed_seed_and_secrets() {
        let fixed = InterfaceConfig::new(Default::default(), "10.0.0.1/24".parse().unwrap());
        let mut a = fixed.clone();
        let mut b = fixed.clone();
        randomize(&mut a).unwrap();
        randomize(&mut b).unwrap();
        assert_ne!(a.secrets, fixed.secrets);
        assert_ne!(a.secrets, b.secrets);
        assert_ne!(a.seed, b.seed);
    }

    #[test]
    fn the_interface_identifier_key_is_the_machine_s_and_hides_its_id() {
        let id = "0123456789abcdef0123456789abcdef\n";
        let machine = machine_key(id).unwrap();
        assert_eq!(machine, SipKey(0x0123_4567_89ab_cdef, 0x0123_4567_89ab_cdef));
        let key = stable_iid_key(machine);
        assert_eq!(key, stable_iid_key(machine_key(id).unwrap()), "the same on every start");
        assert_ne!(key, machine);
        assert_ne!(key.0, key.1);
        assert_ne!(key, stable_iid_key(machine_key("fedcba9876543210fedcba9876543210\n").unwrap()));
    }

    #[test]
    fn a_machine_id_that_is_not_32_hex_digits_is_none() {
        for text in ["", "uninitialized\n", "0123456789abcdef", "0123456789abcdef0123456789abcdeg\n", &"0".repeat(32)] {
            assert_eq!(machine_key(text), None, "{text:?}");
        }
    }

    #[test]
    fn keys_use_all_128_bits() {
        // Both halves are drawn: neither is left zero or copied from the other.
        let key = sip_key().unwrap();
        assert_ne!(key.0, key.1);
        assert!(key.0 != 0 && key.1 != 0);
    }
}
