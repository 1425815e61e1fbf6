//! The Lambda functions are listed once: each crate under `functions/` with its
//! `[package.metadata.lambda]` (the library module of its handler, the template functions that
//! deploy it, the sample events of its triggers). Every other list of them is held to that one
//! here: the workspace's members, `template.yaml` (its functions, and the metrics of the
//! alarms that watch every function, generated from the list), `events/` and its README, the
//! bootstraps' smoke test, the fuzz target of the events, and the table in
//! `docs/architecture.md` ("Adding a Lambda function" is the checklist these tests and the
//! template's, `tests/e2e/template/`, enforce). The scripts that build or run every function
//! read it (`infra/functions.sh`). And every function resolves the same features of the crates
//! they share, so `sam build` compiles each shared crate once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One Lambda function, as its crate declares it.
#[derive(Debug)]
struct Function {
    /// The package (and binary) name, `imgest-<name>`.
    package: String,
    /// Its directory under the workspace, `functions/<name>`.
    dir: String,
    /// The library module its handler lives in (`imgest_lambda_crawl::fetch`).
    handler: String,
    resources: Vec<String>,
    events: Vec<String>,
}

impl Function {
    /// `<name>` of `functions/<name>`.
    fn name(&self) -> &str {
        self.dir.trim_start_matches("functions/")
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The workspace's packages under `functions/`, from `cargo metadata`.
fn functions() -> Vec<Function> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let workspace = PathBuf::from(meta["workspace_root"].as_str().unwrap());
    let mut functions = Vec::new();
    for package in meta["packages"].as_array().unwrap() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().strip_prefix(&workspace).unwrap();
        if !dir.starts_with("functions") {
            continue;
        }
        let package_name = package["name"].as_str().unwrap().to_owned();
        let list = |key: &str| -> Vec<String> {
            package["metadata"]["lambda"][key]
                .as_array()
                .unwrap_or_else(|| {
                    panic!("{package_name}: [package.metadata.lambda] has no `{key}` list")
                })
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        let handler = package["metadata"]["lambda"]["handler"]
            .as_str()
            .unwrap_or_else(|| {
                panic!("{package_name}: [package.metadata.lambda] has no `handler` module")
            })
            .to_owned();
        functions.push(Function {
            handler,
            resources: list("resources"),
            events: list("events"),
            package: package_name.clone(),
            dir: dir.to_str().unwrap().to_owned(),
        });
    }
    functions.sort_by(|a, b| a.package.cmp(&b.package));
    assert!(!functions.is_empty(), "no crates under functions/");
    functions
}

/// A template function: its logical id, `CodeUri` and `BuildProperties.Binary`.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Deployed {
    resource: String,
    code_uri: String,
    binary: String,
}

/// Every `AWS::Serverless::Function` of `template.yaml`. The template is read as text: each
/// resource is a two-space-indented key under `Resources:`, its properties below it.
fn deployed(template: &str) -> Vec<Deployed> {
    let resources = template
        .split_once("\nResources:\n")
        .expect("template.yaml has Resources")
        .1;
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in resources.lines() {
        if line.starts_with("  ") && !line.starts_with("   ") && line.trim_end().ends_with(':') {
            blocks.push((line.trim().trim_end_matches(':').to_owned(), String::new()));
        } else if let Some((_, body)) = blocks.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
        if !line.is_empty() && !line.starts_with(' ') && !line.starts_with('#') {
            break; // the next top-level section (Outputs, ...)
        }
    }
    let field = |body: &str, name: &str| -> String {
        body.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    blocks
        .into_iter()
        .filter(|(_, body)| field(body, "Type") == "AWS::Serverless::Function")
        .map(|(resource, body)| Deployed {
            code_uri: field(&body, "CodeUri"),
            binary: field(&body, "Binary"),
            resource,
        })
        .collect()
}

#[test]
fn every_template_function_is_a_function_crate_and_deploys_what_the_crate_declares() {
    let functions = functions();
    let template = read("template.yaml");
    let mut expected: BTreeSet<Deployed> = BTreeSet::new();
    for f in &functions {
        assert!(
            !f.resources.is_empty(),
            "{}: deployed by no template function",
            f.package
        );
        for resource in &f.resources {
            expected.insert(Deployed {
                resource: resource.clone(),
                code_uri: f.dir.clone(),
                binary: f.package.clone(),
            });
        }
    }
    let found: BTreeSet<Deployed> = deployed(&template).into_iter().collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    let unknown: Vec<_> = found.difference(&expected).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "template.yaml's functions differ from the crates' [package.metadata.lambda] \
         (docs/architecture.md, \"Adding a Lambda function\", steps 1 and 2):\n\
         declared, not in the template: {missing:#?}\nin the template, not declared: {unknown:#?}"
    );
}

#[test]
fn every_sample_event_belongs_to_a_function_and_is_listed_with_it() {
    let functions = functions();
    let readme = read("events/README.md");
    let mut owners: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for f in &functions {
        assert!(!f.events.is_empty(), "{}: no sample event", f.package);
        for event in &f.events {
            let text = read(&format!("events/{event}"));
            serde_json::from_str::<Value>(&text)
                .unwrap_or_else(|e| panic!("events/{event} ({}): {e}", f.package));
            owners.entry(event.clone()).or_default().push(&f.package);
        }
    }
    for (event, packages) in &owners {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{event}` |")))
            .unwrap_or_else(|| panic!("events/README.md lists no row for `{event}`"));
        for package in packages {
            assert!(
                row.contains(&format!("`{package}`")),
                "events/README.md's row for `{event}` does not name `{package}`: {row}"
            );
        }
    }
    for entry in std::fs::read_dir(root().join("events")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".json") {
            assert!(
                owners.contains_key(&name),
                "events/{name} is no function's sample event ([package.metadata.lambda] events)"
            );
        }
    }
}

#[test]
fn the_bootstraps_smoke_test_runs_every_function() {
    let smoke = read("tests/e2e/bootstraps.rs");
    for f in functions() {
        let first = &f.resources[0];
        let declared = f
            .resources
            .iter()
            .any(|r| smoke.contains(&format!("Bootstrap::of(\"{}\", \"{r}\")", f.package)));
        assert!(
            declared,
            "tests/e2e/bootstraps.rs has no `Bootstrap::of(\"{}\", \"{first}\")` \
             (docs/architecture.md, \"Adding a Lambda function\", step 5)",
            f.package
        );
    }
}

#[test]
fn the_fuzz_target_of_the_events_reads_every_functions_events() {
    let target = read("fuzz/fuzz_targets/events.rs");
    let seeds: Vec<String> = std::fs::read_dir(root().join("fuzz/seeds/events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for f in functions() {
        let row = target
            .lines()
            .find(|l| l.starts_with("//! | `") && l.contains(&format!("| {} |", f.name())))
            .unwrap_or_else(|| {
                panic!(
                    "fuzz/fuzz_targets/events.rs's table of kinds has no row for {} \
                     (docs/architecture.md, \"Adding a Lambda function\", step 6)",
                    f.name()
                )
            });
        let byte = row.split('`').nth(1).unwrap();
        assert!(
            seeds.iter().any(|s| s.starts_with(&format!("{byte}-"))),
            "fuzz/seeds/events has no seed for {} (kind `{byte}`)",
            f.name()
        );
    }
}

#[test]
fn the_architecture_guide_lists_every_function() {
    let guide = read("docs/architecture.md");
    let rows: BTreeMap<&str, &str> = guide
        .lines()
        .filter(|l| l.contains("| `functions/"))
        .filter_map(|l| Some((l.split('`').nth(1)?, l)))
        .collect();
    let functions = functions();
    for f in &functions {
        let row = rows.get(f.dir.as_str()).unwrap_or_else(|| {
            panic!(
                "docs/architecture.md's table of functions has no row for `{}` (step 7)",
                f.dir
            )
        });
        for item in f.resources.iter().chain(&f.events) {
            assert!(
                row.contains(&format!("`{item}`")),
                "docs/architecture.md's row for `{}` does not name `{item}`",
                f.dir
            );
        }
    }
    assert_eq!(
        rows.len(),
        functions.len(),
        "docs/architecture.md lists functions that are not crates: {:?}",
        rows.keys()
    );
}

#[test]
fn the_scripts_that_build_every_function_read_the_list() {
    let listed = std::process::Command::new(root().join("infra/functions.sh"))
        .output()
        .expect("infra/functions.sh runs");
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Vec<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let expected: Vec<String> = functions()
        .iter()
        .map(|f| format!("{} {}", f.package, f.dir))
        .collect();
    assert_eq!(listed, expected);
    for script in ["infra/lambda-build.sh", "bench/cold-start.sh"] {
        let text = read(script);
        let code: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        assert!(
            code.iter().any(|l| l.contains("infra/functions.sh")),
            "{script} does not read infra/functions.sh"
        );
        for f in functions() {
            assert!(
                !code.iter().any(|l| l.contains(&f.package)),
                "{script} names {} itself: it should read infra/functions.sh",
                f.package
            );
        }
    }
}

/// Each dependency's features as `cargo tree` resolves them for `package` alone (what `sam
/// build` builds), by `name version`; the workspace's own crates left out.
fn resolved_features(package: &str) -> BTreeMap<String, String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "-f",
            "{p}|{f}",
            "--target",
            "aarch64-unknown-linux-gnu",
        ])
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (crate_, features) = line.trim_end_matches(" (*)").split_once('|')?;
            let mut words = crate_.split_whitespace();
            let (name, version) = (words.next()?, words.next()?);
            (!name.starts_with("imgest")).then(|| (format!("{name} {version}"), features.into()))
        })
        .collect()
}

#[test]
fn every_function_resolves_the_same_features_of_the_crates_they_share() {
    // `sam build` builds one function at a time in one target directory: a shared crate whose
    // features differ between two functions is compiled again, with all that depends on it.
    // shared/lambda/Cargo.toml turns the union on for every function.
    let resolved: Vec<(String, BTreeMap<String, String>)> = functions()
        .iter()
        .map(|f| (f.package.clone(), resolved_features(&f.package)))
        .collect();
    let mut differing = Vec::new();
    let mut crates: BTreeSet<&String> = BTreeSet::new();
    for (_, features) in &resolved {
        crates.extend(features.keys());
    }
    for crate_ in crates {
        let sets: BTreeMap<&str, Vec<&str>> =
            resolved
                .iter()
                .fold(BTreeMap::new(), |mut sets, (package, features)| {
                    if let Some(f) = features.get(crate_) {
                        sets.entry(f.as_str()).or_default().push(package.as_str());
                    }
                    sets
                });
        if sets.len() > 1 {
            differing.push(format!("{crate_}: {sets:?}"));
        }
    }
    assert!(
        differing.is_empty(),
        "features differ between functions (turn the union on in shared/lambda/Cargo.toml):\n{}",
        differing.join("\n")
    );
}

/// The functions that never decode a photo nor download one: they run over the stores alone.
const NEITHER_DECODE_NOR_CRAWL: [&str; 3] = [
    "imgest-ttl-cleanup",
    "imgest-scheduled-gc",
    "imgest-erasure",
];

#[test]
fn only_the_functions_that_decode_link_the_codecs_and_only_those_that_crawl_the_downloader() {
    // A function that linked them anyway would carry their code and be rebuilt by every change
    // to the crawl or the pipeline (docs/architecture.md, the crates' arrows).
    let mut wrong = Vec::new();
    for f in functions() {
        let manifest = read(&format!("{}/Cargo.toml", f.dir));
        let declares = |krate: &str| {
            manifest.lines().any(|l| {
                l.trim_start().starts_with(&format!("{krate}."))
                    || l.starts_with(&format!("{krate} ="))
            })
        };
        let (decodes, crawls) = (declares("imgest-pipeline"), declares("imgest-crawl"));
        if NEITHER_DECODE_NOR_CRAWL.contains(&f.package.as_str()) && (decodes || crawls) {
            wrong.push(format!(
                "{} depends on imgest-pipeline or imgest-crawl",
                f.package
            ));
        }
        let linked = resolved_features(&f.package);
        let links = |name: &str| linked.keys().any(|k| k.split(' ').next() == Some(name));
        if links("image") != decodes {
            wrong.push(format!(
                "{}: links the codecs (`image`): {}, depends on imgest-pipeline: {decodes}",
                f.package,
                links("image")
            ));
        }
        if links("reqwest") != crawls {
            wrong.push(format!(
                "{}: links the downloader (`reqwest`): {}, depends on imgest-crawl: {crawls}",
                f.package,
                links("reqwest")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_template_reader_finds_functions_and_stops_at_the_next_section() {
    let template = "Parameters:\n  X:\n    Type: String\nResources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Metadata:\n      BuildProperties:\n        Binary: imgest-x\n    Properties:\n      CodeUri: functions/x\n  Queue:\n    Type: AWS::SQS::Queue\nOutputs:\n  Y:\n    Type: AWS::Serverless::Function\n";
    assert_eq!(
        deployed(template),
        vec![Deployed {
            resource: "Fn".into(),
            code_uri: "functions/x".into(),
            binary: "imgest-x".into(),
        }]
    );
}

/// Build times and bootstrap sizes drift with every dependency and every crate: they are quoted
/// once, in docs/benchmarks.md#build-times (measured by bench/build-times.sh), and linked from
/// everywhere else. Limits (a size a check enforces) are not figures of this kind.
#[test]
fn build_times_and_bootstrap_sizes_are_quoted_only_in_the_benchmarks_guide() {
    let mut files: Vec<String> = ["README.md", "Cargo.toml", "template.yaml", ".ci/run"]
        .map(String::from)
        .to_vec();
    for dir in ["docs", "infra", "bench"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let quoted = name.ends_with(".md") || name.ends_with(".sh") || name.ends_with(".py");
            if quoted && name != "benchmarks.md" {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    let mut found = Vec::new();
    for file in &files {
        let text = read(file);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let window = lines[i.saturating_sub(1)..(i + 2).min(lines.len())]
                .join(" ")
                .to_lowercase();
            let about_builds = ["build", "built ", "compil", "first time", "cold"]
                .iter()
                .any(|w| window.contains(w));
            let measured_time = about_builds && quotes_a_build_time(&line.to_lowercase());
            // A limit's words may end the line before its size.
            let previous = if i > 0 { lines[i - 1] } else { "" };
            let measured_size = window.contains("bootstrap") && quotes_a_size(previous, line);
            if measured_time || measured_size {
                found.push(format!("{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "quote these in docs/benchmarks.md#build-times and link there:\n{}",
        found.join("\n")
    );
}

/// "about 9 minutes", "takes 20 to 25 minutes", "15 minutes on 2 cores".
fn quotes_a_build_time(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).enumerate().any(|(i, pair)| {
        let number = pair[0].trim_start_matches('(').parse::<f64>().is_ok();
        let unit =
            pair[1].starts_with("minute") || pair[1].trim_end_matches([',', ')', ';']) == "min";
        let lead = words[..i]
            .iter()
            .rev()
            .take(3)
            .any(|w| ["about", "takes", "took", "(about", "in", "to"].contains(w));
        number && unit && (lead || words.get(i + 2).is_some_and(|w| *w == "on"))
    })
}

/// A size in MB on `line` that is not a limit ("at most 20 MB", "limit is 250 MB"; the limit's
/// words may end the `previous` line).
fn quotes_a_size(previous: &str, line: &str) -> bool {
    let lower = format!("{previous} {line}").to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let first = previous.split_whitespace().count();
    words.windows(2).enumerate().skip(first).any(|(i, pair)| {
        let number = pair[0].trim_start_matches('(').parse::<f64>().is_ok();
        let limit = words[..i]
            .iter()
            .rev()
            .take(2)
            .any(|w| ["most", "limit", "is", "over", "under"].contains(w));
        number && pair[1].starts_with("mb") && !limit
    })
}

#[test]
fn the_drift_check_tells_figures_from_limits() {
    assert!(quotes_a_build_time(
        "a cold build takes about 20 to 25 minutes on 2 cores"
    ));
    assert!(quotes_a_build_time(
        "(about 9 minutes the first time on 2 cores)"
    ));
    assert!(!quotes_a_build_time("tasks due 15 minutes later"));
    assert!(quotes_a_size(
        "",
        "the bootstraps are 13.6 MB (ttl-cleanup) to 18.8 MB (api)"
    ));
    assert!(!quotes_a_size("", "checks that each is at most 20 MB"));
    assert!(!quotes_a_size("", "Lambda's limit is 250 MB unzipped"));
    assert!(!quotes_a_size(
        "# (every bootstrap at most",
        "# 20 MB), then"
    ));
    assert!(!quotes_a_size(
        "# 20 MB), then the smoke test",
        "# arm64 `bootstrap` runs"
    ));
}

#[test]
fn every_crate_under_functions_is_a_workspace_member() {
    let members: BTreeSet<String> = functions().into_iter().map(|f| f.dir).collect();
    for entry in std::fs::read_dir(root().join("functions")).unwrap() {
        let entry = entry.unwrap();
        let dir = format!("functions/{}", entry.file_name().to_string_lossy());
        if entry.path().join("Cargo.toml").exists() {
            assert!(
                members.contains(&dir),
                "{dir} is not a member of the workspace (Cargo.toml's `members`; \
                 docs/architecture.md, \"Adding a Lambda function\", step 1)"
            );
        }
    }
}

/// A handler module's source file: `imgest_lambda::erasure` is `shared/lambda/src/erasure.rs`,
/// `imgest_lambda_crawl::fetch` is `shared/lambda-crawl/src/fetch.rs`.
fn handler_file(handler: &str) -> Option<PathBuf> {
    let (krate, module) = handler.split_once("::")?;
    let dir = root()
        .join("shared")
        .join(krate.strip_prefix("imgest_")?.replace('_', "-"))
        .join("src");
    let path = module.replace("::", "/");
    [format!("{path}.rs"), format!("{path}/mod.rs")]
        .into_iter()
        .map(|file| dir.join(file))
        .find(|file| file.exists())
}

#[test]
fn each_function_wires_a_handler_from_the_library() {
    for f in functions() {
        let file = handler_file(&f.handler).unwrap_or_else(|| {
            panic!(
                "{}: its handler module `{}` is no file under shared/ (docs/architecture.md, \
                 \"Adding a Lambda function\", step 1)",
                f.package, f.handler
            )
        });
        let module = f.handler.rsplit("::").next().unwrap();
        let main = read(&format!("{}/src/main.rs", f.dir));
        let (krate, _) = f.handler.split_once("::").unwrap();
        assert!(
            main.contains(krate) && main.contains(module),
            "{}/src/main.rs does not use its handler `{}` ({})",
            f.dir,
            f.handler,
            file.display()
        );
    }
}

/// The functions an alarm on every function watches together: CloudWatch takes at most
/// [`ALARM_METRICS`] metrics in an alarm, so every function's are split in two, by where the
/// handler lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// The crawl's functions (their handlers in `imgest-lambda-crawl`).
    Crawl,
    /// The others: the API and the stores' upkeep.
    Others,
}

impl Group {
    fn of(f: &Function) -> Self {
        if f.handler.starts_with("imgest_lambda_crawl::") {
            Self::Crawl
        } else {
            Self::Others
        }
    }

    /// Who the alarm's sum is of, in its label.
    fn label(self) -> &'static str {
        match self {
            Self::Crawl => "the crawl's functions",
            Self::Others => "the API's and the upkeep's functions",
        }
    }
}

/// The alarms that watch every function, each a sum of one metric of a group's template
/// functions: their metrics are generated from the inventory.
const FUNCTION_ALARMS: [(&str, &str, Group); 4] = [
    ("FunctionErrorsAlarm", "Errors", Group::Others),
    ("FunctionThrottlesAlarm", "Throttles", Group::Others),
    ("CrawlFunctionErrorsAlarm", "Errors", Group::Crawl),
    ("CrawlFunctionThrottlesAlarm", "Throttles", Group::Crawl),
];

/// CloudWatch takes at most this many metrics in an alarm's metric math.
const ALARM_METRICS: usize = 10;

/// The `Metrics` of an alarm that sums `metric` over `resources` (`group`'s), as the template
/// holds it.
fn alarm_metrics(alarm: &str, metric: &str, group: Group, resources: &[&str]) -> String {
    assert!(
        resources.len() <= ALARM_METRICS,
        "{alarm} would sum {} functions' {metric}: CloudWatch takes at most {ALARM_METRICS} \
         metrics in an alarm; split it",
        resources.len()
    );
    let mut out = format!(
        "        # BEGIN metrics {alarm}: generated from the functions' inventory (tests/e2e/inventory.rs); rewrite with IMGEST_BLESS=1 cargo test --workspace --test e2e -- inventory::\n"
    );
    for (i, resource) in resources.iter().enumerate() {
        out.push_str(&format!(
            "        - Id: m{i}\n          ReturnData: false\n          MetricStat:\n            Metric:\n              Namespace: AWS/Lambda\n              MetricName: {metric}\n              Dimensions: [{{Name: FunctionName, Value: !Ref {resource}}}]\n            Period: 300\n            Stat: Sum\n"
        ));
    }
    let ids: Vec<String> = (0..resources.len()).map(|i| format!("m{i}")).collect();
    out.push_str(&format!(
        "        - Id: total\n          Label: {metric} of {}\n          Expression: SUM([{}])\n          ReturnData: true\n        # END metrics {alarm}\n",
        group.label(),
        ids.join(",")
    ));
    out
}

#[test]
fn the_alarms_on_every_function_watch_each_template_function() {
    let functions = functions();
    for (alarm, metric, group) in FUNCTION_ALARMS {
        let resources: Vec<&str> = functions
            .iter()
            .filter(|f| Group::of(f) == group)
            .flat_map(|f| f.resources.iter().map(String::as_str))
            .collect();
        assert!(!resources.is_empty(), "{alarm} would watch no function");
        let rendered = alarm_metrics(alarm, metric, group, &resources);
        let begin = rendered.lines().next().unwrap();
        let end = rendered.lines().last().unwrap();
        crate::template::hold_block(begin, end, &rendered);
    }
    // Each metric is watched on every function, by one alarm.
    for metric in ["Errors", "Throttles"] {
        let groups: Vec<Group> = FUNCTION_ALARMS
            .iter()
            .filter(|(_, m, _)| *m == metric)
            .map(|(_, _, g)| *g)
            .collect();
        for f in &functions {
            assert_eq!(
                groups.iter().filter(|g| **g == Group::of(f)).count(),
                1,
                "{}'s {metric}: one alarm",
                f.package
            );
        }
    }
}

#[test]
fn every_template_function_logs_to_a_log_group_with_a_retention() {
    let template = read("template.yaml");
    for f in functions() {
        for resource in &f.resources {
            let text = crate::template::resource(&template, resource);
            let group = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("LogGroup: !Ref "))
                .unwrap_or_else(|| {
                    panic!("{resource} has no `LoggingConfig: LogGroup: !Ref <its log group>`")
                });
            let group_text = crate::template::resource(&template, group);
            assert!(
                group_text.contains("Type: AWS::Logs::LogGroup")
                    && group_text.contains("RetentionInDays: !Ref LogRetentionDays"),
                "{resource}'s log group {group} is not a log group kept LogRetentionDays"
            );
        }
    }
}
