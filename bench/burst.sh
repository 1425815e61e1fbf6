#!/usr/bin/env bash
# The memory budget under a burst: starts `imgest serve` (release) with IMGEST_MEMORY_BUDGET,
# sends it distinct 20-49 MP photos all at once (imgest-bench burst), and prints how they were
# answered, the time, and the server's peak RSS (VmHWM). Not a test: a measurement.
#
# Usage: bench/burst.sh [COUNT]   (50)
# Settings (environment): BENCH_BUDGET (512MiB), CARGO_TARGET_DIR as for cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

count=${1:-50}
budget=${BENCH_BUDGET:-512MiB}
_bench_say "building imgest and imgest-bench (release)"
imgest=$(bench_build imgest)
bench=$(bench_build imgest-bench)

data=$(mktemp -d)
out=$(mktemp)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$data" "$out"' EXIT
IMGEST_DATA_DIR="$data" IMGEST_LISTEN=127.0.0.1:0 IMGEST_MEMORY_BUDGET="$budget" \
    IMGEST_LOG=warn "$imgest" serve >"$out" &
server=$!
# The server prints its address once it listens.
until grep -q "serving on" "$out"; do
    kill -0 "$server" || { echo "imgest serve exited" >&2; exit 1; }
    sleep 0.1
done
url=$(grep -o 'http://[0-9.:]*' "$out" | head -1)
"$bench" burst --url "$url" --count "$count"
curl -fsS "$url/healthz" >/dev/null && echo "still serving"
peak=$(awk '/VmHWM/ {print $2}' "/proc/$server/status")
echo "peak RSS: $((peak / 1024)) MiB (IMGEST_MEMORY_BUDGET=$budget)"
