"""imgest's photo pipeline against libvips on the same photos, one core: the driver behind
bench/pipeline.sh (read that first: it installs what this needs and calls it).

The job, for both tools, from the file's bytes in memory: MD5 of the bytes, decode, EXIF
orientation, `large` fit 1280x1280, `medium` fit 640x640, `thumb` cover 200x200 (centre crop),
each encoded as JPEG quality 82 (4:2:0, no metadata). libvips does it the fastest way it offers:
one `thumbnail_buffer` to the largest size (shrink-on-load), then the smaller sizes from that
image in memory.

For each photo the driver starts one process per tool and pass (so peak RSS is that photo's),
alternating which tool goes first, every process pinned to the same core; each process does one
untimed warm-up run and then ROUNDS timed runs. A photo's time is the median of all its timed
runs. SSIM is computed on luma (BT.601 weights, 11x11 Gaussian window, sigma 1.5) between each
tool's 640 variant and a reference made from a full decode: libvips decodes at full size and
rotates upright, then resamples in float with the Lanczos3 kernel straight to the variant's
size (`resize` with gap=0: no box pre-shrink).

Also run as `--vips-worker` (the libvips side, one process per photo and pass).
"""

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

QUALITY = 82
LARGE, MEDIUM, THUMB = 1280, 640, 200


def vips_worker(args):
    import pyvips

    # No operation cache: every round must do the work again.
    pyvips.cache_set_max(0)
    data = open(args.file, "rb").read()

    def run():
        hashlib.md5(data).digest()
        large = pyvips.Image.thumbnail_buffer(data, LARGE, height=LARGE, size="down")
        large = large.copy_memory()
        large_jpeg = large.jpegsave_buffer(Q=QUALITY, keep="none")
        medium = large.thumbnail_image(MEDIUM, height=MEDIUM, size="down").copy_memory()
        medium_jpeg = medium.jpegsave_buffer(Q=QUALITY, keep="none")
        thumb = medium.thumbnail_image(THUMB, height=THUMB, crop="centre")
        thumb_jpeg = thumb.jpegsave_buffer(Q=QUALITY, keep="none")
        return {"large": large_jpeg, "medium": medium_jpeg, "thumb": thumb_jpeg}

    out = run()
    ms = []
    for _ in range(max(args.rounds, 1)):
        started = time.perf_counter()
        run()
        ms.append((time.perf_counter() - started) * 1000)
    if args.out:
        stem = os.path.splitext(os.path.basename(args.file))[0]
        for name, jpeg in out.items():
            with open(os.path.join(args.out, f"{stem}.{name}.jpg"), "wb") as f:
                f.write(jpeg)
    variants = {}
    for name, jpeg in out.items():
        img = pyvips.Image.new_from_buffer(jpeg, "")
        variants[name] = {"width": img.width, "height": img.height, "bytes": len(jpeg)}
    print(json.dumps({"ms": ms, "variants": variants, "peak_rss_kb": peak_rss_kb()}))


def peak_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def run_json(cmd, env=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- SSIM -----------------------------------------------------------------------------------


def gaussian_filter(a, sigma=1.5, radius=5):
    import numpy as np

    x = np.arange(-radius, radius + 1)
    w = np.exp(-(x**2) / (2 * sigma**2))
    w /= w.sum()
    # Separable, "valid" region only (no padding): rows, then columns.
    h, wd = a.shape
    rows = sum(w[i] * a[:, i : wd - 2 * radius + i] for i in range(len(w)))
    return sum(w[i] * rows[i : h - 2 * radius + i, :] for i in range(len(w)))


def ssim(x, y):
    """Mean SSIM of two same-sized luma arrays (float, 0..255), Wang et al. 2004 constants."""
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = gaussian_filter(x), gaussian_filter(y)
    sxx = gaussian_filter(x * x) - mx * mx
    syy = gaussian_filter(y * y) - my * my
    sxy = gaussian_filter(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(s.mean())


def luma(img):
    import numpy as np

    a = np.ndarray(
        buffer=img.write_to_memory(),
        dtype=np.float32 if img.format == "float" else np.uint8,
        shape=[img.height, img.width, img.bands],
    ).astype(np.float64)
    if img.bands == 1:
        return a[:, :, 0]
    return 0.299 * a[:, :, 0] + 0.587 * a[:, :, 1] + 0.114 * a[:, :, 2]


class Reference:
    """A photo fully decoded and upright, resampled in float with Lanczos3 to any size."""

    def __init__(self, path):
        import pyvips

        full = pyvips.Image.new_from_file(path, access="random").autorot()
        if full.hasalpha():
            full = full.flatten(background=[255, 255, 255])
        if full.bands == 1:
            full = full.colourspace("srgb")
        self.full = full.cast("float")
        self.cache = {}

    def luma(self, width, height):
        key = (width, height)
        if key not in self.cache:
            f = self.full
            r = f.resize(width / f.width, vscale=height / f.height, kernel="lanczos3", gap=0.0)
            if (r.width, r.height) != key:
                r = r.crop(0, 0, min(width, r.width), min(height, r.height))
            self.cache[key] = luma(r).clip(0, 255)
        return self.cache[key]


def ssim_of(reference, jpeg_path):
    import pyvips

    img = pyvips.Image.new_from_file(jpeg_path)
    ref = reference.luma(img.width, img.height)
    out = luma(img)
    h, w = ref.shape
    return ssim(ref, out[:h, :w])


# --- the driver ----------------------------------------------------------------------------


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vips-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--imgest", help="the imgest-bench binary (release build)")
    p.add_argument("--fallback", help="an imgest-bench binary built without turbojpeg (optional)")
    p.add_argument("--before", help="an imgest-bench binary built from an earlier commit (optional)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--core", default="0")
    p.add_argument("--out", required=True, help="where the variants are written")
    p.add_argument("--json", help="also write the per-photo results here")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    if args.vips_worker:
        args.file = args.files[0]
        return vips_worker(args)

    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGEST_")}
    env["IMGEST_VARIANTS"] = "large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200"
    env["IMGEST_JPEG_QUALITY"] = str(QUALITY)
    env["VIPS_CONCURRENCY"] = "1"
    pin = ["taskset", "-c", args.core]
    rounds = ["--rounds", str(args.rounds)]

    def imgest_bench(binary):
        return lambda f, out: pin + [binary, "pipeline", *rounds, "--out", out, f]

    tools = {
        "imgest": imgest_bench(args.imgest),
        "vips": lambda f, out: pin + [sys.executable, __file__, "--vips-worker", *rounds, "--out", out, f],
    }
    if args.before:
        tools["before"] = imgest_bench(args.before)
    if args.fallback:
        tools["pure-rust"] = imgest_bench(args.fallback)
    for name in tools:
        os.makedirs(os.path.join(args.out, name), exist_ok=True)

    rows = []
    for f in args.files:
        ms = {t: [] for t in tools}
        rss = {t: 0 for t in tools}
        facts = {}
        names = list(tools)
        for pas in range(args.passes):
            order = names if pas % 2 == 0 else names[::-1]
            for t in order:
                r = run_json(tools[t](f, os.path.join(args.out, t)), env)
                ms[t] += r["ms"]
                rss[t] = max(rss[t], r["peak_rss_kb"] or 0)
                facts[t] = r
        ref = Reference(f)
        stem = os.path.splitext(os.path.basename(f))[0]
        row = {
            "photo": os.path.basename(f),
            "format": facts["imgest"]["format"],
            "mp": facts["imgest"]["width"] * facts["imgest"]["height"] / 1e6,
            "progressive": is_progressive(f),
        }
        for t in tools:
            row[t] = {
                "ms": statistics.median(ms[t]),
                "peak_rss_mb": rss[t] / 1024,
                "bytes": {v: facts[t]["variants"][v]["bytes"] for v in ("large", "medium", "thumb")},
                "ssim640": ssim_of(ref, os.path.join(args.out, t, f"{stem}.medium.jpg")),
            }
        rows.append(row)
        print_row(row, tools, header=len(rows) == 1)
    print_totals(rows, tools)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


def is_progressive(path):
    data = open(path, "rb").read(1 << 20)
    if data[:2] != b"\xff\xd8":
        return False
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker in (0xC2, 0xC6, 0xCA, 0xCE):
            return True
        if marker in (0xC0, 0xC1, 0xC3, 0xDA):
            return False
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return False


def kb(n):
    return f"{n / 1000:.0f}"


def print_row(row, tools, header):
    extra = [t for t in tools if t not in ("imgest", "vips")]
    if header:
        cols = ["photo", "fmt", "MP", "imgest ms", "vips ms", "ratio"]
        cols += [f"{t} ms" for t in extra] + [f"{t} ratio" for t in extra]
        cols += ["RSS MB imgest/vips", "kB L/M/T imgest", "kB L/M/T vips", "SSIM640 imgest", "SSIM640 vips"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    i, v = row["imgest"], row["vips"]
    name = row["photo"] + (" (progressive)" if row["progressive"] else "")
    cells = [name, row["format"], f"{row['mp']:.1f}", f"{i['ms']:.1f}", f"{v['ms']:.1f}", f"{i['ms'] / v['ms']:.2f}"]
    cells += [f"{row[t]['ms']:.1f}" for t in extra] + [f"{row[t]['ms'] / v['ms']:.2f}" for t in extra]
    cells += [
        f"{i['peak_rss_mb']:.0f} / {v['peak_rss_mb']:.0f}",
        "/".join(kb(i["bytes"][n]) for n in ("large", "medium", "thumb")),
        "/".join(kb(v["bytes"][n]) for n in ("large", "medium", "thumb")),
        f"{i['ssim640']:.4f}",
        f"{v['ssim640']:.4f}",
    ]
    print("| " + " | ".join(cells) + " |", flush=True)


def print_totals(rows, tools):
    def ratios(t, only=None):
        return [r[t]["ms"] / r["vips"]["ms"] for r in rows if only is None or only(r)]

    print()
    print(f"{len(rows)} photos, times are medians of the timed rounds, one core")
    for t in tools:
        if t == "vips":
            continue
        total, vtotal = sum(r[t]["ms"] for r in rows), sum(r["vips"]["ms"] for r in rows)
        print(
            f"{t}: geomean time ratio {geomean(ratios(t)):.3f}, summed {total:.0f} ms vs vips "
            f"{vtotal:.0f} ms = {total / vtotal:.3f}"
        )
        for fmt in sorted({r["format"] for r in rows}):
            sel = ratios(t, lambda r: r["format"] == fmt)
            print(f"  {fmt}: {len(sel)} photos, geomean ratio {geomean(sel):.3f}, worst {max(sel):.2f}")
        prog = ratios(t, lambda r: r["progressive"])
        if prog:
            print(f"  progressive JPEG: {len(prog)} photos, geomean ratio {geomean(prog):.3f}")
    if "before" in tools:
        after = [r["imgest"]["ms"] / r["before"]["ms"] for r in rows]
        print(
            f"imgest / before, side by side: geomean {geomean(after):.3f}, "
            f"best {min(after):.2f}, worst {max(after):.2f}"
        )
    for t in tools:
        s = [r[t]["ssim640"] for r in rows]
        print(f"SSIM of the 640 variant, {t}: mean {statistics.mean(s):.4f}, min {min(s):.4f}")
    worst = min(rows, key=lambda r: r["imgest"]["ssim640"] - r["vips"]["ssim640"])
    print(
        f"SSIM imgest - vips: mean {statistics.mean(r['imgest']['ssim640'] - r['vips']['ssim640'] for r in rows):+.4f}, "
        f"worst {worst['imgest']['ssim640'] - worst['vips']['ssim640']:+.4f} ({worst['photo']})"
    )
    for n in ("large", "medium", "thumb"):
        i = sum(r["imgest"]["bytes"][n] for r in rows)
        v = sum(r["vips"]["bytes"][n] for r in rows)
        print(f"output bytes, {n}: imgest {i / 1e6:.2f} MB, vips {v / 1e6:.2f} MB, ratio {i / v:.3f}")
    big = max(rows, key=lambda r: r["mp"] if r["format"] == "jpeg" else 0)
    print(
        f"peak RSS on the largest JPEG ({big['photo']}, {big['mp']:.1f} MP): "
        + ", ".join(f"{t} {big[t]['peak_rss_mb']:.1f} MB" for t in tools)
    )


if __name__ == "__main__":
    main()
