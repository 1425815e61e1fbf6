#!/usr/bin/env bash
# What one photo costs `imgest process` (release, one process per photo): CPU seconds (user +
# system) and peak RSS, with its answer. Not a test: a measurement, run by hand.
#
# Two sets by default:
# - large JPEGs, progressive and baseline, of 15 and 17 MP (4:2:0) made from a benchmark photo.
#   A progressive JPEG is decoded from whole-image coefficients (2 bytes each: 3 bytes a pixel
#   at 4:2:0, 6 at 4:4:4), the largest thing an ordinary photo holds; the target is at most
#   64 MiB;
# - the hostile corpus (`imgest-bench hostile`): scan bombs up to the body limit, 49 MP PNGs,
#   chunks that inflate to a GiB, a 3000-frame GIF, a 268 MP canvas. A scan bomb must be
#   answered in under a second of CPU whatever its size (up to the body limit).
#
# Usage:
#   bench/process.sh            # both sets
#   bench/process.sh FILE...    # these files instead
#
# The first run installs libvips (PyPI) and the photos (Debian), as bench/pipeline.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

_bench_say "building imgest and imgest-bench (release)"
imgest=$(bench_build imgest)
bench=$(bench_build imgest-bench)

if [ $# -gt 0 ]; then
    files=("$@")
else
    bench_install
    large="$BENCH_PHOTOS/large"
    if [ ! -f "$large/.complete" ]; then
        mkdir -p "$large"
        "$BENCH_PYTHON" - "$BENCH_PHOTOS/jpeg/TwoWings.jpg" "$large" <<'PY'
import sys, pyvips
src, out = sys.argv[1], sys.argv[2]
photo = pyvips.Image.new_from_file(src)
# 2560x1600 scaled to about 15 and 17 megapixels; quality 90 and 4:2:0 as cameras write them
# (libvips would leave chroma whole at this quality: 4:4:4 has twice the coefficients).
for mp, scale in ((15, 1.913), (17, 2.037)):
    big = photo.resize(scale, kernel="lanczos3")
    for name, interlace in (("progressive", True), ("baseline", False)):
        big.jpegsave(f"{out}/{mp}mp-{name}.jpg", Q=90, interlace=interlace,
                     subsample_mode="on", keep="none")
PY
        touch "$large/.complete"
    fi
    hostile=$(mktemp -d -t imgest-hostile.XXXXXX)
    trap 'rm -rf "$hostile"' EXIT
    "$bench" hostile --out "$hostile" >/dev/null
    files=("$large"/*.jpg "$hostile"/*)
fi

python3 - "$imgest" "${files[@]}" <<'PY'
import os, subprocess, sys
imgest, files = sys.argv[1], sys.argv[2:]
env = {k: v for k, v in os.environ.items() if not k.startswith("IMGEST_")}
print("| photo | MB | answer | CPU s | peak RSS MiB |")
print("|---|---|---|---|---|")
for f in files:
    child = subprocess.Popen([imgest, "process", f], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = status
    line = out.splitlines()[0] if out else ""
    words = line.split()
    if " error " in line:
        answer = words[words.index("error") + 1].rstrip(":")
    elif status == 0:
        answer = next((w for w in words if "x" in w and w.replace("x", "").isdigit()), "ok")
    else:
        answer = f"exit status {status}"
    cpu = usage.ru_utime + usage.ru_stime
    mb = os.path.getsize(f) / 1e6
    print(f"| {os.path.basename(f)} | {mb:.2f} | {answer} | {cpu:.2f} | {usage.ru_maxrss / 1024:.1f} |")
PY
