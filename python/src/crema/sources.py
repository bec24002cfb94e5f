"""Where a loader's records come from: a folder of images per class, a list file, a Caffe LMDB,
WebDataset tar shards or TFRecord files.

A source only names the data; the loader reads it, on crema's threads.
"""

import os

from . import _crema
from ._checks import check_path

__all__ = ["ImageFolder", "ImageList", "CaffeLMDB", "WebDataset", "TFRecord"]


class ImageFolder:
    """An ImageNet-style folder, ``root/CLASS/FILE``, labelled as torchvision's ``ImageFolder``
    labels it: classes by sorted folder name, each class's files found in its folder and below.

    Args:
        root: the folder.
        extensions: file endings kept (compared without case).
    """

    def __init__(self, root, extensions=(".jpg", ".jpeg", ".png")):
        self.root = check_path("crema.ImageFolder", "root", root, folder=True)
        if isinstance(extensions, str) or not all(
                isinstance(each, str) and each.startswith(".") for each in extensions):
            raise TypeError("crema.ImageFolder: extensions must be a sequence of endings such "
                            f"as '.jpg', not {extensions!r}")
        self.extensions = tuple(extensions)
        if not self.extensions:
            raise ValueError("crema.ImageFolder: extensions is empty, so no file would be read")

    def _spec(self):
        spec = _crema.SourceSpec()
        spec.kind = "folder"
        spec.path = self.root
        spec.extensions = list(self.extensions)
        return spec

    def __repr__(self):
        return f"crema.ImageFolder({self.root!r})"


class ImageList:
    """Caffe's ImageData list: lines of ``path label`` under ``root``.

    Args:
        list_file: the list.
        root: the folder its paths are relative to.
    """

    def __init__(self, list_file, root):
        self.list_file = check_path("crema.ImageList", "list_file", list_file, folder=False)
        self.root = check_path("crema.ImageList", "root", root, folder=True)

    def _spec(self):
        spec = _crema.SourceSpec()
        spec.kind = "list"
        spec.path = self.list_file
        spec.root = self.root
        return spec

    def __repr__(self):
        return f"crema.ImageList({self.list_file!r}, {self.root!r})"


class CaffeLMDB:
    """A Caffe LMDB of Datums (what ``convert_imageset`` writes): raw pixels, floats or encoded
    images. Shuffled exactly, by a permutation of its keys per epoch.

    Args:
        path: the database folder (``data.mdb`` inside) or its data file.
    """

    def __init__(self, path):
        if not _crema._build_info["lmdb"]:
            raise RuntimeError("crema.CaffeLMDB: this crema was built without LMDB "
                               "(Debian: liblmdb-dev, then reinstall)")
        self.path = check_path("crema.CaffeLMDB", "path", path)

    def _spec(self):
        spec = _crema.SourceSpec()
        spec.kind = "lmdb"
        spec.path = self.path
        return spec

    def __repr__(self):
        return f"crema.CaffeLMDB({self.path!r})"


def _shard_paths(owner, shards):
    """The shards a pattern (braces, globs) or a list of paths names, checked to exist."""
    if isinstance(shards, (str, os.PathLike)):
        paths = _crema.shard_paths(os.fspath(shards))
    elif isinstance(shards, (list, tuple)):
        paths = [os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
                 for path in shards]
        if not all(isinstance(path, str) for path in paths):
            raise TypeError(f"{owner}: shards must be a pattern or a list of paths")
    else:
        raise TypeError(f"{owner}: shards must be a pattern (a str such as "
                        f"'train-{{000000..000127}}.tar') or a list of paths, not "
                        f"{type(shards).__name__}")
    if not paths:
        raise ValueError(f"{owner}: shards names no shard")
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{owner}: shard {path} does not exist")
    return list(paths)


def _index_paths(owner, index, shards):
    """The index files ``index`` names, one a shard: None, "auto" (each shard's path with
    ``.idx`` after it) or what ``_shard_paths`` takes."""
    if index is None:
        return []
    if index == "auto":
        paths = [path + ".idx" for path in shards]
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{owner}: index {path} does not exist (index='auto' "
                                        "takes SHARD.idx; crema-shards index writes them)")
        return paths
    paths = _shard_paths(owner, index)
    if len(paths) != len(shards):
        raise ValueError(f"{owner}: index names {len(paths)} files for {len(shards)} shards; "
                         "give one a shard, in their order")
    return paths


class WebDataset:
    """WebDataset tar shards: each sample's image (its ``jpg``, ``jpeg``, ``png`` or ``webp``
    member) and class (its ``cls`` member). Indexed when the loader starts (every shard's
    headers, or the shards' index files), then read sample by sample by crema's threads.

    Args:
        shards: a brace pattern or glob (``"train-{000000..000127}.tar"``), or a list of paths.
        index: the shards' index files in DALI's format (``wds2idx``'s, ``crema-shards
            index``'s), one a shard, as a pattern or a list; or "auto" for SHARD.idx beside
            each: the loader then opens without reading the shards' headers.
    """

    def __init__(self, shards, index=None):
        self.shards = _shard_paths("crema.WebDataset", shards)
        self.index = _index_paths("crema.WebDataset", index, self.shards)

    def _spec(self):
        spec = _crema.SourceSpec()
        spec.kind = "webdataset"
        spec.shards = self.shards
        spec.indexes = self.index
        return spec

    def __repr__(self):
        return f"crema.WebDataset({len(self.shards)} shards from {self.shards[0]!r})"


class TFRecord:
    """TFRecord files of ``tf.train.Example``: each record's image and class, by default the
    features of the ImageNet TFRecords (whose classes are numbered from 1). Every length's and
    every record's CRC-32C is checked.

    Args:
        shards: a brace pattern or glob (``"train-{00000..01023}.tfrecord"``), or a list of paths.
        image: the feature holding the encoded image.
        label: the int64 feature holding the class.
        index: the files' index files in DALI's format (``tfrecord2idx``'s, ``crema-shards
            index``'s), as ``crema.WebDataset`` takes them; each record's header is then
            checked when the record is read.
    """

    def __init__(self, shards, image="image/encoded", label="image/class/label", index=None):
        self.shards = _shard_paths("crema.TFRecord", shards)
        self.index = _index_paths("crema.TFRecord", index, self.shards)
        for name, value in (("image", image), ("label", label)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"crema.TFRecord: {name} must be a feature name")
        self.image = image
        self.label = label

    def _spec(self):
        spec = _crema.SourceSpec()
        spec.kind = "tfrecord"
        spec.shards = self.shards
        spec.indexes = self.index
        spec.image_feature = self.image
        spec.label_feature = self.label
        return spec

    def __repr__(self):
        return f"crema.TFRecord({len(self.shards)} shards from {self.shards[0]!r})"
