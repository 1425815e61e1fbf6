#!/usr/bin/env bash
# The whole test suite: unit tests, the port contract suites on the embedded adapters and on the
# AWS adapters (against moto, a local AWS emulator), the end-to-end tests (the runner on a
# real socket, real SQLite, a real directory), then the capacity model on seed 001's peak (no
# breach), then the HTTP API fuzzed against its OpenAPI
# document by schemathesis (infra/schemathesis.sh: no 5xx, and every answer as documented),
# then the page in a headless Chromium (infra/browser-test.sh), then the Lambda functions as
# SAM builds them: the nine arm64 bootstraps built by `sam build` (in its debug mode: the dev
# profile the host's tests use; `infra/lambda-smoke.sh --release` builds and checks the shipping
# profile) and run under qemu-user (infra/lambda-smoke.sh).
#
# Needs cargo, python3 and curl: infra/setup.sh installs the build tools that are missing
# (cmake, nasm, a C compiler, python3's venv, Chromium and its WebDriver, qemu-user and an
# arm64 glibc), and the first run installs moto, schemathesis, selenium, SAM, cargo-lambda and
# zig into venvs under ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools} (see infra/moto.sh,
# infra/schemathesis.sh, infra/browser-test.sh, infra/lambda-build.sh) and fetches the
# pipeline's public corpus, Pillow's test images, with their references (infra/corpus.sh). The
# first run builds the arm64 functions too (in target/lambda-arm64, the longest step the first
# time: docs/benchmarks.md#build-times; later runs rebuild what changed).
#
# Usage:
#   infra/test.sh              # everything
#   infra/test.sh ARGS         # ARGS go to `cargo test` (e.g. a test name filter)
#   IMGEST_TEST_LAMBDA=0 infra/test.sh   # without the arm64 bootstraps (quicker; not Linux)
#   IMGEST_TEST_SCHEMATHESIS=0 infra/test.sh   # without the schemathesis run
#   IMGEST_TEST_BROWSER=0 infra/test.sh        # without the browser test
set -euo pipefail
cd "$(dirname "$0")/.."

infra/setup.sh tests

# Start moto on a free port (stopped on exit); this exports AWS_ENDPOINT_URL.
source infra/moto.sh

# The AWS SDK reads these: fake credentials and a region for the emulator.
moto_client_env
# The AWS tests must run here: a test that finds no emulator fails instead of skipping.
export IMGEST_TEST_AWS=1
# infra/moto_server.py serialises DynamoDB requests, so the racing-writers checks are sound.
export IMGEST_TEST_DYNAMODB_CONCURRENCY=1

# The arm64 build starts now, beside the host's build and tests, and is waited for at the end:
# it fills the core the host's tests leave idle while they wait on moto, the partner hosts and
# their subprocesses, instead of adding its minutes after them. Its output goes to a log
# printed when it is waited for; a failed test stops it (its own session, so its children stop
# with it).
arm64_build_pid=
if [ "${IMGEST_TEST_LAMBDA:-1}" != 0 ] && [ "$(uname -s)" = Linux ]; then
    infra/setup.sh lambda
    arm64_log="${IMGEST_LAMBDA_TARGET_DIR:-$PWD/target/lambda-arm64}/build.log"
    mkdir -p "$(dirname "$arm64_log")"
    echo "test: building the arm64 functions in the background (log: $arm64_log)" >&2
    setsid infra/lambda-smoke.sh --build-only >"$arm64_log" 2>&1 &
    arm64_build_pid=$!
    # moto.sh's trap, and this build's.
    trap 'moto_stop 2>/dev/null || true; [ -z "$arm64_build_pid" ] || kill -- "-$arm64_build_pid" 2>/dev/null || true' EXIT
fi

# The pipeline's public-corpus test (shared/pipeline/tests/corpus.rs): Pillow's test images and
# their references, fetched from PyPI and rendered once (infra/corpus.sh exports
# IMGEST_CORPUS_DIR); here a missing corpus fails the test instead of skipping it.
source infra/corpus.sh
corpus_install
export IMGEST_TEST_CORPUS=1

cargo test --workspace --all-targets "$@"

# The capacity model on seed 001's peak (docs/capacity.md), from the committed profiles: a
# breach fails the suite.
BENCH_PROFILE=dev bench/capacity.sh

if [ "${IMGEST_TEST_SCHEMATHESIS:-1}" != 0 ]; then
    infra/schemathesis.sh
fi

if [ "${IMGEST_TEST_BROWSER:-1}" != 0 ]; then
    infra/browser-test.sh
fi

if [ "${IMGEST_TEST_LAMBDA:-1}" != 0 ]; then
    if [ -n "$arm64_build_pid" ]; then
        arm64_status=0
        wait "$arm64_build_pid" || arm64_status=$?
        arm64_build_pid=
        cat "$arm64_log" >&2
        [ "$arm64_status" = 0 ] || { echo "test: the arm64 build failed" >&2; exit 1; }
    fi
    # With the build done, this rebuilds nothing (seconds) and runs the bootstraps.
    infra/lambda-smoke.sh
fi
