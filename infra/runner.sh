# Sourced by the infra scripts that test a running `imgest serve` (schemathesis.sh,
# browser-test.sh). `runner_prepare NAME` builds the CLI and sets `imgest` to it, and `work` to a
# fresh directory, removed on exit with the runner stopped. `runner_start LOG` starts "$imgest" serve, with the caller's IMGEST_*
# environment, on a free port of 127.0.0.1, its output in LOG, and waits until it answers
# /healthz; it sets `port`, `base` and `runner_pid`. Three attempts: another process may take
# the port between the pick and the bind. `runner_stop` stops that runner, and only it.
# `runner_tokens DIR ISSUER SUB SCOPE CLIENT` has the runner check tokens (a fresh key's JWKS
# in DIR, written by `imgest token`) and sets `token` to one signed with that key.
runner_pid=

runner_free_port() {
    python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

runner_stop() {
    if [ -n "$runner_pid" ]; then
        kill "$runner_pid" 2>/dev/null || true
        wait "$runner_pid" 2>/dev/null || true
        runner_pid=
    fi
}

# One attempt: waits for /healthz at most ~30 s (every 0.2 s); fails early if the runner exits.
_runner_try() {
    local log=$1 i
    port="$(runner_free_port)"
    IMGEST_LISTEN="127.0.0.1:$port" "$imgest" serve >"$log" 2>&1 &
    runner_pid=$!
    for i in $(seq 1 150); do
        if curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$port/healthz"; then
            base="http://127.0.0.1:$port"
            return 0
        fi
        if ! kill -0 "$runner_pid" 2>/dev/null; then
            wait "$runner_pid" 2>/dev/null || true
            runner_pid=
            return 1
        fi
        sleep 0.2
    done
    echo "runner: it did not answer on port $port within 30s" >&2
    return 1
}

runner_start() {
    local log=$1 attempt
    for attempt in 1 2 3; do
        _runner_try "$log" && return 0
        echo "runner: it failed to start (attempt $attempt); its log:" >&2
        tail -n 20 "$log" >&2 || true
        runner_stop
    done
    return 1
}

runner_tokens() {
    local dir=$1 issuer=$2 sub=$3 scope=$4 client=$5
    export IMGEST_JWKS_FILE="$dir/jwks.json"
    export IMGEST_JWT_ISSUER="$issuer"
    export IMGEST_JWT_AUDIENCE="imgest"
    token="$("$imgest" token --jwks-file "$IMGEST_JWKS_FILE" --issuer "$IMGEST_JWT_ISSUER" \
        --audience "$IMGEST_JWT_AUDIENCE" --sub "$sub" --scope "$scope" \
        --client-id "$client" --valid-for 1h)"
}

runner_prepare() {
    # The build the test run made (`cargo test --workspace --all-targets`), so that after it
    # nothing is built again: `cargo build -p imgest` would build the library a second time
    # with other features, and link a second binary.
    cargo test --workspace --all-targets --no-run --quiet
    imgest="$PWD/target/debug/imgest"
    work="$(mktemp -d -t "imgest-$1.XXXXXX")"
    trap 'runner_stop; rm -rf "$work"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
