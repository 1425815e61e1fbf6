//! The SAM template held to what the code declares: blocks of `template.yaml` generated from
//! the code's lists (the API's routes, each function's permissions) must be what the code
//! renders now, and invariants over those lists hold. `IMGEST_BLESS=1` rewrites the blocks
//! instead of comparing them (then review the diff).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod edges;
mod events;
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

/// The top-level section of `template` under `key` (e.g. `Parameters:`), without its head.
fn section<'a>(template: &'a str, key: &str) -> &'a str {
    let start = template
        .find(&format!("\n{key}\n"))
        .unwrap_or_else(|| panic!("template.yaml has no {key}"))
        + key.len()
        + 2;
    let rest = &template[start..];
    let end = rest
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .find(|&i| rest[i..].starts_with(|c: char| c.is_ascii_alphabetic()))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The entries of `section` at two spaces of indentation, each with its text (the lines
/// indented deeper that follow it).
fn entries(section: &str) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for line in section.lines() {
        let indent = line.len() - line.trim_start().len();
        match line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')) {
            Some(name) if indent == 2 && !name.starts_with('#') => {
                out.push((name, String::new()));
            }
            _ => {
                if let Some((_, text)) = out.last_mut() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    out
}

/// The `KEY: value` lines of the first `Variables:` block in `text`.
fn variables(text: &str) -> Vec<(String, String)> {
    let mut lines = text.lines().skip_while(|l| l.trim() != "Variables:");
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let indent = head.len() - head.trim_start().len();
    lines
        .filter(|l| !l.trim_start().starts_with('#'))
        .take_while(|l| l.len() - l.trim_start().len() > indent)
        .filter_map(|l| {
            let (key, value) = l.trim().split_once(':')?;
            Some((key.to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// The environment `function` starts with as the template deploys it: the Globals' variables,
/// then its own, with every parameter at its default, every condition false, and each stack
/// resource a value of its kind (a queue's URL, a topic's ARN, a name).
pub fn environment(function: &str) -> std::collections::HashMap<String, String> {
    let template = text();
    let defaults: std::collections::HashMap<&str, String> =
        entries(section(&template, "Parameters:"))
            .into_iter()
            .map(|(name, text)| {
                let default = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("Default: "))
                    .unwrap_or_default();
                (name, unquote(default).to_owned())
            })
            .collect();
    let resources = entries(section(&template, "Resources:"));
    let kind_of = |name: &str| -> Option<String> {
        let (_, text) = resources.iter().find(|(n, _)| *n == name)?;
        text.lines()
            .find_map(|l| l.trim().strip_prefix("Type: "))
            .map(str::to_owned)
    };
    let reference = |name: &str| -> String {
        let account = "arn:aws:{}:eu-west-1:123456789012";
        if let Some(default) = defaults.get(name) {
            return default.clone();
        }
        match name {
            "AWS::StackName" => return "imgest".into(),
            "AWS::Region" => return "eu-west-1".into(),
            "AWS::AccountId" => return "123456789012".into(),
            _ => {}
        }
        if let Some((resource, _attribute)) = name.split_once('.') {
            return format!("{}:{resource}", account.replace("{}", "lambda"));
        }
        match kind_of(name).as_deref() {
            Some("AWS::SQS::Queue") => {
                format!("https://sqs.eu-west-1.amazonaws.com/123456789012/{name}")
            }
            Some("AWS::SNS::Topic") => format!("{}:{name}", account.replace("{}", "sns")),
            Some(_) => name.to_ascii_lowercase(),
            None => panic!("{function}: {name} is neither a parameter nor a resource"),
        }
    };
    let resolve = |value: &str| -> String {
        if let Some(name) = value.strip_prefix("!Ref ") {
            return reference(name.trim());
        }
        if let Some(name) = value.strip_prefix("!GetAtt ") {
            return reference(name.trim());
        }
        if let Some(text) = value.strip_prefix("!Sub ") {
            let mut text = unquote(text.trim()).to_owned();
            while let Some(start) = text.find("${") {
                let end = start + text[start..].find('}').expect("an unclosed ${");
                let value = reference(&text[start + 2..end]);
                text.replace_range(start..=end, &value);
            }
            return text;
        }
        if let Some(choice) = value.strip_prefix("!If [") {
            // Every condition is false with the defaults: the last branch.
            let otherwise = choice
                .trim_end_matches(']')
                .rsplit(", ")
                .next()
                .unwrap_or("");
            assert!(
                !otherwise.starts_with('!'),
                "{function}: a condition's false branch to resolve: {value}"
            );
            return unquote(otherwise).to_owned();
        }
        if value == "!Join" {
            // A list the template joins from the stack's resources (the roles' ids): its
            // items are ids, never addresses, so one stands for them all.
            return "AROAEXAMPLEROLEID".into();
        }
        assert!(!value.starts_with('!'), "{function}: {value}");
        unquote(value).to_owned()
    };
    let (_, definition) = resources
        .iter()
        .find(|(n, _)| *n == function)
        .unwrap_or_else(|| panic!("template.yaml has no {function}"));
    variables(section(&template, "Globals:"))
        .into_iter()
        .chain(variables(definition))
        .map(|(key, value)| {
            let value = resolve(&value);
            (key, value)
        })
        .collect()
}

fn unquote(value: &str) -> &str {
    let value = value.trim();
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value)
}
