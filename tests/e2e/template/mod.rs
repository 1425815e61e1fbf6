//! The SAM template held to what the code declares: blocks of `template.yaml` generated from
//! the code's lists (the API's routes, each function's permissions) must be what the code
//! renders now, and invariants over those lists hold. `IMGEST_BLESS=1` rewrites the blocks
//! instead of comparing them (then review the diff).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod edges;
mod permissions;
mod routes;
mod trust;
mod watermark;

use std::path::PathBuf;

/// The template's path.
fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../template.yaml")
}

/// The template's text.
pub fn text() -> String {
    std::fs::read_to_string(path()).unwrap_or_else(|e| panic!("reading template.yaml: {e}"))
}

/// The lines of `template` from the one starting with `begin` to the next one starting with
/// `end`, both included (each with its line break), and where they start; `None` if there is
/// no such block. Panics if there are two.
pub fn block<'a>(template: &'a str, begin: &str, end: &str) -> Option<(usize, &'a str)> {
    let mut found = None;
    let mut offset = 0;
    for line in template.split_inclusive('\n') {
        if line.trim_end() == begin.trim_end() {
            assert!(found.is_none(), "two blocks begin with {begin:?}");
            found = Some(offset);
        }
        offset += line.len();
    }
    let start = found?;
    let rest = &template[start..];
    let mut len = 0;
    for line in rest.split_inclusive('\n') {
        len += line.len();
        if line.trim_end() == end.trim_end() {
            return Some((start, &rest[..len]));
        }
    }
    panic!("the block {begin:?} has no end {end:?}");
}

/// Holds the template's block from `begin` to `end` to `expected` (which includes both
/// lines): what differs is the failure, line by line. With `IMGEST_BLESS=1`, writes
/// `expected` there instead.
pub fn hold_block(begin: &str, end: &str, expected: &str) {
    let template = text();
    let (start, found) = block(&template, begin, end)
        .unwrap_or_else(|| panic!("template.yaml has no line {begin:?}"));
    if found == expected {
        return;
    }
    if std::env::var("IMGEST_BLESS").is_ok_and(|v| v == "1") {
        let mut out = String::new();
        out.push_str(&template[..start]);
        out.push_str(expected);
        out.push_str(&template[start + found.len()..]);
        std::fs::write(path(), out).unwrap();
        return;
    }
    panic!("{}", difference(found, expected));
}

/// What a reader needs to see: the lines only the template has, and the lines only the code's
/// rendering has (each with its line number, counted as many times as it is missing).
pub fn difference(template: &str, code: &str) -> String {
    let only = |a: &str, b: &str| -> Vec<String> {
        let mut left: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
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
        "template.yaml's generated block differs from what the code declares (IMGEST_BLESS=1 rewrites it; then review the diff).\nonly in the template:\n{}\nonly in the code:\n{}",
        only(template, code).join("\n"),
        only(code, template).join("\n"),
    )
}
