"""Bytes and CPU of each variant format at each quality, at equal visual quality: the driver
behind bench/formats.sh (read that first: it installs what this needs and calls it).

Only the encoder is measured. Each photo is first made a 1280-pixel PNG (libvips' thumbnail,
Lanczos3, lossless): imgest never upscales, so its `fit:1280x1280` variant of that PNG is the
same pixels, encoded. Each encoded variant is compared with the PNG by butteraugli (libjxl's
`butteraugli_main`, the 3-norm it prints: lower is better, about 1 is "just noticeable" at
typical viewing), after libvips decodes WebP and AVIF to PNG for it.

CPU: `imgest-bench pipeline` times the whole job on one core (median of ROUNDS runs after a
warm-up); the same PNG with a 16x16 JPEG variant times what is not the encoder (decoding the
PNG, the copy), and the difference is the encoder's milliseconds per 1280 variant.

Then, per format, bytes are interpolated (in log-bytes, linearly in the score) at JPEG q82's
mean score: the bytes each format needs for the quality imgest's default JPEG gives.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys

import pyvips

SETTINGS = [
    ("jpeg", 70), ("jpeg", 82), ("jpeg", 90),
    ("webp", 75), ("webp", 85), ("webp", 92),
    ("avif", 60), ("avif", 75), ("avif", 85), ("avif", 92),
]
BASELINE = ("jpeg", 82)


def run_bench(binary, core, variants, files, out, rounds):
    env = dict(os.environ, IMGEST_VARIANTS=variants, IMGEST_METRICS="off")
    cmd = ["taskset", "-c", core, binary, "pipeline", "--rounds", str(rounds)]
    if out:
        os.makedirs(out, exist_ok=True)
        cmd += ["--out", out]
    result = subprocess.run(cmd + files, env=env, check=True, capture_output=True, text=True)
    return {json.loads(l)["file"]: json.loads(l) for l in result.stdout.splitlines()}


def butteraugli(tool, reference, distorted):
    result = subprocess.run([tool, reference, distorted, "--pnorm", "3"], check=True,
                            capture_output=True, text=True)
    # The max-norm on the first line, then "3-norm: X".
    for line in result.stdout.splitlines():
        if line.startswith("3-norm:"):
            return float(line.split(":")[1])
    raise RuntimeError(f"no 3-norm in {result.stdout!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--imgest", required=True)
    ap.add_argument("--butteraugli", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--core", default="0")
    ap.add_argument("photos", nargs="+")
    args = ap.parse_args()

    refs = []
    for photo in args.photos:
        stem = os.path.splitext(os.path.basename(photo))[0]
        ref = f"{args.out}/{stem}.png"
        pyvips.Image.thumbnail(photo, 1280, height=1280, size="down").pngsave(ref, keep="none")
        refs.append(ref)
    floor = run_bench(args.imgest, args.core, "v=fit:16x16", refs, None, args.rounds)

    rows = {}
    for fmt, quality in SETTINGS:
        out = f"{args.out}/{fmt}{quality}"
        runs = run_bench(args.imgest, args.core, f"v=fit:1280x1280:{fmt}:{quality}", refs, out,
                         args.rounds)
        ext = {"jpeg": "jpg"}.get(fmt, fmt)
        sizes, scores, ms = [], [], []
        for ref in refs:
            stem = os.path.splitext(os.path.basename(ref))[0]
            encoded = f"{out}/{stem}.v.{ext}"
            sizes.append(os.path.getsize(encoded))
            ms.append(runs[ref]["ms_without_sha256_median"] - floor[ref]["ms_without_sha256_median"])
            if fmt == "jpeg":
                decoded = encoded
            else:
                decoded = f"{out}/{stem}.v.png"
                pyvips.Image.new_from_file(encoded).pngsave(decoded, keep="none")
            scores.append(butteraugli(args.butteraugli, ref, decoded))
        rows[(fmt, quality)] = {
            "bytes": statistics.mean(sizes),
            "score": statistics.mean(scores),
            "ms": statistics.median(ms),
        }
        print(f"{fmt}:{quality} done", file=sys.stderr)

    base = rows[BASELINE]
    print(f"{len(refs)} photos as 1280-pixel PNGs, one core, ms = encoder per variant (median)\n")
    print("| format | quality | mean kB | butteraugli 3-norm (mean) | encoder ms | bytes vs JPEG q82 | ms vs JPEG q82 |")
    print("|---|---|---|---|---|---|---|")
    for (fmt, quality), r in rows.items():
        print(f"| {fmt} | {quality} | {r['bytes'] / 1000:.0f} | {r['score']:.2f} | {r['ms']:.1f} "
              f"| {r['bytes'] / base['bytes']:.2f} | {r['ms'] / base['ms']:.1f} |")
    print(f"\nAt JPEG q82's score ({base['score']:.2f}), interpolated:")
    for fmt in ("webp", "avif"):
        points = sorted((r["score"], r["bytes"], q) for (f, q), r in rows.items() if f == fmt)
        for (s0, b0, q0), (s1, b1, q1) in zip(points, points[1:]):
            if s0 <= base["score"] <= s1:
                t = (base["score"] - s0) / (s1 - s0) if s1 > s0 else 0
                b = math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0)))
                q = q0 + t * (q1 - q0)
                print(f"  {fmt}: quality about {q:.0f}, {b / 1000:.0f} kB = {b / base['bytes']:.2f} of JPEG's bytes")
                break
        else:
            print(f"  {fmt}: JPEG q82's score is outside the qualities measured")


if __name__ == "__main__":
    sys.exit(main())
