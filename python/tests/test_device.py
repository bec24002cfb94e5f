"""crema.Loader(device="cuda:N"): batches uploaded to a GPU by crema's threads, handed over
through DLPack on the consumer's stream.

Without a GPU these run on the counting CUDA runtime (a build of the module made with
CREMA_PYTHON_COUNTING_CUDA: device memory is host memory, every runtime call counted), which
tools/python-test.sh builds beside the package where the CUDA toolkit's headers are; elsewhere
they report themselves skipped. The device's side is read through the DLPack capsule itself."""

import ctypes
import gc

import numpy as np
import pytest

import crema
from crema import _crema

pytestmark = pytest.mark.skipif(not crema.build_info().get("counting_cuda"),
                                reason="needs the module built on the counting CUDA runtime")

KDL_CUDA = 2


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_DTYPES = {(0, 64): np.int64, (1, 8): np.uint8, (2, 32): np.float32}


def read_capsule(capsule):
    """(device, a host copy of the tensor) from an unconsumed DLPack capsule: the counting
    runtime's device memory is host memory, so its bytes can be read here."""
    tensor = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    dtype = np.dtype(_DTYPES[(tensor.dtype.code, tensor.dtype.bits)])
    count = int(np.prod(shape))
    raw = (ctypes.c_byte * (count * dtype.itemsize)).from_address(
        tensor.data + tensor.byte_offset)
    array = np.frombuffer(bytes(raw), dtype=dtype).reshape(shape)
    return (tensor.device.device_type, tensor.device.device_id), array


def calls(this_thread=False):
    return _crema._counting_cuda_calls(this_thread)


def loader_of(photos, device="cuda:0", output="dlpack", **options):
    options.setdefault("seed", 11)
    options.setdefault("threads", 2)
    transform = crema.ImageTransform(crop=crema.RandomResizedCrop(32), flip=True,
                                     mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4))
    return crema.Loader(crema.ImageFolder(photos), transform, 4, device=device, output=output,
                        **options)


def test_device_batches_hold_the_host_loaders_bytes(photos):
    stream = _crema._counting_cuda_stream()
    with loader_of(photos) as on_device, loader_of(photos, device=None, output="numpy") as host:
        assert len(on_device) == len(host) == 6
        for epoch in range(2):
            seen = 0
            for (images, labels), (host_images, host_labels) in zip(on_device, host):
                assert images.__dlpack_device__() == (KDL_CUDA, 0)
                assert images.shape == host_images.shape
                device, image_bytes = read_capsule(images.__dlpack__(stream=stream))
                assert device == (KDL_CUDA, 0)
                np.testing.assert_array_equal(image_bytes, host_images)
                device, label_values = read_capsule(labels.__dlpack__(stream=stream))
                assert label_values.dtype == np.int64
                np.testing.assert_array_equal(label_values, host_labels)
                seen += 1
            assert seen == 6, f"epoch {epoch}"


def test_the_consumers_stream_waits_for_the_upload_and_the_slot_for_the_consumer(photos):
    stream = _crema._counting_cuda_stream()
    with loader_of(photos, prefetch=2) as loader:
        batches = iter(loader)
        images, labels = next(batches)
        before = calls(this_thread=True)
        capsule = images.__dlpack__(stream=stream)
        after = calls(this_thread=True)
        # One wait of the consumer's stream for the upload's event; the host does not wait.
        assert after["cudaStreamWaitEvent"] - before["cudaStreamWaitEvent"] == 1
        assert after["cudaStreamSynchronize"] == before["cudaStreamSynchronize"]
        assert after["cudaEventSynchronize"] == before["cudaEventSynchronize"]
        # The labels share the upload: their wait is the same one, made again.
        labels.__dlpack__(stream=stream)
        # Giving the batch back records one event on the consumer's stream, at the last
        # reference: not while a view (the capsule) lives.
        del images, labels
        gc.collect()
        assert loader._impl.held == 1
        recorded = calls(this_thread=True)["cudaEventRecord"]
        del capsule
        gc.collect()
        assert loader._impl.held == 0
        assert calls(this_thread=True)["cudaEventRecord"] - recorded == 1
        # The uploads into slots given back this way wait for those events (on the producers'
        # side, not the host's): the rest of the epoch's fills, at least.
        waits_before = calls()["cudaStreamWaitEvent"] - calls(this_thread=True)[
            "cudaStreamWaitEvent"]
        rest = 0
        for images, labels in batches:
            images.__dlpack__(stream=stream)
            rest += 1
        del images, labels
        gc.collect()
        waits = calls()["cudaStreamWaitEvent"] - calls(this_thread=True)["cudaStreamWaitEvent"]
        assert rest == len(loader) - 1
        assert waits - waits_before >= rest - loader._impl.slots


def test_a_steady_loop_allocates_and_creates_nothing_per_batch(photos):
    stream = _crema._counting_cuda_stream()
    with loader_of(photos, prefetch=3) as loader:
        def epoch():
            for images, labels in loader:
                read_capsule(images.__dlpack__(stream=stream))
                labels.__dlpack__(stream=stream)
        epoch()
        epoch()  # every slot filled and given back at least once
        gc.collect()
        before = calls()
        epoch()
        epoch()
        gc.collect()
        after = calls()
        for call in ("cudaMalloc", "cudaEventCreate", "cudaStreamCreate"):
            assert after[call] == before[call], call
        # One upload per batch (data and labels in one block).
        assert after["cudaMemcpyAsync"] - before["cudaMemcpyAsync"] >= 2 * len(loader)


def test_dlpacks_default_and_no_sync_streams_and_refusals(photos):
    with loader_of(photos) as loader, loader_of(photos, device=None, output="numpy") as host:
        (images, labels), (host_images, host_labels) = next(iter(loader)), next(iter(host))
        # None: CUDA's legacy default stream, as DLPack has it.
        read_capsule(images.__dlpack__())
        # -1: no synchronisation asked; the host waits for the upload, so the bytes are there.
        _, label_values = read_capsule(labels.__dlpack__(stream=-1))
        np.testing.assert_array_equal(label_values, host_labels)
        with pytest.raises(ValueError, match="stream 0 is ambiguous"):
            images.__dlpack__(stream=0)
        with pytest.raises(TypeError, match="stream must be an integer"):
            images.__dlpack__(stream="default")
        with pytest.raises(TypeError, match="keyword arguments only"):
            images.__dlpack__(1)


def test_a_failing_upload_is_an_error_naming_it_not_a_hang(photos):
    _crema._counting_cuda_fail("cudaMemcpyAsync", 2)
    try:
        with loader_of(photos, threads=1, stall_timeout=20.0) as loader:
            with pytest.raises(crema.Error) as failure:
                for images, _ in loader:
                    images.__dlpack__(stream=-1)
            assert "finishing batch" in str(failure.value)
            assert "cudaMemcpyAsync" in str(failure.value)
    finally:
        _crema._counting_cuda_heal()


def test_device_options_are_checked(photos):
    with pytest.raises(ValueError, match="output='numpy' arrays are in host memory"):
        loader_of(photos, output="numpy")
    with pytest.raises(ValueError, match="'cuda' or 'cuda:N'"):
        loader_of(photos, device="cuda:first")
    with pytest.raises(TypeError, match="device must be"):
        loader_of(photos, device=0)


@pytest.mark.skipif(not crema.build_info()["nvjpeg"], reason="needs nvJPEG (here, the fake one)")
@pytest.mark.parametrize("crop", [crema.RandomResizedCrop(32), crema.ResizeCenterCrop(40, 32)],
                         ids=["train", "eval"])
def test_nvjpeg_batches_are_the_cpu_loaders_samples_decoded_at_full_size(photos, crop):
    # nvJPEG decodes every window at full size, where the CPU path may decode a large shrink at
    # a smaller JPEG scale: the samples agree closely, not bit for bit; the labels exactly.
    stream = _crema._counting_cuda_stream()

    def loader(decoder, device, output):
        transform = crema.ImageTransform(crop=crop, flip=True, dtype="uint8", decoder=decoder)
        return crema.Loader(crema.ImageFolder(photos), transform, 4, seed=5, threads=2,
                            device=device, output=output)

    with loader("nvjpeg", "cuda:0", "dlpack") as on_gpu, loader("cpu", None, "numpy") as host:
        assert len(on_gpu) == len(host)
        for (images, labels), (host_images, host_labels) in zip(on_gpu, host):
            assert images.__dlpack_device__() == (KDL_CUDA, 0)
            _, samples = read_capsule(images.__dlpack__(stream=stream))
            _, label_values = read_capsule(labels.__dlpack__(stream=stream))
            assert samples.shape == host_images.shape and samples.dtype == np.uint8
            # Each sample is within 8 levels of its CPU counterpart on average, and nearer to
            # it than to any other sample of the batch (a sample misplaced would not be).
            gpu = samples.astype(np.int16)
            cpu = host_images.astype(np.int16)
            distance = np.abs(gpu[:, None] - cpu[None, :]).mean(axis=(2, 3, 4))
            assert distance.diagonal().max() < 8.0, distance
            assert (distance.argmin(axis=1) == np.arange(len(gpu))).all(), distance
            np.testing.assert_array_equal(label_values, host_labels)


@pytest.mark.skipif(not crema.build_info()["nvjpeg"], reason="needs nvJPEG (here, the fake one)")
def test_nvjpeg_decoding_needs_the_loaders_device(photos):
    transform = crema.ImageTransform(decoder="nvjpeg")
    with pytest.raises(ValueError, match="give the loader device='cuda:N'"):
        crema.Loader(crema.ImageFolder(photos), transform, 4, output="dlpack")


@pytest.mark.skipif(not crema.build_info()["nvjpeg"], reason="needs nvJPEG (here, the fake one)")
def test_streamed_shards_are_decoded_on_the_cpu_not_by_nvjpeg(photos, tmp_path):
    from test_shards import write_webdataset
    paths = [str(path) for path in write_webdataset(photos, tmp_path)]
    source = crema.WebDataset(paths, stream=True, epoch_samples=21)
    with pytest.raises(crema.ConfigError, match="stream=True is decoded on the CPU for now"):
        crema.Loader(source, crema.ImageTransform(decoder="nvjpeg"), 4, device="cuda:0",
                     output="dlpack")
