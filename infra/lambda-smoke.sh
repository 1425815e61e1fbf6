#!/usr/bin/env bash
# The Lambda functions as `sam build` makes them, built and run: `sam build` (cargo-lambda and
# zig, arm64, offline) into a target directory of its own, then the bootstraps' smoke test
# (tests/e2e/bootstraps.rs): each function's arm64 `bootstrap` runs under qemu-user against the
# Runtime API emulator (runtime-api/), with the AWS side on moto, fed its trigger's events.
#
# Two builds of the same template, tools and code:
#   - by default SAM's debug mode (`SAM_BUILD_MODE=debug`: cargo's dev profile, the one the
#     host's tests build with, its codecs optimised), which is what the test command runs: a cold
#     build takes about half the shipping one's time (no fat-LTO link per function,
#     docs/benchmarks.md#build-times), and CI's time is bounded;
#   - with `--release`, the shipping profile `sam deploy` uploads (fat LTO, one codegen unit,
#     stripped), and a size check (every bootstrap at most 24 MB). Run it before a deployment
#     and when a change adds a dependency to a function (bench/build-times.sh records sizes).
#
# Usage:
#   infra/lambda-smoke.sh                # build (only what changed), test
#   infra/lambda-smoke.sh --release      # the shipping build, its size check, then the test
#   infra/lambda-smoke.sh --nocapture    # other arguments go to the test binary: this one shows
#                                        # each function's `cold start:` line (under qemu: slow)
#   infra/lambda-smoke.sh --build-only   # the build (and with --release the size check), no
#                                        # test (infra/test.sh runs this beside the host's tests)
#
# Settings (environment):
#   IMGEST_LAMBDA_TARGET_DIR  the arm64 build's cargo target directory (default
#                             target/lambda-arm64): apart from the tests' debug build, so each
#                             stays incremental, and a CI cache can keep it. `sam build` writes
#                             the artifacts to its sam-dev/ subdirectory (sam/ with --release).
#                             A cold build's time is in docs/benchmarks.md#build-times; with
#                             nothing changed, seconds.
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

release=
build_only=
while [ $# -gt 0 ]; do
    case "$1" in
        --release) release=1 ;;
        --build-only) build_only=1 ;;
        *) break ;;
    esac
    shift
done

if [ -n "$release" ]; then
    build_dir="$target_dir/sam"
    build_mode=
else
    build_dir="$target_dir/sam-dev"
    build_mode=debug
fi

started=$SECONDS
SAM_BUILD_MODE="$build_mode" infra/lambda-build.sh --sam --build-dir "$build_dir"
build_seconds=$((SECONDS - started))

# Each function SAM built, with its size; with the shipping profile, any over the limit fails
# the run (the dev profile's are several times larger and never shipped).
too_big=0
for bootstrap in "$build_dir"/*/bootstrap; do
    size=$(wc -c <"$bootstrap")
    function=$(basename "$(dirname "$bootstrap")")
    awk -v f="$function" -v s="$size" 'BEGIN { printf "lambda-smoke: %-22s %5.1f MB\n", f, s / 1e6 }' >&2
    if [ -n "$release" ] && [ "$size" -gt "$MAX_BOOTSTRAP_BYTES" ]; then
        say "$function's bootstrap is $size bytes, over $MAX_BOOTSTRAP_BYTES"
        too_big=1
    fi
done
[ "$too_big" = 0 ] || exit 1
if [ -n "$build_only" ]; then
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
