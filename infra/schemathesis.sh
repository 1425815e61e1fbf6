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

say() { echo "schemathesis.sh: $*" >&2; }

source infra/venv.sh
source infra/runner.sh
venv_install schemathesis "schemathesis==$SCHEMATHESIS_VERSION"
runner_prepare schemathesis

# One token that may call every route: every scope, and a client (offers and crawls need one).
runner_tokens "$work" imgest-schemathesis schemathesis "imgest:upload imgest:offers imgest:metrics imgest:operator" \
    schemathesis

export IMGEST_DATA_DIR="$work/data"
# Generated uploads come faster than a seller's: the per-caller rate is not under test here
# (its 429 is documented, but answering it to most uploads would leave the rest untested).
export IMGEST_UPLOAD_RPM=1000000
export IMGEST_LOG="${IMGEST_LOG:-warn}"

runner_start "$work/serve.log"
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
