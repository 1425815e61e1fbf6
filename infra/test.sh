#!/usr/bin/env bash
# The whole test suite: unit tests, the port contract suites on the embedded adapters and on the
# AWS adapters (against moto, a local AWS emulator), and the end-to-end tests (the runner on a
# real socket, real SQLite, a real directory).
#
# Needs cargo, python3 and curl: infra/setup.sh installs the build tools that are missing
# (cmake, nasm, a C compiler, python3's venv), and the first run installs moto into a venv under
# ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools} (see infra/moto.sh). Arguments go to `cargo test`.
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

cargo test --workspace --all-targets "$@"
