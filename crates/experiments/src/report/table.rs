//! Plain-text tables for the terminal.

/// A table with a header row; columns are right-aligned except the first (numbers line up),
/// or all left-aligned for tables of text ([`Table::text`]).
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    text: bool,
}

impl Table {
    /// A table with these column titles.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(header: I) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            text: false,
        }
    }

    /// A table of text: every column left-aligned, so no line is padded beyond its own text
    /// (lists of names and descriptions).
    pub fn text<I: IntoIterator<Item = S>, S: Into<String>>(header: I) -> Table {
        Table {
            text: true,
            ..Table::new(header)
        }
    }

    /// Appends a row (missing cells are blank, extra cells are kept).
    pub fn row<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The table as CSV (header first).
    pub fn to_csv(&self) -> String {
        let mut rows = vec![self.header.clone()];
        rows.extend(self.rows.iter().cloned());
        super::csv::render(&rows)
    }

    /// Renders the table.
    pub fn render(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; ncols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let cells: Vec<String> = (0..ncols)
                .map(|i| {
                    let c = r.get(i).map_or("", String::as_str);
                    if i == 0 || self.text {
                        format!("{c:<w$}", w = widths[i])
                    } else {
                        format!("{c:>w$}", w = widths[i])
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        let mut out = line(&self.header);
        out.push('\n');
        out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1)));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(["flow", "kbps"]);
        t.row(["a", "1"]);
        t.row(["long-name", "1234"]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "flow       kbps");
        assert_eq!(lines[2], "a             1");
        assert_eq!(lines[3], "long-name  1234");
    }

    #[test]
    fn text_tables_do_not_pad_short_lines() {
        let mut t = Table::text(["name", "what"]);
        t.row(["a", "short"]);
        t.row(["b", "a much longer description"]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[2], "a     short");
    }
}
