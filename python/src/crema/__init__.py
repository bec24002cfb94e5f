"""crema from Python: a data loader for PyTorch and NumPy training loops, run by crema's C++
pipeline (decoding, cropping, resampling and batching on its own threads, without the GIL) and
handing batches over without a copy.

    import crema
    loader = crema.Loader(
        crema.ImageFolder("train"),
        crema.ImageTransform(crop=crema.RandomResizedCrop(224), flip=True,
                             mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
        batch_size=256, threads=8)
    for images, labels in loader:  # one epoch
        ...
"""

from . import _crema
from ._crema import ConfigError, Error, FormatError, IOError, LMDBError, PipelineError
from .loader import Loader
from .sources import HTTP, CaffeLMDB, ImageFolder, ImageList, TFRecord, WebDataset
from .transforms import CaffeTransform, ImageTransform, RandomResizedCrop, ResizeCenterCrop

__version__ = _crema.__version__

__all__ = [
    "Loader", "ImageFolder", "ImageList", "CaffeLMDB", "WebDataset", "TFRecord", "HTTP",
    "ImageTransform",
    "RandomResizedCrop",
    "ResizeCenterCrop", "CaffeTransform", "build_info", "Error", "ConfigError", "FormatError",
    "PipelineError", "IOError", "LMDBError", "__version__",
]


def build_info():
    """Which optional parts this crema was built with: a dict of ``version`` and the booleans
    ``image``, ``lmdb``, ``cuda``, ``nvjpeg``, ``mpi``."""
    return dict(_crema._build_info)
