#!/usr/bin/python3
"""Writes the seed corpus of crema-fuzz-image_window into fuzz/corpus/image_window/: small JPEGs
and PNGs of every kind the decoders meet (subsamplings 4:2:0, 4:2:2, 4:4:4, 4:4:0, 4:1:1, gray,
CMYK, progressive, arithmetic-coded, restart markers, 1 x 1, sides of 65,500 pixels, a file cut
short; PNG gray, RGB, RGBA, 16-bit, palette, interlaced), each behind the eight bytes that choose
the fuzzer's window, sizes and options. Pixels are cut from scikit-image's astronaut (NASA,
public domain). Needs python3-pil, python3-skimage and cjpeg (libjpeg-turbo-progs).

  fuzz/make_image_window_corpus.py
"""
import io
import os
import subprocess
import tempfile

from PIL import Image
from skimage import data

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "image_window")


def photo(width, height, mode="RGB"):
    return Image.fromarray(data.astronaut()).resize((width, height)).convert(mode)


def pil(image, **save):
    buffer = io.BytesIO()
    image.save(buffer, **save)
    return buffer.getvalue()


def cjpeg(image, *flags):
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "in.ppm")
        image.save(source)
        return subprocess.run(["cjpeg", *flags, source], check=True, capture_output=True).stdout


def main():
    os.makedirs(OUT, exist_ok=True)
    colour = photo(37, 29)
    seeds = {
        "jpeg_420": pil(colour, format="JPEG", quality=90, subsampling="4:2:0"),
        "jpeg_422": pil(colour, format="JPEG", quality=90, subsampling="4:2:2"),
        "jpeg_444": pil(colour, format="JPEG", quality=90, subsampling="4:4:4"),
        "jpeg_440": cjpeg(colour, "-sample", "1x2"),
        "jpeg_411": cjpeg(colour, "-sample", "4x1"),
        "jpeg_gray": pil(photo(21, 17, "L"), format="JPEG", quality=85),
        "jpeg_cmyk": pil(photo(18, 16, "CMYK"), format="JPEG", quality=90),
        "jpeg_progressive": pil(colour, format="JPEG", quality=90, progressive=True),
        "jpeg_arithmetic": cjpeg(colour, "-arithmetic"),
        "jpeg_restart": cjpeg(colour, "-restart", "1"),
        "jpeg_1x1": pil(photo(1, 1), format="JPEG"),
        "jpeg_wide": pil(Image.new("L", (65500, 1), 128), format="JPEG"),
        "jpeg_tall": pil(Image.new("L", (1, 65500), 128), format="JPEG"),
        "png_rgb": pil(photo(13, 11), format="PNG"),
        "png_rgba": pil(photo(9, 7, "RGBA"), format="PNG"),
        "png_gray": pil(photo(8, 5, "L"), format="PNG"),
        "png_16bit": pil(photo(6, 6, "L").convert("I"), format="PNG"),
        "png_palette": pil(photo(10, 4, "P"), format="PNG"),
        "png_interlaced": pil(photo(12, 9), format="PNG", interlace=1),
        "png_1x1": pil(photo(1, 1), format="PNG"),
    }
    seeds["jpeg_truncated"] = seeds["jpeg_420"][: len(seeds["jpeg_420"]) * 2 // 3]
    # The eight choice bytes: window (top, left, rows, columns), least size, options, geometry.
    choices = [bytes([0, 0, 255, 255, 0, 0, 0, 0]), bytes([200, 100, 40, 255, 128, 0x15, 1, 9]),
               bytes([255, 255, 0, 0, 255, 0x2a, 0, 3])]
    for index, (name, image) in enumerate(sorted(seeds.items())):
        with open(os.path.join(OUT, name), "wb") as out:
            out.write(choices[index % len(choices)] + image)
    print("%d seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
