//! The CLI reference (`docs/cli.md`) is the command tree as clap declares it: every command,
//! subcommand and argument with its help, rendered here and held to the document (a command or
//! a flag added, changed or removed without it fails, showing the lines; `IMGEST_BLESS=1`
//! rewrites it).

use clap::{Arg, Command, CommandFactory};

use crate::Cli;

const BEGIN: &str = "<!-- BEGIN commands: generated from the CLI's clap declarations (cli/src); rewrite with IMGEST_BLESS=1 cargo test -p imgest --bin imgest reference -->";
const END: &str = "<!-- END commands -->";

/// A table cell: one line, no column breaks, and outside code spans no `<`, `>` a renderer
/// would take for HTML.
fn cell(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.replace('<', "&lt;").replace('>', "&gt;")
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
        .replace('|', "\\|")
}

/// How an argument is written: `--name <VALUE>`, `--flag` or `<FILE>...`.
fn usage(arg: &Arg) -> String {
    let value = || {
        let names = arg
            .get_value_names()
            .map(|n| {
                n.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
        format!("<{names}>")
    };
    let takes_value = arg.get_action().takes_values();
    let many = matches!(arg.get_num_args(), Some(r) if r.max_values() > 1);
    match arg.get_long() {
        Some(long) if takes_value => format!("--{long} {}", value()),
        Some(long) => format!("--{long}"),
        None if many => format!("{}...", value()),
        None => value(),
    }
}

/// What an argument is: its help, whether it is required, its default.
fn what(arg: &Arg) -> String {
    let mut text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| cell(&h.to_string()))
        .unwrap_or_default();
    let mut notes = Vec::new();
    if arg.is_required_set() {
        notes.push("required".to_owned());
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("default `{}`", defaults.join(",")));
    }
    if arg.is_global_set() {
        notes.push("for every subcommand".to_owned());
    }
    if !notes.is_empty() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!("({})", notes.join("; ")));
    }
    text
}

fn render_command(cmd: &mut Command, depth: usize, out: &mut String) {
    let name = cmd
        .get_bin_name()
        .map(str::to_owned)
        .unwrap_or_else(|| cmd.get_name().to_owned());
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    out.push_str(&format!("{} `{name}`\n\n", "#".repeat(depth + 1)));
    if !about.is_empty() {
        let paragraphs: Vec<String> = about
            .trim()
            .split("\n\n")
            .map(|p| cell(p).replace("\\|", "|"))
            .collect();
        out.push_str(&paragraphs.join("\n\n"));
        out.push_str("\n\n");
    }
    let usage_line = cmd.render_usage().to_string();
    let usage_line = usage_line.trim().trim_start_matches("Usage: ");
    out.push_str(&format!("`{usage_line}`\n\n"));
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | what |\n|---|---|\n");
        for arg in args {
            out.push_str(&format!("| `{}` | {} |\n", usage(arg), what(arg)));
        }
        out.push('\n');
    }
    let mut subcommands: Vec<Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .cloned()
        .collect();
    for sub in &mut subcommands {
        render_command(sub, depth + 1, out);
    }
}

/// The reference's generated part.
pub fn render() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = format!("{BEGIN}\n\n");
    let mut commands: Vec<Command> = cli
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .cloned()
        .collect();
    for cmd in &mut commands {
        render_command(cmd, 1, &mut out);
    }
    out.push_str(END);
    out.push('\n');
    out
}

#[test]
fn the_cli_reference_is_the_command_tree_clap_declares() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
    imgest_testing::generated::hold(&path, "docs/cli.md", BEGIN, END, &render());
}

#[test]
fn every_command_has_help_and_the_rendering_shows_each_argument() {
    let mut cli = Cli::command();
    cli.build();
    for cmd in cli.get_subcommands().filter(|s| s.get_name() != "help") {
        assert!(
            cmd.get_about().is_some(),
            "`imgest {}` has no help",
            cmd.get_name()
        );
    }
    let rendered = render();
    assert!(rendered.contains("## `imgest sweep`"), "{rendered}");
    assert!(rendered.contains("| `--shard <SHARD>` |"), "{rendered}");
    assert!(
        rendered.contains("### `imgest variants confirm`"),
        "{rendered}"
    );
    assert!(rendered.contains("| `<FILES>...` |"), "{rendered}");
}
