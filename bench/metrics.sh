#!/usr/bin/env bash
# What the stages' metrics cost the photo pipeline: one imgest-bench binary over the photo set at
# IMGEST_METRICS=off, counts and timings, side by side (each pass runs the three levels in a
# rotated order, every process pinned to the same core). Prints each level's total of per-photo
# medians and its ratio to `off`. Not a test: a measurement, run by hand.
#
# Usage:
#   bench/metrics.sh            # the photo set of bench/pipeline.sh, 5 rounds x 4 passes
#   bench/metrics.sh FILE...    # these files instead
#
# The first run installs the photos (Debian) as bench/tools.sh does. Needs cargo, python3,
# apt-get, dpkg-deb and taskset. Settings (environment): BENCH_ROUNDS (5), BENCH_PASSES (4),
# BENCH_CORE (0).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

bench_install
_bench_say "building imgest-bench (release)"
bin=$(bench_build imgest-bench)
if [ $# -gt 0 ]; then
    files=("$@")
else
    files=("$BENCH_PHOTOS"/jpeg/*.jpg "$BENCH_PHOTOS"/derived/* samples/garden-portrait-exif6.jpg)
fi
_bench_say "${#files[@]} inputs, every process pinned to core ${BENCH_CORE:-0}"
python3 - "$bin" "${BENCH_ROUNDS:-5}" "${BENCH_PASSES:-4}" "${BENCH_CORE:-0}" "${files[@]}" <<'PY'
import json, os, statistics, subprocess, sys

binary, rounds, passes, core, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
levels = ["off", "counts", "timings"]
runs = {level: {} for level in levels}  # level -> file -> every timed run's ms
for p in range(passes):
    order = levels[p % 3:] + levels[:p % 3]
    for level in order:
        env = dict(os.environ, IMGEST_METRICS=level)
        out = subprocess.run(
            ["taskset", "-c", core, binary, "pipeline", "--rounds", rounds, *files],
            env=env, check=True, capture_output=True, text=True,
        ).stdout
        for line in out.splitlines():
            row = json.loads(line)
            assert row["metrics"] == level, row["metrics"]
            runs[level].setdefault(row["file"], []).extend(row["ms"])
total = {level: sum(statistics.median(ms) for ms in runs[level].values()) for level in levels}
ratios = {
    level: statistics.median(
        statistics.median(runs[level][f]) / statistics.median(runs["off"][f]) for f in runs["off"]
    )
    for level in levels
}
print(f"{len(files)} photos, {passes} passes x {rounds} rounds per level, core {core}")
print(f"{'level':8} {'total of medians':>17} {'vs off':>7} {'median photo vs off':>20}")
for level in levels:
    print(f"{level:8} {total[level]:14.1f} ms {total[level] / total['off']:6.3f}x {ratios[level]:19.3f}x")
PY
