#!/usr/bin/env bash
# The Lambda functions as `sam deploy` ships them, built and run: `sam build` (cargo-lambda and
# zig, arm64, offline) into a target directory of its own, a size check (every bootstrap at most
# 24 MB), then the bootstraps' smoke test (tests/e2e/bootstraps.rs): each function's
# arm64 `bootstrap` runs under qemu-user against the Runtime API emulator (runtime-api/), with
# the AWS side on moto, fed its trigger's events. `infra/test.sh` runs this last.
#
# Usage:
#   infra/lambda-smoke.sh                # build (only what changed), check, test
#   infra/lambda-smoke.sh --nocapture    # arguments go to the test binary: this one shows each
#                                        # function's `cold start:` line (under qemu: slow)
#   infra/lambda-smoke.sh --build-only   # the build and the size check, no test (infra/test.sh
#                                        # runs this beside the host's tests: see there)
#
# Settings (environment):
#   IMGEST_LAMBDA_TARGET_DIR  the arm64 build's cargo target directory (default
#                             target/lambda-arm64): apart from the tests' debug build, so each
#                             stays incremental, and a CI cache can keep it. `sam build` writes
#                             the artifacts to its sam/ subdirectory. A cold build's time is
#                             in docs/benchmarks.md#build-times; with nothing changed, seconds.
#   IMGEST_TOOLS_DIR          where tools are installed (see infra/lambda-build.sh, moto.sh)
#   AWS_ENDPOINT_URL          an emulator already running (infra/test.sh's); else moto starts
#
# Needs Linux (qemu-user): infra/setup.sh lambda installs qemu-user-static and Debian's arm64
# glibc (libc6-arm64-cross), the library root qemu loads the bootstraps' C library from.
set -euo pipefail
cd "$(dirname "$0")/.."

# Lambda's limit is 250 MB unzipped; ours is smaller because the bootstrap is read at every
# cold start. Raised when the AVIF encoder (rav1e) came into the functions that make variants:
# their sizes are in docs/benchmarks.md#build-times.
MAX_BOOTSTRAP_BYTES=24000000
ARM64_SYSROOT=/usr/aarch64-linux-gnu

say() { echo "lambda-smoke: $*" >&2; }

if [ "$(uname -s)" != Linux ]; then
    say "running the arm64 bootstraps needs Linux (qemu-user); IMGEST_TEST_LAMBDA=0 infra/test.sh leaves this out"
    exit 1
fi
infra/setup.sh lambda

target_dir="${IMGEST_LAMBDA_TARGET_DIR:-$PWD/target/lambda-arm64}"
mkdir -p "$target_dir"
target_dir=$(cd "$target_dir" && pwd)
build_dir="$target_dir/sam"

started=$SECONDS
CARGO_TARGET_DIR="$target_dir" infra/lambda-build.sh --sam --build-dir "$build_dir"
build_seconds=$((SECONDS - started))

# Each function SAM built, with its size; any over the limit fails the run.
too_big=0
for bootstrap in "$build_dir"/*/bootstrap; do
    size=$(wc -c <"$bootstrap")
    function=$(basename "$(dirname "$bootstrap")")
    awk -v f="$function" -v s="$size" 'BEGIN { printf "lambda-smoke: %-22s %5.1f MB\n", f, s / 1e6 }' >&2
    if [ "$size" -gt "$MAX_BOOTSTRAP_BYTES" ]; then
        say "$function's bootstrap is $size bytes, over $MAX_BOOTSTRAP_BYTES"
        too_big=1
    fi
done
[ "$too_big" = 0 ] || exit 1
if [ "${1:-}" = "--build-only" ]; then
    say "built in ${build_seconds}s"
    exit 0
fi

if [ -z "${AWS_ENDPOINT_URL:-}" ]; then
    # Starts moto on a free port (stopped on exit) and exports AWS_ENDPOINT_URL; then the
    # fake credentials and region the emulator takes.
    source infra/moto.sh
    moto_client_env
fi
export IMGEST_TEST_AWS=1
export IMGEST_TEST_DYNAMODB_CONCURRENCY=1
export IMGEST_BOOTSTRAPS="$build_dir"
export IMGEST_BOOTSTRAP_RUNNER="qemu-aarch64-static -L $ARM64_SYSROOT"

started=$SECONDS
# --workspace: the same features as the test command's build, so its test binary is reused.
cargo test --workspace --test e2e bootstraps:: -- --ignored "$@"
say "built in ${build_seconds}s, tested in $((SECONDS - started))s"
