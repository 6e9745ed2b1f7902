//! `/etc/hosts` and `/etc/resolv.conf`, read as glibc reads them (the
//! parts an IPv4 stub resolver needs). Pure functions of the files' text:
//! a line that does not parse is skipped.

use std::net::Ipv4Addr;
use std::time::Duration;

/// The IPv4 addresses `/etc/hosts` gives `name` (matched without regard to
/// ASCII case, against every name of a line), in file order, with the
/// canonical name (the first name of the first matching line).
pub(crate) fn hosts_lookup(text: &str, name: &str) -> Option<(String, Vec<Ipv4Addr>)> {
    let mut found: Option<(String, Vec<Ipv4Addr>)> = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(Ok(addr)) = fields.next().map(str::parse::<Ipv4Addr>) else { continue };
        let names: Vec<&str> = fields.collect();
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            let (_, addrs) = found.get_or_insert_with(|| (names[0].to_string(), Vec::new()));
            addrs.push(addr);
        }
    }
    found
}

/// The first name `/etc/hosts` gives `addr`.
pub(crate) fn hosts_reverse(text: &str, addr: Ipv4Addr) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        (fields.next()?.parse::<Ipv4Addr>().ok()? == addr).then(|| fields.next().map(str::to_string))?
    })
}

/// What `/etc/resolv.conf` says (glibc's defaults where it says nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvConf {
    /// IPv4 name servers, at most three (as glibc's `MAXNS`).
    pub(crate) servers: Vec<Ipv4Addr>,
    pub(crate) search: Vec<String>,
    pub(crate) ndots: usize,
    pub(crate) timeout: Duration,
    pub(crate) attempts: usize,
}

/// The most name servers, search domains and `ndots` glibc takes.
const MAX_SERVERS: usize = 3;
const MAX_SEARCH: usize = 6;
const MAX_NDOTS: usize = 15;

pub(crate) fn resolv_conf(text: &str) -> ResolvConf {
    let mut c =
        ResolvConf { servers: Vec::new(), search: Vec::new(), ndots: 1, timeout: Duration::from_secs(5), attempts: 2 };
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => {
                if let Some(Ok(a)) = fields.next().map(str::parse::<Ipv4Addr>) {
                    if c.servers.len() < MAX_SERVERS {
                        c.servers.push(a);
                    }
                }
            }
            // The last of `search` and `domain` holds.
            Some("search" | "domain") => {
                c.search = fields.take(MAX_SEARCH).map(|d| d.trim_end_matches('.').to_string()).collect();
            }
            Some("options") => {
                for o in fields {
                    let (key, value) = o.split_once(':').unwrap_or((o, ""));
                    let Ok(n) = value.parse::<usize>() else { continue };
                    match key {
                        "ndots" => c.ndots = n.min(MAX_NDOTS),
                        "timeout" => c.timeout = Duration::from_secs(n.clamp(1, 30) as u64),
                        "attempts" => c.attempts = n.clamp(1, 5),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    c
}

/// The names to ask for, in order, for `name` (glibc's rule): a name
/// ending in a dot as it is; one with at least `ndots` dots as it is, then
/// with each search domain; one with fewer, the other way round.
pub(crate) fn candidates(name: &str, c: &ResolvConf) -> Vec<String> {
    if let Some(absolute) = name.strip_suffix('.') {
        return vec![absolute.to_string()];
    }
    let searched = c.search.iter().map(|d| format!("{name}.{d}"));
    if name.matches('.').count() >= c.ndots {
        std::iter::once(name.to_string()).chain(searched).collect()
    } else {
        searched.chain(std::iter::once(name.to_string())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOSTS: &str = "127.0.0.1 localhost\n# a comment\n10.0.0.5  web.example  Web  # trailing\n\
                         ::1 localhost ip6-localhost\nbad line\n10.0.0.6 web.example\n";

    #[test]
    fn hosts_match_any_name_in_any_case_in_file_order() {
        let (canon, addrs) = hosts_lookup(HOSTS, "WEB.example").unwrap();
        assert_eq!(canon, "web.example");
        assert_eq!(addrs, ["10.0.0.5".parse::<Ipv4Addr>().unwrap(), "10.0.0.6".parse().unwrap()]);
        assert_eq!(hosts_lookup(HOSTS, "web").unwrap().1, ["10.0.0.5".parse::<Ipv4Addr>().unwrap()], "an alias");
        assert_eq!(hosts_lookup(HOSTS, "localhost").unwrap().1, [Ipv4Addr::LOCALHOST], "the IPv6 line is skipped");
        assert!(hosts_lookup(HOSTS, "nowhere").is_none());
        assert_eq!(hosts_reverse(HOSTS, "10.0.0.5".parse().unwrap()).as_deref(), Some("web.example"));
        assert_eq!(hosts_reverse(HOSTS, "10.9.9.9".parse().unwrap()), None);
    }

    #[test]
    fn resolv_conf_takes_servers_search_and_options() {
        let c = resolv_conf(
            "nameserver 10.0.0.53\nnameserver fd00::1\nsearch a.example b.example.\n\
             options ndots:2 timeout:1 attempts:9 rotate\n; a comment\nnameserver 10.0.0.54\n",
        );
        assert_eq!(c.servers, ["10.0.0.53".parse::<Ipv4Addr>().unwrap(), "10.0.0.54".parse().unwrap()]);
        assert_eq!(c.search, ["a.example", "b.example"]);
        assert_eq!((c.ndots, c.timeout, c.attempts), (2, Duration::from_secs(1), 5));
        assert_eq!(resolv_conf("").ndots, 1);
    }

    #[test]
    fn candidates_follow_ndots_and_the_final_dot() {
        let c = resolv_conf("search corp.example\n");
        assert_eq!(candidates("db", &c), ["db.corp.example", "db"]);
        assert_eq!(candidates("db.example", &c), ["db.example", "db.example.corp.example"]);
        assert_eq!(candidates("db.example.", &c), ["db.example"]);
    }

    proptest! {
        #[test]
        fn any_text_parses_without_panicking(text in ".{0,400}", name in "[a-z.]{0,20}") {
            let _ = hosts_lookup(&text, &name);
            let _ = hosts_reverse(&text, Ipv4Addr::LOCALHOST);
            let c = resolv_conf(&text);
            prop_assert!(c.servers.len() <= MAX_SERVERS && c.search.len() <= MAX_SEARCH);
            let _ = candidates(&name, &c);
        }
    }
}
