#!/usr/bin/env python3
"""Writes the demo's data set as JPEG files: ten classes of shapes (disc, ring, square, frame,
triangle, plus, cross, h-bar, v-bar, diamond), each at a random place and size, in a random
bright colour on a random dark background, under pixel noise, 32 x 32, one folder per class
(ROOT/train/CLASS/N.jpg and ROOT/test/CLASS/N.jpg), as torchvision's ImageFolder reads them.

    make_shapes.py ROOT [--train 12000] [--test 2000] [--seed 1]

The shapes are those of crema's C++ demo (examples/demo/shapes.hpp), drawn with NumPy's
generator: the same seed writes the same files.
"""

import argparse
import pathlib

import numpy as np
from PIL import Image

CLASSES = ("disc", "ring", "square", "frame", "triangle", "plus", "cross", "h-bar", "v-bar",
           "diamond")
SIDE = 32


def inside(label, dx, dy, r):
    """Which pixels, at offsets (dx, dy) from a shape's centre, lie in shape ``label`` of
    half-size r."""
    ax, ay = np.abs(dx), np.abs(dy)
    stroke = max(2.0, r / 3.0)
    d2 = dx * dx + dy * dy
    box = (ax <= r) & (ay <= r)
    return [
        d2 <= r * r,
        (d2 <= r * r) & (d2 >= (r - stroke) ** 2),
        box,
        box & ((ax > r - stroke) | (ay > r - stroke)),
        (dy >= -r) & (dy <= r) & (ax <= (dy + r) / 2.0),
        ((ax <= stroke / 2) & (ay <= r)) | ((ay <= stroke / 2) & (ax <= r)),
        box & (np.abs(ax - ay) <= stroke / 2),
        (ax <= r) & (ay <= r / 3.0),
        (ay <= r) & (ax <= r / 3.0),
        ax + ay <= r,
    ][label]


def write(root, count, rng):
    for name in CLASSES:
        (root / name).mkdir(parents=True, exist_ok=True)
    ys, xs = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    for n in range(count):
        label = int(rng.integers(len(CLASSES)))
        half = rng.uniform(5.0, 11.0)
        cx, cy = rng.uniform(half, SIDE - 1 - half, size=2)
        background = rng.integers(0, 101, size=3)
        colour = rng.integers(130, 256, size=3)
        mask = inside(label, xs - cx, ys - cy, half)
        image = np.where(mask[..., None], colour, background).astype(np.float32)
        image += rng.normal(0.0, 24.0, size=image.shape)
        pixels = np.clip(np.rint(image), 0, 255).astype(np.uint8)
        Image.fromarray(pixels, "RGB").save(root / CLASSES[label] / f"{n:05d}.jpg", quality=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--train", type=int, default=12000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    write(args.root / "train", args.train, rng)
    write(args.root / "test", args.test, rng)


if __name__ == "__main__":
    main()
