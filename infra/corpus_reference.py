"""The reference rendering of every file of a corpus, for the pipeline's corpus test: what a
colour-managed viewer shows, as Pillow reads it.

    corpus_reference.py IMAGES REFERENCE DEFAULT_CMYK_PROFILE

For each file under IMAGES (recursively), REFERENCE/<path>.png is its first frame turned upright
(ImageOps.exif_transpose: EXIF, XMP, AVIF's irot/imir), converted to sRGB from its ICC profile
(LittleCMS, relative colorimetric: what imgest does; a CMYK image without one through the same
default CMYK profile imgest uses), flattened over white, 8-bit RGB. A file Pillow cannot read
gets REFERENCE/<path>.refused with Pillow's error instead.
"""

import io
import os
import sys
import warnings

from PIL import Image, ImageCms, ImageOps

# Beyond imgest's own default limit, a file is a bomb for the reference too (Pillow refuses it).
Image.MAX_IMAGE_PIXELS = 50_000_000
warnings.simplefilter("ignore")
SRGB = ImageCms.createProfile("sRGB")


def eight_bit(im):
    """16- and 32-bit grey as 8-bit grey (Pillow's own conversion clips instead of scaling)."""
    if im.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        top = 65535 if im.mode.startswith("I;16") else max(1, im.getextrema()[1])
        return im.point(lambda v: v * (255 / top)).convert("L")
    if im.mode == "F":
        return im.convert("L")
    return im


def render(path, default_cmyk):
    im = Image.open(path)
    im.seek(0)
    im.load()
    icc = im.info.get("icc_profile")
    im = ImageOps.exif_transpose(im)
    im = eight_bit(im)
    if im.mode in ("P", "PA", "LA", "La", "RGBa") or "transparency" in im.info:
        im = im.convert("RGBA")
    alpha = im.getchannel("A") if im.mode == "RGBA" else None
    if im.mode == "RGBA":
        im = im.convert("RGB")
    if icc or im.mode == "CMYK":
        try:
            source = ImageCms.ImageCmsProfile(io.BytesIO(icc)) if icc else default_cmyk
            im = ImageCms.profileToProfile(im, source, SRGB, renderingIntent=1, outputMode="RGB")
        except (ImageCms.PyCMSError, OSError, ValueError):
            # A profile LittleCMS cannot read or refuses (or of another kind than the pixels):
            # as imgest, the pixels as they are (CMYK through the default profile).
            if im.mode == "CMYK":
                im = ImageCms.profileToProfile(im, default_cmyk, SRGB, renderingIntent=1, outputMode="RGB")
    im = im.convert("RGB")
    if alpha is not None:
        white = Image.new("RGB", im.size, (255, 255, 255))
        im = Image.composite(im, white, alpha)
    return im


def main():
    images, reference, cmyk = sys.argv[1:4]
    default_cmyk = ImageCms.ImageCmsProfile(cmyk)
    done = refused = 0
    for root, _, files in os.walk(images):
        for name in sorted(files):
            path = os.path.join(root, name)
            out = os.path.join(reference, os.path.relpath(path, images))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            try:
                render(path, default_cmyk).save(out + ".png")
                done += 1
            except Exception as e:  # noqa: BLE001 - any failure is the reference's answer
                with open(out + ".refused", "w") as f:
                    f.write(f"{type(e).__name__}: {e}\n")
                refused += 1
    print(f"corpus: {done} references rendered, {refused} files Pillow does not read", file=sys.stderr)


if __name__ == "__main__":
    main()
