//! Blocks of the repository's files generated from the code (the template's policies and
//! alarm metrics, the configuration and CLI references): a test renders what the code
//! declares and holds the block between a begin and an end line to it, failing with the lines
//! that differ. With `IMGEST_BLESS=1` it writes the rendering there instead (then review the
//! diff).

use std::collections::HashMap;
use std::path::Path;

/// Whether the tests rewrite generated blocks (`IMGEST_BLESS=1`) rather than compare them.
pub fn blessing() -> bool {
    std::env::var("IMGEST_BLESS").is_ok_and(|v| v == "1")
}

/// The lines of `text` from the one that is `begin` to the next one that is `end` (both
/// included, each with its line break; compared without trailing blanks), and where they
/// start; `None` if there is no such block. Panics if there are two, or no end.
pub fn block<'a>(text: &'a str, begin: &str, end: &str) -> Option<(usize, &'a str)> {
    let mut found = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == begin.trim_end() {
            assert!(found.is_none(), "two blocks begin with {begin:?}");
            found = Some(offset);
        }
        offset += line.len();
    }
    let start = found?;
    let rest = &text[start..];
    let mut len = 0;
    for line in rest.split_inclusive('\n') {
        len += line.len();
        if len > line.len() && line.trim_end() == end.trim_end() {
            return Some((start, &rest[..len]));
        }
    }
    panic!("the block {begin:?} has no end {end:?}");
}

/// Holds the block of the file at `path` (`name` in messages) from `begin` to `end` to
/// `expected`, which includes both lines. With `IMGEST_BLESS=1`, writes `expected` there
/// instead.
pub fn hold(path: &Path, name: &str, begin: &str, end: &str, expected: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {name}: {e}"));
    let (start, found) =
        block(&text, begin, end).unwrap_or_else(|| panic!("{name} has no line {begin:?}"));
    if found == expected {
        return;
    }
    if blessing() {
        let mut out = String::with_capacity(text.len());
        out.push_str(&text[..start]);
        out.push_str(expected);
        out.push_str(&text[start + found.len()..]);
        std::fs::write(path, out).unwrap_or_else(|e| panic!("writing {name}: {e}"));
        return;
    }
    panic!("{}", difference(name, found, expected));
}

/// What a reader needs to see: the lines only the file has, and the lines only the code's
/// rendering has (each with its line number within the block, counted as many times as it
/// is missing).
pub fn difference(name: &str, file: &str, code: &str) -> String {
    let only = |a: &str, b: &str| -> Vec<String> {
        let mut left: HashMap<&str, usize> = HashMap::new();
        for line in b.lines() {
            *left.entry(line).or_default() += 1;
        }
        a.lines()
            .enumerate()
            .filter(|(_, line)| match left.get_mut(line) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .map(|(i, line)| format!("  {:>4}: {line}", i + 1))
            .collect()
    };
    format!(
        "{name}'s generated block differs from what the code declares (IMGEST_BLESS=1 rewrites it; then review the diff).\nonly in {name}:\n{}\nonly in the code:\n{}",
        only(file, code).join("\n"),
        only(code, file).join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_runs_from_its_begin_to_its_end_line() {
        let text = "a\n<!-- BEGIN x -->\nb\n<!-- END x -->\nc\n";
        let (start, found) = block(text, "<!-- BEGIN x -->", "<!-- END x -->").unwrap();
        assert_eq!(start, 2);
        assert_eq!(found, "<!-- BEGIN x -->\nb\n<!-- END x -->\n");
        assert!(block(text, "<!-- BEGIN y -->", "<!-- END y -->").is_none());
        let shown = difference("f", "x\ny\n", "x\nz\n");
        assert!(shown.contains("only in f:\n     2: y"), "{shown}");
        assert!(shown.contains("only in the code:\n     2: z"), "{shown}");
    }
}
