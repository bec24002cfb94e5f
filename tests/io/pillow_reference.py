#!/usr/bin/python3
"""What torchvision's transforms make of an image on PIL images, as raw RGB bytes, for
crema's image_transform test (Debian: python3-pil).

  pillow_reference.py IMAGE CASES   writes, for each line of CASES, the output's H x W x 3 bytes:
    crop TOP LEFT HEIGHT WIDTH OUT_HEIGHT OUT_WIDTH
        RandomResizedCrop's resized_crop: img.crop(box).resize(size, BILINEAR)
    center RESIZE CROP_HEIGHT CROP_WIDTH
        Resize(RESIZE) (the short side; the long side in proportion, rounded down), then
        CenterCrop: the crop starts at round((size - crop) / 2)
"""
import sys

from PIL import Image


def main():
    image = Image.open(sys.argv[1]).convert("RGB")
    out = sys.stdout.buffer
    with open(sys.argv[2]) as cases:
        for line in cases:
            words = line.split()
            if not words:
                continue
            if words[0] == "crop":
                top, left, height, width, out_height, out_width = map(int, words[1:])
                made = image.crop((left, top, left + width, top + height)).resize(
                    (out_width, out_height), Image.BILINEAR)
            else:
                resize, crop_height, crop_width = map(int, words[1:])
                width, height = image.size
                if width <= height:
                    size = (resize, int(resize * height / width))
                else:
                    size = (int(resize * width / height), resize)
                resized = image.resize(size, Image.BILINEAR)
                top = int(round((size[1] - crop_height) / 2.0))
                left = int(round((size[0] - crop_width) / 2.0))
                made = resized.crop((left, top, left + crop_width, top + crop_height))
            out.write(made.tobytes())


if __name__ == "__main__":
    main()
