"""modeflow.dataset: MindSpore's dataset names over the engine's IDX reader, with synthetic
Fashion-MNIST files, and Debian's real package when installed."""

import gzip
import os
import struct

import numpy as np
import pytest

import modeflow as ms
import modeflow.dataset as ds
import modeflow.dataset.transforms as transforms
import modeflow.dataset.vision as vision
from modeflow.dataset import config as ds_config

REAL_DIR = "/usr/share/datasets/fashion-mnist"


@pytest.fixture(autouse=True)
def unset_seed():
    ds_config._seed = None
    yield
    ds_config._seed = None


def idx_bytes(code, shape, payload):
    return bytes([0, 0, code, len(shape)]) + b"".join(struct.pack(">I", d) for d in shape) + payload


def write_fashion(directory, n_train=7, n_test=3):
    """Image i of a part is filled with i; labels i % 10. Train files gzip-compressed, test raw."""
    os.makedirs(directory, exist_ok=True)
    for prefix, n, compress in (("train", n_train, True), ("t10k", n_test, False)):
        images = np.repeat(np.arange(n, dtype=np.uint8), 28 * 28).tobytes()
        labels = (np.arange(n) % 10).astype(np.uint8).tobytes()
        for kind, data in (("images-idx3-ubyte", idx_bytes(8, [n, 28, 28], images)),
                           ("labels-idx1-ubyte", idx_bytes(8, [n], labels))):
            name = f"{prefix}-{kind}" + (".gz" if compress else "")
            with open(os.path.join(directory, name), "wb") as f:
                f.write(gzip.compress(data) if compress else data)
    return str(directory)


@pytest.fixture
def fashion_dir(tmp_path):
    return write_fashion(tmp_path / "fashion")


def test_read_idx_raw_and_gzip(tmp_path):
    data = idx_bytes(0x0C, [3], struct.pack(">3i", 1, -2, 70000))
    (tmp_path / "a.idx").write_bytes(data)
    (tmp_path / "a.idx.gz").write_bytes(gzip.compress(data))
    for name in ("a.idx", "a.idx.gz"):
        array = ds.read_idx(str(tmp_path / name))
        assert array.dtype == np.int32
        assert array.tolist() == [1, -2, 70000]


def test_read_idx_damage_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "cut.idx").write_bytes(idx_bytes(8, [10], bytes(4)))
    with pytest.raises(RuntimeError, match="cut.idx.*truncated"):
        ds.read_idx(str(tmp_path / "cut.idx"))
    (tmp_path / "bad.gz").write_bytes(gzip.compress(idx_bytes(8, [4], bytes(4)))[:-6])
    with pytest.raises(RuntimeError, match="bad.gz"):
        ds.read_idx(str(tmp_path / "bad.gz"))


def test_fashion_mnist_columns_and_dtypes(fashion_dir):
    data = ds.FashionMnistDataset(fashion_dir, usage="train", shuffle=False)
    assert data.get_col_names() == ["image", "label"]
    assert data.get_dataset_size() == 7
    rows = list(data.create_tuple_iterator(output_numpy=True))
    image, label = rows[3]
    assert image.dtype == np.uint8 and image.shape == (28, 28, 1) and image[0, 0, 0] == 3
    assert label.dtype == np.uint32 and label.shape == () and label == 3
    assert ds.FashionMnistDataset(fashion_dir, usage="test").get_dataset_size() == 3
    assert ds.FashionMnistDataset(fashion_dir).get_dataset_size() == 10  # None reads all


def test_fashion_mnist_bad_arguments(fashion_dir, tmp_path):
    with pytest.raises(ValueError, match="usage 'valid'"):
        ds.FashionMnistDataset(fashion_dir, usage="valid")
    with pytest.raises(ValueError, match="dataset-fashion-mnist"):
        ds.FashionMnistDataset(str(tmp_path / "nowhere"))
    with pytest.raises(RuntimeError, match="together"):
        ds.FashionMnistDataset(fashion_dir, num_shards=2)
    with pytest.raises(ValueError, match="shard_id 2 is not in"):
        ds.FashionMnistDataset(fashion_dir, num_shards=2, shard_id=2)
    with pytest.raises(TypeError, match="shuffle must be a bool"):
        ds.FashionMnistDataset(fashion_dir, shuffle="yes")
    os.remove(os.path.join(fashion_dir, "t10k-labels-idx1-ubyte"))
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte"):
        ds.FashionMnistDataset(fashion_dir, usage="test")


def test_training_pipeline_yields_tensors(fashion_dir):
    data = ds.FashionMnistDataset(fashion_dir, usage="all", shuffle=False)
    data = data.map([vision.Rescale(1.0 / 255.0, 0.0), vision.HWC2CHW()], input_columns="image")
    data = data.map(transforms.TypeCast(ms.int32), input_columns="label")
    data = data.batch(4, drop_remainder=False)
    assert data.get_dataset_size() == 3
    batches = list(data.create_tuple_iterator())
    assert [b[1].shape for b in batches] == [(4,), (4,), (2,)]
    images, labels = batches[0]
    assert isinstance(images, ms.Tensor) and images.dtype == ms.float32
    assert images.shape == (4, 1, 28, 28)
    assert labels.dtype == ms.int32 and labels.asnumpy().tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(images.asnumpy()[2], np.full((1, 28, 28), 2 / 255), rtol=1e-6)
    assert data.batch(1).get_dataset_size() == 3
    dropped = ds.FashionMnistDataset(fashion_dir, shuffle=False).batch(4, drop_remainder=True)
    assert dropped.get_dataset_size() == 2 and len(list(dropped)) == 2


def test_uint8_columns_become_int32_tensors(fashion_dir):
    image, label = next(iter(ds.FashionMnistDataset(fashion_dir, shuffle=False)))
    assert image.dtype == ms.int32 and image.shape == (28, 28, 1)
    assert label.dtype == ms.int64 and label.shape == ()


def test_dict_iterator_and_epochs(fashion_dir):
    data = ds.FashionMnistDataset(fashion_dir, usage="test", shuffle=False)
    iterator = data.create_dict_iterator(num_epochs=2, output_numpy=True)
    epochs = [[int(row["label"]) for row in iterator] for _ in range(3)]
    assert epochs == [[0, 1, 2], [0, 1, 2], []]


def labels_of(data):
    return [int(label) for _, label in data.create_tuple_iterator(output_numpy=True)]


def test_seeded_shuffle_repeats_and_matches_the_engine(fashion_dir):
    ds.config.set_seed(11)
    assert ds.config.get_seed() == 11
    first = labels_of(ds.FashionMnistDataset(fashion_dir, usage="all"))
    assert first == labels_of(ds.FashionMnistDataset(fashion_dir, usage="all"))
    assert sorted(first) == sorted(list(range(7)) + list(range(3)))
    # The C++ Batches draw the same permutation for the same seed (engine/data/batches.h).
    order = ms._modeflow._shuffled_indices(10, 11, 0)
    labels = [i % 10 for i in range(7)] + [i % 10 for i in range(3)]
    assert first == [labels[i] for i in order]
    # A fixed value: the same on every machine (tests/engine/dataset_test.cc has it too).
    assert ms._modeflow._shuffled_indices(8, 1, 0).tolist() == [2, 3, 5, 7, 0, 1, 4, 6]
    # Epochs differ; repeat reshuffles.
    it = ds.FashionMnistDataset(fashion_dir, usage="all").create_tuple_iterator(output_numpy=True)
    e0 = [int(r[1]) for r in it]
    e1 = [int(r[1]) for r in it]
    assert e0 == first and sorted(e1) == sorted(e0)
    data = ds.NumpySlicesDataset(np.arange(40), shuffle=True)
    rows = data.repeat(2).create_tuple_iterator(output_numpy=True)
    one, two = np.split(np.array([int(r[0]) for r in rows]), 2)
    assert sorted(one) == sorted(two) == list(range(40)) and list(one) != list(two)


def test_shards_partition_the_set():
    data = np.arange(23)
    for shuffle in (False, True):
        seen = []
        for shard in range(4):
            part = ds.NumpySlicesDataset(data, shuffle=shuffle, num_shards=4, shard_id=shard)
            rows = [int(r[0]) for r in part.create_tuple_iterator(output_numpy=True)]
            assert len(rows) == part.get_dataset_size() in (5, 6)
            seen += rows
        assert sorted(seen) == list(range(23))


def test_buffer_shuffle_is_a_permutation():
    ds.config.set_seed(3)
    data = ds.NumpySlicesDataset({"x": np.arange(50)}, shuffle=False).shuffle(8)
    rows = [int(r[0]) for r in data.create_tuple_iterator(output_numpy=True)]
    assert sorted(rows) == list(range(50)) and rows != list(range(50))
    assert rows == [int(r[0]) for r in data.create_tuple_iterator(output_numpy=True)]
    with pytest.raises(ValueError, match="buffer_size 1 is not in"):
        data.shuffle(1)


def test_numpy_slices_columns():
    data = ds.NumpySlicesDataset((np.zeros((4, 2)), np.arange(4)), shuffle=False)
    assert data.get_col_names() == ["column_0", "column_1"]
    named = ds.NumpySlicesDataset({"a": [1, 2], "b": [3, 4]}, shuffle=False)
    assert named.get_col_names() == ["a", "b"]
    assert [r["b"] for r in named.create_dict_iterator(output_numpy=True)] == [3, 4]
    with pytest.raises(ValueError, match="different numbers of rows"):
        ds.NumpySlicesDataset({"a": [1, 2], "b": [3]})
    with pytest.raises(TypeError, match="data must be"):
        ds.NumpySlicesDataset(5)
    with pytest.raises(ValueError, match="batch_size 0 is not in"):
        named.batch(0)
    with pytest.raises(ValueError, match="input column 'c'"):
        named.map(lambda x: x, input_columns="c")


def test_generator_dataset():
    def gen():
        for i in range(5):
            yield np.array([i, i]), np.int32(i)

    data = ds.GeneratorDataset(gen, column_names=["x", "y"])
    rows = list(data.create_tuple_iterator(output_numpy=True))
    assert [int(y) for _, y in rows] == [0, 1, 2, 3, 4]
    assert data.get_dataset_size() == 5
    with pytest.raises(ValueError, match="random-accessible"):
        ds.GeneratorDataset(gen, column_names=["x", "y"], shuffle=True)

    class Source:
        def __getitem__(self, i):
            return (np.float32(i),)

        def __len__(self):
            return 6

    ds.config.set_seed(5)
    shuffled = [float(r[0]) for r in ds.GeneratorDataset(Source(), "v").create_tuple_iterator(
        output_numpy=True)]
    assert sorted(shuffled) == [0, 1, 2, 3, 4, 5]
    part = ds.GeneratorDataset(Source(), ["v"], num_shards=3, shard_id=1, shuffle=False)
    assert [float(r[0]) for r in part.create_tuple_iterator(output_numpy=True)] == [1.0, 4.0]


def test_vision_and_transforms_on_numpy():
    img = np.arange(2 * 3 * 2, dtype=np.uint8).reshape(2, 3, 2)
    out = vision.Rescale(0.5, 1.0)(img)
    assert out.dtype == np.float32 and out[1, 2, 1] == 11 * 0.5 + 1
    chw = vision.HWC2CHW()(img)
    assert chw.shape == (2, 2, 3) and chw[1, 0, 2] == img[0, 2, 1]
    norm = vision.Normalize(mean=[1.0, 2.0], std=[2.0, 4.0])(img)
    np.testing.assert_allclose(norm[..., 1], (img[..., 1] - 2.0) / 4.0)
    norm_chw = vision.Normalize([1.0, 2.0], [2.0, 4.0], is_hwc=False)(chw)
    np.testing.assert_allclose(norm_chw, vision.HWC2CHW()(norm))
    assert transforms.TypeCast(ms.int32)(np.array([1.7])).dtype == np.int32
    assert transforms.TypeCast(np.float64)(np.array([1])).dtype == np.float64
    with pytest.raises(ValueError, match="std"):
        vision.Normalize([0.5], [0.0])
    with pytest.raises(TypeError, match="mean must be a list"):
        vision.Normalize(0.5, [1.0])
    with pytest.raises(TypeError, match="rescale must be a number"):
        vision.Rescale("x", 0)
    with pytest.raises(RuntimeError, match="3 channels but"):
        vision.Normalize([1.0, 2.0], [1.0, 1.0])(np.zeros((2, 2, 3)))
    with pytest.raises(TypeError, match="data_type"):
        transforms.TypeCast(object())


def test_set_seed_checks():
    with pytest.raises(TypeError):
        ds.config.set_seed(1.5)
    with pytest.raises(ValueError):
        ds.config.set_seed(-1)


@pytest.mark.skipif(not os.path.isdir(REAL_DIR), reason="dataset-fashion-mnist not installed")
def test_real_fashion_mnist():
    train = ds.FashionMnistDataset(REAL_DIR, usage="train", shuffle=False)
    test = ds.FashionMnistDataset(REAL_DIR, usage="test", shuffle=False)
    assert train.get_dataset_size() == 60000 and test.get_dataset_size() == 10000
    labels = np.array([int(r[1]) for r in test.create_tuple_iterator(output_numpy=True)])
    assert labels.min() == 0 and labels.max() == 9
    assert np.bincount(labels).tolist() == [1000] * 10
