#!/usr/bin/env bash
# The Lambda functions: the workspace's packages under functions/, one line each, as
# `package directory` (e.g. `imgest-api functions/api`). The one list the scripts that build or
# run every function read (infra/lambda-build.sh, bench/cold-start.sh); tests/e2e/inventory.rs
# holds the template, the sample events, the bootstraps' smoke test, the fuzz target and the
# docs to it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --no-deps --format-version 1 | python3 -c '
import json, os, sys
meta = json.load(sys.stdin)
root = meta["workspace_root"]
for p in sorted(meta["packages"], key=lambda p: p["name"]):
    d = os.path.relpath(os.path.dirname(p["manifest_path"]), root)
    if d.startswith("functions" + os.sep):
        print(p["name"], d)
'
