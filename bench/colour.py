"""Colour management measured: imgest's variants of photos with colour profiles against libvips'
colour-managed rendering, in mean CIE76 ΔE; and what the conversion costs. Run by bench/colour.sh.

For each sRGB photo given, it makes test photos with libvips (relative colorimetric, q95 JPEG):
  p3            converted to Display P3 (libvips' built-in profile), the profile embedded
  p3-untagged   the same pixels without the profile (what the conversion's cost is measured against)
  adobe         converted to Adobe RGB (1998) (moxcms' encoding, written by imgest-bench icc)
  cmyk          converted to CMYK through FOGRA39 (imgest's default CMYK profile), embedded
  cmyk-untagged the same CMYK JPEG without the profile (imgest falls back to FOGRA39)
then runs `imgest-bench pipeline` (quality 100, the `large` 1280 variant written) on each, and
compares that variant with libvips' `thumbnail` of the same file to 1280 (export profile sRGB,
intent relative; FOGRA39 as the import profile of the untagged CMYK one). ΔE is computed per
pixel in CIELAB (D65) from both sRGB images; mean and 95th percentile are printed.

With --before BIN, the same variants from another imgest-bench build (the pipeline before colour
management) are compared too.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pyvips


def srgb_to_lab(rgb):
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
    )
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1)


def pixels(image):
    image = image.colourspace("srgb") if image.interpretation != "srgb" else image
    if image.bands == 4:
        image = image.flatten(background=[255, 255, 255])
    return np.ndarray(buffer=image.write_to_memory(), dtype=np.uint8, shape=[image.height, image.width, image.bands])


def delta_e(a, b):
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    d = np.linalg.norm(srgb_to_lab(a[:h, :w]) - srgb_to_lab(b[:h, :w]), axis=-1)
    return float(d.mean()), float(np.percentile(d, 95))


def make(src, out, adobe, cmyk):
    stem = os.path.splitext(os.path.basename(src))[0]
    im = pyvips.Image.new_from_file(src)
    made = {}
    p3 = im.icc_transform("p3", input_profile="srgb", intent="relative")
    made["p3"] = f"{out}/{stem}-p3.jpg"
    p3.jpegsave(made["p3"], Q=95, keep="icc")
    made["p3-untagged"] = f"{out}/{stem}-p3-untagged.jpg"
    p3.jpegsave(made["p3-untagged"], Q=95, keep="none")
    made["adobe"] = f"{out}/{stem}-adobe.jpg"
    im.icc_transform(adobe, input_profile="srgb", intent="relative").jpegsave(made["adobe"], Q=95, keep="icc")
    ink = im.icc_transform(cmyk, input_profile="srgb", intent="relative")
    made["cmyk"] = f"{out}/{stem}-cmyk.jpg"
    ink.jpegsave(made["cmyk"], Q=95, keep="icc")
    made["cmyk-untagged"] = f"{out}/{stem}-cmyk-untagged.jpg"
    ink.jpegsave(made["cmyk-untagged"], Q=95, keep="none")
    return made


def run(binary, files, out, rounds):
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, IMGEST_JPEG_QUALITY="100", IMGEST_VARIANTS="large=fit:1280x1280")
    result = subprocess.run(
        [binary, "pipeline", "--rounds", str(rounds), "--out", out, *files],
        env=env, check=True, capture_output=True, text=True,
    )
    return {json.loads(line)["file"]: json.loads(line) for line in result.stdout.splitlines()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--imgest", required=True)
    ap.add_argument("--before")
    ap.add_argument("--adobe", required=True)
    ap.add_argument("--cmyk", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("photos", nargs="+")
    args = ap.parse_args()

    tests = {p: make(p, args.out, args.adobe, args.cmyk) for p in args.photos}
    files = [f for made in tests.values() for f in made.values()]
    ours = run(args.imgest, files, f"{args.out}/now", args.rounds)
    before = run(args.before, files, f"{args.out}/before", 1) if args.before else None

    header = f"{'photo':28} {'kind':14} {'ΔE mean':>8} {'p95':>6}"
    if before:
        header += f" {'before':>8} {'p95':>6}"
    print(header)
    means = {}
    for photo, made in tests.items():
        for kind, path in made.items():
            if kind == "p3-untagged":
                continue
            import_profile = args.cmyk if kind == "cmyk-untagged" else None
            # size="down": imgest never upscales, libvips' thumbnail does by default.
            kwargs = {"export_profile": "srgb", "intent": "relative", "height": 1280, "size": "down"}
            if import_profile:
                kwargs["import_profile"] = import_profile
            ref = pixels(pyvips.Image.thumbnail(path, 1280, **kwargs))
            stem = os.path.splitext(os.path.basename(path))[0]
            got = pixels(pyvips.Image.new_from_file(f"{args.out}/now/{stem}.large.jpg"))
            mean, p95 = delta_e(ref, got)
            means.setdefault(kind, []).append(mean)
            row = f"{os.path.basename(photo):28} {kind:14} {mean:8.2f} {p95:6.2f}"
            if before:
                old = pixels(pyvips.Image.new_from_file(f"{args.out}/before/{stem}.large.jpg"))
                bm, bp = delta_e(ref, old)
                row += f" {bm:8.2f} {bp:6.2f}"
            print(row)
    for kind, values in means.items():
        print(f"mean ΔE, {kind}: {sum(values) / len(values):.2f} (worst {max(values):.2f})")

    # The conversion's cost: the same P3 pixels with and without their profile.
    ratios = []
    print(f"\n{'photo':28} {'p3 ms':>8} {'untagged ms':>12} {'ratio':>6}")
    for photo, made in tests.items():
        tagged, plain = ours[made["p3"]]["ms_median"], ours[made["p3-untagged"]]["ms_median"]
        ratios.append(tagged / plain)
        print(f"{os.path.basename(photo):28} {tagged:8.1f} {plain:12.1f} {tagged / plain:6.3f}")
    geomean = float(np.exp(np.mean(np.log(ratios))))
    print(f"P3 over untagged, geomean: {geomean:.3f}")


if __name__ == "__main__":
    sys.exit(main())
