"""crema.CaffeLMDB: Caffe's transform on raw Datums, equal to its arithmetic; encoded Datums
through the ImageNet-style transform."""

import numpy as np
import pytest

import crema

pytestmark = pytest.mark.skipif(not crema.build_info()["lmdb"], reason="built without LMDB")


def record_pixels(i):
    return np.array([(i * 7 + j) % 256 for j in range(3 * 6 * 5)],
                    dtype=np.float32).reshape(3, 6, 5)


def test_caffe_s_transform_subtracts_the_mean_and_scales_as_caffe_does(raw_lmdb):
    transform = crema.CaffeTransform(mean_values=(10, 20, 30), scale=0.5)
    with crema.Loader(crema.CaffeLMDB(raw_lmdb), transform, 8, shuffle=False,
                      output="numpy") as loader:
        assert len(loader) == 4
        batches = [(images.copy(), labels.copy()) for images, labels in loader]
    images = np.concatenate([images for images, _ in batches])
    labels = np.concatenate([labels for _, labels in batches])
    mean = np.array([10, 20, 30], dtype=np.float32).reshape(3, 1, 1)
    expected = np.stack([(record_pixels(i) - mean) * np.float32(0.5) for i in range(30)])
    assert np.array_equal(images, expected)
    assert labels.tolist() == [i % 4 for i in range(30)]


def test_a_test_phase_crop_is_the_centre_and_bytes_keep_the_pixels(raw_lmdb):
    transform = crema.CaffeTransform(crop=4, train=False, dtype="uint8")
    with crema.Loader(crema.CaffeLMDB(raw_lmdb), transform, 5, shuffle=False,
                      output="numpy") as loader:
        images, labels = next(iter(loader))
    assert images.dtype == np.uint8 and images.shape == (5, 3, 4, 4)
    for i in range(5):
        assert np.array_equal(images[i], record_pixels(i)[:, 1:5, 0:4].astype(np.uint8))


def test_a_shuffled_lmdb_visits_every_record_once_an_epoch_in_another_order(raw_lmdb):
    transform = crema.CaffeTransform(crop=4, mirror=True)
    with crema.Loader(crema.CaffeLMDB(raw_lmdb), transform, 6, seed=3, threads=2,
                      output="numpy") as loader:
        orders = []
        for _ in range(2):
            firsts = [images[:, 0, 0, 0].copy() for images, _ in loader]
            orders.append(np.concatenate(firsts))
    assert len(orders[0]) == 30
    assert not np.array_equal(orders[0], orders[1])


def test_encoded_datums_go_through_the_image_transform(jpeg_lmdb, photos):
    transform = crema.ImageTransform(crop=crema.ResizeCenterCrop(64, 56))
    with crema.Loader(crema.CaffeLMDB(jpeg_lmdb), transform, 7, shuffle=False,
                      output="numpy") as loader:
        labels = np.concatenate([labels for _, labels in loader])
    assert sorted(labels.tolist()) == [0] * 7 + [1] * 7 + [2] * 7


def test_a_missing_database_is_an_error_naming_its_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="path does not exist"):
        crema.CaffeLMDB(tmp_path / "missing")
