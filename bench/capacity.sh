#!/usr/bin/env bash
# The capacity model (docs/capacity.md): seed 001's peak, or your scenario, against the
# deployment, from counts measured on the real handlers. Without --measure it reads the
# committed profiles (docs/capacity/profile.json, docs/capacity/contention.json); with it, it
# measures them again first (the cost benchmark, then the contention benchmark, both against
# moto: a few minutes) and writes them there. Exits non-zero on any breach.
#
# Usage:
#   bench/capacity.sh                                  # the default scenario
#   bench/capacity.sh --scenario my-peak.json --suggest
#   bench/capacity.sh --measure                        # measure again, then model
#
# Needs cargo; --measure also needs python3 (with venv) and curl. Other arguments go to
# `imgest-bench capacity`.
set -euo pipefail
cd "$(dirname "$0")/.."

measure=
if [ "${1:-}" = --measure ]; then
    measure=1
    shift
fi

profile=${BENCH_PROFILE:-release}
target_dir=${CARGO_TARGET_DIR:-target}
bin_dir=$profile
[ "$profile" = dev ] && bin_dir=debug
cargo build --profile "$profile" -p imgest-bench
bench=$target_dir/$bin_dir/imgest-bench

if [ -n "$measure" ]; then
    infra/setup.sh tests
    source infra/moto.sh
    moto_client_env
    # 100 offers of 10 photos of realistic sizes and formats: 10 fetch batches of 100 and 10
    # intake batches of 10. Twice that (20 of each) held 16 GB in moto, which keeps every
    # stored photo in memory, and was killed on a 24-GB machine.
    "$bench" cost --offers 100 --photos 10 --realistic-photos --profile-out docs/capacity/profile.json
    "$bench" contention --profile-out docs/capacity/contention.json
fi
"$bench" capacity "$@"
