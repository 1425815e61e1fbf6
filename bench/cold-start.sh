#!/usr/bin/env bash
# Each Lambda function's cold start: from starting its bootstrap to its first poll for an event
# (init: settings, clients) and to its first answer (init and the first invocation), as the
# bootstraps' smoke test (tests/e2e/bootstraps.rs) measures them against the Runtime API
# emulator, with moto for AWS. The x86-64 release build of the functions, run directly and one
# test at a time: not Lambda's figure (no download of the code, no microVM), but what the
# binary itself does before it answers. Medians of ROUNDS runs (default 5). Not a test: a
# measurement, run by hand.
#
# The first answers include the work of the smoke test's first event: for scheduled-gc a sweep
# of all 256 shards on moto, for process and backfill a whole photo.
#
# Usage:
#   bench/cold-start.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

rounds=${1:-5}
mapfile -t functions < <(infra/functions.sh | cut -d' ' -f1)
[ ${#functions[@]} -gt 0 ] || { echo "cold-start: infra/functions.sh found no functions" >&2; exit 1; }

_bench_say "building the ${#functions[@]} functions (release)"
args=()
for f in "${functions[@]}"; do args+=(-p "$f"); done
cargo build --release --quiet "${args[@]}"
target=$(bench_target_dir)
# cargo-lambda's layout (<function>/bootstrap), which the smoke test reads.
layout="$target/cold-start"
for f in "${functions[@]}"; do
    mkdir -p "$layout/$f"
    ln -sf "$target/release/$f" "$layout/$f/bootstrap"
done
cargo test --quiet --workspace --test e2e --no-run

source infra/moto.sh
moto_client_env
export IMGEST_TEST_AWS=1 IMGEST_TEST_DYNAMODB_CONCURRENCY=1 IMGEST_BOOTSTRAPS="$layout"

lines="$layout/cold-start.txt"
: >"$lines"
for round in $(seq "$rounds"); do
    _bench_say "round $round of $rounds"
    cargo test --quiet --workspace --test e2e bootstraps:: -- --ignored --nocapture \
        --test-threads=1 2>&1 | grep -o 'cold start: .* s$' >>"$lines"
done

python3 - "$lines" <<'PY'
import re, statistics, sys
samples = {}
for line in open(sys.argv[1]):
    m = re.match(r"cold start: (\S+) init ([\d.]+) s, first answer ([\d.]+) s", line)
    if m:
        samples.setdefault(m[1], []).append((float(m[2]), float(m[3])))
print(f"{'function':<22} {'runs':>4} {'init ms':>8} {'first answer ms':>16}")
for name, runs in sorted(samples.items()):
    init = statistics.median(r[0] for r in runs) * 1000
    first = statistics.median(r[1] for r in runs) * 1000
    print(f"{name:<22} {len(runs):>4} {init:>8.1f} {first:>16.1f}")
PY
