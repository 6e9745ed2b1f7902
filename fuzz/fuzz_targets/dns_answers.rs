//! A DNS answer, as the preload library's stub resolver reads one from
//! the network (`nagare_posix::names::dns::answer`), to an `A` and to a
//! `PTR` question: the input's first two bytes are the query id it waits
//! for, the rest the datagram. No panic; an `A` answer taken as found has
//! an address and a canonical name, a `PTR` one a name and no address.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_posix::names::dns::{answer, Answer, Ask};

fuzz_target!(|data: &[u8]| {
    let [a, b, datagram @ ..] = data else { return };
    let id = u16::from_be_bytes([*a, *b]);
    for name in ["x.example", "a.b.c.example.", "x"] {
        if let Some(Answer::Found(canonical, addrs)) = answer(datagram, id, name, Ask::A) {
            assert!(!addrs.is_empty() && !canonical.is_empty());
        }
    }
    if let Some(Answer::Found(name, addrs)) = answer(datagram, id, "4.3.2.10.in-addr.arpa", Ask::Ptr) {
        assert!(addrs.is_empty() && !name.is_empty());
    }
});
