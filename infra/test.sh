#!/usr/bin/env bash
# The whole test suite: unit tests, the port contract suites on the embedded adapters, and the
# end-to-end tests (the runner on a real socket, real SQLite, a real directory).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets "$@"
