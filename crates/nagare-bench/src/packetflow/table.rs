//! The figures' arithmetic and forms: rates, shares and ratios, a perf
//! client's JSON summary read back, markdown tables and CSV lines.

use std::fmt::Write as _;

/// Datagrams per second that `mbit` Mbit/s of `len`-byte datagrams make
/// (`perf client --udp-rate` counts the datagrams' payload bytes).
pub fn datagrams_per_s(mbit: f64, len: usize) -> f64 {
    mbit * 1e6 / 8.0 / len.max(1) as f64
}

/// The Mbit/s of `rate` datagrams of `len` bytes per second.
pub fn mbit_per_s(rate: f64, len: usize) -> f64 {
    rate * len as f64 * 8.0 / 1e6
}

/// `part` as a percentage of `whole`; none of nothing.
pub fn percent(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0 && part.is_finite()).then(|| part * 100.0 / whole)
}

/// `a / b`; none when `b` is not above 0.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

/// `values[at]` as a percentage of the largest of `values`; none when
/// there is no such value or the largest is not above 0.
pub fn of_most(values: &[f64], at: usize) -> Option<f64> {
    let most = values.iter().copied().fold(0.0, f64::max);
    percent(*values.get(at)?, most)
}

/// What one `nagare perf client --json` said of its test.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Report {
    /// Datagrams (UDP) the sender sent.
    pub sent_packets: u64,
    /// Seconds the sender sent for.
    pub sent_secs: f64,
    /// Datagrams (UDP) the receiver got.
    pub received_packets: u64,
    /// Bytes the receiver got.
    pub received_bytes: u64,
    /// Seconds from the receiver's first byte to its last.
    pub received_secs: f64,
}

impl Report {
    /// The summary on the last line of `stdout` that is a JSON object;
    /// none if there is none or its fields are missing.
    pub fn parse(stdout: &str) -> Option<Report> {
        let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{'))?;
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let side = |name: &str| -> Option<(u64, u64, f64)> {
            let s = v.get(name)?;
            Some((s.get("packets")?.as_u64()?, s.get("bytes")?.as_u64()?, s.get("seconds")?.as_f64()?))
        };
        let (sent_packets, _, sent_secs) = side("sender")?;
        let (received_packets, received_bytes, received_secs) = side("receiver")?;
        Some(Report { sent_packets, sent_secs, received_packets, received_bytes, received_secs })
    }

    /// Datagrams per second offered: those sent over the sending time.
    pub fn offered_per_s(&self) -> f64 {
        ratio(self.sent_packets as f64, self.sent_secs).unwrap_or(0.0)
    }

    /// Datagrams per second received, over the same sending time (a
    /// receiver that got few, late, is not credited with a short window).
    pub fn received_per_s(&self) -> f64 {
        ratio(self.received_packets as f64, self.sent_secs).unwrap_or(0.0)
    }
}

/// A table of text cells, printed as markdown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Markdown: the first column left-aligned, the others right; a short
    /// row is filled with "—".
    pub fn markdown(&self) -> String {
        let n = self.header.len();
        let mut s = String::new();
        let line = |s: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            s.push('|');
            for c in cells {
                let _ = write!(s, " {} |", c.replace('|', "\\|"));
            }
            s.push('\n');
        };
        line(&mut s, &mut self.header.iter().map(String::as_str));
        s.push('|');
        for i in 0..n {
            s.push_str(if i == 0 { "---|" } else { "---:|" });
        }
        s.push('\n');
        for row in &self.rows {
            line(&mut s, &mut (0..n).map(|i| row.get(i).map_or("—", String::as_str)));
        }
        s
    }
}

/// One CSV line of `fields`: a field with a comma, a quote or a line
/// break is quoted, its quotes doubled.
pub fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| if f.contains([',', '"', '\n', '\r']) { format!("\"{}\"", f.replace('"', "\"\"")) } else { f.clone() })
        .collect();
    quoted.join(",")
}

/// A number with `digits` decimals, or "—" for none.
pub fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:.digits$}"))
}

/// A number for a CSV field: empty for none.
pub fn field(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_datagrams_and_mbit_agree() {
        // 256-byte datagrams: 2.048 Mbit/s is 1000 per second.
        assert!((datagrams_per_s(2.048, 256) - 1000.0).abs() < 1e-9);
        assert!((mbit_per_s(1000.0, 256) - 2.048).abs() < 1e-12);
        assert!((mbit_per_s(datagrams_per_s(123.0, 256), 256) - 123.0).abs() < 1e-9);
    }

    #[test]
    fn shares_and_ratios_of_nothing_are_none() {
        assert_eq!(percent(25.0, 200.0), Some(12.5));
        assert_eq!(percent(0.0, 200.0), Some(0.0));
        assert_eq!(percent(5.0, 0.0), None);
        assert_eq!(ratio(6.0, 2.0), Some(3.0));
        assert_eq!(ratio(6.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        // Delivered at 0.5x, 1x, 2x, 4x: the 4x point is half the best.
        let delivered = [50.0, 100.0, 80.0, 50.0];
        assert_eq!(of_most(&delivered, 2), Some(80.0));
        assert_eq!(of_most(&delivered, 3), Some(50.0));
        assert_eq!(of_most(&delivered, 4), None);
        assert_eq!(of_most(&[0.0, 0.0], 1), None);
    }

    #[test]
    fn a_perf_summary_is_read_back() {
        let out = "some progress\n{\"server\":\"10.97.0.2:5301\",\"protocol\":\"udp\",\"mode\":\"stream\",\"len\":256,\
            \"sender\":{\"bytes\":2560000,\"packets\":10000,\"seconds\":2.0,\"gbit_per_s\":0.01},\
            \"receiver\":{\"bytes\":640000,\"packets\":2500,\"seconds\":1.5,\"gbit_per_s\":0.003},\"lost\":7500}\n";
        let r = Report::parse(out).unwrap();
        assert_eq!(r.sent_packets, 10000);
        assert_eq!(r.received_packets, 2500);
        assert_eq!(r.received_bytes, 640000);
        assert_eq!(r.offered_per_s(), 5000.0);
        // Over the sending time, not the receiver's 1.5 s.
        assert_eq!(r.received_per_s(), 1250.0);
        assert_eq!(Report::parse("Error: connection refused\n"), None);
        assert_eq!(Report::parse("{\"sender\":{\"bytes\":1}}"), None);
        // A receiver that got nothing is a report of 0, not a failure.
        let none = Report { sent_packets: 10, sent_secs: 1.0, ..Report::default() };
        assert_eq!(none.received_per_s(), 0.0);
        assert_eq!(Report::default().received_per_s(), 0.0);
    }

    #[test]
    fn a_table_in_markdown() {
        let mut t = Table::new(&["receiver", "none", "filter"]);
        t.row(vec!["nice 0".into(), "12".into(), "a|b".into()]);
        t.row(vec!["nice 5".into()]);
        assert_eq!(
            t.markdown(),
            "| receiver | none | filter |\n|---|---:|---:|\n| nice 0 | 12 | a\\|b |\n| nice 5 | — | — |\n"
        );
    }

    /// The fields of one CSV line as [`csv_line`] writes it (as Python's
    /// csv module reads it); none if a quote is not closed.
    fn parse_csv_line(line: &str) -> Option<Vec<String>> {
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut chars = line.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => fields.push(std::mem::take(&mut field)),
                (_, c) => field.push(c),
            }
        }
        if quoted {
            return None;
        }
        fields.push(field);
        Some(fields)
    }

    #[test]
    fn csv_lines_round_trip() {
        let fields: Vec<String> =
            ["filter,scheduler", "nice 0", "say \"hi\"", "", "12.5"].iter().map(|s| s.to_string()).collect();
        let line = csv_line(&fields);
        assert_eq!(line, "\"filter,scheduler\",nice 0,\"say \"\"hi\"\"\",,12.5");
        assert_eq!(parse_csv_line(&line), Some(fields));
        assert_eq!(parse_csv_line("a,\"b"), None);
        assert_eq!(cell(None, 1), "—");
        assert_eq!(cell(Some(2.26), 1), "2.3");
        assert_eq!(field(None), "");
    }
}
