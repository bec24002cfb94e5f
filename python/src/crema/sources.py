"""Where a loader's records come from: a folder of images per class, a list file, a Caffe LMDB,
WebDataset tar shards or TFRecord files (on a filesystem, or behind http://, https:// or s3://
URLs).

A source only names the data; the loader reads it, on crema's threads.
"""

import os

from . import _crema
from ._checks import check_path

__all__ = ["ImageFolder", "ImageList", "CaffeLMDB", "WebDataset", "TFRecord", "HTTP"]


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


def _is_url(name):
    """Whether ``name`` is a URL (``scheme://...``) rather than a path."""
    scheme, found, _ = name.partition("://")
    return bool(found and scheme) and all(c.isalnum() or c in "+-." for c in scheme)


def _shard_paths(owner, shards):
    """The shards a pattern (braces, globs) or a list of paths names, each file checked to exist
    (a URL is asked when the loader starts)."""
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
        if not _is_url(path) and not os.path.isfile(path):
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
            if not _is_url(path) and not os.path.isfile(path):
                raise FileNotFoundError(f"{owner}: index {path} does not exist (index='auto' "
                                        "takes SHARD.idx; crema-shards index writes them)")
        return paths
    paths = _shard_paths(owner, index)
    if len(paths) != len(shards):
        raise ValueError(f"{owner}: index names {len(paths)} files for {len(shards)} shards; "
                         "give one a shard, in their order")
    return paths


class HTTP:
    """How shards named by ``http://``, ``https://`` and ``s3://`` URLs are read (libcurl): one
    range request a sample on kept connections, failed requests retried with backoff from the
    byte they reached. ``s3://bucket/key`` URLs are signed (AWS Signature Version 4) with
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN`` where the
    environment has them, and read from ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) where
    set, else from AWS in ``AWS_REGION``.

    Args:
        retries: attempts after the first for a connection failure, a timeout, a body cut
            short, and the answers 408, 429 and 5xx (other 4xx answers are not retried).
        backoff: seconds before the first retry, doubled for each next up to ``most_backoff``.
        most_backoff: the longest wait between attempts, in seconds.
        connect_timeout: seconds a connection may take to open.
        request_timeout: seconds a request may take in all; None for no limit.
        stall_timeout: whole seconds a transfer may move no byte.
        aws_sigv4: sign http(s) URLs too, as ``"aws:amz:REGION:SERVICE"``.
        s3_endpoint: where ``s3://`` URLs are read from (``<endpoint>/bucket/key``).
        region: the region S3 requests are signed for.
        headers: extra request headers, ``"Name: value"`` each.
        cache_bytes: bytes of shards kept in memory, in chunks of ``chunk_bytes`` read whole
            (the least recently used dropped first); 0: none, one request a sample. With a
            source shuffled shard by shard (``shard_blocks``), a cache that holds a block makes
            one request a chunk.
        chunk_bytes: the size of the cache's chunks.
        ca_file: a file of PEM certificates HTTPS servers are checked against instead of the
            system's (an internal store's own authority). Servers are always verified.
    """

    def __init__(self, retries=5, backoff=0.2, most_backoff=10.0, connect_timeout=10.0,
                 request_timeout=None, stall_timeout=30, aws_sigv4=None, s3_endpoint=None,
                 region=None, headers=(), cache_bytes=0, chunk_bytes=8 << 20, ca_file=None):
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError(f"crema.HTTP: retries must be an int >= 0, not {retries!r}")
        for name, value in (("backoff", backoff), ("most_backoff", most_backoff),
                            ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"crema.HTTP: {name} must be seconds >= 0, not {value!r}")
        if request_timeout is not None and (not isinstance(request_timeout, (int, float))
                                            or request_timeout <= 0):
            raise ValueError("crema.HTTP: request_timeout must be seconds > 0 or None, not "
                             f"{request_timeout!r}")
        if not isinstance(stall_timeout, int) or isinstance(stall_timeout, bool) or \
                stall_timeout < 1:
            raise ValueError(f"crema.HTTP: stall_timeout must be whole seconds >= 1, not "
                             f"{stall_timeout!r}")
        if isinstance(headers, str) or not all(isinstance(h, str) for h in headers):
            raise TypeError("crema.HTTP: headers must be a sequence of 'Name: value' strings")
        for name, value, least in (("cache_bytes", cache_bytes, 0),
                                   ("chunk_bytes", chunk_bytes, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"crema.HTTP: {name} must be an int >= {least}, not {value!r}")
        self.retries = retries
        self.backoff = float(backoff)
        self.most_backoff = float(most_backoff)
        self.connect_timeout = float(connect_timeout)
        self.request_timeout = request_timeout
        self.stall_timeout = stall_timeout
        self.aws_sigv4 = aws_sigv4 or ""
        self.s3_endpoint = s3_endpoint or ""
        self.region = region or ""
        self.headers = list(headers)
        self.cache_bytes = cache_bytes
        self.chunk_bytes = chunk_bytes
        self.ca_file = os.fspath(ca_file) if ca_file is not None else ""

    def _spec(self):
        spec = _crema.HTTPSpec()
        spec.retries = self.retries
        spec.backoff_s = self.backoff
        spec.most_backoff_s = self.most_backoff
        spec.connect_timeout_s = self.connect_timeout
        spec.request_timeout_s = float(self.request_timeout or 0)
        spec.stall_timeout_s = self.stall_timeout
        spec.aws_sigv4 = self.aws_sigv4
        spec.s3_endpoint = self.s3_endpoint
        spec.region = self.region
        spec.headers = self.headers
        spec.cache_bytes = self.cache_bytes
        spec.chunk_bytes = self.chunk_bytes
        spec.ca_file = self.ca_file
        return spec

    def __repr__(self):
        return f"crema.HTTP(retries={self.retries}, request_timeout={self.request_timeout!r})"


def _shard_blocks_of(owner, shard_blocks):
    """``shard_blocks`` checked: None, or shards a block (an int >= 1)."""
    if shard_blocks is None:
        return 0
    if not isinstance(shard_blocks, int) or isinstance(shard_blocks, bool) or shard_blocks < 1:
        raise ValueError(f"{owner}: shard_blocks must be an int >= 1 or None, not "
                         f"{shard_blocks!r}")
    return shard_blocks


def _stream_of(owner, stream, shuffle_buffer, epoch_samples, index, shard_blocks):
    """The stream options checked: (stream, shuffle_buffer, epoch_samples)."""
    if not isinstance(stream, bool):
        raise TypeError(f"{owner}: stream must be True or False, not {stream!r}")
    if not isinstance(shuffle_buffer, int) or isinstance(shuffle_buffer, bool) or \
            shuffle_buffer < 0:
        raise ValueError(f"{owner}: shuffle_buffer must be an int >= 0, not {shuffle_buffer!r}")
    if not stream:
        if epoch_samples is not None:
            raise ValueError(f"{owner}: epoch_samples is for stream=True (an indexed source "
                             "counts its samples)")
        return False, 0, 0
    if index:
        raise ValueError(f"{owner}: stream=True reads without an index; give index=None")
    if shard_blocks:
        raise ValueError(f"{owner}: shard_blocks orders an indexed source; a stream reads its "
                         "shards in order, through shuffle_buffer")
    if epoch_samples is None or not isinstance(epoch_samples, int) or \
            isinstance(epoch_samples, bool) or epoch_samples < 1:
        raise ValueError(f"{owner}: stream=True needs epoch_samples, the samples an epoch reads "
                         "across the ranks (a stream is not counted before it is read), not "
                         f"{epoch_samples!r}")
    return True, shuffle_buffer, epoch_samples


def _http_of(owner, http, shards):
    """``http`` checked: a crema.HTTP, or None for its defaults."""
    if http is None:
        http = HTTP()
    if not isinstance(http, HTTP):
        raise TypeError(f"{owner}: http must be a crema.HTTP, not {type(http).__name__}")
    if any(_is_url(path) for path in shards) and not _crema._build_info["http"]:
        raise RuntimeError(f"{owner}: shards named by URL need crema built with crema::http "
                           "(Debian: libcurl4-openssl-dev, then reinstall)")
    return http


class _Shards:
    """What crema.WebDataset and crema.TFRecord share: the shards and their index files, how
    URLs are read, and the order (indexed, shard by shard, or streamed)."""

    def _take_shards(self, owner, shards, index, http, shard_blocks, stream, shuffle_buffer,
                     epoch_samples):
        self.shards = _shard_paths(owner, shards)
        self.index = _index_paths(owner, index, self.shards)
        self.http = _http_of(owner, http, self.shards + self.index)
        self.shard_blocks = _shard_blocks_of(owner, shard_blocks)
        self.stream, self.shuffle_buffer, self.epoch_samples = _stream_of(
            owner, stream, shuffle_buffer, epoch_samples, self.index, self.shard_blocks)

    def _shard_spec(self, kind):
        spec = _crema.SourceSpec()
        spec.kind = kind
        spec.shards = self.shards
        spec.indexes = self.index
        spec.http = self.http._spec()
        spec.shard_blocks = self.shard_blocks
        spec.stream = self.stream
        spec.shuffle_buffer = self.shuffle_buffer
        spec.epoch_samples = self.epoch_samples
        return spec


class WebDataset(_Shards):
    """WebDataset tar shards: each sample's image (its ``jpg``, ``jpeg``, ``png`` or ``webp``
    member) and class (its ``cls`` member). Indexed when the loader starts (every shard's
    headers, or the shards' index files), then read sample by sample by crema's threads.

    Args:
        shards: a brace pattern or glob (``"train-{000000..000127}.tar"``), or a list of paths;
            paths or URLs (``https://host/train-{000000..000127}.tar``, ``s3://bucket/...``).
        index: the shards' index files in DALI's format (``wds2idx``'s, ``crema-shards
            index``'s), one a shard, as a pattern or a list; or "auto" for SHARD.idx beside
            each: the loader then opens without reading the shards' headers (over HTTP, one
            request an index instead of one a member).
        http: how URLs are read, a ``crema.HTTP`` (its defaults where None).
        shard_blocks: shuffle shard by shard, as a reader over a network wants: each epoch
            the shards in a keyed order, ``shard_blocks`` at a time, the samples of those
            shards in a keyed order of their own; None: any sample after any other.
        stream: read without an index, as WebDataset's loader does: each rank every
            world-th shard (another share each epoch when shuffled), each shard from its start
            to its end, samples drawn from a buffer of ``shuffle_buffer``; nothing is read
            before the first batch.
        shuffle_buffer: a stream's buffer, in samples (0: the shards' order).
        epoch_samples: a stream's samples an epoch, across the ranks (needed: a stream is not
            counted before it is read): each rank reads its share, its shards again where they
            hold fewer, so that every rank makes as many batches.
    """

    def __init__(self, shards, index=None, http=None, shard_blocks=None, stream=False,
                 shuffle_buffer=1000, epoch_samples=None):
        self._take_shards("crema.WebDataset", shards, index, http, shard_blocks, stream,
                          shuffle_buffer, epoch_samples)

    def _spec(self):
        return self._shard_spec("webdataset")

    def __repr__(self):
        return f"crema.WebDataset({len(self.shards)} shards from {self.shards[0]!r})"


class TFRecord(_Shards):
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
        http: how URLs are read, a ``crema.HTTP`` (its defaults where None).
        shard_blocks: shuffle shard by shard, as ``crema.WebDataset`` does.
        stream, shuffle_buffer, epoch_samples: read without an index, as ``crema.WebDataset``
            does.
    """

    def __init__(self, shards, image="image/encoded", label="image/class/label", index=None,
                 http=None, shard_blocks=None, stream=False, shuffle_buffer=1000,
                 epoch_samples=None):
        self._take_shards("crema.TFRecord", shards, index, http, shard_blocks, stream,
                          shuffle_buffer, epoch_samples)
        for name, value in (("image", image), ("label", label)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"crema.TFRecord: {name} must be a feature name")
        self.image = image
        self.label = label

    def _spec(self):
        spec = self._shard_spec("tfrecord")
        spec.image_feature = self.image
        spec.label_feature = self.label
        return spec

    def __repr__(self):
        return f"crema.TFRecord({len(self.shards)} shards from {self.shards[0]!r})"
