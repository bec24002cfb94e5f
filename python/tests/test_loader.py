"""crema.Loader: epochs, determinism, resume, zero-copy lifetimes, sharding, threads and errors."""

import gc
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import crema
from conftest import (REPO, read_float32, threads_of_this_process, torch_or_skip)


def small_transform(**overrides):
    arguments = dict(crop=crema.RandomResizedCrop(48), flip=True, jitter=(0.2, 0.2, 0.2),
                     mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    arguments.update(overrides)
    return crema.ImageTransform(**arguments)


def numpy_loader(root, batch_size=4, **options):
    options.setdefault("threads", 2)
    options.setdefault("seed", 5)
    options.setdefault("output", "numpy")
    return crema.Loader(crema.ImageFolder(root), options.pop("transform", small_transform()),
                        batch_size, **options)


def epoch_bytes(loader):
    """One epoch as copies: [(images, labels)]."""
    return [(images.copy(), labels.copy()) for images, labels in loader]


def test_an_epoch_has_len_batches_of_the_shape_asked_and_every_sample_once(photos):
    with numpy_loader(photos, batch_size=4, shuffle=False) as loader:
        assert len(loader) == 6  # 21 images, the last batch of 1 kept
        batches = epoch_bytes(loader)
    assert len(batches) == 6
    assert [len(labels) for _, labels in batches] == [4, 4, 4, 4, 4, 1]
    images, labels = batches[0]
    assert images.shape == (4, 3, 48, 48) and images.dtype == np.float32
    assert labels.dtype == np.int64
    # In order, ImageFolder's labels: 7 files of class 0, then 1, then 2.
    assert np.concatenate([labels for _, labels in batches]).tolist() == [0] * 7 + [1] * 7 + [2] * 7


@pytest.mark.parametrize("last_batch, lengths", [("keep", [5, 5, 5, 5, 1]),
                                                 ("drop", [5, 5, 5, 5]),
                                                 ("pad", [5, 5, 5, 5, 5])])
def test_the_last_batch_is_kept_dropped_or_padded(photos, last_batch, lengths):
    with numpy_loader(photos, batch_size=5, last_batch=last_batch) as loader:
        assert len(loader) == len(lengths)
        for epoch in range(2):
            assert [len(labels) for _, labels in loader] == lengths


def test_the_same_seed_gives_the_same_bytes_whatever_the_thread_count(photos):
    epochs = []
    for threads in (1, 2, 3):
        with numpy_loader(photos, threads=threads) as loader:
            epochs.append([epoch_bytes(loader) for _ in range(2)])
    for other in epochs[1:]:
        for epoch, reference in zip(other, epochs[0]):
            for (images, labels), (want_images, want_labels) in zip(epoch, reference):
                assert np.array_equal(images, want_images)
                assert np.array_equal(labels, want_labels)
    # Another epoch, another order and other augmentations.
    first, second = epochs[0]
    assert not np.array_equal(first[0][0], second[0][0])


def test_set_epoch_replays_an_epoch_and_another_seed_changes_it(photos):
    with numpy_loader(photos) as loader:
        first = epoch_bytes(loader)
        epoch_bytes(loader)
        loader.set_epoch(0)
        again = epoch_bytes(loader)
    for (images, _), (want, _) in zip(again, first):
        assert np.array_equal(images, want)
    with numpy_loader(photos, seed=6) as other:
        assert not np.array_equal(epoch_bytes(other)[0][0], first[0][0])


def test_the_loader_gives_the_bytes_of_crema_feed_for_the_same_seed(photos, tmp_path):
    """The C++ pipeline (crema-feed --dump) and the Python loader: the same batches, bit for
    bit. CREMA_FEED names the tool (tools/test.sh sets it); without it the test is skipped."""
    tool = os.environ.get("CREMA_FEED")
    if tool is None:
        pytest.skip("CREMA_FEED is not set (tools/test.sh sets it to build/dev's crema-feed)")
    assert pathlib.Path(tool).is_file(), f"CREMA_FEED={tool} does not exist"
    dump = tmp_path / "batches.f32"
    subprocess.run([tool, "--images", str(photos), "--batch", "4", "--random-resized-crop",
                    "40", "--mirror", "--normalize", "0.5,0.4,0.3/0.2,0.25,0.3", "--seed", "9",
                    "--producers", "2", "--threads", "2", "--dump", str(dump)],
                   check=True, capture_output=True)
    values = np.array(read_float32(dump), dtype=np.float32)
    transform = crema.ImageTransform(crop=crema.RandomResizedCrop(40), flip=True,
                                     mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    with crema.Loader(crema.ImageFolder(photos), transform, 4, threads=3, seed=9,
                      output="numpy") as loader:
        at = 0
        for images, labels in loader:
            count = images.size
            assert np.array_equal(images.ravel(), values[at:at + count])
            at += count
            assert labels.tolist() == values[at:at + len(labels)].astype(np.int64).tolist()
            at += len(labels)
    assert at == values.size


def test_batches_are_the_slots_memory_and_no_batch_allocates(photos):
    torch = torch_or_skip()
    with crema.Loader(crema.ImageFolder(photos), small_transform(), 3, threads=2,
                      prefetch=4) as loader:
        pointers = set()
        label_pointers = set()
        for _ in range(4):
            for images, labels in loader:
                assert isinstance(images, torch.Tensor) and images.is_contiguous()
                pointers.add(images.data_ptr())
                label_pointers.add(labels.data_ptr())
        # 28 batches through 4 slots: every tensor's memory is one of theirs.
        assert len(pointers) <= 4 and len(label_pointers) <= 4


def test_a_slot_is_reused_only_after_the_last_view_of_its_batch_is_gone(photos):
    torch = torch_or_skip()
    with crema.Loader(crema.ImageFolder(photos), small_transform(), 3, threads=2,
                      prefetch=4) as loader:
        iterator = iter(loader)
        images, labels = next(iterator)
        view = images[1:, 2]  # a slice outlives its tensor
        kept = view.clone()
        pointer = images.data_ptr()
        del images, labels
        gc.collect()
        others = set()
        for images, _ in iterator:
            others.add(images.data_ptr())
        for images, _ in loader:
            others.add(images.data_ptr())
        assert torch.equal(view, kept)
        assert pointer not in others
        del view
        gc.collect()
        seen_again = any(images.data_ptr() == pointer for images, _ in loader)
        assert seen_again


def test_a_loop_that_keeps_every_batch_gets_an_error_that_says_what_to_do(photos):
    with numpy_loader(photos, batch_size=2, prefetch=4) as loader:
        kept = []
        with pytest.raises(crema.PipelineError, match=r"all 4 batch slots.*clone\(\).*prefetch"):
            for batch in loader:
                kept.append(batch)
        assert len(kept) == 4
        kept.clear()
        assert sum(1 for _ in loader) == len(loader)  # released, it goes on


def test_copies_leave_the_slot_at_once(photos):
    with numpy_loader(photos, batch_size=2, prefetch=4, copy=True) as loader:
        kept = list(loader)
    assert len(kept) == len(loader)
    assert all(images.flags.owndata for images, _ in kept)


def test_uint8_and_nhwc_outputs(photos):
    transform = crema.ImageTransform(crop=crema.ResizeCenterCrop(64, (48, 40)), dtype="uint8",
                                     layout="NHWC")
    with numpy_loader(photos, transform=transform) as loader:
        images, labels = next(iter(loader))
    assert images.shape == (4, 48, 40, 3) and images.dtype == np.uint8
    assert images.max() > 100


def test_reduced_detail_changes_samples_and_keeps_them_deterministic(photos):
    exact = epoch_bytes(numpy_loader(photos, transform=small_transform(crop=crema.ResizeCenterCrop(
        64, 40))))
    reduced = [epoch_bytes(numpy_loader(photos, threads=threads, transform=small_transform(
        crop=crema.ResizeCenterCrop(64, 40), detail="reduced"))) for threads in (1, 3)]
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(*reduced))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(exact, reduced[0]))
    with pytest.raises(ValueError, match="detail must be one of"):
        crema.ImageTransform(detail="low")


def test_dlpack_output_is_read_by_numpy_and_torch(photos):
    with numpy_loader(photos, output="dlpack") as loader:
        images, labels = next(iter(loader))
        array = np.from_dlpack(images)
        assert array.shape == (4, 3, 48, 48)
        torch = pytest.importorskip("torch")
        assert torch.utils.dlpack.from_dlpack(labels).dtype == torch.int64


def read_all(loader, count):
    out = []
    while len(out) < count:
        for images, labels in loader:
            out.append((images.copy(), labels.copy()))
            if len(out) == count:
                break
    return out


def test_a_resumed_loader_delivers_what_one_never_stopped_delivers(photos):
    random.seed(3)
    whole = numpy_loader(photos, batch_size=4, threads=2, last_batch="pad")
    reference = [batch for _ in range(3) for batch in epoch_bytes(whole)]
    whole.close()
    for stop in sorted(random.sample(range(1, len(reference)), 5)) + [0, 6, len(reference) - 1]:
        first = numpy_loader(photos, batch_size=4, threads=3, last_batch="pad")
        seen = 0
        while seen < stop:
            for images, _ in first:
                assert np.array_equal(images, reference[seen][0])
                seen += 1
                if seen == stop:
                    break
        state = first.state_dict()
        first.close()
        resumed = numpy_loader(photos, batch_size=4, threads=1, last_batch="pad")
        resumed.load_state_dict(state)
        rest = []
        while len(rest) < len(reference) - stop:
            rest += epoch_bytes(resumed)
        resumed.close()
        for (images, labels), (want, want_labels) in zip(rest, reference[stop:]):
            assert np.array_equal(images, want) and np.array_equal(labels, want_labels)


def test_a_state_from_another_loader_is_refused_naming_what_differs(photos, tmp_path):
    with numpy_loader(photos) as loader:
        state = loader.state_dict()
    for options, what in ((dict(seed=6), "seed"), (dict(batch_size=3), "batch size"),
                          (dict(shard=(0, 2)), "world size"), (dict(shuffle=False), "shuffle")):
        with numpy_loader(photos, **options) as other:
            with pytest.raises(ValueError, match=what):
                other.load_state_dict(state)
    other_root = tmp_path / "copy"
    other_root.symlink_to(photos)
    with numpy_loader(other_root) as other:
        with pytest.raises(ValueError, match="data set"):
            other.load_state_dict(state)


def test_threads_start_on_the_first_iteration_and_close_joins_them(photos):
    gc.collect()  # other tests' loaders, closed by their finalizers now rather than below
    before = threads_of_this_process()
    loader = numpy_loader(photos, threads=3)
    assert threads_of_this_process() == before
    next(iter(loader))
    assert threads_of_this_process() >= before + 3
    loader.close()
    assert threads_of_this_process() == before
    with pytest.raises(crema.Error, match="closed"):
        next(iter(loader))


def test_another_python_thread_runs_while_the_loader_waits(photos):
    """The GIL is released while waiting, and producers never take it: a Python thread runs
    inside the loop's waits. Its steps are timed; a wait that held the GIL would see none of them
    but within a switch interval of its ends, which the margins leave out. Batches are taken
    until the waits, less their margins, add up to enough to tell, however fast the machine."""
    stop = threading.Event()
    stamps = []

    def count():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    margin = 2 * sys.getswitchinterval() + 0.002
    transform = crema.ImageTransform(crop=crema.ResizeCenterCrop(512, 448))
    windows = []
    try:
        with crema.Loader(crema.ImageFolder(photos), transform, 21, threads=1, prefetch=1,
                          output="numpy", shuffle=False) as loader:
            worker = threading.Thread(target=count)
            worker.start()
            try:
                deadline = time.perf_counter() + 30
                while (sum(max(0.0, end - start) for start, end in windows) < 0.05
                       and time.perf_counter() < deadline):
                    start = time.perf_counter()
                    batch = next(iter(loader))
                    windows.append((start + margin, time.perf_counter() - margin))
                    del batch
            finally:
                stop.set()
                worker.join()
    finally:
        sys.setswitchinterval(interval)
    windows = [(start, end) for start, end in windows if end > start]
    waited = sum(end - start for start, end in windows)
    inside = sum(1 for stamp in stamps for start, end in windows if start < stamp < end)
    assert waited >= 0.05, f"the waits were too short to tell ({waited:.3f} s past the margins)"
    assert inside > 100


CHILD_LOOP = """
import os, sys, time
import crema
loader = crema.Loader(crema.ImageFolder(sys.argv[1]),
                      crema.ImageTransform(crop=crema.ResizeCenterCrop(256, 224)), 3,
                      threads=1, prefetch=2, output="numpy")
print("ready", flush=True)
try:
    while True:
        for images, labels in loader:
            pass
except KeyboardInterrupt:
    loader.close()
    print("interrupted, threads", len(os.listdir("/proc/self/task")), flush=True)
    raise
"""


def test_ctrl_c_stops_a_loop_promptly_leaving_no_thread(photos):
    # SIGINT's default action for the child, whatever this process was started with (a shell
    # without job control starts background jobs with it ignored, and Python then leaves it so).
    child = subprocess.Popen([sys.executable, "-c", CHILD_LOOP, str(photos)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # into the loop, waiting for batches
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        child.kill()
    assert "interrupted, threads 1" in out, err
    assert "KeyboardInterrupt" in err
    assert child.returncode != 0


CHILD_EXIT = """
import sys
import crema
loader = crema.Loader(crema.ImageFolder(sys.argv[1]), crema.ImageTransform(), 3, threads=2,
                      output="numpy")
next(iter(loader))
print("exiting", flush=True)
"""


def test_a_process_exits_promptly_with_a_running_loader(photos):
    done = subprocess.run([sys.executable, "-c", CHILD_EXIT, str(photos)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "exiting" in done.stdout


def test_a_loader_started_before_fork_refuses_to_run_in_the_child(photos):
    loader = numpy_loader(photos)
    unstarted = numpy_loader(photos)
    next(iter(loader))
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without Python's exit handlers
        message = b"no error"
        try:
            next(iter(loader))
        except RuntimeError as error:
            message = str(error).encode()
        try:
            count = sum(1 for _ in unstarted)  # a loader not yet started works in the child
            message += b"|%d" % count
        except Exception as error:  # noqa: BLE001  (reported to the parent)
            message += b"|" + str(error).encode()
        os.write(writer, message)
        os._exit(0)
    os.close(writer)
    _, status = os.waitpid(pid, 0)
    message = os.read(reader, 4096).decode()
    os.close(reader)
    loader.close()
    unstarted.close()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert "started in process" in message and "fork()" in message
    assert message.endswith(f"|{len(unstarted)}")


def test_a_corrupt_image_is_an_error_naming_the_file_with_crema_s_whole_chain(corrupt_photos):
    with numpy_loader(corrupt_photos, batch_size=2, shuffle=False) as loader:
        with pytest.raises(crema.PipelineError) as raised:
            for _ in loader:
                pass
    message = str(raised.value)
    assert "transform failed on record" in message and "class_1/img_3.jpg" in message
    assert "because:" in message
    assert isinstance(raised.value.__cause__, crema.FormatError)
    assert "class_1/img_3.jpg" in str(raised.value.__cause__)


def test_a_read_that_never_returns_is_an_error_naming_its_record_after_hang_timeout(
        photos, tmp_path):
    """A FIFO in the folder: opening it blocks until a writer comes. The loop polls in short
    waits, yet learns of the hang as a blocking wait does."""
    root = tmp_path / "hangs"
    (root / "class_0").mkdir(parents=True)
    for i, path in enumerate(sorted((photos / "class_0").glob("*.jpg"))[:3]):
        (root / "class_0" / f"img_{i}.jpg").write_bytes(path.read_bytes())
    fifo = root / "class_0" / "img_9.jpg"
    os.mkfifo(fifo)
    loader = crema.Loader(crema.ImageFolder(root), small_transform(), 2, threads=1,
                          shuffle=False, output="numpy", hang_timeout=0.5)
    asked = time.perf_counter()
    try:
        with pytest.raises(crema.PipelineError) as raised:
            for _ in loader:
                pass
        waited = time.perf_counter() - asked
    finally:
        # The reader is blocked in open(): a writer lets it go, so that close() can join it.
        threading.Thread(target=lambda: open(fifo, "wb").close(), daemon=True).start()
        loader.close()
    message = str(raised.value)
    # The image sources hand on paths; the transform reads the file.
    assert "has been transforming record 3 (pass 0) of image_folder:" in message
    assert "(hang_timeout 500 ms)" in message
    assert waited >= 0.5


def test_a_folder_loader_names_its_classes_as_torchvision_does(photos, tmp_path):
    with crema.Loader(crema.ImageFolder(photos), small_transform(), 4, output="numpy") as loader:
        assert loader.classes == ["class_0", "class_1", "class_2"]
        assert loader.class_to_idx == {"class_0": 0, "class_1": 1, "class_2": 2}
    listing = tmp_path / "list.txt"
    listing.write_text("class_0/img_0.jpg 4\n")
    with crema.Loader(crema.ImageList(listing, photos), small_transform(), 1,
                      output="numpy") as loader:
        assert loader.classes is None and loader.class_to_idx is None


@pytest.mark.parametrize("arguments, error, match", [
    (dict(batch_size=0), ValueError, "batch_size must be at least 1"),
    (dict(batch_size=2.5), TypeError, "batch_size must be an int"),
    (dict(threads=0), ValueError, "threads must be at least 1"),
    (dict(seed=-1), ValueError, "seed must be at least 0"),
    (dict(last_batch="short"), ValueError, "last_batch must be one of"),
    (dict(shard=(2, 2)), ValueError, "rank 2 is outside a world of 2"),
    (dict(shard=3), TypeError, "shard must be 'auto' or"),
    (dict(output="jax"), ValueError, "output must be one of"),
    (dict(shuffle=1), TypeError, "shuffle must be True or False"),
    (dict(prefetch=-1), ValueError, "prefetch must be at least 0"),
    (dict(copy=True, output="dlpack"), ValueError, "copy=True"),
    (dict(hang_timeout=0), ValueError, "hang_timeout must be positive"),
    (dict(device="tpu"), ValueError, "device must be None, 'cpu', 'cuda' or 'cuda:N'"),
    (dict(device=1), TypeError, "device must be None"),
])
def test_bad_loader_arguments_are_errors_naming_the_argument(photos, arguments, error, match):
    options = dict(batch_size=4, output="numpy")
    options.update(arguments)
    batch_size = options.pop("batch_size")
    with pytest.raises(error, match=match):
        crema.Loader(crema.ImageFolder(photos), crema.ImageTransform(), batch_size, **options)


@pytest.mark.skipif(crema.build_info()["cuda"], reason="this build has CUDA")
def test_a_device_in_a_build_without_cuda_says_how_to_build_one(photos):
    with pytest.raises(ValueError, match="CREMA_ENABLE_CUDA=ON"):
        crema.Loader(crema.ImageFolder(photos), crema.ImageTransform(), 4, device="cuda:0")
    # "cpu" is host memory, as None.
    with crema.Loader(crema.ImageFolder(photos), small_transform(), 4, device="cpu",
                      output="numpy") as loader:
        images, _ = next(iter(loader))
        assert images.shape[0] == 4


@pytest.mark.skipif(crema.build_info()["nvjpeg"], reason="this build has nvJPEG")
def test_nvjpeg_in_a_build_without_it_says_how_to_build_one():
    with pytest.raises(ValueError, match="CREMA_ENABLE_NVJPEG=ON"):
        crema.ImageTransform(decoder="nvjpeg")
    with pytest.raises(ValueError, match="decoder must be one of"):
        crema.ImageTransform(decoder="gpu")


def test_bad_sources_and_transforms_are_errors_naming_what_is_wrong(photos, tmp_path):
    with pytest.raises(FileNotFoundError, match="root does not exist") as raised:
        crema.ImageFolder(tmp_path / "missing")
    assert raised.value.filename == str(tmp_path / "missing")
    with pytest.raises(NotADirectoryError):
        crema.ImageFolder(REPO / "pyproject.toml")
    with pytest.raises(FileNotFoundError, match="list_file"):
        crema.ImageList(tmp_path / "missing.txt", photos)
    with pytest.raises(TypeError, match="source must be"):
        crema.Loader(str(photos), crema.ImageTransform(), 4)
    with pytest.raises(TypeError, match="transform must be"):
        crema.Loader(crema.ImageFolder(photos), lambda x: x, 4)
    with pytest.raises(TypeError, match="CaffeTransform reads Caffe Datums"):
        crema.Loader(crema.ImageFolder(photos), crema.CaffeTransform(), 4)
    with pytest.raises(ValueError, match="crop .* is larger than the short side"):
        crema.ResizeCenterCrop(100, 224)
    with pytest.raises(ValueError, match="scale must be"):
        crema.RandomResizedCrop(224, scale=(0.9, 0.1))
    with pytest.raises(TypeError, match="crop must be a crema.RandomResizedCrop"):
        crema.ImageTransform(crop=224)
    with pytest.raises(ValueError, match="std must not be 0"):
        crema.ImageTransform(std=(1, 0, 1))
    with pytest.raises(ValueError, match="dtype must be one of"):
        crema.ImageTransform(dtype="float16")
    with pytest.raises(ValueError, match="mean_file or mean_values, not both"):
        crema.CaffeTransform(mean_file=REPO / "pyproject.toml", mean_values=(1, 2, 3))
    empty = tmp_path / "empty"
    (empty / "class_0").mkdir(parents=True)
    with pytest.raises(crema.ConfigError, match="holds no image file"):
        crema.Loader(crema.ImageFolder(empty), crema.ImageTransform(), 4, output="numpy")
    with pytest.raises(crema.ConfigError, match="holds 21 records in this shard, fewer than a "
                                                "batch of 32"):
        crema.Loader(crema.ImageFolder(photos), crema.ImageTransform(), 32, last_batch="drop",
                     output="numpy")


def test_an_image_list_reads_its_lines(photos, tmp_path):
    listing = tmp_path / "list.txt"
    files = sorted(photos.glob("*/*.jpg"))
    listing.write_text("".join(f"{path.relative_to(photos)} {i % 5}\n"
                               for i, path in enumerate(files)))
    with crema.Loader(crema.ImageList(listing, photos), small_transform(), 7, shuffle=False,
                      output="numpy") as loader:
        labels = np.concatenate([labels for _, labels in loader])
    assert labels.tolist() == [i % 5 for i in range(len(files))]


def test_build_info_and_version():
    info = crema.build_info()
    assert info["version"] == crema.__version__
    assert info["image"] is True
    assert set(info) >= {"lmdb", "cuda", "nvjpeg", "mpi"}
    header = (REPO / "include" / "crema" / "version.hpp").read_text()
    parts = [line.split()[-1] for line in header.splitlines()
             if line.startswith("#define CREMA_VERSION_") and line.split()[-1].isdigit()]
    assert crema.__version__ == ".".join(parts)


NUMPY_ONLY = """
import sys
sys.modules["torch"] = None  # as if PyTorch were not installed
import crema
try:
    crema.Loader(crema.ImageFolder(sys.argv[1]), crema.ImageTransform(), 4)
except ImportError as error:
    print("torch:", error)
loader = crema.Loader(crema.ImageFolder(sys.argv[1]), crema.ImageTransform(), 4,
                      output="numpy")
images, labels = next(iter(loader))
print("numpy:", type(images).__module__, images.shape, labels.dtype)
"""


def test_the_package_works_with_numpy_alone(photos):
    done = subprocess.run([sys.executable, "-c", NUMPY_ONLY, str(photos)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "torch: crema.Loader: output='torch' needs PyTorch" in done.stdout
    assert "numpy: numpy (4, 3, 224, 224) int64" in done.stdout
