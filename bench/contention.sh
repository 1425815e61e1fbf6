#!/usr/bin/env bash
# The contention benchmark: the shared DynamoDB items the seed's peak writes hardest, each
# written by many concurrent writers through the real adapters against moto behind a proxy
# that adds a fixed latency per request (see `imgest-bench contention --help` and
# docs/benchmarks.md). Not a test: a measurement, run by hand.
#
# Usage:
#   bench/contention.sh                              # 64 writers, 10 s per target, 5 ms
#   bench/contention.sh --writers 16 --duration 5s --targets ratelimit,image
#   bench/contention.sh --before REV [ARGS]          # the same on commit REV first
#
# Needs cargo, python3 (with venv) and curl. Other arguments go to `imgest-bench contention`.
set -euo pipefail
cd "$(dirname "$0")/.."

before=
if [ "${1:-}" = --before ]; then
    before=$2
    shift 2
fi

infra/setup.sh tests
source infra/moto.sh
moto_client_env

profile=${BENCH_PROFILE:-release}
target_dir=${CARGO_TARGET_DIR:-target}
bin_dir=$profile
[ "$profile" = dev ] && bin_dir=debug

if [ -n "$before" ]; then
    tree=$target_dir/contention-before
    rm -rf "$tree"
    git worktree add --detach "$tree" "$before" >/dev/null
    trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
    # REV must have this benchmark (any commit since it landed).
    absolute=$(realpath "$target_dir")
    (cd "$tree" && CARGO_TARGET_DIR="$absolute" cargo build --profile "$profile" -p imgest-bench)
    echo "before ($before):"
    "$target_dir/$bin_dir/imgest-bench" contention "$@"
    echo
    echo "after ($(git rev-parse --short HEAD)):"
fi
cargo build --profile "$profile" -p imgest-bench
"$target_dir/$bin_dir/imgest-bench" contention "$@"
