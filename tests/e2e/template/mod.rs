//! The SAM template held to what the code declares: blocks of `template.yaml` generated from
//! the code's lists (the API's routes, each function's permissions) must be what the code
//! renders now, and invariants over those lists hold. `IMGEST_BLESS=1` rewrites the blocks
//! instead of comparing them (then review the diff).

#![allow(clippy::unwrap_used, clippy::panic)]

mod edges;
mod events;
mod permissions;
mod routes;
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

/// Holds the template's block from `begin` to `end` to `expected` (which includes both
/// lines): what differs is the failure, line by line. With `IMGEST_BLESS=1`, writes
/// `expected` there instead.
pub fn hold_block(begin: &str, end: &str, expected: &str) {
    imgest_testing::generated::hold(&path(), "template.yaml", begin, end, expected);
}

pub use imgest_testing::generated::block;

/// The lines only the template has, and the lines only the code's rendering has.
pub fn difference(template: &str, code: &str) -> String {
    imgest_testing::generated::difference("template.yaml", template, code)
}

/// A resource's text: from its name to the next line at its indentation or less (comments
/// and blank lines kept). Panics if there is no such resource.
pub fn resource(template: &str, name: &str) -> String {
    let head = format!("  {name}:");
    let mut lines = template.lines().skip_while(|l| *l != head);
    let mut out = String::new();
    if let Some(first) = lines.next() {
        out.push_str(first);
        out.push('\n');
    }
    for line in lines {
        let indent = line.len() - line.trim_start().len();
        if !line.trim().is_empty() && indent <= 2 && !line.trim_start().starts_with('#') {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    assert!(!out.is_empty(), "template.yaml has no resource {name}");
    out
}

/// The logical ids of the template's resources of type `kind`, in its order.
pub fn resources_of(template: &str, kind: &str) -> Vec<String> {
    template
        .lines()
        .zip(template.lines().skip(1))
        .filter(|(name, next)| {
            name.starts_with("  ")
                && !name.starts_with("   ")
                && next.trim() == format!("Type: {kind}")
        })
        .map(|(name, _)| name.trim().trim_end_matches(':').to_owned())
        .collect()
}

/// The value of the first line of `text` whose key is `key` (`key: value`), unquoted.
pub fn value_of(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.trim().split_once(':')?;
        (k == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}
