//! Plain-text tables for the listing commands (`tag list`, `worker list`, `cluster status`,
//! `timeseq list`): each column as wide as its widest cell, so no value pushes the next column
//! out of line whatever its length (an RFC 3339 epoch with an offset, a 19-digit max_id).

/// How a column's cells line up: text to the left, numbers to the right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A header and rows of cells; [`Table::render`] lays them out.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, Align)]) -> Table {
        Table { columns: columns.to_vec(), rows: Vec::new() }
    }

    /// Adds a row; missing cells print empty, extra ones are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The header and every row, two spaces between columns, no trailing blanks.
    pub fn render(&self) -> String {
        let cell = |row: &[String], i: usize| row.get(i).map_or(String::new(), Clone::clone);
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (title, _))| {
                self.rows
                    .iter()
                    .map(|row| cell(row, i).chars().count())
                    .chain([title.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let header: Vec<String> = self.columns.iter().map(|(title, _)| title.to_string()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let line: Vec<String> = self
                .columns
                .iter()
                .enumerate()
                .map(|(i, (_, align))| {
                    let text = cell(row, i);
                    let pad = " ".repeat(widths[i].saturating_sub(text.chars().count()));
                    match align {
                        Align::Left => format!("{text}{pad}"),
                        Align::Right => format!("{pad}{text}"),
                    }
                })
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_and_numbers_align_right() {
        let mut table = Table::new(&[("NAME", Align::Left), ("EPOCH", Align::Left), ("N", Align::Right)]);
        table.row(vec!["a".into(), "2020-01-01T00:00:00+08:00".into(), "7".into()]);
        table.row(vec!["longer-name".into(), "2020-01-01T00:00:00Z".into(), "1234".into()]);
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NAME         EPOCH                         N");
        assert_eq!(lines[1], "a            2020-01-01T00:00:00+08:00     7");
        assert_eq!(lines[2], "longer-name  2020-01-01T00:00:00Z       1234");
        let epoch_column = |line: &str| line.find("2020");
        assert_eq!(epoch_column(lines[1]), epoch_column(lines[2]));
        assert!(text.lines().all(|line| line == line.trim_end()));
    }

    #[test]
    fn a_short_row_prints_empty_cells() {
        let mut table = Table::new(&[("A", Align::Left), ("B", Align::Left)]);
        table.row(vec!["x".into()]);
        assert_eq!(table.render(), "A  B\nx\n");
    }
}
