#!/usr/bin/env bash
# The AWS bill per million photos, measured: starts moto (an AWS emulator, see infra/moto.sh),
# builds imgest-bench in release mode and runs `imgest-bench cost`, which drives the real functions'
# handlers through a request-counting proxy in front of the emulator and prints the cost tables
# (per stage, requests per photo, per scenario against the targets). Not a test: a
# measurement, run by hand. docs/cost.md explains the model.
#
# Usage:
#   bench/cost.sh                   # 25 offers x 8 photos per scenario
#   bench/cost.sh --offers 50 --photos 10 --host-latency 300ms
#
# Needs cargo, python3 (with venv) and curl. Arguments go to `imgest-bench cost`.
set -euo pipefail
cd "$(dirname "$0")/.."

infra/setup.sh tests

# Start moto on a free port (stopped on exit); this exports AWS_ENDPOINT_URL.
source infra/moto.sh

# The AWS SDK reads these: fake credentials and a region for the emulator.
moto_client_env

profile=${BENCH_PROFILE:-release}
cargo build --profile "$profile" -p imgest-bench
target_dir=${CARGO_TARGET_DIR:-target}
[ "$profile" = dev ] && profile=debug
"$target_dir/$profile/imgest-bench" cost "$@"
