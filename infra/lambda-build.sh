#!/usr/bin/env bash
# Builds the Lambda functions for arm64 (runtime provided.al2023) with cargo-lambda, which
# cross-compiles with zig as the linker: no Docker, no cross toolchain. The release profile is
# the one that ships: stripped, no debug info (see Cargo.toml); with `SAM_BUILD_MODE=debug`,
# `--sam` builds with the dev profile instead. infra/lambda-smoke.sh (part of the test command)
# builds with `--sam` and runs what it built; a cold build's time is in
# docs/benchmarks.md#build-times.
#
# Usage:
#   infra/lambda-build.sh                 # every function: target/lambda-arm64/lambda/<function>/bootstrap
#   infra/lambda-build.sh -p imgest-api   # other `cargo lambda build` arguments replace the
#                                         # function list (e.g. -p imgest to try the toolchain)
#   infra/lambda-build.sh --sam [ARGS]    # `sam build ARGS` with the same tools on PATH
#                                         # (SAM from infra/check-template.sh's venv); the
#                                         # artifacts land in .aws-sam/build/
#
# Settings (environment):
#   IMGEST_TOOLS_DIR  where tools are installed (default ~/.cache/imgest-tools); cargo-lambda
#                     and zig go to the venv $IMGEST_TOOLS_DIR/lambda (about 15 s from PyPI)
#   IMGEST_LAMBDA_TARGET_DIR  the cargo target directory of the arm64 build (default
#                     target/lambda-arm64): apart from the host's, so neither build evicts the
#                     other and `cargo test` can run meanwhile (each holds its own lock).
#
# Needs rustup (the aarch64-unknown-linux-gnu standard library is added if missing). Verified
# with cargo-lambda 1.9.2 and zig 0.17.1: aws-lc-sys (rustls' crypto) and rusqlite's bundled
# SQLite cross-compile; the binaries need glibc 2.30 at most (provided.al2023 has 2.34).
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: cargo-lambda drives cargo-zigbuild, whose zig support moves with zig releases.
CARGO_LAMBDA_VERSION="1.9.2"
ZIGLANG_VERSION="0.17.1"

# The functions: one package (and binary) each, from the workspace (infra/functions.sh).
mapfile -t FUNCTIONS < <(infra/functions.sh | cut -d' ' -f1)
[ ${#FUNCTIONS[@]} -gt 0 ] || { echo "lambda-build: infra/functions.sh found no functions" >&2; exit 1; }

say() { echo "lambda-build: $*" >&2; }
# shellcheck source=infra/venv.sh
source infra/venv.sh

infra/setup.sh
venv_install lambda "cargo-lambda==$CARGO_LAMBDA_VERSION" "ziglang==$ZIGLANG_VERSION"
export CARGO_TARGET_DIR="${IMGEST_LAMBDA_TARGET_DIR:-$PWD/target/lambda-arm64}"
if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    say "adding the rust target aarch64-unknown-linux-gnu"
    rustup target add aarch64-unknown-linux-gnu
fi
# cargo-lambda is found as `cargo lambda`; zig as `python3 -m ziglang` (the venv's python3).
export PATH="$venv/bin:$PATH"

started=$SECONDS
if [ "${1:-}" = "--sam" ]; then
    shift
    infra/check-template.sh --install-only
    export SAM_CLI_TELEMETRY=0
    "${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}/sam/bin/sam" build --template template.yaml "$@"
    say "sam build done in $((SECONDS - started))s"
    exit 0
fi

if [ $# -gt 0 ]; then
    args=("$@")
else
    args=()
    for f in "${FUNCTIONS[@]}"; do args+=(-p "$f"); done
fi
cargo lambda build --release --arm64 "${args[@]}"

target_dir=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
say "built in $((SECONDS - started))s:"
for bootstrap in "$target_dir"/lambda/*/bootstrap; do
    [ -f "$bootstrap" ] && ls -l "$bootstrap" >&2
done
