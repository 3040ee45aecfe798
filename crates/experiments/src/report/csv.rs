//! Minimal CSV writing (RFC 4180 quoting).

use std::fmt::Write;

/// Quotes a field if it contains a comma, quote or newline.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Renders rows (the first is the header) as CSV text.
pub fn render(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r.iter().map(|c| field(c)).collect();
        let _ = writeln!(out, "{}", line.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(render(&[vec!["x".into(), "y".into()]]), "x,y\n");
    }
}
