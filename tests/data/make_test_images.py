#!/usr/bin/python3
"""Makes the photographs crema's image tests start from, out of scikit-image's sample images
(Debian: python3-skimage, python3-pil). Both are free of copyright restrictions:

  astronaut.jpg  NASA's portrait of Eileen Collins (public domain), 256 x 256
  coffee.jpg     Rachel Michetti's cup of coffee (CC0), cropped to 171 x 253: odd sizes, so
                 that windows meet partial iMCUs at the right and bottom edges

Quality 92, 4:2:0. The tests re-encode their pixels into every JPEG variant they need.
Run from this folder: /usr/bin/python3 make_test_images.py
"""
from PIL import Image
from skimage import data

Image.fromarray(data.astronaut()).resize((256, 256), Image.LANCZOS).save(
    "astronaut.jpg", quality=92, subsampling="4:2:0")
coffee = Image.fromarray(data.coffee())  # 400 x 600
coffee.crop((80, 60, 80 + 253, 60 + 171)).save("coffee.jpg", quality=92, subsampling="4:2:0")
