//! A figure as printed (title, settings, markdown table, notes) and as a
//! CSV file for `scripts/bench/plot_packetflow.py`.

use super::table::{csv_line, Table};
use anyhow::{Context, Result};
use std::path::Path;

pub struct Figure {
    /// The CSV file's name without `.csv` (`fig3`, `sweep`, …).
    pub name: &'static str,
    pub title: String,
    /// Settings and figures printed under the title.
    pub lines: Vec<String>,
    pub table: Table,
    /// Printed after the table: columns down, receivers that failed.
    pub notes: Vec<String>,
    pub csv_header: Vec<&'static str>,
    pub csv_rows: Vec<Vec<String>>,
}

impl Figure {
    pub fn new(name: &'static str, title: String, table: Table, csv_header: &[&'static str]) -> Figure {
        Figure {
            name,
            title,
            lines: Vec::new(),
            table,
            notes: Vec::new(),
            csv_header: csv_header.to_vec(),
            csv_rows: Vec::new(),
        }
    }

    /// Prints the figure and, with `csv_dir`, writes `csv_dir/NAME.csv`.
    pub fn emit(&self, csv_dir: Option<&Path>) -> Result<()> {
        println!();
        println!("### {}", self.title);
        println!();
        for l in &self.lines {
            println!("{l}");
        }
        if !self.lines.is_empty() {
            println!();
        }
        print!("{}", self.table.markdown());
        if !self.notes.is_empty() {
            println!();
            for n in &self.notes {
                println!("- {n}");
            }
        }
        if let Some(dir) = csv_dir {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join(format!("{}.csv", self.name));
            let header: Vec<String> = self.csv_header.iter().map(|s| s.to_string()).collect();
            let mut text = csv_line(&header) + "\n";
            for row in &self.csv_rows {
                text += &csv_line(row);
                text.push('\n');
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            println!();
            println!("(written to {})", path.display());
        }
        Ok(())
    }
}
