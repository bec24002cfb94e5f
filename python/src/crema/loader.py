"""crema.Loader: batches for a training loop, made by crema's C++ threads, handed over without a
copy."""

import atexit
import os
import weakref

from . import _crema
from ._checks import check_bool, check_choice, check_int, check_real
from .sources import CaffeLMDB, ImageFolder, ImageList, TFRecord, WebDataset
from .transforms import CaffeTransform, ImageTransform

__all__ = ["Loader"]

_STATE_VERSION = 1
_LAST_BATCH = {"keep": _crema.PartialBatch.keep, "drop": _crema.PartialBatch.drop,
               "pad": _crema.PartialBatch.pad}
_OUTPUT = {"torch": _crema.Output.torch, "numpy": _crema.Output.numpy,
           "dlpack": _crema.Output.dlpack}

# Loaders whose threads run: closed at exit, let go in a child after fork().
_started = weakref.WeakSet()


def _close_all():
    for loader in list(_started):
        loader.close()


def _forget_all_in_child():
    for loader in list(_started):
        loader._forget()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all_in_child)


def _shard_from_environment():
    """(rank, world) from torch.distributed when it is initialised, else from RANK and
    WORLD_SIZE, else (0, 1)."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        try:
            return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        except ValueError:
            raise ValueError("crema.Loader: shard='auto' found RANK="
                             f"{os.environ['RANK']!r} and WORLD_SIZE="
                             f"{os.environ['WORLD_SIZE']!r}, which are not integers") from None
    return 0, 1


class Loader:
    """Batches of ``(images, labels)`` for a training loop: ``for images, labels in loader:`` is
    one epoch of ``len(loader)`` batches; the next ``iter()`` is the next epoch, with other
    augmentations (``set_epoch`` chooses one, as DistributedSampler's does).

    crema's threads read, decode, crop, resample and normalise into batch slots while the loop
    trains; a batch reaches Python as arrays over its slot's memory (DLPack, no copy), and the
    slot is reused only once every array made from it (views and slices included) is gone.
    The same seed gives the same batches, bytes included, whatever ``threads`` is; a loader
    resumed from ``state_dict()`` delivers exactly the batches the stopped one would have.

    Args:
        source: ``crema.ImageFolder``, ``crema.ImageList``, ``crema.CaffeLMDB``,
            ``crema.WebDataset`` or ``crema.TFRecord``.
        transform: ``crema.ImageTransform``, or ``crema.CaffeTransform`` for an LMDB.
        batch_size: samples per batch.
        threads: crema's threads (default: the cores this process may use).
        seed: keys the shuffle and the augmentations.
        shuffle: another order every epoch (a permutation keyed by seed and epoch).
        last_batch: "keep" it short, "drop" it, or "pad" it with the epoch's first samples.
        shard: "auto" (torch.distributed, else RANK and WORLD_SIZE, else one process), or
            (rank, world). Every rank gets the same number of batches per epoch: the ranks one
            sample short repeat one ("keep", "pad"), or the ranks one over leave one ("drop").
        prefetch: batch slots (0: enough for the threads, at least 4). Batches kept alive hold
            their slots; a loop that keeps them all gets an error that says so.
        output: "torch" (tensors), "numpy" (arrays) or "dlpack" (objects with ``__dlpack__``).
        copy: hand out copies (for loops that keep batches); the slot is reused at once.
        device: None (host memory), or "cuda", "cuda:N" or a ``torch.device``: crema's threads
            upload each batch to that GPU from pinned memory. As torch tensors, a batch is ready
            for work on PyTorch's current stream (which waits for the upload; the host does
            not); as "dlpack" objects, for the stream their consumer passes to ``__dlpack__``.
            The slot is refilled only after the work queued on that stream before the batch's
            last tensor was let go.
        stall_timeout: seconds a wait may last before the error that names what holds it up.
        hang_timeout: seconds crema's source or transform may spend on one record before the
            loop gets an error naming the record (a read that never returns, say).
    """

    def __init__(self, source, transform, batch_size, *, threads=None, seed=0, shuffle=True,
                 last_batch="keep", shard="auto", prefetch=0, output="torch", copy=False,
                 device=None, stall_timeout=60.0, hang_timeout=60.0):
        owner = "crema.Loader"
        if not isinstance(source, (ImageFolder, ImageList, CaffeLMDB, WebDataset, TFRecord)):
            raise TypeError(f"{owner}: source must be a crema.ImageFolder, crema.ImageList, "
                            f"crema.CaffeLMDB, crema.WebDataset or crema.TFRecord, not "
                            f"{type(source).__name__}")
        if not isinstance(transform, (ImageTransform, CaffeTransform)):
            raise TypeError(f"{owner}: transform must be a crema.ImageTransform or "
                            f"crema.CaffeTransform, not {type(transform).__name__}")
        if isinstance(transform, CaffeTransform) and not isinstance(source, CaffeLMDB):
            raise TypeError(f"{owner}: a crema.CaffeTransform reads Caffe Datums, so its "
                            "source must be a crema.CaffeLMDB; use crema.ImageTransform for "
                            "image files")
        self._batch_size = check_int(owner, "batch_size", batch_size, least=1)
        if threads is None:
            threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else (os.cpu_count() or 1)
        self._threads = check_int(owner, "threads", threads, least=1, most=1024)
        self._seed = check_int(owner, "seed", seed, least=0, most=2**64 - 1)
        self._shuffle = check_bool(owner, "shuffle", shuffle)
        self._last_batch = check_choice(owner, "last_batch", last_batch, tuple(_LAST_BATCH))
        self._rank, self._world = self._check_shard(owner, shard)
        prefetch = check_int(owner, "prefetch", prefetch, least=0, most=1 << 20)
        self._output = check_choice(owner, "output", output, tuple(_OUTPUT))
        self._copy = check_bool(owner, "copy", copy)
        stall = check_real(owner, "stall_timeout", stall_timeout, positive=True)
        hang = check_real(owner, "hang_timeout", hang_timeout, positive=True)
        if self._copy and self._output == "dlpack":
            raise ValueError(f"{owner}: copy=True makes torch or numpy copies; with "
                             "output='dlpack', copy in the framework that imports the batch")
        if self._output == "torch":
            try:
                import torch  # noqa: F401  (nanobind imports it too; here, to say so clearly)
            except ImportError:
                raise ImportError(f"{owner}: output='torch' needs PyTorch, which is not "
                                  "installed here; use output='numpy'") from None
        self._device = _check_device(owner, device, self._output)
        if getattr(transform, "decoder", "cpu") == "nvjpeg" and self._device is None:
            raise ValueError(f"{owner}: a transform with decoder='nvjpeg' decodes on a GPU; "
                             "give the loader device='cuda:N'")

        spec = source._spec()
        spec.shuffle = self._shuffle
        spec.rank = self._rank
        spec.world = self._world
        if self._world > 1:
            spec.balance = (_crema.ShardBalance.drop if self._last_batch == "drop"
                            else _crema.ShardBalance.pad)
        options = _crema.LoaderSpec()
        options.batch_size = self._batch_size
        options.threads = self._threads
        options.prefetch = prefetch
        options.seed = self._seed
        options.last_batch = _LAST_BATCH[self._last_batch]
        options.stall_timeout_ms = max(1, int(stall * 1000))
        options.hang_timeout_ms = max(1, int(hang * 1000))
        options.device = -1 if self._device is None else self._device
        if isinstance(transform, CaffeTransform):
            self._impl = _crema.Loader.caffe(spec, transform._spec(), options)
        else:
            self._impl = _crema.Loader.images(spec, transform._spec(), options)
        self._kind = _OUTPUT[self._output]
        self._next_epoch = 0
        self._resume = None       # (epoch, batch) from load_state_dict, for the next iter()
        self._iterating = None    # the epoch being iterated
        self._started_in = None   # the process that started the threads
        self._forked_from = None  # set in a child after fork()

    @staticmethod
    def _check_shard(owner, shard):
        if isinstance(shard, str):
            check_choice(owner, "shard", shard, ("auto",))
            rank, world = _shard_from_environment()
        elif isinstance(shard, (tuple, list)) and len(shard) == 2:
            rank = check_int(owner, "shard's rank", shard[0], least=0)
            world = check_int(owner, "shard's world", shard[1], least=1)
        else:
            raise TypeError(f"{owner}: shard must be 'auto' or (rank, world), not {shard!r}")
        if not 0 <= rank < world:
            raise ValueError(f"{owner}: shard's rank {rank} is outside a world of {world}")
        return rank, world

    def __len__(self):
        """The batches of one epoch (of this rank's shard)."""
        return len(self._impl)

    @property
    def classes(self):
        """The class names by label, as torchvision's ``ImageFolder.classes``: the sorted names
        of an ``ImageFolder``'s folders; ``None`` for sources whose labels are only numbers."""
        return list(self._impl.classes) or None

    @property
    def class_to_idx(self):
        """``{name: label}`` for an ``ImageFolder``, as torchvision's; ``None`` otherwise."""
        classes = self.classes
        return None if classes is None else {name: label for label, name in enumerate(classes)}

    def __iter__(self):
        self._check_process()
        if self._resume is not None:
            epoch, batch = self._resume
            self._resume = None
        else:
            epoch, batch = self._next_epoch, 0
        self._impl.seek(epoch, batch)
        self._next_epoch = epoch + 1
        if self._started_in is None:
            self._started_in = os.getpid()
            _started.add(self)
        self._iterating = _Epoch(self, epoch)
        return self._iterating

    def set_epoch(self, epoch):
        """Makes the next ``iter()`` epoch ``epoch``: its order and its augmentations."""
        self._next_epoch = check_int("crema.Loader.set_epoch", "epoch", epoch, least=0)
        self._resume = None
        self._iterating = None

    @property
    def epoch(self):
        """The epoch the next ``iter()`` starts (or resumes)."""
        return self._resume[0] if self._resume is not None else self._next_epoch

    def state_dict(self):
        """Where the loader stands, with what identifies its data: give it to
        ``load_state_dict`` of a loader made the same way (threads may differ) to go on with
        the batch that would have come next."""
        if self._iterating is not None:
            epoch, batch = self._impl.position()
        elif self._resume is not None:
            epoch, batch = self._resume
        else:
            epoch, batch = self._next_epoch, 0
        if batch >= len(self):
            epoch, batch = epoch + 1, 0
        return {"version": _STATE_VERSION, "dataset": self._impl.key,
                "records_per_epoch": self._impl.records_per_epoch, "seed": self._seed,
                "shuffle": self._shuffle, "batch_size": self._batch_size,
                "last_batch": self._last_batch, "rank": self._rank, "world": self._world,
                "epoch": epoch, "batch": batch}

    def load_state_dict(self, state):
        """Makes the next ``iter()`` go on where ``state`` (from ``state_dict``) stood.

        Raises:
            ValueError: naming what differs, for a state of another data set, seed, shuffle,
                batch size, last batch or world.
        """
        owner = "crema.Loader.load_state_dict"
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            raise ValueError(f"{owner}: not a crema.Loader state (version {_STATE_VERSION})")
        mine = self.state_dict()
        for key, what in (("dataset", "data set"), ("world", "world size"),
                          ("rank", "rank"), ("records_per_epoch", "records per epoch"),
                          ("batch_size", "batch size"), ("seed", "seed"),
                          ("shuffle", "shuffle"), ("last_batch", "last batch")):
            if state.get(key) != mine[key]:
                raise ValueError(f"{owner}: the state is of {what} {state.get(key)!r}, this "
                                 f"loader's is {mine[key]!r}")
        epoch = check_int(owner, "state's epoch", state.get("epoch"), least=0)
        batch = check_int(owner, "state's batch", state.get("batch"), least=0, most=len(self))
        self._resume = (epoch, batch)
        self._iterating = None

    def close(self):
        """Stops crema's threads and waits for them; batches handed out stay valid."""
        if self._forked_from is None:
            self._impl.close()
        self._iterating = None
        _started.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stats(self):
        """The pipeline's counters, as a line: batches made and delivered, waits, queues."""
        return self._impl.stats()

    def __repr__(self):
        return (f"crema.Loader({self._impl.key}, batch_size={self._batch_size}, "
                f"{len(self)} batches an epoch, threads={self._threads}, "
                f"shard=({self._rank}, {self._world}))")

    def _check_process(self):
        if self._forked_from is not None:
            raise RuntimeError(f"crema.Loader: this loader's threads were started in process "
                               f"{self._forked_from}, and this is a child of it made by fork(), "
                               "where they do not exist; make a new crema.Loader in the child")

    def _forget(self):
        # In a child after fork(): the threads are the parent's.
        self._forked_from = self._started_in
        self._impl.abandon()
        self._iterating = None

    def _next_batch(self, epoch):
        if self._iterating is not epoch:
            return None  # a later iter() or set_epoch took over
        self._check_process()
        batch = self._impl.next(self._kind, self._consumer_stream())
        if batch is None:
            self._iterating = None
        elif self._copy:
            images, labels = batch
            batch = (_copy_of(images), _copy_of(labels))
        return batch

    def _consumer_stream(self):
        # Where torch tensors of a device batch are used: PyTorch's current stream there.
        if self._device is None or self._output != "torch":
            return 0
        import torch
        return torch.cuda.current_stream(self._device).cuda_stream


def _check_device(owner, device, output):
    """The CUDA device number ``device`` names, or None for host memory."""
    if device is None:
        return None
    text = str(device) if type(device).__name__ == "device" else device  # a torch.device
    if not isinstance(text, str):
        raise TypeError(f"{owner}: device must be None, 'cuda', 'cuda:N' or a torch.device, "
                        f"not {type(device).__name__}")
    if text == "cpu":
        return None
    kind, _, number = text.partition(":")
    if kind != "cuda" or (number and not number.isdigit()):
        raise ValueError(f"{owner}: device must be None, 'cpu', 'cuda' or 'cuda:N', not "
                         f"{text!r}")
    if not _crema._build_info["cuda"]:
        raise ValueError(f"{owner}: device={text!r} needs crema built with CUDA (pip install . "
                         "--config-settings cmake.define.CREMA_ENABLE_CUDA=ON where the CUDA "
                         "toolkit is); this one was built without")
    if output == "numpy":
        raise ValueError(f"{owner}: output='numpy' arrays are in host memory; with "
                         f"device={text!r} use output='torch' or output='dlpack'")
    if output == "torch":
        import torch
        if not torch.cuda.is_available():
            raise ValueError(f"{owner}: device={text!r} with output='torch' needs PyTorch with "
                             "CUDA, and this PyTorch has none; use output='dlpack'")
        if not number:
            return torch.cuda.current_device()
    return int(number) if number else 0


def _copy_of(array):
    clone = getattr(array, "clone", None)
    return clone() if clone is not None else array.copy()


class _Epoch:
    """One epoch's iterator."""

    __slots__ = ("_loader", "epoch")

    def __init__(self, loader, epoch):
        self._loader = loader
        self.epoch = epoch

    def __iter__(self):
        return self

    def __next__(self):
        batch = self._loader._next_batch(self)
        if batch is None:
            raise StopIteration
        return batch

    def __len__(self):
        return len(self._loader)
