//! The report's table: one model ([`Table`]) rendered to text (comfy-table),
//! Markdown and HTML, and the text helpers every renderer shares (HTML
//! escaping, wrapping at the terminal's width). Knows no run or section:
//! the tables themselves are assembled in `tables.rs` and by each kind.

use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table as Comfy};

/// A table with a title, a header row and body rows of text cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Title shown above the table.
    pub title: String,
    /// Column headers.
    pub header: Vec<String>,
    /// Body rows (same length as the header).
    pub rows: Vec<Vec<String>>,
    /// Lines shown under the table (flags and warnings its cells carry).
    pub notes: Vec<String>,
}

impl Table {
    /// A table with no title (a terminal listing: `results list`, `pg
    /// list`), with these column headers and no rows yet.
    pub fn with_header<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table { header: header.into_iter().map(Into::into).collect(), ..Table::default() }
    }

    /// Adds a body row.
    pub fn add_row<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) -> &mut Table {
        self.rows.push(row.into_iter().map(Into::into).collect());
        self
    }

    /// Renders for a terminal: the title on its own line (none when the
    /// table has no title), the table, then its notes.
    pub fn to_text(&self) -> String {
        let mut t = Comfy::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
        t.set_header(self.header.clone());
        for r in &self.rows {
            t.add_row(r.clone());
        }
        let mut out = if self.title.is_empty() { format!("{t}\n") } else { format!("{}\n{t}\n", self.title) };
        for n in &self.notes {
            let _ = writeln!(out, "{n}");
        }
        out
    }

    /// Renders as a GitHub-flavoured Markdown table.
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = format!(
            "### {}\n\n| {} |\n|",
            self.title,
            self.header.iter().map(|h| esc(h)).collect::<Vec<_>>().join(" | ")
        );
        for i in 0..self.header.len() {
            out.push_str(if i == 0 { " --- |" } else { " ---: |" });
        }
        out.push('\n');
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | "));
        }
        out.push('\n');
        for n in &self.notes {
            let _ = writeln!(out, "> {n}\n");
        }
        out
    }

    /// Renders as an HTML table (escaped).
    pub fn to_html(&self) -> String {
        let mut out = format!("<h3>{}</h3>\n<table class=\"t\"><thead><tr>", esc_html(&self.title));
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", esc_html(h));
        }
        out.push_str("</tr></thead><tbody>\n");
        for r in &self.rows {
            out.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let tag = if i == 0 { "th" } else { "td" };
                let _ = write!(out, "<{tag}>{}</{tag}>", esc_html(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
        for n in &self.notes {
            let _ = writeln!(out, "<p class=\"flag\">{}</p>", esc_html(n));
        }
        out
    }
}

/// Escapes text for HTML.
pub(crate) fn esc_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The widest line the terminal summary writes.
pub(crate) const TERMINAL_WIDTH: usize = 120;

/// `text` in lines of at most `width` columns, broken at spaces: the first
/// after `first`, the rest after `rest` (a word longer than a line stands
/// alone).
pub(crate) fn wrap(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count() + usize::from(!empty) + word.chars().count();
        if !empty && len > width {
            out.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push(line);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_verdict_wraps_inside_a_terminal() {
        let text = "verdict read-seq-256k: storage-throughput — device vda 100 % utilised with 4.8 in flight, await 2.5 ms (21 µs at log-write-8k), CPU 6 % busy — the device is saturated";
        let lines = super::wrap(text, "  ", "      ", 120);
        assert!(lines.len() == 2 && lines.iter().all(|l| l.chars().count() <= 120), "{lines:?}");
        assert!(lines[0].starts_with("  verdict ") && lines[1].starts_with("      "));
        assert_eq!(
            lines.join(" ").split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert_eq!(super::wrap("short", "  ", "    ", 120), ["  short"]);
    }

    use super::*;

    fn table() -> Table {
        Table {
            title: "plan s5 · io — IOPS · median (min–max, n repeats)".into(),
            header: vec!["profile".into(), "target=hdd".into(), "target=a|b".into()],
            rows: vec![
                vec!["oltp-read-8k".into(), "110 (100–120, n=2)".into(), "1050 (1000–1100, n=2)".into()],
                vec!["wal<append>".into(), "55".into(), "–".into()],
            ],
            notes: vec!["⚠ fsync=off (a|b)".into()],
        }
    }

    #[test]
    fn an_untitled_table_renders_as_comfy_table_draws_it() {
        let mut t = Table::with_header(["name", "port"]);
        t.add_row(["a", "5432"]).add_row(vec!["bb".to_string(), "1".to_string()]);
        let mut c = Comfy::new();
        c.load_preset(UTF8_FULL_CONDENSED);
        c.set_header(vec!["name", "port"]);
        c.add_row(vec!["a", "5432"]);
        c.add_row(vec!["bb", "1"]);
        // What `println!("{c}")` printed before the listings went through Table.
        assert_eq!(t.to_text(), format!("{c}\n"));
        assert!(t.to_text().starts_with('┌'), "{}", t.to_text());
    }

    #[test]
    fn table_renders_as_text() {
        insta::assert_snapshot!(table().to_text());
    }

    #[test]
    fn table_renders_as_markdown_with_pipes_escaped() {
        insta::assert_snapshot!(table().to_markdown());
    }

    #[test]
    fn table_renders_as_escaped_html() {
        insta::assert_snapshot!(table().to_html());
    }
}
