"""What a loader makes of each record: torchvision's training and evaluation transforms, or
Caffe's. A transform only describes; crema's threads decode only the window each sample needs,
resample it and write it into the batch.
"""

import math

from . import _crema
from ._checks import (check_bool, check_choice, check_pair, check_path, check_real, check_size,
                      check_triple)

__all__ = ["RandomResizedCrop", "ResizeCenterCrop", "ImageTransform", "CaffeTransform"]


class RandomResizedCrop:
    """torchvision's ``RandomResizedCrop(size, scale, ratio)``: a window of random area (a share
    of the image's in ``scale``) and aspect ratio (log-uniform in ``ratio``), resized to ``size``.

    Args:
        size: the output, an int (square) or (height, width).
        scale: the window's share of the image's area, (least, most).
        ratio: the window's width / height, (least, most).
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)):
        owner = "crema.RandomResizedCrop"
        self.size = check_size(owner, "size", size)
        self.scale = check_pair(owner, "scale", scale, positive=True)
        self.ratio = check_pair(owner, "ratio", ratio, positive=True)
        for name, (low, high) in (("scale", self.scale), ("ratio", self.ratio)):
            if low > high:
                raise ValueError(f"{owner}: {name} must be (least, most), not {(low, high)}")

    def _fill(self, spec):
        spec.random_crop = True
        spec.height, spec.width = self.size
        spec.scale_low, spec.scale_high = self.scale
        spec.ratio_low, spec.ratio_high = self.ratio

    def __repr__(self):
        return f"crema.RandomResizedCrop({self.size}, scale={self.scale}, ratio={self.ratio})"


class ResizeCenterCrop:
    """torchvision's ``Resize(resize)`` then ``CenterCrop(crop)``: the short side resized to
    ``resize``, then the centre ``crop`` cut out.

    Args:
        resize: the short side after resizing.
        crop: the output, an int (square) or (height, width), at most ``resize``.
    """

    def __init__(self, resize=256, crop=224):
        owner = "crema.ResizeCenterCrop"
        self.resize = check_size(owner, "resize", resize)[0]
        self.crop = check_size(owner, "crop", crop)
        if max(self.crop) > self.resize:
            raise ValueError(f"{owner}: crop {self.crop} is larger than the short side "
                             f"{self.resize} it is cut from")

    def _fill(self, spec):
        spec.random_crop = False
        spec.resize = self.resize
        spec.height, spec.width = self.crop

    def __repr__(self):
        return f"crema.ResizeCenterCrop({self.resize}, {self.crop})"


class ImageTransform:
    """ImageNet-style input: a crop (``RandomResizedCrop`` for training, ``ResizeCenterCrop`` for
    evaluation), a random horizontal flip, colour jitter, then ToTensor and Normalize (float32) or
    the 8-bit values (uint8, for engines that normalise on the device). Resampled as Pillow
    resamples (bilinear, antialiased), so samples are within 1 of torchvision's.

    Args:
        crop: ``RandomResizedCrop`` or ``ResizeCenterCrop``.
        flip: flip horizontally with probability 1/2.
        jitter: (brightness, contrast, saturation), as torchvision's ``ColorJitter``; None: none.
        mean, std: per channel (RGB), applied to values in [0, 1]; float32 outputs only.
        dtype: "float32" or "uint8".
        layout: "NCHW" or "NHWC".
        detail: "exact" (the default: windows keep the output's resolution) or "reduced": a
            window is decoded one JPEG scale smaller while that keeps 3/4 of the output's rows
            and columns, faster and less sharp (docs/datasets.md states how far from Pillow).
        decoder: "cpu" (the default: libjpeg-turbo on crema's threads) or "nvjpeg": the JPEGs
            are decoded by nvJPEG on the loader's ``device`` and resampled there by crema's
            kernels, the same samples within nvJPEG's rounding (needs crema built with nvJPEG).
    """

    def __init__(self, crop=None, flip=False, jitter=None, mean=(0.0, 0.0, 0.0),
                 std=(1.0, 1.0, 1.0), dtype="float32", layout="NCHW", detail="exact",
                 decoder="cpu"):
        owner = "crema.ImageTransform"
        if crop is None:
            crop = RandomResizedCrop(224)
        if not isinstance(crop, (RandomResizedCrop, ResizeCenterCrop)):
            raise TypeError(f"{owner}: crop must be a crema.RandomResizedCrop or a "
                            f"crema.ResizeCenterCrop, not {type(crop).__name__}")
        self.crop = crop
        self.flip = check_bool(owner, "flip", flip)
        self.jitter = (0.0, 0.0, 0.0) if jitter is None else check_triple(owner, "jitter", jitter)
        if min(self.jitter) < 0:
            raise ValueError(f"{owner}: jitter must be (brightness, contrast, saturation), each "
                             f"0 or more, not {self.jitter}")
        self.mean = check_triple(owner, "mean", mean)
        self.std = check_triple(owner, "std", std)
        if any(value == 0 for value in self.std):
            raise ValueError(f"{owner}: std must not be 0, got {self.std}")
        self.dtype = check_choice(owner, "dtype", dtype, ("float32", "uint8"))
        self.layout = check_choice(owner, "layout", layout, ("NCHW", "NHWC"))
        self.detail = check_choice(owner, "detail", detail, ("exact", "reduced"))
        self.decoder = check_choice(owner, "decoder", decoder, ("cpu", "nvjpeg"))
        if self.decoder == "nvjpeg" and not _crema._build_info["nvjpeg"]:
            raise ValueError(f"{owner}: decoder='nvjpeg' needs crema built with nvJPEG (pip "
                             "install . --config-settings cmake.define.CREMA_ENABLE_CUDA=ON "
                             "--config-settings cmake.define.CREMA_ENABLE_NVJPEG=ON where the "
                             "CUDA toolkit and nvJPEG are); this one was built without")
        if self.dtype == "uint8" and (self.mean != (0.0, 0.0, 0.0) or
                                      self.std != (1.0, 1.0, 1.0)):
            raise ValueError(f"{owner}: mean and std apply to float32 outputs; uint8 outputs "
                             "are the pixel values (normalise them on the device)")

    def _spec(self):
        spec = _crema.ImageSpec()
        self.crop._fill(spec)
        spec.flip = self.flip
        spec.jitter = list(self.jitter)
        spec.mean = list(self.mean)
        spec.std = list(self.std)
        spec.bytes = self.dtype == "uint8"
        spec.hwc = self.layout == "NHWC"
        spec.reduced_detail = self.detail == "reduced"
        spec.nvjpeg = self.decoder == "nvjpeg"
        return spec

    def __repr__(self):
        return (f"crema.ImageTransform(crop={self.crop!r}, flip={self.flip}, "
                f"jitter={self.jitter}, mean={self.mean}, std={self.std}, "
                f"dtype={self.dtype!r}, layout={self.layout!r}, detail={self.detail!r}, "
                f"decoder={self.decoder!r})")


class CaffeTransform:
    """Caffe's ``DataTransformer``, equal to it bit for bit: a crop (random in training, the
    centre otherwise), a mirror (training only), the mean (a mean file, what
    ``compute_image_mean`` writes, or a value per channel) subtracted, then ``scale``. Reads
    Caffe LMDBs only; samples are NCHW, channels as stored (BGR for Caffe's images).

    Args:
        crop: the side of the square crop; 0 keeps the whole record.
        mirror: flip at random (in training).
        mean_file: a BlobProto of the mean image; not with ``mean_values``.
        mean_values: one value per channel, or one for all.
        scale: applied after the mean is subtracted.
        train: Caffe's TRAIN phase (random crop and mirror); False: TEST (the centre, no mirror).
        dtype: "float32" (the whole transform) or "uint8" (the crop and mirror only).
    """

    def __init__(self, crop=0, mirror=False, mean_file=None, mean_values=None, scale=1.0,
                 train=True, dtype="float32"):
        owner = "crema.CaffeTransform"
        self.crop = check_size(owner, "crop", crop)[0] if crop else 0
        self.mirror = check_bool(owner, "mirror", mirror)
        if mean_file is not None and mean_values is not None:
            raise ValueError(f"{owner}: give mean_file or mean_values, not both")
        self.mean_file = (None if mean_file is None
                          else check_path(owner, "mean_file", mean_file, folder=False))
        if mean_values is None:
            self.mean_values = ()
        else:
            if isinstance(mean_values, (str, bytes)) or not hasattr(mean_values, "__len__"):
                raise TypeError(f"{owner}: mean_values must be a sequence of numbers, "
                                f"not {mean_values!r}")
            self.mean_values = tuple(check_real(owner, "mean_values", value)
                                     for value in mean_values)
        self.scale = check_real(owner, "scale", scale)
        self.train = check_bool(owner, "train", train)
        self.dtype = check_choice(owner, "dtype", dtype, ("float32", "uint8"))
        if self.dtype == "uint8" and (self.mean_file or self.mean_values or
                                      not math.isclose(self.scale, 1.0)):
            raise ValueError(f"{owner}: uint8 outputs are the cropped pixels; apply mean and "
                             "scale on the device, or ask for float32")

    def _spec(self):
        spec = _crema.CaffeSpec()
        spec.crop = self.crop
        spec.mirror = self.mirror
        spec.training = self.train
        spec.mean_file = self.mean_file or ""
        spec.mean_values = list(self.mean_values)
        spec.scale = self.scale
        spec.bytes = self.dtype == "uint8"
        return spec

    def __repr__(self):
        return (f"crema.CaffeTransform(crop={self.crop}, mirror={self.mirror}, "
                f"mean_file={self.mean_file!r}, mean_values={self.mean_values}, "
                f"scale={self.scale}, train={self.train}, dtype={self.dtype!r})")
