//! DNS messages for an IPv4 stub resolver: an `A` question and the
//! addresses its answer gives, a `PTR` question and the name its answer
//! gives (each following the answer's `CNAME` chain). An answer is hostile
//! input: anything that does not parse, or does not answer our question,
//! is refused.

use simple_dns::rdata::RData;
use simple_dns::{Name, Packet, PacketFlag, Question, CLASS, QCLASS, QTYPE, RCODE, TYPE};
use std::net::Ipv4Addr;

/// What is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// A name's IPv4 addresses.
    A,
    /// The name of an address (`d.c.b.a.in-addr.arpa`).
    Ptr,
}

/// What an answer says.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// For [`Ask::A`], the name's addresses and its canonical name (the end
    /// of the chain); for [`Ask::Ptr`], the name an address has, and no
    /// addresses.
    Found(String, Vec<Ipv4Addr>),
    /// The name does not exist, or has no record of the kind asked.
    NoName,
    /// The server failed or refused: ask another.
    ServerFailed,
}

/// The name a `PTR` question for `addr` asks about.
pub fn ptr_name(addr: Ipv4Addr) -> String {
    let [a, b, c, d] = addr.octets();
    format!("{d}.{c}.{b}.{a}.in-addr.arpa")
}

/// The question `ask` for `name` with `id`, recursion desired; `None` for
/// a name that is not a DNS name.
pub fn query(name: &str, id: u16, ask: Ask) -> Option<Vec<u8>> {
    let mut p = Packet::new_query(id);
    p.set_flags(PacketFlag::RECURSION_DESIRED);
    let qname = Name::new(name).ok()?;
    let qtype = match ask {
        Ask::A => TYPE::A,
        Ask::Ptr => TYPE::PTR,
    };
    p.questions.push(Question::new(qname, QTYPE::TYPE(qtype), QCLASS::CLASS(CLASS::IN), false));
    p.build_bytes_vec().ok()
}

fn same(a: &str, b: &str) -> bool {
    a.trim_end_matches('.').eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// The answer in `bytes` to our question `ask` for `name` with `id`;
/// `None` when it is not one (malformed, another id or question, not a
/// response).
pub fn answer(bytes: &[u8], id: u16, name: &str, ask: Ask) -> Option<Answer> {
    let p = Packet::parse(bytes).ok()?;
    if p.id() != id || !p.has_flags(PacketFlag::RESPONSE) {
        return None;
    }
    if p.questions.len() != 1 || !same(&p.questions[0].qname.to_string(), name) {
        return None;
    }
    match p.rcode() {
        RCODE::NoError => {}
        RCODE::NameError => return Some(Answer::NoName),
        _ => return Some(Answer::ServerFailed),
    }
    // The chain from our name through CNAMEs, in answer order, bounded by
    // the answer's own size.
    let mut names = vec![name.trim_end_matches('.').to_string()];
    let mut addrs = Vec::new();
    for rr in &p.answers {
        let owner = rr.name.to_string();
        if !names.iter().any(|n| same(n, &owner)) {
            continue;
        }
        match (&rr.rdata, ask) {
            (RData::A(a), Ask::A) => addrs.push(Ipv4Addr::from(a.address)),
            (RData::PTR(p), Ask::Ptr) => {
                let target = p.0.to_string().trim_end_matches('.').to_string();
                return Some(if target.is_empty() { Answer::NoName } else { Answer::Found(target, Vec::new()) });
            }
            (RData::CNAME(c), _) => names.push(c.0.to_string().trim_end_matches('.').to_string()),
            _ => {}
        }
    }
    if addrs.is_empty() {
        return Some(Answer::NoName);
    }
    let canonical = names.pop().unwrap_or_default();
    Some(Answer::Found(canonical, addrs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use simple_dns::rdata::{A, CNAME, PTR};
    use simple_dns::ResourceRecord;

    fn response(id: u16, qname: &str, rcode: RCODE, answers: Vec<ResourceRecord<'static>>) -> Vec<u8> {
        let mut p = Packet::new_reply(id);
        *p.rcode_mut() = rcode;
        p.questions.push(Question::new(
            Name::new_unchecked(qname).into_owned(),
            QTYPE::TYPE(TYPE::A),
            QCLASS::CLASS(CLASS::IN),
            false,
        ));
        p.answers = answers;
        p.build_bytes_vec().unwrap()
    }

    fn a(name: &'static str, ip: [u8; 4]) -> ResourceRecord<'static> {
        ResourceRecord::new(Name::new_unchecked(name), CLASS::IN, 60, RData::A(A { address: u32::from_be_bytes(ip) }))
    }

    #[test]
    fn a_query_parses_back_as_one_a_question() {
        let q = query("www.example", 0x1234, Ask::A).unwrap();
        let p = Packet::parse(&q).unwrap();
        assert_eq!(p.id(), 0x1234);
        assert_eq!(p.questions[0].qname.to_string(), "www.example");
        assert!(p.has_flags(PacketFlag::RECURSION_DESIRED));
        assert!(query(&"a".repeat(64), 1, Ask::A).is_none(), "a label past 63 bytes");
    }

    #[test]
    fn an_answer_follows_its_cname_chain_and_skips_strangers() {
        let cname = ResourceRecord::new(
            Name::new_unchecked("www.example"),
            CLASS::IN,
            60,
            RData::CNAME(CNAME(Name::new_unchecked("edge.example"))),
        );
        let bytes = response(
            7,
            "www.example",
            RCODE::NoError,
            vec![cname, a("edge.example", [10, 0, 0, 9]), a("other.example", [10, 0, 0, 1])],
        );
        assert_eq!(
            answer(&bytes, 7, "WWW.example.", Ask::A),
            Some(Answer::Found("edge.example".into(), vec![Ipv4Addr::new(10, 0, 0, 9)]))
        );
        assert_eq!(answer(&bytes, 8, "www.example", Ask::A), None, "another id");
        assert_eq!(answer(&bytes, 7, "mail.example", Ask::A), None, "another question");
        assert_eq!(
            answer(&query("www.example", 7, Ask::A).unwrap(), 7, "www.example", Ask::A),
            None,
            "a query is no answer"
        );
    }

    #[test]
    fn a_ptr_answer_gives_the_address_s_name() {
        let name = ptr_name(Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(name, "3.2.1.10.in-addr.arpa");
        let q = Packet::parse(&query(&name, 9, Ask::Ptr).unwrap()).unwrap().questions[0].qtype;
        assert_eq!(q, QTYPE::TYPE(TYPE::PTR));
        let ptr = ResourceRecord::new(
            Name::new_unchecked("3.2.1.10.in-addr.arpa"),
            CLASS::IN,
            60,
            RData::PTR(PTR(Name::new_unchecked("host.example"))),
        );
        let bytes = response(9, "3.2.1.10.in-addr.arpa", RCODE::NoError, vec![ptr]);
        assert_eq!(answer(&bytes, 9, &name, Ask::Ptr), Some(Answer::Found("host.example".into(), vec![])));
        assert_eq!(answer(&bytes, 9, &name, Ask::A), Some(Answer::NoName), "no address in a PTR answer");
    }

    #[test]
    fn rcodes_and_empty_answers_say_what_they_mean() {
        assert_eq!(
            answer(&response(1, "x.example", RCODE::NameError, vec![]), 1, "x.example", Ask::A),
            Some(Answer::NoName)
        );
        assert_eq!(
            answer(&response(1, "x.example", RCODE::NoError, vec![]), 1, "x.example", Ask::A),
            Some(Answer::NoName)
        );
        assert_eq!(
            answer(&response(1, "x.example", RCODE::ServerFailure, vec![]), 1, "x.example", Ask::A),
            Some(Answer::ServerFailed)
        );
    }

    #[test]
    fn truncated_and_garbage_answers_are_refused() {
        let bytes = response(3, "x.example", RCODE::NoError, vec![a("x.example", [10, 0, 0, 1])]);
        for cut in 0..bytes.len() {
            assert!(!matches!(answer(&bytes[..cut], 3, "x.example", Ask::A), Some(Answer::Found(..))), "cut at {cut}");
        }
        assert_eq!(answer(&[0xff; 40], 0xffff, "x.example", Ask::A), None);
    }
}
