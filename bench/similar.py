"""The near-duplicate benchmark's photos (bench/similar.sh runs this, then `imgest-bench similar`).

Writes, under OUT:
  originals/NNN.jpg          the public photos the queries are made of (ORIGINALS), at most
                             1600 pixels a side, quality 92
  queries/TRANSFORM/NNN.jpg  each original transformed (the list below; seeded, so the same
                             files every run)
  distractors/NNNNN.jpg      COUNT unrelated photos: random windows (20-45 % of a side, any
                             aspect) of the DISTRACTOR photos, a disjoint set, turned or mirrored
                             at random, 300-900 pixels on the long side, quality 70-95

Usage: python bench/similar.py ORIGINALS_DIR DISTRACTORS_DIR OUT [COUNT]
"""

import io
import os
import random
import sys

from PIL import Image, ImageDraw, ImageEnhance, ImageFont, ImageOps

PHOTO = (".jpg", ".jpeg", ".png", ".webp")


def photos(directory):
    for root, _, files in os.walk(directory):
        for name in sorted(files):
            if name.lower().endswith(PHOTO):
                yield os.path.join(root, name)


def load(path, side):
    image = Image.open(path)
    image = ImageOps.exif_transpose(image).convert("RGB")
    image.thumbnail((side, side), Image.LANCZOS)
    return image


def jpeg(image, quality):
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def reencoded(image, quality):
    return Image.open(io.BytesIO(jpeg(image, quality)))


def resized(image, scale):
    w, h = image.size
    return image.resize((max(16, round(w * scale)), max(16, round(h * scale))), Image.BILINEAR)


def watermarked(image, rng):
    """A shop's name, half transparent, a twentieth of the photo high, in a random corner."""
    w, h = image.size
    layer = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    size = max(10, h // 20)
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one size only
        font = ImageFont.load_default()
    text = "seller-shop.example"
    box = draw.textbbox((0, 0), text, font=font)
    tw, th = box[2] - box[0], box[3] - box[1]
    x = rng.choice([w // 40, w - tw - w // 40])
    y = rng.choice([h // 40, h - th - h // 20])
    draw.text((x, y), text, font=font, fill=(255, 255, 255, 128), stroke_width=1,
              stroke_fill=(0, 0, 0, 128))
    return Image.alpha_composite(image.convert("RGBA"), layer).convert("RGB")


def cropped(image, share, rng):
    """`share` of each side cut, split at random between its two ends."""
    w, h = image.size
    left = rng.random() * share
    top = rng.random() * share
    box = (round(left * w), round(top * h), round((1 - (share - left)) * w),
           round((1 - (share - top)) * h))
    return image.crop(box)


def padded(image, share, rng):
    """A border adding `share` of each side, split at random, of a flat colour."""
    w, h = image.size
    pw, ph = round(w * share), round(h * share)
    colour = rng.choice([(0, 0, 0), (255, 255, 255), (238, 238, 238)])
    out = Image.new("RGB", (w + pw, h + ph), colour)
    out.paste(image, (rng.randint(0, pw), rng.randint(0, ph)))
    return out


def transforms(image, rng):
    """(name, image, quality) of every transform of `image`."""
    yield "reencoded", reencoded(image, rng.randint(50, 95)), 95
    yield "resized", resized(image, rng.uniform(0.25, 1.0)), 90
    yield "watermarked", watermarked(image, rng), 90
    yield "brightness", ImageEnhance.Brightness(image).enhance(rng.choice([0.9, 1.1])), 90
    yield "contrast", ImageEnhance.Contrast(image).enhance(rng.choice([0.9, 1.1])), 90
    yield "mirrored", ImageOps.mirror(image), 90
    for share in (5, 10, 15, 20):
        yield f"cropped-{share}", cropped(image, share / 100, rng), 90
    for share in (5, 10, 15, 20):
        yield f"padded-{share}", padded(image, share / 100, rng), 90
    yield "resized-50+q70", resized(image, 0.5), 70
    yield "mirrored+q75", ImageOps.mirror(image), 75
    yield "padded-10+resized-60", resized(padded(image, 0.1, rng), 0.6), 85
    yield "watermarked+resized-50+q80", resized(watermarked(image, rng), 0.5), 80
    yield "brightness+contrast+q80", ImageEnhance.Contrast(
        ImageEnhance.Brightness(image).enhance(1.1)).enhance(0.9), 80


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    originals_dir, distractors_dir, out = sys.argv[1:4]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 10_000
    rng = random.Random(45)
    originals = list(photos(originals_dir))
    for i, path in enumerate(originals):
        image = load(path, 1600)
        write(f"{out}/originals/{i:03}.jpg", jpeg(image, 92))
        for name, transformed, quality in transforms(image, rng):
            write(f"{out}/queries/{name}/{i:03}.jpg", jpeg(transformed, quality))
    pool = [load(p, 2400) for p in photos(distractors_dir)]
    for n in range(count):
        source = rng.choice(pool)
        w, h = source.size
        cw, ch = round(w * rng.uniform(0.2, 0.45)), round(h * rng.uniform(0.2, 0.45))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        window = source.crop((x, y, x + cw, y + ch))
        window = window.transpose(rng.choice([
            Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.ROTATE_90,
            Image.Transpose.ROTATE_180, Image.Transpose.ROTATE_270, Image.Transpose.TRANSPOSE,
        ])) if rng.random() < 0.5 else window
        window.thumbnail((rng.randint(300, 900),) * 2, Image.LANCZOS)
        write(f"{out}/distractors/{n:05}.jpg", jpeg(window, rng.randint(70, 95)))
    print(f"{len(originals)} originals, {len(pool)} distractor sources, {count} distractors",
          file=sys.stderr)


if __name__ == "__main__":
    main()
