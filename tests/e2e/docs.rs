//! The guides held to the tree: every link between them leads to a file and a heading that
//! exist, every file they (and the code's comments, the template's, the scripts') name by path
//! exists, and the table of where each behaviour is tested (`docs/testing.md`) names tests that
//! exist, on both backends, with no row left half-tested on AWS.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every file of the repository (bar build output, tools' state and git's), relative to it.
fn files() -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if rel.is_empty() && matches!(name.as_str(), "target" | ".git" | ".aws-sam") {
                continue;
            }
            if name == "target" || name == "__pycache__" || name.starts_with('.') && name != ".ci" {
                continue;
            }
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), "", &mut out);
    out.sort();
    out
}

/// The guides: the README and `docs/`.
fn guides() -> Vec<String> {
    let mut out = vec!["README.md".to_owned()];
    out.extend(
        files()
            .into_iter()
            .filter(|f| f.starts_with("docs/") && f.ends_with(".md")),
    );
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of a Markdown file's inline links, `[text](target)`, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
            }
        }
    }
    out
}

#[test]
fn every_link_between_the_guides_leads_to_a_file_and_a_heading() {
    let mut broken = Vec::new();
    for guide in guides() {
        let text = read(&guide);
        let dir = Path::new(&guide).parent().unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                PathBuf::from(&guide)
            } else {
                dir.join(file)
            };
            let Ok(linked) = std::fs::read_to_string(root().join(&path)) else {
                if !root().join(&path).exists() {
                    broken.push(format!("{guide}: ({target}): no {}", path.display()));
                }
                continue;
            };
            if let Some(anchor) = anchor
                && path.extension().is_some_and(|e| e == "md")
                && !anchors(&linked).contains(anchor)
            {
                broken.push(format!(
                    "{guide}: ({target}): {} has no heading #{anchor}",
                    path.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Backquoted names that look like a file of the repository (`shared/flows/src/sweep.rs`,
/// `budget.rs`, `infra/test.sh`): a path of word characters with a known extension.
fn named_files(text: &str) -> Vec<String> {
    const EXTENSIONS: [&str; 7] = [".rs", ".sh", ".md", ".py", ".toml", ".yaml", ".json"];
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|t| t.split([':', '#']).next().unwrap_or_default().to_owned())
        .filter(|t| {
            EXTENSIONS.iter().any(|e| t.ends_with(e))
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
                && !t.starts_with('/')
        })
        .collect()
}

/// The text a file says things in: a guide whole; code, the template and scripts by their
/// comments.
fn prose(file: &str) -> Option<String> {
    let text = read(file);
    if file.ends_with(".md") {
        return Some(text);
    }
    let marker = if file.ends_with(".rs") {
        "//"
    } else if file.ends_with(".sh")
        || file.ends_with(".py")
        || file.ends_with(".yaml")
        || file.ends_with(".toml")
    {
        "#"
    } else {
        return None;
    };
    Some(
        text.lines()
            .filter_map(|l| l.trim_start().strip_prefix(marker))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Files named that are not the repository's: `sam deploy --guided` writes `samconfig.toml`;
/// `lambda_http`'s `src/request.rs` holds the panics the events fuzz target steps around.
const OTHERS: &[&str] = &["samconfig.toml", "request.rs", "src/request.rs"];

#[test]
fn every_file_the_guides_and_comments_name_exists() {
    let files = files();
    let exists = |named: &str| {
        files
            .iter()
            .any(|f| f == named || f.ends_with(&format!("/{named}")))
    };
    let mut missing = Vec::new();
    for file in &files {
        let script = [".sh", ".py"].iter().any(|e| file.ends_with(e));
        let subject = file.ends_with(".md")
            || file == "template.yaml"
            || file.ends_with("Cargo.toml")
            || script && (file.starts_with("infra/") || file.starts_with("bench/"))
            || file.ends_with(".rs");
        if !subject {
            continue;
        }
        let Some(text) = prose(file) else { continue };
        for named in named_files(&text) {
            // Files a command or a test makes, and other projects' files, not the repository's.
            let elsewhere = named.starts_with("target/")
                || named.starts_with("fuzz/artifacts")
                || OTHERS.contains(&named.as_str());
            if !elsewhere && !exists(&named) {
                missing.push(format!("{file} names `{named}`, which does not exist"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_checks_read_links_paths_and_headings_as_written() {
    assert_eq!(
        slug(" The backfill's kill switch"),
        "the-backfills-kill-switch"
    );
    assert_eq!(slug(" What `stats` shows"), "what-stats-shows");
    assert_eq!(
        links("see [a](ops.md#x) and [b](#y)\n```\n[c](z.md)\n```\n"),
        ["ops.md#x", "#y"]
    );
    assert_eq!(
        named_files("see `flows/budget.rs` and `infra/test.sh:12`, not `a b.rs` or `x`"),
        ["flows/budget.rs", "infra/test.sh"]
    );
}

/// One row of the table of where each behaviour is tested.
#[derive(Debug)]
struct Row {
    behaviour: String,
    embedded: String,
    aws: String,
}

fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| behaviour"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(
                cells.len(),
                3,
                "docs/testing.md: a row has three cells: {l}"
            );
            Row {
                behaviour: cells[0].to_owned(),
                embedded: cells[1].to_owned(),
                aws: cells[2].to_owned(),
            }
        })
        .collect()
}

/// The tests a cell names: `module::…::test` (as `cargo test` names them), each resolved to
/// its file: under `tests/e2e/` (the e2e binary), else `cli/tests/` or a crate's `tests/`.
fn tests_named(cell: &str) -> Vec<(String, String)> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.contains("::"))
        .map(|t| {
            let (module, test) = t.rsplit_once("::").unwrap();
            (module.replace("::", "/"), test.to_owned())
        })
        .collect()
}

fn test_file(module: &str) -> Option<String> {
    let mut candidates = vec![
        format!("tests/e2e/{module}.rs"),
        format!("tests/e2e/{module}/mod.rs"),
        format!("cli/tests/{module}.rs"),
    ];
    for entry in std::fs::read_dir(root().join("shared")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        candidates.push(format!("shared/{name}/tests/{module}.rs"));
    }
    candidates.into_iter().find(|c| root().join(c).is_file())
}

#[test]
fn every_behaviour_is_tested_on_both_backends_by_tests_that_exist() {
    let text = read("docs/testing.md");
    let rows = rows(&text);
    assert!(rows.len() > 20, "{rows:?}");
    let mut wrong = Vec::new();
    for row in &rows {
        // What a cell says besides the tests it names.
        let words = |cell: &str| -> String { cell.split('`').step_by(2).collect() };
        if [&row.embedded, &row.aws]
            .iter()
            .any(|cell| words(cell).to_lowercase().contains("partial"))
        {
            wrong.push(format!("{}: half-tested", row.behaviour));
        }
        for (backend, cell) in [("embedded", &row.embedded), ("AWS", &row.aws)] {
            let named = tests_named(cell);
            if named.is_empty() && !cell.starts_with("— (") {
                wrong.push(format!(
                    "{}: no {backend} test named, and no `— (why not)`",
                    row.behaviour
                ));
            }
            for (module, test) in named {
                let Some(file) = test_file(&module) else {
                    wrong.push(format!("{}: no test file for `{module}`", row.behaviour));
                    continue;
                };
                let source = read(&file);
                let lines: Vec<&str> = source.lines().collect();
                let found = lines.iter().enumerate().find(|(_, l)| {
                    l.trim_start()
                        .trim_start_matches("async ")
                        .starts_with(&format!("fn {test}("))
                });
                let is_test = found.is_some_and(|(i, _)| {
                    lines[i.saturating_sub(3)..i].iter().any(|l| {
                        l.trim_start().starts_with("#[tokio::test") || l.trim() == "#[test]"
                    })
                });
                if !is_test {
                    wrong.push(format!("{}: {file} has no test `{test}`", row.behaviour));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "docs/testing.md:\n{}", wrong.join("\n"));
}

/// The runbook's list of stages is the code's.
#[test]
fn the_runbook_names_every_stage_and_no_other() {
    use imgest_core::telemetry::metrics::Stage;
    let runbook = read("docs/operations.md");
    let paragraph = runbook
        .split("\n\n")
        .find(|p| p.starts_with("The stages: "))
        .expect("docs/operations.md lists the stages in a paragraph starting \"The stages: \"");
    // Each stage is named in backquotes before its description in parentheses.
    let named: BTreeSet<&str> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    let code: BTreeSet<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
    let named: BTreeSet<&str> = named
        .into_iter()
        .filter(|w| !["tier"].contains(w))
        .collect();
    assert_eq!(named, code, "docs/operations.md's stages");
}

/// A variable the guides or the template name is one the code reads (declared in
/// `shared/settings/src/reference.rs`), or one a test or a script reads.
#[test]
fn every_variable_the_guides_name_is_read() {
    let files = files();
    let tooling: String = files
        .iter()
        .filter(|f| {
            let tool = f.starts_with("infra/")
                || f.starts_with("bench/")
                || f.starts_with(".ci/")
                || f.starts_with("tests/")
                || f.contains("/tests/")
                || f.starts_with("shared/testing/");
            tool && !f.ends_with(".md")
        })
        .filter_map(|f| std::fs::read_to_string(root().join(f)).ok())
        .collect();
    let mut unknown = BTreeSet::new();
    for file in guides().iter().map(String::as_str).chain(["template.yaml"]) {
        let text = read(file);
        for (at, _) in text.match_indices("IMGEST_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let name = name.trim_end_matches('_');
            let read =
                imgest_settings::reference::variable(name).is_some() || tooling.contains(name);
            if !read {
                unknown.insert(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "named, and read by neither the code nor a test or script:\n{}",
        unknown.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}
