#!/usr/bin/env bash
# Starts moto's server: an AWS emulator (S3, SQS, SNS, Step Functions, DynamoDB, ...) on one local
# port, so the AWS adapters run their contract suites without an AWS account or a network.
#
# Needs only python3 (with venv), curl and the PyPI registry. Two ways to use it:
#
#   source infra/moto.sh    # starts moto; exports MOTO_PORT, MOTO_PID, MOTO_LOG and
#                           # AWS_ENDPOINT_URL; `moto_client_env` sets fake credentials and a
#                           # region; the caller's EXIT trap stops it (set here: see below)
#   eval "$(infra/moto.sh)" # the same from an interactive shell: prints the exports and
#                           # leaves moto running; stop it with `kill "$MOTO_PID"`
#
# Settings (environment):
#   IMGEST_TOOLS_DIR  where tools are installed (default ~/.cache/imgest-tools); moto's venv
#                     is kept in $IMGEST_TOOLS_DIR/moto and reused by later runs
#   MOTO_PORT         the port to listen on (default: a free one)

# The moto release the tests are written against (the newest when this was written; the
# adapters need 5.2.5 or later).
# Bump deliberately: emulator behaviour changes between releases, and moto_server.py patches
# moto's private names (SQS's SenderId): run tests/e2e/intake_senders_aws.rs after a bump.
MOTO_VERSION="5.2.5"

_moto_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=infra/venv.sh
source "$_moto_dir/venv.sh"

_moto_say() { echo "moto.sh: $*" >&2; }

# Installs moto into its venv (reused across runs: installing takes a minute, starting a
# second) and sets `_moto_venv` to it.
_moto_install() {
    local venv # venv_install sets it: kept from the sourcing script's own
    venv_install moto "moto[server]==$MOTO_VERSION" || return 1
    _moto_venv=$venv
}

# A port nobody listens on right now (the OS picks it). Another process could take it before
# moto binds it; _moto_start then fails to come up and the caller tries another port.
_moto_free_port() {
    "$_moto_venv/bin/python" -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# Starts moto_server on $1 in the background and waits until it answers (at most ~30 s,
# polling every 0.2 s). Fails early if the process exits (for instance: the port is taken).
_moto_start() {
    local port=$1
    MOTO_LOG="${MOTO_LOG:-$(mktemp -t imgest-moto.XXXXXX.log)}"
    # moto's server with DynamoDB requests serialised (see moto_server.py for why).
    "$_moto_venv/bin/python" "$_moto_dir/moto_server.py" "$port" >"$MOTO_LOG" 2>&1 &
    MOTO_PID=$!
    local i
    for i in $(seq 1 150); do
        if curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$port/moto-api/"; then
            MOTO_PORT=$port
            return 0
        fi
        if ! kill -0 "$MOTO_PID" 2>/dev/null; then
            wait "$MOTO_PID" 2>/dev/null || true
            MOTO_PID=
            return 1
        fi
        sleep 0.2
    done
    _moto_say "moto did not answer on port $port within 30s"
    kill "$MOTO_PID" 2>/dev/null || true
    wait "$MOTO_PID" 2>/dev/null || true
    MOTO_PID=
    return 1
}

# Stops the server this script started (and only that one).
moto_stop() {
    if [ -n "${MOTO_PID:-}" ]; then
        kill "$MOTO_PID" 2>/dev/null || true
        wait "$MOTO_PID" 2>/dev/null || true
        MOTO_PID=
    fi
}

# What an AWS client talking to this emulator needs: fixed fake credentials and a region
# (moto accepts any), and no profile, session token or instance metadata of the developer's
# leaking in. Nothing reaches AWS.
moto_client_env() {
    unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN
    export AWS_ACCESS_KEY_ID=test
    export AWS_SECRET_ACCESS_KEY=test
    export AWS_REGION=us-east-1
    export AWS_EC2_METADATA_DISABLED=true
}

_moto_main() {
    _moto_install || { _moto_say "installing moto failed"; return 1; }
    local attempt port
    for attempt in 1 2 3; do
        port="${MOTO_PORT:-$(_moto_free_port)}"
        if _moto_start "$port"; then
            break
        fi
        _moto_say "moto failed to start on port $port (attempt $attempt); its log:"
        tail -n 20 "$MOTO_LOG" >&2 || true
        # A fixed port that fails will fail again.
        [ -n "${MOTO_PORT:-}" ] && return 1
    done
    [ -n "${MOTO_PID:-}" ] || return 1
    # Step Functions executions are not run by default (moto only records them); the
    # delayed-send state machine must really wait and send its message.
    if ! curl -fsS -o /dev/null --max-time 10 -X POST "http://127.0.0.1:$MOTO_PORT/moto-api/config" \
        -H 'Content-Type: application/json' \
        -d '{"stepfunctions":{"execute_state_machine":true}}'; then
        _moto_say "could not enable Step Functions execution"
        moto_stop
        return 1
    fi
    export MOTO_PORT MOTO_PID MOTO_LOG
    export AWS_ENDPOINT_URL="http://127.0.0.1:$MOTO_PORT"
    _moto_say "moto $MOTO_VERSION listening on $AWS_ENDPOINT_URL (pid $MOTO_PID, log $MOTO_LOG)"
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    # Sourced: the caller gets the variables and moto_stop. Whatever happens next in the
    # caller (a failed start, a failed test, Ctrl-C), the emulator this started is stopped: an
    # EXIT trap runs on every way out, and turning INT/TERM into exits makes it run on those.
    trap 'moto_stop 2>/dev/null || true' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    _moto_main
else
    # Run: print the exports for `eval`; the server outlives this script.
    set -euo pipefail
    _moto_main
    echo "export MOTO_PORT=$MOTO_PORT MOTO_PID=$MOTO_PID MOTO_LOG=$MOTO_LOG AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL"
fi
