//! The configuration reference held to the code, both ways: every variable the shipped code
//! reads is declared in `shared/settings/src/reference.rs` and every declared one is read;
//! every variable `template.yaml` sets is declared and every one declared as set is set (the
//! others say why not); and `docs/configuration.md`'s table is generated from the declarations
//! and the template (`IMGEST_BLESS=1` rewrites it). The declarations' defaults and bounds are
//! held to the parsers by the settings crate's own tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use imgest_settings::reference::{self, Parser, Place, VARIABLES, Variable};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The Rust files under `dir` (relative to the workspace), recursively.
fn rust_files(dir: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
        return;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let path = format!("{dir}/{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            rust_files(&path, out);
        } else if path.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The source that ships: the library crates (bar the test suites), the CLI and the
/// functions, each file up to its test module.
fn shipped_sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root().join("shared")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name != "testing" {
            rust_files(&format!("shared/{name}/src"), &mut files);
        }
    }
    rust_files("cli/src", &mut files);
    for entry in std::fs::read_dir(root().join("functions")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        rust_files(&format!("functions/{name}/src"), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = read(&file);
            let shipped = match text.find("\n#[cfg(test)]") {
                Some(end) => text[..end].to_owned(),
                None => text,
            };
            (file, shipped)
        })
        .collect()
}

/// The variable names `text` has as whole string literals (`"IMGEST_…"`, `"AWS_LAMBDA_…"`).
fn names_read(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for prefix in ["\"IMGEST_", "\"AWS_LAMBDA_"] {
        for (at, _) in text.match_indices(prefix) {
            let rest = &text[at + 1..];
            let len = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            if rest[len..].starts_with('"') && !rest[..len].ends_with('_') {
                names.insert(rest[..len].to_owned());
            }
        }
    }
    names
}

const DECLARATIONS: &str = "shared/settings/src/reference.rs";

#[test]
fn every_variable_the_code_reads_is_declared_and_every_declared_one_is_read() {
    let sources = shipped_sources();
    let mut undeclared = Vec::new();
    let mut readers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (file, text) in &sources {
        if file == DECLARATIONS {
            continue;
        }
        for name in names_read(text) {
            if reference::variable(&name).is_none() {
                undeclared.push(format!("{file} reads {name}"));
            }
            readers.entry(name).or_default().push(file);
        }
    }
    assert!(
        undeclared.is_empty(),
        "variables read and not declared in {DECLARATIONS} (declare each: the configuration \
         reference is generated from it):\n{}",
        undeclared.join("\n")
    );
    for v in VARIABLES {
        let files = readers.get(v.name).cloned().unwrap_or_default();
        match v.parser {
            Parser::Settings => assert!(
                files.iter().any(|f| f.starts_with("shared/settings/src/")),
                "{DECLARATIONS} declares {} as parsed by the settings crate, which reads it \
                 nowhere (read by: {files:?})",
                v.name
            ),
            Parser::File(file) => assert!(
                files.contains(&file),
                "{DECLARATIONS} declares {} as read in {file}, which does not read it (read by: \
                 {files:?})",
                v.name
            ),
        }
    }
}

/// One variable the template sets: where (`Globals` or a function's logical id) and to what.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Set {
    owner: String,
    value: String,
}

/// Every environment variable `template.yaml` sets, in `Globals` and in each resource: the
/// `Variables:` blocks, read as text (a key below `Variables:`, more indented than it).
fn template_settings(template: &str) -> BTreeMap<String, Vec<Set>> {
    let mut out: BTreeMap<String, Vec<Set>> = BTreeMap::new();
    let mut section = "";
    let mut owner = String::new();
    let mut variables_at: Option<usize> = None;
    for line in template.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent == 0 {
            section = trimmed.trim_end_matches(':');
            variables_at = None;
            continue;
        }
        if !matches!(section, "Globals" | "Resources") {
            continue;
        }
        if indent == 2 {
            owner = if section == "Globals" {
                "Globals".to_owned()
            } else {
                trimmed.trim_end_matches(':').to_owned()
            };
        }
        match variables_at {
            Some(at) if indent > at => {
                if let Some((name, value)) = trimmed.split_once(':') {
                    out.entry(name.trim().to_owned()).or_default().push(Set {
                        owner: owner.clone(),
                        value: value.trim().to_owned(),
                    });
                }
                continue;
            }
            Some(_) => variables_at = None,
            None => {}
        }
        if trimmed == "Variables:" {
            variables_at = Some(indent);
        }
    }
    out
}

/// The template's parameters' names.
fn parameters(template: &str) -> BTreeSet<String> {
    let section = format!("\n{template}");
    let section = section
        .split_once("\nParameters:\n")
        .expect("template.yaml has Parameters")
        .1;
    section
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with(' ') || l.starts_with('#'))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.trim_end().ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':').to_owned())
        .collect()
}

#[test]
fn every_variable_the_template_sets_is_declared_and_every_one_declared_as_set_is_set() {
    let template = read("template.yaml");
    let set = template_settings(&template);
    let mut wrong = Vec::new();
    for (name, places) in &set {
        if reference::variable(name).is_none() {
            let owners: Vec<&str> = places.iter().map(|s| s.owner.as_str()).collect();
            wrong.push(format!(
                "template.yaml sets {name} ({owners:?}), which {DECLARATIONS} does not declare"
            ));
        }
    }
    for v in VARIABLES {
        match (v.template_leaves, set.get(v.name)) {
            (None, None) => wrong.push(format!(
                "{DECLARATIONS} says template.yaml sets {}, and it does not (or say why not: \
                 `.left(..)`)",
                v.name
            )),
            (Some(why), Some(places)) => wrong.push(format!(
                "{DECLARATIONS} says template.yaml leaves {} ({why}), and it sets it: {places:?}",
                v.name
            )),
            _ => {}
        }
        if v.place == Place::Local && v.template_leaves.is_none() {
            wrong.push(format!(
                "{} is read locally only, yet declared as set by the template",
                v.name
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_template_reader_finds_globals_and_each_functions_variables() {
    let template = "Parameters:\n  P:\n    Type: String\nGlobals:\n  Function:\n    Environment:\n      Variables:\n        IMGEST_A: !Ref P\n        # a comment\n        IMGEST_B: aws\n    Runtime: x\nResources:\n  Fn:\n    Properties:\n      Environment:\n        Variables:\n          IMGEST_C: \"5\"\n      MemorySize: 1\n  Other:\n    Properties:\n      Description: IMGEST_D: not a variable\nOutputs:\n  X:\n    Value: 1\n";
    let set = template_settings(template);
    let names: Vec<&str> = set.keys().map(String::as_str).collect();
    assert_eq!(names, ["IMGEST_A", "IMGEST_B", "IMGEST_C"]);
    assert_eq!(
        set["IMGEST_C"],
        [Set {
            owner: "Fn".into(),
            value: "\"5\"".into()
        }]
    );
    assert_eq!(set["IMGEST_A"][0].owner, "Globals");
    assert_eq!(parameters(template), BTreeSet::from(["P".to_owned()]));
}

/// How the reference shows a value the template sets.
fn shown(value: &str, parameters: &BTreeSet<String>) -> String {
    if let Some(name) = value.strip_prefix("!Ref ") {
        return if parameters.contains(name) {
            format!("`{name}`")
        } else {
            format!("the stack's `{name}`")
        };
    }
    let literal = value.trim_matches('"');
    if !value.starts_with('!') {
        return format!("`{literal}`");
    }
    if value == "!Join" {
        // A list joined over several lines: the stack's resources' attributes.
        return "the stack's resources (`!Join`)".to_owned();
    }
    if value.len() <= 48 {
        format!("`{value}`")
    } else if value.starts_with("!Sub") {
        "the stack's resources (`!Sub`)".to_owned()
    } else {
        let head: String = value.chars().take(40).collect();
        format!("`{head}…`")
    }
}

/// The template column of one variable: what sets it, and for which functions.
fn template_column(v: &Variable, set: Option<&Vec<Set>>, parameters: &BTreeSet<String>) -> String {
    let Some(places) = set else {
        return format!("— ({})", v.template_leaves.unwrap_or("not set"));
    };
    // The functions of each value, in the template's order.
    let mut values: Vec<(String, Vec<&str>)> = Vec::new();
    for s in places {
        let value = shown(&s.value, parameters);
        match values.iter_mut().find(|(v, _)| *v == value) {
            Some((_, owners)) => owners.push(&s.owner),
            None => values.push((value, vec![&s.owner])),
        }
    }
    values
        .into_iter()
        .map(|(value, owners)| {
            if owners == ["Globals"] {
                value
            } else {
                format!("{value} ({})", owners.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

const BEGIN: &str = "<!-- BEGIN settings: generated from shared/settings/src/reference.rs and template.yaml; rewrite with IMGEST_BLESS=1 cargo test --workspace --test e2e -- reference:: -->";
const END: &str = "<!-- END settings -->";

/// The reference's table, as `docs/configuration.md` holds it.
fn render(template: &str) -> String {
    let set = template_settings(template);
    let parameters = parameters(template);
    let mut out = format!(
        "{BEGIN}\n| variable | default | bounds | where | template (AWS) | meaning |\n|---|---|---|---|---|---|\n"
    );
    for v in VARIABLES {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            v.name,
            reference::default_shown(v),
            reference::bounds(v),
            v.place.as_str(),
            template_column(v, set.get(v.name), &parameters),
            v.meaning,
        ));
    }
    out.push_str(END);
    out.push('\n');
    out
}

#[test]
fn the_configuration_reference_is_generated_from_the_declarations_and_the_template() {
    imgest_testing::generated::hold(
        &root().join("docs/configuration.md"),
        "docs/configuration.md",
        BEGIN,
        END,
        &render(&read("template.yaml")),
    );
}
