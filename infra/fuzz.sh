#!/usr/bin/env bash
# Coverage-guided fuzzing of imgest's readers of untrusted input (photo bytes, photo URLs, JSON
# bodies, Lambda events) with libFuzzer, on the stable toolchain.
#
# Usage:
#   infra/fuzz.sh list              # the targets
#   infra/fuzz.sh TARGET SECONDS    # build TARGET, seed a fresh corpus, fuzz it for SECONDS
#
# The targets are fuzz/fuzz_targets/TARGET.rs, in the crate fuzz/ (its own workspace and
# target dir). cargo-fuzz's CLI is not used: its default build (AddressSanitizer) needs nightly.
# Instead this builds as `cargo fuzz build --sanitizer none` does (cargo-fuzz 0.13): release,
# for the host triple named explicitly (so the flags below reach neither build scripts nor proc
# macros), with cargo-fuzz's RUSTFLAGS (below). No AddressSanitizer: imgest is safe Rust (the
# workspace forbids unsafe code), so the memory errors ASan catches cannot come from its own
# code, and libjpeg-turbo and libwebp (C, built by their crates' build scripts) would not be
# instrumented by cargo-fuzz's ASan either.
#
# A finding is a panic (a failed assertion too), a hang (one input running over -timeout
# seconds) or a memory blow-up (RSS over -rss_limit_mb). Then this exits 1 and names the
# reproducer, fuzz/artifacts/TARGET/{crash,timeout,oom}-<sha1>: the target binary replays it.
#
# Needs what any imgest build needs (cc, cmake, nasm) and a C++ compiler, for libFuzzer, which
# libfuzzer-sys compiles from its C++ source: `infra/setup.sh fuzz` checks them and installs
# (or names) what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(pipeline url exif json_bodies events)

usage() {
    echo "usage: infra/fuzz.sh list | infra/fuzz.sh TARGET SECONDS  (targets: ${targets[*]})" >&2
    exit 2
}

[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
    printf '%s\n' "${targets[@]}"
    exit 0
fi
[ $# -eq 2 ] || usage
target=$1
seconds=$2
case " ${targets[*]} " in *" $target "*) ;; *) usage ;; esac
# 0 would be no limit at all for libFuzzer.
case "$seconds" in '' | *[!0-9]*) usage ;; esac
[ "$seconds" -gt 0 ] || usage

infra/setup.sh fuzz

# What cargo-fuzz 0.13 passes for `--sanitizer none` on Linux: SanitizerCoverage feeding
# libFuzzer (inline 8-bit counters, the PC table, comparison operands), `cfg(fuzzing)`, no
# branch folding (keeps distinct branches distinct for coverage), stack-depth tracing, debug
# assertions (and with them overflow checks, spelled out here), and one codegen unit (with
# several, the coverage pass keeps ThinLTO from inlining anything across them). Any RUSTFLAGS
# of the caller's come last, as cargo-fuzz appends them.
flags=(
    -Cpasses=sancov-module
    -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
    -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares
    --cfg fuzzing
    -Cllvm-args=-simplifycfg-branch-fold-threshold=0
    -Cllvm-args=-sanitizer-coverage-stack-depth
    -Cdebug-assertions
    -Coverflow-checks
    -Ccodegen-units=1
)
host=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${flags[*]} ${RUSTFLAGS:-}" cargo build --manifest-path fuzz/Cargo.toml \
    --target-dir fuzz/target --target "$host" --release --bin "$target"
binary=fuzz/target/$host/release/$target

# A fresh corpus from the seeds, so that a run depends only on what is committed: the pipeline's
# fixture photos, and for the other targets the small examples under fuzz/seeds/TARGET (the
# exif target gets the fixture JPEGs too). Reproducers saved under tests/fixtures/fuzz/ are not
# seeds: one of a finding left open would stop every run at once.
corpus=fuzz/corpus/$target
rm -rf "$corpus"
mkdir -p "$corpus"
if [ -d "fuzz/seeds/$target" ]; then
    cp fuzz/seeds/"$target"/* "$corpus"/
fi
case "$target" in
    pipeline) find tests/fixtures -maxdepth 1 -type f ! -name '*.md' ! -name '*.py' -exec cp {} "$corpus"/ \; ;;
    exif) cp tests/fixtures/*.jpg "$corpus"/ ;;
esac

# Tokens of the input language make the mutations land on meaningful inputs sooner.
dict=()
case "$target" in
    url) dict=(-dict=fuzz/dicts/url.dict) ;;
    json_bodies | events) dict=(-dict=fuzz/dicts/json.dict) ;;
esac

artifacts=fuzz/artifacts/$target
mkdir -p "$artifacts"
before=$(ls "$artifacts")
# -timeout: seconds one input may take. -rss_limit_mb: the process's resident memory, polled
# every second. -malloc_limit_mb: one allocation's size, which libFuzzer checks only through a
# sanitizer's allocator hooks, so it is inert in this build: it is set for a sanitizer build,
# and the RSS limit is what catches a blow-up here.
status=0
# The fuzzer's own CPU time (one process, one thread), apart from the build's.
TIMEFORMAT="fuzz: $target: %U s user + %S s system CPU in %R s"
time {
    "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "${dict[@]}" "$corpus" || status=$?
}
found=$(comm -13 <(echo "$before") <(ls "$artifacts"))
if [ -n "$found" ]; then
    echo "fuzz: $target found something; reproducer(s):" >&2
    while read -r name; do echo "    $artifacts/$name" >&2; done <<<"$found"
    echo "fuzz: replay one with: $binary <reproducer>" >&2
    exit 1
fi
if [ "$status" != 0 ]; then
    echo "fuzz: $target: libFuzzer exited with status $status and saved no reproducer" >&2
    exit "$status"
fi
echo "fuzz: $target: nothing found in ${seconds}s" >&2
