#!/usr/bin/env bash
# How long imgest takes to build, and how big the Lambda bootstraps are: the figures
# docs/benchmarks.md#build-times quotes. Each commit is measured in fresh clones (nothing
# reused from this checkout's target/), so the figures are what a new machine pays:
#
#   clean      `cargo build --workspace --all-targets` (what the test command compiles)
#   touch      the same again after touching one flow file (GC's): a developer's rebuild
#   demo       `infra/demo.sh` from a fresh clone (its build and the tour)
#   sam        `sam build` of the arm64 functions from nothing (infra/lambda-build.sh --sam),
#              and each bootstrap's size
#
# Usage:
#   bench/build-times.sh                 # this commit (HEAD)
#   bench/build-times.sh --before REV    # REV, then HEAD, one after the other
#   bench/build-times.sh --only clean,touch [--before REV]
#
# Takes long (about an hour a commit on 2 cores, most of it `sam build`); run it on an otherwise
# idle machine. Results go to stdout as a table and to target/build-times/RESULTS.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

before=""
only="clean,touch,demo,sam"
while [ $# -gt 0 ]; do
    case "$1" in
        --before) before=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) echo "usage: bench/build-times.sh [--before REV] [--only clean,touch,demo,sam]" >&2; exit 2 ;;
    esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }

infra/setup.sh lambda
work="$PWD/target/build-times"
mkdir -p "$work"
results="$work/RESULTS"
: >"$results"

# A fresh clone of REV under $work/NAME.
clone() {
    local rev=$1 dir=$2
    rm -rf "$dir"
    git clone --quiet --no-local --no-checkout . "$dir"
    git -C "$dir" checkout --quiet "$rev"
}

# Seconds COMMAND takes in DIR, wall-clock then CPU (user + system, children included: the
# figure to compare when the machine was not idle). Its output goes to DIR.log.
seconds() {
    local dir=$1; shift
    local timing="$dir.time"
    /usr/bin/time -f "%e %U %S" -o "$timing" bash -c 'cd "$1" && shift && "$@"' _ "$dir" "$@" \
        >>"$dir.log" 2>&1 || { _bench_say "failed: $* (see $dir.log)"; return 1; }
    awk '{ printf "%d %d\n", $1, $2 + $3 }' "$timing"
}

# Appends "REV WHAT WALL" and "REV WHAT-cpu CPU" to the results.
record() {
    local label=$1 what=$2 wall cpu
    read -r wall cpu
    echo "$label $what $wall" >>"$results"
    echo "$label $what-cpu $cpu" >>"$results"
}

measure() {
    local rev=$1 label
    label=$(git rev-parse --short "$rev")
    _bench_say "measuring $label"
    if wants clean || wants touch; then
        local dir="$work/$label-build"
        clone "$rev" "$dir"
        if wants clean; then
            seconds "$dir" cargo build --workspace --all-targets | record "$label" clean
        else
            seconds "$dir" cargo build --workspace --all-targets >/dev/null
        fi
        if wants touch; then
            local flow
            flow=$(cd "$dir" && find shared -path '*flows*' -name gc.rs | head -1)
            touch "$dir/$flow"
            seconds "$dir" cargo build --workspace --all-targets | record "$label" touch
        fi
        rm -rf "$dir"
    fi
    if wants demo; then
        local dir="$work/$label-demo"
        clone "$rev" "$dir"
        seconds "$dir" infra/demo.sh | record "$label" demo
        rm -rf "$dir"
    fi
    if wants sam; then
        local dir="$work/$label-sam"
        clone "$rev" "$dir"
        seconds "$dir" env IMGEST_LAMBDA_TARGET_DIR="$dir/target/lambda-arm64" \
            infra/lambda-build.sh --sam --build-dir "$dir/target/lambda-arm64/sam" | record "$label" sam
        for bootstrap in "$dir"/target/lambda-arm64/sam/*/bootstrap; do
            echo "$label size:$(basename "$(dirname "$bootstrap")") $(wc -c <"$bootstrap")" >>"$results"
        done
        rm -rf "$dir"
    fi
}

[ -n "$before" ] && measure "$before"
measure HEAD

python3 - "$results" <<'PY'
import sys
rows = {}
revs = []
for line in open(sys.argv[1]):
    rev, what, value = line.split()
    if rev not in revs:
        revs.append(rev)
    rows.setdefault(what, {})[rev] = int(value)
print(f"{'what':<34}" + "".join(f"{r:>12}" for r in revs))
for what, by_rev in rows.items():
    if what.startswith("size:"):
        cells = "".join(f"{by_rev[r] / 1e6:>9.1f} MB" if r in by_rev else f"{'-':>12}" for r in revs)
        print(f"{'bootstrap ' + what[5:]:<34}{cells}")
    else:
        name = what[:-4] + " (CPU)" if what.endswith("-cpu") else what + " (wall)"
        cells = "".join(f"{by_rev[r] / 60:>8.1f} min" if r in by_rev else f"{'-':>12}" for r in revs)
        print(f"{name:<34}{cells}")
PY
