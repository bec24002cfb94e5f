"""Where a loader's records come from: a folder of images per class, a list file, a Caffe LMDB.

A source only names the data; the loader reads it, on crema's threads.
"""

from . import _crema
from ._checks import check_path

__all__ = ["ImageFolder", "ImageList", "CaffeLMDB"]


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
