#!/usr/bin/python3
"""Makes an ImageNet-like folder of JPEGs for crema's JPEG-input benchmarks, from photographs that
Debian ships in python3-skimage, free of copyright restrictions (NASA's astronaut, public domain;
Rachel Michetti's coffee, Stefan van der Walt's chelsea, CC0; and the others below).

  make_dataset.py OUT [--images N] [--classes C] [--seed S] [--square S] [--quality Q]
                      [--list FILE]

Each image is a random crop of one photograph (at least half of each side), rescaled so that its
short side is 300 to 500 pixels, with the long side in ImageNet's usual proportions, saved as a
JPEG of quality 85 to 95 (4:2:0) in OUT/classK/. About 190 kpixels and 40 KB an image, as the
ImageNet training set is on average. With --square S the crop is resized to S x S instead, as
Caffe's convert_imageset --resize_height/--resize_width makes ImageNet's LMDBs (256: about 17 KB
at quality 90). --quality fixes the quality; --list writes Caffe's ImageData list of the images
(`classK/imageNNNNN.jpg K` lines, relative to OUT). Deterministic for a seed.
"""
import argparse
import os
import random

from PIL import Image
from skimage import data

PHOTOGRAPHS = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "motorcycle_left",
               "retina", "immunohistochemistry", "cat"]


def photographs():
    found = []
    for name in PHOTOGRAPHS:
        loader = getattr(data, name, None)
        if loader is None:
            continue
        try:
            pixels = loader()
        except Exception:  # a sample this skimage does not ship
            continue
        image = Image.fromarray(pixels)
        if image.mode != "RGB":
            image = image.convert("RGB")
        found.append(image)
    if not found:
        raise SystemExit("no photographs: install python3-skimage")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--square", type=int, default=0)
    parser.add_argument("--quality", type=int, default=0)
    parser.add_argument("--list")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sources = photographs()
    total_bytes = 0
    total_pixels = 0
    listed = []
    for i in range(args.images):
        source = sources[i % len(sources)]
        width, height = source.size
        crop_w = rng.randint(width // 2, width)
        crop_h = rng.randint(height // 2, height)
        left = rng.randint(0, width - crop_w)
        top = rng.randint(0, height - crop_h)
        image = source.crop((left, top, left + crop_w, top + crop_h))
        short = rng.randint(300, 500)
        aspect = rng.uniform(1.0, 1.5)
        size = (round(short * aspect), short) if rng.random() < 0.7 else (short, round(short * aspect))
        if args.square:
            size = (args.square, args.square)
        image = image.resize(size, Image.BICUBIC)
        if rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        label = i % args.classes
        folder = os.path.join(args.out, "class%d" % label)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "image%05d.jpg" % i)
        quality = rng.randint(85, 95)
        image.save(path, quality=args.quality or quality, subsampling="4:2:0")
        listed.append("class%d/image%05d.jpg %d\n" % (label, i, label))
        total_bytes += os.path.getsize(path)
        total_pixels += size[0] * size[1]
    if args.list:
        with open(args.list, "w") as out:
            out.writelines(listed)
    print("%d images in %d classes under %s: %.0f kpixels and %.1f KB on average"
          % (args.images, args.classes, args.out, total_pixels / args.images / 1000,
             total_bytes / args.images / 1024))


if __name__ == "__main__":
    main()
