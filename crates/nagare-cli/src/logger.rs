//! Where the libraries' diagnostics go: stderr, each line led by the
//! program's name (`nagare netd: driver pid 1234`), at the level the
//! `NAGARE_LOG` variable names (`error`, `warn`, `info` (the default),
//! `debug`, `trace` or `off`).

use std::io::Write;

struct Stderr {
    prefix: &'static str,
}

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            // One write per line, so lines of several threads do not mix.
            let line = format!("{}: {}\n", self.prefix, record.args());
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// Sends log records to stderr, led by `prefix`.
pub fn init(prefix: &'static str) {
    let level = std::env::var("NAGARE_LOG").ok().and_then(|v| v.parse().ok()).unwrap_or(log::LevelFilter::Info);
    if log::set_logger(Box::leak(Box::new(Stderr { prefix }))).is_ok() {
        log::set_max_level(level);
    }
}
