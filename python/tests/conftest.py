"""Fixtures: folders of JPEGs cut from the test photographs (tests/data, public domain), a corrupt
one, and Caffe LMDBs written here."""

import os
import pathlib
import struct

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PHOTOS = [REPO / "tests" / "data" / "astronaut.jpg", REPO / "tests" / "data" / "coffee.jpg"]


def torch_or_skip():
    return pytest.importorskip("torch")


def make_folder(root, classes=3, per_class=7):
    """root/class_k/img_i.jpg: crops of the photographs, of several sizes and aspect ratios."""
    from PIL import Image
    photos = [Image.open(path).convert("RGB") for path in PHOTOS]
    for k in range(classes):
        folder = pathlib.Path(root) / f"class_{k}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            photo = photos[(k + i) % len(photos)]
            width = 96 + 16 * ((i * 5 + k) % 7)
            height = 80 + 16 * ((i * 3 + k * 2) % 6)
            left = (i * 37 + k * 11) % (photo.width - width)
            top = (i * 23 + k * 17) % (photo.height - height)
            photo.crop((left, top, left + width, top + height)).save(
                folder / f"img_{i}.jpg", quality=90)
    return pathlib.Path(root)


@pytest.fixture(scope="session")
def photos(tmp_path_factory):
    """21 JPEGs in 3 classes."""
    return make_folder(tmp_path_factory.mktemp("photos"))


@pytest.fixture(scope="session")
def corrupt_photos(tmp_path_factory):
    """A folder whose class_1/img_3.jpg is cut short."""
    root = make_folder(tmp_path_factory.mktemp("corrupt"), classes=2, per_class=5)
    victim = root / "class_1" / "img_3.jpg"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    return root


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def datum(channels, height, width, data, label, encoded=False):
    """A Caffe Datum on the protobuf wire: channels 1, height 2, width 3, data 4, label 5,
    encoded 7."""
    out = bytearray()
    for field, value in ((1, channels), (2, height), (3, width)):
        out += _varint(field << 3) + _varint(value)
    out += _varint(4 << 3 | 2) + _varint(len(data)) + data
    out += _varint(5 << 3) + _varint(label)
    if encoded:
        out += _varint(7 << 3) + _varint(1)
    return bytes(out)


def write_lmdb(path, records):
    """An LMDB of (key, value) records, as convert_imageset writes it."""
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(os.fspath(path), map_size=1 << 28)
    with env.begin(write=True) as txn:
        for key, value in records:
            txn.put(key, value)
    env.close()
    return pathlib.Path(path)


@pytest.fixture(scope="session")
def raw_lmdb(tmp_path_factory):
    """30 raw Datums of 3 x 6 x 5 bytes: record i's pixel j is (i * 7 + j) % 256, label i % 4."""
    records = []
    for i in range(30):
        pixels = bytes((i * 7 + j) % 256 for j in range(3 * 6 * 5))
        records.append((b"%08d" % i, datum(3, 6, 5, pixels, i % 4)))
    return write_lmdb(tmp_path_factory.mktemp("raw") / "db", records)


@pytest.fixture(scope="session")
def jpeg_lmdb(tmp_path_factory, photos):
    """The photos folder's JPEGs as encoded Datums."""
    records = []
    files = sorted(photos.glob("*/*.jpg"))
    for i, path in enumerate(files):
        label = int(path.parent.name.split("_")[1])
        records.append((b"%08d_%s" % (i, path.name.encode()),
                        datum(0, 0, 0, path.read_bytes(), label, encoded=True)))
    return write_lmdb(tmp_path_factory.mktemp("jpeg") / "db", records)


def read_float32(path):
    return struct.unpack(f"{os.path.getsize(path) // 4}f", pathlib.Path(path).read_bytes())


def threads_of_this_process():
    return len(os.listdir("/proc/self/task"))
