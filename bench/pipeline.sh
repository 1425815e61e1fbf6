#!/usr/bin/env bash
# imgest's photo pipeline against libvips, on one core, on real photos: prints a table (time,
# ratio to libvips, peak RSS, output bytes, SSIM of the 640 variant) and the totals. Not a test:
# a measurement, run by hand. bench/pipeline.py says exactly what is measured and how.
#
# Usage:
#   bench/pipeline.sh               # all photos, 5 timed rounds x 2 passes each
#   bench/pipeline.sh --fallback    # also the pure-Rust build (no libjpeg-turbo)
#   bench/pipeline.sh --before REV  # also imgest-bench built from commit REV, side by side
#   bench/pipeline.sh FILE...       # these files instead of the photo set
#
# The first run installs libvips (PyPI) and the photos (Debian): see bench/tools.sh.
# Needs cargo, python3 (with venv), apt-get, dpkg-deb and taskset.
#
# Settings (environment): BENCH_ROUNDS (5), BENCH_PASSES (2), BENCH_CORE (0),
# CARGO_TARGET_DIR as for cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

fallback=0
before=""
while [ $# -gt 0 ]; do
    case "$1" in
        --fallback) fallback=1; shift ;;
        --before) before="${2:?--before needs a commit}"; shift 2 ;;
        *) break ;;
    esac
done

bench_install
args=()
if [ "$fallback" = 1 ]; then
    _bench_say "building imgest-bench without libjpeg-turbo (release)"
    pure=$(bench_build imgest-bench --no-default-features)
    cp "$pure" "$pure-pure-rust"
    args+=(--fallback "$pure-pure-rust")
fi
if [ -n "$before" ]; then
    _bench_say "building imgest-bench at $before (release)"
    args+=(--before "$(bench_build_at "$before" imgest-bench)")
fi
_bench_say "building imgest-bench (release)"
args+=(--imgest "$(bench_build imgest-bench)")

if [ $# -gt 0 ]; then
    files=("$@")
else
    files=("$BENCH_PHOTOS"/jpeg/*.jpg "$BENCH_PHOTOS"/derived/* samples/garden-portrait-exif6.jpg)
fi
out=$(mktemp -d -t imgest-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
_bench_say "${#files[@]} inputs, every process pinned to core ${BENCH_CORE:-0}"
"$BENCH_PYTHON" bench/pipeline.py "${args[@]}" \
    --rounds "${BENCH_ROUNDS:-5}" --passes "${BENCH_PASSES:-2}" --core "${BENCH_CORE:-0}" \
    --out "$out" "${files[@]}"
