//! The engine's keys and seed from the operating system's random source
//! (`getrandom(2)` through the `getrandom` crate): the one place where a
//! host on a real network gets them. Each key is a full 128 bits drawn on
//! its own, so the keys of initial sequence numbers and SYN cookies, of the
//! connection table, of stable IPv6 interface identifiers and of IPv6
//! fragment identifications are independent, and nothing in them comes from the clock or the process
//! id, which the network can guess. The interface identifier key is drawn
//! at each start, so stable addresses last as long as the process.
//! Simulations and tests use `nagare_core::Secrets::from_seed` instead.

use nagare_core::hash::SipKey;
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

/// Independent keys for the engine's keyed hashes.
pub fn secrets() -> io::Result<Secrets> {
    Ok(Secrets { isn: sip_key()?, table: sip_key()?, stable_iid: sip_key()?, frag_ident: sip_key()? })
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
    fn keys_use_all_128_bits() {
        // Both halves are drawn: neither is left zero or copied from the other.
        let key = sip_key().unwrap();
        assert_ne!(key.0, key.1);
        assert!(key.0 != 0 && key.1 != 0);
    }
}
