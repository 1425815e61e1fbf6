# Installs what the benchmarks need, once, under ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools}.
# Sourced by bench/pipeline.sh and bench/dedup.sh: `bench_install` sets
#   BENCH_PYTHON   a python with pyvips + pyvips-binary (libvips) and numpy, from PyPI
#   BENCH_PHOTOS   a directory with jpeg/ (Debian's `mate-backgrounds` 1.26.0-1 photographs,
#                  GPL-2+, see samples/README.md; fetched with `apt-get download`) and derived/
#                  (made from them with libvips: a ~20 MP JPEG, TwoWings upscaled 2.2x at q90;
#                  Storm and Garden as PNG; Aqua and Blinds as lossy WebP q85)
# Needs python3 (with venv), apt-get and dpkg-deb.

BENCH_PYVIPS_VERSION="3.2.0"
BENCH_PYVIPS_BINARY_VERSION="8.18.7"
BENCH_NUMPY_VERSION="2.4.6"
BENCH_PHOTOS_PACKAGE="mate-backgrounds"
BENCH_PHOTOS_VERSION="1.26.0-1"

# The build tools imgest needs (cmake, nasm, …), installed if missing.
infra/setup.sh

_bench_tools="${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}"
BENCH_PYTHON="$_bench_tools/bench/bin/python"
BENCH_PHOTOS="$_bench_tools/photos/$BENCH_PHOTOS_PACKAGE-$BENCH_PHOTOS_VERSION"

_bench_say() { echo "bench: $*" >&2; }

# Stamps are written last, so an interrupted install is redone from scratch.
_bench_install_venv() {
    local venv="$_bench_tools/bench"
    local stamp="$venv/.installed-pyvips-$BENCH_PYVIPS_VERSION-$BENCH_PYVIPS_BINARY_VERSION-numpy-$BENCH_NUMPY_VERSION"
    [ -f "$stamp" ] && return 0
    _bench_say "installing pyvips, pyvips-binary and numpy into $venv"
    python3 -m venv --clear "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "pyvips==$BENCH_PYVIPS_VERSION" "pyvips-binary==$BENCH_PYVIPS_BINARY_VERSION" \
        "numpy==$BENCH_NUMPY_VERSION"
    touch "$stamp"
}

_bench_apt_download() {
    (cd "$1" && apt-get download "$BENCH_PHOTOS_PACKAGE=$BENCH_PHOTOS_VERSION")
}

_bench_install_photos() {
    local stamp="$BENCH_PHOTOS/.complete"
    [ -f "$stamp" ] && return 0
    _bench_say "fetching $BENCH_PHOTOS_PACKAGE $BENCH_PHOTOS_VERSION with apt-get download"
    rm -rf "$BENCH_PHOTOS"
    mkdir -p "$BENCH_PHOTOS/deb"
    if ! _bench_apt_download "$BENCH_PHOTOS/deb"; then
        # A fresh machine may have no package lists yet.
        if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
        _bench_apt_download "$BENCH_PHOTOS/deb"
    fi
    dpkg-deb -x "$BENCH_PHOTOS"/deb/*.deb "$BENCH_PHOTOS/deb/x"
    local share="$BENCH_PHOTOS/deb/x/usr/share"
    mkdir -p "$BENCH_PHOTOS/jpeg" "$BENCH_PHOTOS/derived"
    cp "$share"/backgrounds/mate/nature/*.jpg "$share"/backgrounds/mate/abstract/*.jpg \
        "$share"/backgrounds/mate/desktop/*.jpg "$BENCH_PHOTOS/jpeg/"
    cp "$share/doc/$BENCH_PHOTOS_PACKAGE/copyright" "$BENCH_PHOTOS/COPYRIGHT"
    "$BENCH_PYTHON" - "$BENCH_PHOTOS/jpeg" "$BENCH_PHOTOS/derived" <<'PY'
import sys, pyvips
src, out = sys.argv[1], sys.argv[2]
big = pyvips.Image.new_from_file(f"{src}/TwoWings.jpg").resize(2.2, kernel="lanczos3")
big.jpegsave(f"{out}/TwoWings-20mp.jpg", Q=90, keep="none")
for name in ("Storm", "Garden"):
    pyvips.Image.new_from_file(f"{src}/{name}.jpg").pngsave(f"{out}/{name}.png", keep="none")
for name in ("Aqua", "Blinds"):
    pyvips.Image.new_from_file(f"{src}/{name}.jpg").webpsave(f"{out}/{name}.webp", Q=85, keep="none")
PY
    rm -rf "$BENCH_PHOTOS/deb"
    touch "$stamp"
}

bench_install() {
    _bench_install_venv
    _bench_install_photos
}

bench_target_dir() {
    cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

# Builds the release binary of package $1 (imgest or imgest-bench; more arguments go to cargo)
# and prints its path.
bench_build() {
    local package=$1
    shift
    cargo build --release --quiet -p "$package" "$@"
    echo "$(bench_target_dir)/release/$package"
}

# bench_build_at REV PACKAGE: PACKAGE built (release) from commit REV in a temporary worktree,
# in a target directory of its own (before/ under this tree's, kept between runs so only what
# changed is built again); prints the path of a copy named PACKAGE-before. Not this tree's
# target directory: cargo names a workspace crate's artefacts the same in any checkout, so the
# two builds overwrote each other's, and a later build here could link the other commit's
# crates (seen: the bench crate failing to find what the other commit lacked).
bench_build_at() {
    local rev=$1 package=$2 tree target_dir
    target_dir=$(bench_target_dir)
    tree=$(mktemp -d -t imgest-before.XXXXXX)
    git worktree add --detach --quiet "$tree" "$rev"
    CARGO_TARGET_DIR="$target_dir/before" cargo build --release --quiet \
        --manifest-path "$tree/Cargo.toml" -p "$package"
    git worktree remove --force "$tree"
    cp "$target_dir/before/release/$package" "$target_dir/release/$package-before"
    echo "$target_dir/release/$package-before"
}
