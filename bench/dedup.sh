#!/usr/bin/env bash
# Dedup hits through the local runner's HTTP API: `imgest serve` on 127.0.0.1 pinned to one
# core, one ~1 MB JPEG uploaded once, then wrk POSTs the same bytes again and again from the
# other core. Prints requests/s, p50/p99 latency and the MB/s the server hashes, next to the
# md-5 crate's single-core MB/s measured in the same run (`imgest-bench md5`, same core): a
# dedup hit is MD5 of the body, its SHA-256 (checked against the stored image's) and one record
# write, so the share of MD5 alone is what the issue's bound (70 %) is about, and MD5 then
# SHA-256 is the hit's hashing ceiling.
#
# Usage: bench/dedup.sh [SECONDS]   (default 10; wrk runs once for that long)
#
# Needs cargo, wrk and curl (Debian: apt-get install wrk curl), taskset, and what
# bench/tools.sh installs (the photo: mate-backgrounds' Dune.jpg, 1.0 MB).
# Settings (environment): BENCH_SERVER_CORE (0), BENCH_CLIENT_CORE (1), BENCH_CONNECTIONS (4),
# BENCH_IMGEST (an imgest binary to measure instead of building this tree's, e.g. an older one).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh

seconds="${1:-10}"
server_core="${BENCH_SERVER_CORE:-0}"
client_core="${BENCH_CLIENT_CORE:-1}"
command -v wrk >/dev/null || { _bench_say "wrk is missing (apt-get install wrk)"; exit 1; }

bench_install
bin="${BENCH_IMGEST:-$(bench_build imgest)}"
bench=$(bench_build imgest-bench)
body="$BENCH_PHOTOS/jpeg/Dune.jpg"

data=$(mktemp -d -t imgest-bench-dedup.XXXXXX)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$data"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
IMGEST_DATA_DIR="$data" IMGEST_LISTEN="127.0.0.1:$port" IMGEST_LOG=warn \
    taskset -c "$server_core" "$bin" serve >"$data/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.1
done
url="http://127.0.0.1:$port/v1/images"
first=$(curl -fsS -o /dev/null -w '%{http_code}' -H 'Content-Type: image/jpeg' --data-binary "@$body" "$url")
again=$(curl -fsS -w '\n' -H 'Content-Type: image/jpeg' --data-binary "@$body" "$url")
case "$again" in
    *'"deduplicated":true'*) ;;
    *) _bench_say "the second upload was not a dedup hit: $again"; exit 1 ;;
esac
_bench_say "first upload: $first; then $seconds s of wrk on core $client_core, server on core $server_core"

# MD5 alone just before and just after the load, on the server's core (the two differ when
# something else shares the machine; the report shows both).
md5_before=$(taskset -c "$server_core" "$bench" md5)
result=$(BENCH_BODY="$body" taskset -c "$client_core" wrk -t1 -c "${BENCH_CONNECTIONS:-4}" \
    -d "${seconds}s" --latency -s bench/dedup.lua "$url" | tail -n 1)
md5_after=$(taskset -c "$server_core" "$bench" md5)
python3 - "$result" "$md5_before" "$md5_after" <<'PY'
import json, sys
r, before, after = (json.loads(a) for a in sys.argv[1:4])
m = {"md5_mb_s_median": (before["md5_mb_s_median"] + after["md5_mb_s_median"]) / 2}
mb_s = r["req_s"] * r["body_bytes"] / 1e6
print(f"dedup hits: {r['body_bytes'] / 1e6:.2f} MB body, {r['requests']} requests in {r['seconds']:.1f} s, "
      f"non-2xx answers {r['non_2xx']}, socket errors {r['errors']}")
print(f"  {r['req_s']:.0f} req/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
print(f"  {mb_s:.0f} MB/s hashed end to end; md-5 alone on one core: {m['md5_mb_s_median']:.0f} MB/s "
      f"(before {before['md5_mb_s_median']:.0f}, after {after['md5_mb_s_median']:.0f}) "
      f"-> {100 * mb_s / m['md5_mb_s_median']:.0f} %")
both = (before["md5_then_sha256_mb_s_median"] + after["md5_then_sha256_mb_s_median"]) / 2
print(f"  MD5 then SHA-256 on one core: {both:.0f} MB/s (the hit's hashing ceiling, "
      f"{100 * both / m['md5_mb_s_median']:.0f} % of MD5 alone; SHA extensions: {after['sha_ni']})")
PY
