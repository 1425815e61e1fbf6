#!/usr/bin/env bash
# The variant formats compared (bench/formats.py says exactly how): for JPEG, WebP and AVIF at
# three qualities each, the mean bytes of a 1280-pixel variant, its butteraugli distance from
# the lossless 1280-pixel picture, and the encoder's CPU per variant, on the benchmark photos;
# then the bytes WebP and AVIF need for the quality of the default JPEG (q82). Not a test: a
# measurement, run by hand (docs/benchmarks.md#output-formats has the figures).
#
# Usage:
#   bench/formats.sh            # the benchmark photos (bench/tools.sh installs them)
#   bench/formats.sh FILE...    # these photos instead
#
# The first run installs libvips (PyPI), the photos and libjxl's butteraugli (Debian packages,
# unpacked under the tools directory, nothing installed system-wide).
# Settings (environment): BENCH_ROUNDS (5), BENCH_CORE (0), CARGO_TARGET_DIR as for cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

# libjxl's tools from Debian bookworm, with the libraries butteraugli_main needs besides the
# system's.
JXL_PACKAGES=(libjxl-devtools libjxl0.7 libhwy1 libtcmalloc-minimal4 libopenexr-3-1-30 libimath-3-1-29)

bench_install
jxl="$_bench_tools/jxl"
if [ ! -x "$jxl/usr/bin/butteraugli_main" ]; then
    _bench_say "installing libjxl's butteraugli (Debian packages, unpacked in $jxl)"
    debs=$(mktemp -d)
    (cd "$debs" && apt-get download "${JXL_PACKAGES[@]}")
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$jxl"; done
    rm -rf "$debs"
fi
cat > "$jxl/butteraugli" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$jxl/usr/lib/x86_64-linux-gnu" exec "$jxl/usr/bin/butteraugli_main" "\$@"
WRAP
chmod +x "$jxl/butteraugli"

_bench_say "building imgest-bench (release)"
imgest=$(bench_build imgest-bench)
if [ $# -gt 0 ]; then
    photos=("$@")
else
    photos=("$BENCH_PHOTOS"/jpeg/*.jpg)
fi
out=$(mktemp -d -t imgest-formats.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$BENCH_PYTHON" bench/formats.py --imgest "$imgest" --butteraugli "$jxl/butteraugli" \
    --rounds "${BENCH_ROUNDS:-5}" --core "${BENCH_CORE:-0}" --out "$out" "${photos[@]}"
