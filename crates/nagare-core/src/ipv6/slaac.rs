//! Stateless address autoconfiguration (RFC 4862 5.5.3): what an address
//! formed from a router's prefix is, and how the lifetimes of a Prefix
//! Information option apply to it.
//!
//! The interface identifier is made as the link-local address's is
//! (`crate::ipv6::iid`: stable and opaque, different in each prefix, by
//! default; the modified EUI-64 of the MAC if so configured). Only a
//! 64-bit prefix fits it (RFC 4291 2.5.1). The address table makes the
//! address, keeps the lifetimes and runs them out (`crate::ipv6::addr`).

use super::addr::Lifetimes;
use crate::time::Instant;
use core::time::Duration;
use nagare_wire::{is_link_local, NdpPrefixInfo};

/// The prefix length an interface identifier of 64 bits leaves.
pub const SLAAC_PREFIX_LEN: u8 = 64;

/// A lifetime field's "forever" (RFC 4861 4.6.2).
pub const INFINITE_LIFETIME: u32 = u32::MAX;

/// Below this remaining valid lifetime an unauthenticated advertisement
/// may not shorten it (RFC 4862 5.5.3 (e)).
pub const TWO_HOURS: Duration = Duration::from_secs(2 * 60 * 60);

/// Why a prefix forms no address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The A flag is clear.
    NotAutonomous,
    /// fe80::/10: the link-local address is made otherwise (5.5.3 (b)).
    LinkLocal,
    /// The preferred lifetime exceeds the valid one (5.5.3 (c)).
    BadLifetimes,
    /// Not 64 bits long: no room for our interface identifier.
    PrefixLength,
}

/// Whether `info`'s prefix forms an address, or why not.
pub fn check(info: &NdpPrefixInfo) -> Result<(), Refusal> {
    if !info.autonomous {
        return Err(Refusal::NotAutonomous);
    }
    if is_link_local(&info.prefix) {
        return Err(Refusal::LinkLocal);
    }
    if info.preferred_lifetime > info.valid_lifetime {
        return Err(Refusal::BadLifetimes);
    }
    if info.prefix_len != SLAAC_PREFIX_LEN {
        return Err(Refusal::PrefixLength);
    }
    Ok(())
}

/// When a lifetime of `secs` seconds from `now` ends; `None`: never.
pub fn deadline(secs: u32, now: Instant) -> Option<Instant> {
    (secs != INFINITE_LIFETIME).then(|| now + Duration::from_secs(u64::from(secs)))
}

/// The lifetimes of a new address from `info` (its valid lifetime not 0).
pub fn new_lifetimes(info: &NdpPrefixInfo, now: Instant) -> Lifetimes {
    Lifetimes {
        preferred_until: deadline(info.preferred_lifetime, now),
        valid_until: deadline(info.valid_lifetime, now),
    }
}

/// The lifetimes of an address that has `current` ones after `info`
/// advertises its prefix again (RFC 4862 5.5.3 (e)): the preferred
/// lifetime is taken as it is; the valid one if it is over two hours or
/// past what remains, else the remaining one is kept if two hours or
/// less, and cut to two hours otherwise, so that a forged advertisement
/// cannot end an address at once.
pub fn updated_lifetimes(current: Lifetimes, info: &NdpPrefixInfo, now: Instant) -> Lifetimes {
    let advertised = deadline(info.valid_lifetime, now);
    let remaining = current.valid_until.map(|t| t.saturating_since(now));
    let advertised_len = Duration::from_secs(u64::from(info.valid_lifetime));
    let longer = match remaining {
        None => advertised.is_none(),
        Some(left) => advertised.is_none() || advertised_len > left,
    };
    let valid_until = if advertised_len > TWO_HOURS || longer {
        advertised
    } else if remaining.is_some_and(|left| left <= TWO_HOURS) {
        current.valid_until
    } else {
        Some(now + TWO_HOURS)
    };
    Lifetimes { preferred_until: deadline(info.preferred_lifetime, now), valid_until }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(prefix: &str, len: u8, valid: u32, preferred: u32) -> NdpPrefixInfo {
        NdpPrefixInfo {
            prefix_len: len,
            on_link: true,
            autonomous: true,
            valid_lifetime: valid,
            preferred_lifetime: preferred,
            prefix: prefix.parse().unwrap(),
        }
    }

    #[test]
    fn prefixes_that_form_nothing() {
        let mut i = info("2001:db8::", 64, 100, 50);
        assert_eq!(check(&i), Ok(()));
        i.autonomous = false;
        assert_eq!(check(&i), Err(Refusal::NotAutonomous));
        assert_eq!(check(&info("fe80::", 64, 100, 50)), Err(Refusal::LinkLocal));
        assert_eq!(check(&info("2001:db8::", 64, 100, 101)), Err(Refusal::BadLifetimes));
        assert_eq!(check(&info("2001:db8::", 48, 100, 50)), Err(Refusal::PrefixLength));
        assert_eq!(check(&info("2001:db8::", 80, 100, 50)), Err(Refusal::PrefixLength));
    }

    #[test]
    fn the_two_hour_rule() {
        let now = Instant::from_secs(1000);
        let hours = |h: u64| Some(now + Duration::from_secs(h * 3600));
        let with = |valid: Option<Instant>| Lifetimes { preferred_until: valid, valid_until: valid };
        let secs = |h: u64| u32::try_from(h * 3600).unwrap();
        // Longer than two hours: taken, shorter or not.
        assert_eq!(updated_lifetimes(with(hours(10)), &info("::", 64, secs(3), 0), now).valid_until, hours(3));
        // Longer than what remains: taken.
        let longer = Some(now + Duration::from_secs(5400));
        assert_eq!(updated_lifetimes(with(hours(1)), &info("::", 64, 5400, 0), now).valid_until, longer);
        // Short, with more than two hours left: cut to two hours.
        assert_eq!(updated_lifetimes(with(hours(10)), &info("::", 64, 60, 0), now).valid_until, hours(2));
        assert_eq!(updated_lifetimes(with(None), &info("::", 64, 0, 0), now).valid_until, hours(2));
        // Short, with two hours or less left: ignored.
        assert_eq!(updated_lifetimes(with(hours(1)), &info("::", 64, 0, 0), now).valid_until, hours(1));
        // Forever is longer than anything; the preferred lifetime is taken.
        let l = updated_lifetimes(with(hours(1)), &info("::", 64, INFINITE_LIFETIME, 30), now);
        assert_eq!((l.valid_until, l.preferred_until), (None, Some(now + Duration::from_secs(30))));
    }
}
