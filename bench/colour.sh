#!/usr/bin/env bash
# Colour management measured (bench/colour.py says exactly how): imgest's variants of Display P3,
# Adobe RGB and CMYK photos made from the demo samples, against libvips' colour-managed rendering
# (mean CIE76 ΔE per photo), and what converting a P3 photo costs over the same pixels untagged.
# Not a test: a measurement, run by hand.
#
# Usage:
#   bench/colour.sh                 # the photos in samples/
#   bench/colour.sh --before REV    # also imgest-bench built from commit REV (its ΔE beside)
#   bench/colour.sh FILE...         # these sRGB photos instead
#
# The first run installs libvips (PyPI) and the benchmark photos (Debian): see bench/tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

before=""
if [ "${1:-}" = "--before" ]; then
    before="${2:?--before needs a commit}"
    shift 2
fi
bench_install
args=()
if [ -n "$before" ]; then
    _bench_say "building imgest-bench at $before (release)"
    args+=(--before "$(bench_build_at "$before" imgest-bench)")
fi
_bench_say "building imgest-bench (release)"
imgest=$(bench_build imgest-bench)
if [ $# -gt 0 ]; then
    photos=("$@")
else
    photos=(samples/*.jpg)
fi
out=$(mktemp -d -t imgest-colour.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$imgest" icc adobe-rgb "$out/AdobeRGB.icc"
taskset -c "${BENCH_CORE:-0}" "$BENCH_PYTHON" bench/colour.py --imgest "$imgest" "${args[@]}" \
    --adobe "$out/AdobeRGB.icc" --cmyk shared/pipeline/profiles/FOGRA39L.icc --out "$out" \
    "${photos[@]}"
