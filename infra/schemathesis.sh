#!/usr/bin/env bash
# Fuzzes the HTTP API against its own OpenAPI document with schemathesis: starts the local
# runner (`imgest serve`, checking tokens against a JWKS that `imgest token` writes) on a free
# port of 127.0.0.1 over a fresh data directory, and runs schemathesis on
# /v1/openapi.json with a bearer token that may call every route. Fails on any 5xx answer, and
# on any answer whose status, Content-Type or body the document does not describe.
#
# Needs python3 (with venv), curl and the PyPI registry; builds the CLI (debug) if needed. The
# first run installs schemathesis into a venv under ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools}
# (about 10 s), reused by later runs. infra/test.sh runs this after `cargo test`.
#
# Settings (environment):
#   IMGEST_TOOLS_DIR                where tools are installed (default ~/.cache/imgest-tools)
#   IMGEST_SCHEMATHESIS_EXAMPLES    test cases per operation and phase (default 100: about
#                                   1,600 requests in 10 s on 2 cores, once the CLI is built)
#   IMGEST_SCHEMATHESIS_SEED        a seed, to replay a run (default: a fresh one, printed)
set -euo pipefail
cd "$(dirname "$0")/.."

# The release the run is written against (its CLI options and checks). Bump deliberately.
SCHEMATHESIS_VERSION="4.32.5"

venv="${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}/schemathesis"
say() { echo "schemathesis.sh: $*" >&2; }

# As infra/moto.sh: the stamp is written last, so an interrupted install is redone whole.
install() {
    local stamp="$venv/.installed-schemathesis-$SCHEMATHESIS_VERSION"
    [ -f "$stamp" ] && return 0
    say "installing schemathesis==$SCHEMATHESIS_VERSION into $venv"
    python3 -m venv --clear "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "schemathesis==$SCHEMATHESIS_VERSION"
    touch "$stamp"
}

free_port() {
    "$venv/bin/python" -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

install
cargo build --quiet -p imgest
imgest="$PWD/target/debug/imgest"

work="$(mktemp -d -t imgest-schemathesis.XXXXXX)"
runner_pid=
# Stops the runner this script started (and only that one).
stop_runner() {
    if [ -n "$runner_pid" ]; then
        kill "$runner_pid" 2>/dev/null || true
        wait "$runner_pid" 2>/dev/null || true
        runner_pid=
    fi
}
trap 'stop_runner; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One token that may call every route: both scopes and a client (offers and crawls need one).
export IMGEST_JWKS_FILE="$work/jwks.json"
export IMGEST_JWT_ISSUER="imgest-schemathesis"
export IMGEST_JWT_AUDIENCE="imgest"
token="$("$imgest" token --jwks-file "$IMGEST_JWKS_FILE" --issuer "$IMGEST_JWT_ISSUER" \
    --audience "$IMGEST_JWT_AUDIENCE" --sub schemathesis --scope "imgest:upload imgest:offers" \
    --client-id schemathesis --valid-for 1h)"

export IMGEST_DATA_DIR="$work/data"
# Generated uploads come faster than a seller's: the per-caller rate is not under test here
# (its 429 is documented, but answering it to most uploads would leave the rest untested).
export IMGEST_UPLOAD_RPM=1000000
export IMGEST_LOG="${IMGEST_LOG:-warn}"

# Starts the runner on a free port and waits for /healthz (at most ~30 s, polling every 0.2 s);
# fails early if it exits (another process took the port between the pick and the bind).
start() {
    port="$(free_port)"
    IMGEST_LISTEN="127.0.0.1:$port" "$imgest" serve >"$work/serve.log" 2>&1 &
    runner_pid=$!
    local i
    for i in $(seq 1 150); do
        if curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$port/healthz"; then
            return 0
        fi
        if ! kill -0 "$runner_pid" 2>/dev/null; then
            wait "$runner_pid" 2>/dev/null || true
            runner_pid=
            return 1
        fi
        sleep 0.2
    done
    say "the runner did not answer on port $port within 30s"
    return 1
}
for attempt in 1 2 3; do
    start && break
    say "the runner failed to start (attempt $attempt); its log:"
    tail -n 20 "$work/serve.log" >&2 || true
    [ "$attempt" = 3 ] && exit 1
    stop_runner
    rm -rf "$IMGEST_DATA_DIR"
done

base="http://127.0.0.1:$port"
say "fuzzing $base (runner pid $runner_pid)"
seed=()
if [ -n "${IMGEST_SCHEMATHESIS_SEED:-}" ]; then
    seed=(--seed "$IMGEST_SCHEMATHESIS_SEED")
fi
started=$SECONDS
status=0
# One worker: the runner has the other core, and schemathesis's generator is not reliably
# thread-safe on every Python (CPython 3.11 fails in `ast.parse` with two workers).
# Run from the temporary directory: schemathesis keeps its state (.schemathesis/) in the
# working directory. POST /v1/crawl (operation crawl_offer) is left out: it would have the runner download
# whatever URLs are generated, from the network.
(cd "$work" && "$venv/bin/schemathesis" --no-color run "$base/v1/openapi.json" \
    --url "$base" \
    --header "Authorization: Bearer $token" \
    --exclude-operation-id crawl_offer \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
    --max-examples "${IMGEST_SCHEMATHESIS_EXAMPLES:-100}" \
    --workers 1 \
    --request-timeout 30 \
    --report-dir "$work/report" \
    "${seed[@]}") || status=$?
say "finished in $((SECONDS - started))s (exit $status)"
if [ "$status" != 0 ]; then
    say "the runner's log (last 40 lines):"
    tail -n 40 "$work/serve.log" >&2 || true
fi
exit "$status"
