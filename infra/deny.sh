#!/usr/bin/env bash
# Supply-chain check of the dependency tree with cargo-deny, by the rules in deny.toml: every
# crate's licence is on the allow list, no crate is built in two versions (bar the listed
# exceptions), no version deny.toml refuses for a known flaw is in it (its bans' `deny` list),
# and every crate comes from crates.io. Run by .ci/run.
#
# The advisories check (RustSec's advisory database) is not run: it clones the database from
# GitHub, which this project's machines cannot reach. deny.toml says how to turn it on.
#
# Settings (environment):
#   IMGEST_TOOLS_DIR  where tools are installed (default ~/.cache/imgest-tools); cargo-deny is
#                     built from crates.io into $IMGEST_TOOLS_DIR/cargo-deny/bin on first use
#                     (a few minutes on 2 cores); the check itself takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: new releases add checks and change deny.toml's keys. Bump deliberately.
CARGO_DENY_VERSION="0.20.2"

root="${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}/cargo-deny"
say() { echo "deny: $*" >&2; }

# Built from source (crates.io is reachable; a prebuilt binary from GitHub is not), with its own
# Cargo.lock (--locked) so the build does not drift. The version check redoes an interrupted or
# outdated install.
if ! "$root/bin/cargo-deny" --version 2>/dev/null | grep -qx "cargo-deny $CARGO_DENY_VERSION"; then
    # Its build compiles C (ring, zstd) and links with cc: setup.sh installs a C compiler.
    infra/setup.sh
    say "installing cargo-deny $CARGO_DENY_VERSION into $root"
    started=$SECONDS
    cargo install --locked --quiet --root "$root" --force "cargo-deny@$CARGO_DENY_VERSION"
    say "installed in $((SECONDS - started))s"
fi

# `cargo deny ...`, run as the binary itself so that no other cargo-deny on PATH or in
# ~/.cargo/bin is picked; --all-features checks every optional dependency too.
started=$SECONDS
"$root/bin/cargo-deny" --all-features check licenses bans sources
say "ok in $((SECONDS - started))s"
