-- wrk script for bench/dedup.sh: POSTs the same known body (BENCH_BODY) to /v1/images
-- and prints the figures as one JSON line at the end.
wrk.method = "POST"
wrk.headers["Content-Type"] = "image/jpeg"
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = f:read("*all")
f:close()

done = function(summary, latency, requests)
    local seconds = summary.duration / 1e6
    io.write(string.format(
        '{"requests": %d, "seconds": %.3f, "req_s": %.1f, "p50_ms": %.3f, "p99_ms": %.3f, '
            .. '"errors": %d, "non_2xx": %d, "body_bytes": %d}\n',
        summary.requests, seconds, summary.requests / seconds,
        latency:percentile(50) / 1000, latency:percentile(99) / 1000,
        summary.errors.connect + summary.errors.read + summary.errors.write
            + summary.errors.timeout,
        summary.errors.status, #wrk.body))
end
