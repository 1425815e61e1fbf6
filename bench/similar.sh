#!/usr/bin/env bash
# Near-duplicate detection measured (docs/benchmarks.md#near-duplicates): recall per transform
# (re-encoded, resized, watermarked, brightness, contrast, mirrored, cropped, padded, and
# combinations) of public photos that are not in the test fixtures, against 10,000 unrelated
# photos on the embedded store, PDQ alone beside; false positives; the hash's cost; reads per
# lookup; index bytes. Not a test: a measurement, run by hand.
#
# Usage:
#   bench/similar.sh            # 10,000 distractors
#   bench/similar.sh COUNT      # COUNT distractors instead
#
# The photos (first run only, under ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools}/similar):
#   originals    Debian's gnome-backgrounds 43.1-1 and plasma-workspace-wallpapers 4:5.27.5-2
#                (photographs and renderings under their packages' licences; see each
#                package's copyright file) and scikit-image 0.26.0's sample photos (PyPI, BSD)
#   distractors  Debian's mate-backgrounds 1.26.0-1 (bench/tools.sh), ukui-wallpapers
#                20.04.3-1.1, lomiri-wallpapers-16.04 and -20.04 20.04.0-2, sway-backgrounds
#                1.7-6: random windows of these, so no distractor shows an original
# Needs python3 (with venv), apt-get, dpkg-deb and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/tools.sh
# shellcheck source=infra/venv.sh
source infra/venv.sh

count=${1:-10000}
PILLOW_VERSION="12.0.0"
SKIMAGE_VERSION="0.26.0"
ORIGINALS=("gnome-backgrounds=43.1-1" "plasma-workspace-wallpapers=4:5.27.5-2")
DISTRACTORS=("ukui-wallpapers=20.04.3-1.1" "lomiri-wallpapers-16.04=20.04.0-2"
    "lomiri-wallpapers-20.04=20.04.0-2" "sway-backgrounds=1.7-6")

bench_install
venv_install similar "pillow==$PILLOW_VERSION"
python="$venv/bin/python"
tools="${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}/similar"
photos="$tools/photos"
if [ ! -f "$photos/.complete" ]; then
    rm -rf "$photos"
    mkdir -p "$photos/deb" "$photos/originals" "$photos/distractors"
    (cd "$photos/deb" && apt-get download "${ORIGINALS[@]}" "${DISTRACTORS[@]}")
    for deb in "$photos"/deb/*.deb; do
        name=$(basename "$deb" | cut -d_ -f1)
        case " ${ORIGINALS[*]} " in
            *" $name="*) dest="$photos/originals/$name" ;;
            *) dest="$photos/distractors/$name" ;;
        esac
        dpkg-deb -x "$deb" "$dest"
    done
    cp -r "$BENCH_PHOTOS/jpeg" "$photos/distractors/mate-backgrounds"
    (cd "$photos/deb" && "$python" -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 "scikit-image==$SKIMAGE_VERSION")
    mkdir -p "$photos/originals/scikit-image"
    "$python" - "$photos"/deb/scikit_image-*.whl "$photos/originals/scikit-image" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("skimage/data/") and name.endswith((".png", ".jpg")):
            with open(os.path.join(out, os.path.basename(name)), "wb") as f:
                f.write(z.read(name))
PY
    # Not photographs: binary masks, text and a tiny logo.
    rm -f "$photos"/originals/scikit-image/{horse,text,logo,microaneurysms,page}.png
    # One of each pair of the same picture: the grey chessboard, the stereo pair's right view.
    rm -f "$photos"/originals/scikit-image/{chessboard_GRAY,motorcycle_right}.png
    # One picture each: a Plasma wallpaper's largest size (not its screenshot, its other sizes
    # or its dark version), a GNOME background's light version.
    mkdir -p "$photos/chosen"
    for wallpaper in "$photos"/originals/plasma-workspace-wallpapers/usr/share/wallpapers/*/; do
        largest=$(ls -S "$wallpaper"contents/images/* 2>/dev/null | head -1)
        [ -n "$largest" ] && cp "$largest" "$photos/chosen/plasma-$(basename "$wallpaper").${largest##*.}"
    done
    for light in "$photos"/originals/gnome-backgrounds/usr/share/backgrounds/gnome/*-l.*; do
        cp "$light" "$photos/chosen/gnome-$(basename "$light")"
    done
    for photo in "$photos"/originals/scikit-image/*; do
        cp "$photo" "$photos/chosen/skimage-$(basename "$photo")"
    done
    find "$photos" -name '*.svg' -delete
    rm -rf "$photos/deb"
    touch "$photos/.complete"
fi

sets="$tools/sets-$count"
if [ ! -f "$sets/.complete" ]; then
    _bench_say "making the queries and $count distractors"
    rm -rf "$sets"
    "$python" bench/similar.py "$photos/chosen" "$photos/distractors" "$sets" "$count"
    touch "$sets/.complete"
fi

_bench_say "building imgest-bench (release)"
"$(bench_build imgest-bench)" similar --dir "$sets"
