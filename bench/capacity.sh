#!/usr/bin/env bash
# The capacity model (docs/capacity.md): seed 001's peak, or your scenario, against the
# deployment, from counts measured on the real handlers. Without --measure it reads the
# committed profiles (docs/capacity/profile.json, docs/capacity/contention.json); with it, it
# measures them again first (the cost benchmark, then the contention benchmark, both against
# moto: a few minutes) and writes them there. Exits non-zero on any breach.
#
# With --validate it checks the model's per-instance rates against the real handlers instead:
# each function's invocations held to its share of a vCPU by a CPU quota (cgroup v1's cpu
# controller, which it must be allowed to write: root, or a delegated subtree), the model's
# formulas given the same run's counts and latencies; it writes docs/capacity/validation.json
# and fails when a row is more than 25 % from its measurement (15 to 40 minutes).
#
# Usage:
#   bench/capacity.sh                                  # the default scenario
#   bench/capacity.sh --scenario my-peak.json --suggest
#   bench/capacity.sh --measure                        # measure again, then model
#   bench/capacity.sh --validate                       # model beside measurement, per row
#
# Needs cargo; --measure and --validate also need python3 (with venv) and curl. Other arguments
# go to `imgest-bench capacity` (with --validate, to `imgest-bench validate`).
set -euo pipefail
cd "$(dirname "$0")/.."

measure=
validate=
case "${1:-}" in
--measure)
    measure=1
    shift
    ;;
--validate)
    validate=1
    shift
    ;;
esac

# What the measurement builds needs (the codecs' build tools) and the emulator.
if [ -n "$measure$validate" ]; then
    infra/setup.sh tests
fi
profile=${BENCH_PROFILE:-release}
target_dir=${CARGO_TARGET_DIR:-target}
bin_dir=$profile
[ "$profile" = dev ] && bin_dir=debug
cargo build --profile "$profile" -p imgest-bench
bench=$target_dir/$bin_dir/imgest-bench

if [ -n "$validate" ]; then
    source infra/moto.sh
    moto_client_env
    "$bench" validate --out docs/capacity/validation.json "$@"
    exit
fi
if [ -n "$measure" ]; then
    source infra/moto.sh
    moto_client_env
    # 200 offers of 10 photos of realistic sizes and formats: 20 fetch batches of 100 and 20
    # intake batches of 10.
    "$bench" cost --offers 200 --photos 10 --realistic-photos --profile-out docs/capacity/profile.json
    "$bench" contention --profile-out docs/capacity/contention.json
fi
"$bench" capacity "$@"
