"""WebDataset tar shards and TFRecord files through crema.Loader: the same batches, bit for bit,
as the image folder they were written from, and bad arguments named."""

import io
import math
import pathlib
import struct
import tarfile

import numpy as np
import pytest

import crema


def folder_files(root):
    """(relative path, class) of an ImageFolder, in its order."""
    classes = sorted(path.name for path in root.iterdir() if path.is_dir())
    return [(path.relative_to(root), label) for label, name in enumerate(classes)
            for path in sorted((root / name).iterdir())]


def write_webdataset(root, out, per_shard=8):
    paths = []
    files = folder_files(root)
    for first in range(0, len(files), per_shard):
        paths.append(out / f"shard-{first // per_shard:06d}.tar")
        with tarfile.open(paths[-1], "w", format=tarfile.PAX_FORMAT) as shard:
            for relative, label in files[first:first + per_shard]:
                key = str(relative.with_suffix(""))
                for extension, data in (("jpg", (root / relative).read_bytes()),
                                        ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"{key}.{extension}")
                    info.size = len(data)
                    shard.addfile(info, io.BytesIO(data))
    return paths


def _crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(name, kind, values):
    return _field(1, _field(1, name.encode()) + _field(2, _field(kind, values)))


def write_tfrecords(root, out, per_shard=10):
    paths = []
    files = folder_files(root)
    for first in range(0, len(files), per_shard):
        paths.append(out / f"shard-{first // per_shard:06d}.tfrecord")
        with open(paths[-1], "wb") as shard:
            for relative, label in files[first:first + per_shard]:
                example = _field(1, _feature("jpeg", 1, _field(1, (root / relative).read_bytes()))
                                 + _feature("class", 3, _field(1, _varint(label))))
                header = struct.pack("<Q", len(example))
                shard.write(header + struct.pack("<I", _masked(header)) + example
                            + struct.pack("<I", _masked(example)))
    return paths


def epoch(source, **options):
    transform = crema.ImageTransform(crop=crema.RandomResizedCrop(40), flip=True,
                                     mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    with crema.Loader(source, transform, 5, threads=2, seed=9, output="numpy",
                      **options) as loader:
        return [(images.copy(), labels.copy()) for images, labels in loader]


def same(first, second):
    return len(first) == len(second) and all(
        np.array_equal(a, c) and np.array_equal(b, d) for (a, b), (c, d) in zip(first, second))


def test_webdataset_shards_give_the_folders_batches(photos, tmp_path):
    paths = write_webdataset(photos, tmp_path)
    from_folder = epoch(crema.ImageFolder(photos))
    assert same(epoch(crema.WebDataset([str(path) for path in paths])), from_folder)
    pattern = str(tmp_path / "shard-{000000..000002}.tar")
    assert same(epoch(crema.WebDataset(pattern)), from_folder)
    assert crema.WebDataset(str(tmp_path / "shard-*.tar")).shards == [str(p) for p in paths]


def test_tfrecord_files_give_the_folders_batches(photos, tmp_path):
    paths = write_tfrecords(photos, tmp_path)
    from_folder = epoch(crema.ImageFolder(photos), shuffle=False)
    source = crema.TFRecord(str(tmp_path / "shard-*.tfrecord"), image="jpeg", label="class")
    assert same(epoch(source, shuffle=False), from_folder)
    assert len(source.shards) == len(paths)


def test_bad_shard_arguments_are_named(photos, tmp_path):
    with pytest.raises(FileNotFoundError, match="shard .*missing.tar does not exist"):
        crema.WebDataset([str(tmp_path / "missing.tar")])
    with pytest.raises(crema.ConfigError, match="matches no file"):
        crema.WebDataset(str(tmp_path / "none-*.tar"))
    with pytest.raises(ValueError, match="is not closed"):
        crema.TFRecord(str(tmp_path / "s-{0..3.tfrecord"))
    with pytest.raises(TypeError, match="shards must be a pattern"):
        crema.WebDataset(42)
    with pytest.raises(TypeError, match="image must be a feature name"):
        crema.TFRecord([str(path) for path in write_tfrecords(photos, tmp_path)], image="")
    text = tmp_path / "text.tar"
    text.write_bytes(b"T" * 1024)
    with pytest.raises(crema.FormatError, match="holds no tar header"):
        epoch(crema.WebDataset([str(text)]))


def write_dali_indexes(paths):
    """Each shard's index as DALI's tools write it (wds2idx version 1.2: per sample, each
    member's extension, data offset, size and name; tfrecord2idx: each record's offset and
    framed size), beside it as SHARD.idx, from Python's own reading of the shard."""
    for path in paths:
        lines = []
        if str(path).endswith(".tar"):
            samples = []
            with tarfile.open(path) as shard:
                for member in shard.getmembers():
                    key, _, extension = member.name.partition(".")
                    field = f"{extension} {member.offset_data} {member.size} {member.name}"
                    if samples and samples[-1][0] == key:
                        samples[-1][1].append(field)
                    else:
                        samples.append((key, [field]))
            lines = [f"v1.2 {len(samples)}"] + [" ".join(fields) for _, fields in samples]
        else:
            data = path.read_bytes()
            at = 0
            while at < len(data):
                length = struct.unpack_from("<Q", data, at)[0]
                lines.append(f"{at} {length + 16}")
                at += length + 16
        pathlib.Path(f"{path}.idx").write_text("\n".join(lines) + "\n")


def test_shards_opened_from_dali_index_files_give_the_same_batches(photos, tmp_path):
    tars = write_webdataset(photos, tmp_path)
    records = write_tfrecords(photos, tmp_path)
    write_dali_indexes(tars + records)
    assert same(epoch(crema.WebDataset(str(tmp_path / "shard-*.tar"), index="auto")),
                epoch(crema.ImageFolder(photos)))
    listed = crema.TFRecord(str(tmp_path / "shard-*.tfrecord"), image="jpeg", label="class",
                            index=[f"{path}.idx" for path in records])
    assert same(epoch(listed, shuffle=False), epoch(crema.ImageFolder(photos), shuffle=False))


def test_bad_index_arguments_and_files_are_named(photos, tmp_path):
    tars = write_webdataset(photos, tmp_path)
    with pytest.raises(FileNotFoundError, match=r"index .*shard-000000.tar.idx does not exist"):
        crema.WebDataset(str(tmp_path / "shard-*.tar"), index="auto")
    write_dali_indexes(tars)
    with pytest.raises(ValueError, match="index names 1 files for 3 shards"):
        crema.WebDataset(str(tmp_path / "shard-*.tar"), index=[f"{tars[0]}.idx"])
    pathlib.Path(f"{tars[1]}.idx").write_text("v1.1 8\n")
    with pytest.raises(crema.FormatError, match=r"shard-000001.tar.idx .*line 1: its first line "
                                                r"is 'v1.1'"):
        epoch(crema.WebDataset(str(tmp_path / "shard-*.tar"), index="auto"))


def test_shards_the_webdataset_library_writes_read_as_it_reads_them(photos, tmp_path):
    wds = pytest.importorskip("webdataset")
    files = folder_files(photos)
    with wds.ShardWriter(str(tmp_path / "wds-%06d.tar"), maxcount=8, verbose=0) as sink:
        for relative, label in files:
            sink.write({"__key__": str(relative.with_suffix("")),
                        "jpg": (photos / relative).read_bytes(), "cls": label})
    pattern = str(tmp_path / "wds-*.tar")
    # The library's own reading: keys and classes in the shards' order.
    shards = sorted(str(path) for path in tmp_path.glob("wds-*.tar"))
    theirs = [(sample["__key__"], int(sample["cls"]))
              for sample in wds.WebDataset(shards, shardshuffle=False)]
    assert theirs == [(str(relative.with_suffix("")), label) for relative, label in files]
    # crema's: the same samples, so the folder's batches bit for bit.
    assert same(epoch(crema.WebDataset(pattern)), epoch(crema.ImageFolder(photos)))


def labels_of(batches):
    return sorted(np.concatenate([labels for _, labels in batches]).tolist())


def test_streamed_shards_read_every_sample_and_give_every_rank_as_many_batches(photos, tmp_path):
    paths = [str(path) for path in write_webdataset(photos, tmp_path)]
    samples = len(folder_files(photos))
    indexed = epoch(crema.WebDataset(paths), shuffle=False)
    # Unshuffled, one rank: the shards in order, as the indexed source reads them.
    assert same(epoch(crema.WebDataset(paths, stream=True, epoch_samples=samples),
                      shuffle=False), indexed)
    # Shuffled through a buffer: every sample once, another order, the same for the same seed.
    streamed = epoch(crema.WebDataset(paths, stream=True, shuffle_buffer=6,
                                      epoch_samples=samples))
    assert same(streamed, epoch(crema.WebDataset(paths, stream=True, shuffle_buffer=6,
                                                 epoch_samples=samples)))
    assert not same(streamed, indexed)
    assert labels_of(streamed) == labels_of(indexed)
    # Two ranks whose shards hold unlike numbers: as many batches on each.
    counts = [len(epoch(crema.WebDataset(paths, stream=True, epoch_samples=samples),
                        shard=(rank, 2))) for rank in (0, 1)]
    assert counts == [math.ceil(math.ceil(samples / 2) / 5)] * 2
    source = crema.TFRecord([str(p) for p in write_tfrecords(photos, tmp_path)], image="jpeg",
                            label="class", stream=True, epoch_samples=samples)
    assert labels_of(epoch(source)) == labels_of(indexed)


def test_bad_stream_arguments_are_named(photos, tmp_path):
    paths = [str(path) for path in write_webdataset(photos, tmp_path)]
    with pytest.raises(ValueError, match="stream=True needs epoch_samples"):
        crema.WebDataset(paths, stream=True)
    with pytest.raises(ValueError, match="stream=True reads without an index"):
        crema.WebDataset(paths, stream=True, index=paths, epoch_samples=5)
    with pytest.raises(ValueError, match="epoch_samples is for stream=True"):
        crema.WebDataset(paths, epoch_samples=5)
    with pytest.raises(ValueError, match="shuffle_buffer must be an int >= 0"):
        crema.TFRecord(paths, stream=True, shuffle_buffer=-1, epoch_samples=5)
    with pytest.raises(crema.ConfigError, match="rank 3 of 4 gets no shard: there are 3 shards"):
        epoch(crema.WebDataset(paths, stream=True, epoch_samples=21), shard=(3, 4))
