#!/usr/bin/env bash
# Makes this machine able to build (and, with `tests`, test) imgest: checks every tool the build
# needs and installs the missing ones with the system's package manager. `infra/demo.sh`,
# `infra/test.sh` and `.ci/run` run it first, so both Quick start commands work on a fresh
# machine that has only cargo, python3 and curl.
#
# Usage:
#   infra/setup.sh          # what building imgest needs
#   infra/setup.sh tests    # that, plus what the test command needs
#   infra/setup.sh fuzz     # that, plus what the fuzz targets need (infra/fuzz.sh runs it)
#   infra/setup.sh lambda   # that, plus what running the arm64 Lambda bootstraps on this
#                           # machine needs (infra/lambda-smoke.sh runs it; Linux only)
#
# What is needed, and why:
#   cargo (rustup)          the Rust toolchain; rust-toolchain.toml names the version
#   a C compiler (cc)       libjpeg-turbo, libwebp and SQLite are built from their C sources
#   cmake, nasm             libjpeg-turbo's build (nasm assembles its x86-64 SIMD code)
#   python3 with venv, curl (tests) moto, the AWS emulator, runs from a venv
#   chromium, chromedriver  (tests) the page's browser test drives a headless Chromium through
#                           its WebDriver (Debian's chromium and chromium-driver)
#   a C++ compiler (c++)    (fuzz) libFuzzer, which libfuzzer-sys builds from its C++ source
#   qemu-aarch64-static     (lambda) runs an arm64 Linux program on another CPU (qemu-user)
#   an arm64 glibc          (lambda) the bootstraps' C library and loader, for qemu to load
#                           from /usr/aarch64-linux-gnu (Debian's libc6-arm64-cross)
#
# A missing package is installed with apt-get, dnf, yum, zypper, apk, pacman or brew when this
# runs as root, or sudo works without a password. Otherwise (or with IMGEST_SETUP=check) it
# installs nothing, prints the exact command to run, and exits 1. Rust itself is never
# installed here: without cargo it says where to get it.
set -euo pipefail

want_tests=0
want_fuzz=0
want_lambda=0
case "${1:-}" in
    "") ;;
    tests) want_tests=1 ;;
    fuzz) want_fuzz=1 ;;
    lambda) want_lambda=1 ;;
    *) echo "usage: infra/setup.sh [tests|fuzz|lambda]" >&2; exit 2 ;;
esac

say() { echo "setup: $*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
    say "cargo is missing: install Rust with rustup (https://rustup.rs), then run this again"
    exit 1
fi

# Each missing tool, as the package that provides it (named per package manager below).
missing=()
command -v cc >/dev/null 2>&1 || missing+=(cc)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
# libjpeg-turbo assembles SIMD code with nasm on x86-64 only (arm64 uses C intrinsics).
case "$(uname -m)" in
    x86_64 | amd64) command -v nasm >/dev/null 2>&1 || missing+=(nasm) ;;
esac
if [ "$want_tests" = 1 ]; then
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    if ! command -v python3 >/dev/null 2>&1; then
        missing+=(python3 venv)
    elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        # Debian and Ubuntu ship venv's ensurepip separately (python3-venv).
        missing+=(venv)
    fi
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromedriver)
fi
if [ "$want_fuzz" = 1 ]; then
    command -v c++ >/dev/null 2>&1 || missing+=(c++)
fi
if [ "$want_lambda" = 1 ]; then
    command -v qemu-aarch64-static >/dev/null 2>&1 || missing+=(qemu-aarch64-static)
    [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || missing+=(arm64-libc)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

# The package names of the missing tools for one package manager.
packages_for() {
    local manager=$1 tool
    for tool in "${missing[@]}"; do
        case "$manager:$tool" in
            apt-get:cc) echo gcc libc6-dev ;;
            apk:cc) echo build-base ;;
            pacman:cc) echo base-devel ;;
            brew:cc) ;; # Xcode's command line tools provide cc
            *:cc) echo gcc ;;
            apt-get:c++ | apk:c++) echo g++ ;;
            pacman:c++) echo gcc ;;
            brew:c++) ;; # Xcode's command line tools provide c++
            *:c++) echo gcc-c++ ;;
            apt-get:venv) echo python3-venv ;;
            apt-get:chromedriver) echo chromium-driver ;;
            apk:chromedriver) echo chromium-chromedriver ;;
            pacman:chromedriver) echo chromium ;;
            apt-get:qemu-aarch64-static) echo qemu-user-static ;;
            *:qemu-aarch64-static) echo qemu-user-static ;;
            apt-get:arm64-libc) echo libc6-arm64-cross ;;
            *:arm64-libc)
                # Only Debian and Ubuntu package an arm64 glibc at that path.
                say "no known package of an arm64 glibc under /usr/aarch64-linux-gnu for $manager: install one there by hand"
                exit 1 ;;
            apk:venv) echo py3-virtualenv ;;
            *:venv) ;; # part of python3 elsewhere
            brew:python3) echo python ;;
            pacman:python3) echo python ;;
            *) echo "$tool" ;;
        esac
    done | tr '\n' ' ' | sed 's/ *$//'
}

manager=
for m in apt-get dnf yum zypper apk pacman brew; do
    if command -v "$m" >/dev/null 2>&1; then
        manager=$m
        break
    fi
done
if [ -z "$manager" ]; then
    say "missing: ${missing[*]}; no known package manager found: install them, then run this again"
    exit 1
fi
packages=$(packages_for "$manager")
case "$manager" in
    apt-get) command="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages" ;;
    dnf | yum) command="$manager install -y $packages" ;;
    zypper) command="zypper --non-interactive install $packages" ;;
    apk) command="apk add $packages" ;;
    pacman) command="pacman -S --needed --noconfirm $packages" ;;
    brew) command="brew install $packages" ;;
esac

# brew refuses to run as root; every other manager needs it.
sudo=
if [ "$manager" != brew ] && [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo"
    else
        sudo="-"
    fi
fi
if [ "${IMGEST_SETUP:-install}" = check ] || [ "$sudo" = "-" ]; then
    prefix=
    [ "$sudo" = "-" ] && prefix="sudo "
    say "missing: ${missing[*]}. Install them with:"
    echo "    ${prefix}sh -c '$command'" >&2
    exit 1
fi
say "missing: ${missing[*]}; installing with: ${sudo:+$sudo }$command"
if [ -n "$sudo" ]; then
    sudo sh -c "$command" >&2
else
    sh -c "$command" >&2
fi
for tool in cc cmake nasm curl python3 c++ qemu-aarch64-static chromium chromedriver; do
    case " ${missing[*]} " in
        *" $tool "*)
            command -v "$tool" >/dev/null 2>&1 || {
                say "$tool is still missing after the install: install it by hand"
                exit 1
            }
            ;;
    esac
done
say "installed: ${missing[*]}"
