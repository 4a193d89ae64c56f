"""The dataset pipeline: sources (FashionMnistDataset, NumpySlicesDataset, GeneratorDataset) and
the operations MindSpore training scripts chain on them (map, shuffle, batch, repeat), iterated as
tuples or dicts of modeflow Tensors or numpy arrays.

A pipeline runs lazily in the calling thread, one row at a time: each node yields rows (tuples of
numpy arrays, one per column) for an epoch. Every shuffle draws from the engine's portable
generator, so ds.config.set_seed(n) orders a pipeline the same way on every machine.
"""

import numbers
import os

import numpy as np

from .. import _modeflow
from . import config

__all__ = ["Dataset", "FashionMnistDataset", "GeneratorDataset", "NumpySlicesDataset"]

_INT32_MAX = 2**31 - 1


def _check_int(name, value, low, high=_INT32_MAX, where=""):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{where}{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{where}{name} {value} is not in [{low}, {high}]")
    return int(value)


def _check_bool(name, value, where):
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{where}{name} must be a bool or None, got {type(value).__name__}")


def _check_shards(num_shards, shard_id, where):
    """MindSpore's rule: both or neither; 0 <= shard_id < num_shards."""
    if (num_shards is None) != (shard_id is None):
        given = "num_shards" if shard_id is None else "shard_id"
        raise RuntimeError(f"{where}num_shards and shard_id must be given together (got only "
                           f"{given})")
    if num_shards is None:
        return None, None
    num_shards = _check_int("num_shards", num_shards, 1, where=where)
    shard_id = _check_int("shard_id", shard_id, 0, where=where)
    if shard_id >= num_shards:
        raise ValueError(f"{where}shard_id {shard_id} is not in [0, {num_shards - 1}] for "
                         f"num_shards {num_shards}")
    return num_shards, shard_id


class _Rng:
    """SplitMix64 with Lemire's unbiased bounded draw: the engine's generator (batches.cc), for
    the buffer shuffle of Dataset.shuffle."""

    _MASK = 2**64 - 1

    def __init__(self, seed):
        self.state = seed & self._MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self._MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self._MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self._MASK
        return z ^ (z >> 31)

    def below(self, bound):
        m = self.next() * bound
        if (m & self._MASK) < bound:
            threshold = (2**64 - bound) % bound
            while (m & self._MASK) < threshold:
                m = self.next() * bound
        return m >> 64


class Dataset:
    """What every dataset has: the chaining operations and the iterators."""

    def __init__(self, child=None):
        self._child = child

    # What subclasses define.
    def _rows(self, epoch, seed):
        """Yields the rows of one epoch, each a tuple of numpy arrays."""
        raise NotImplementedError

    def get_col_names(self):
        return self._child.get_col_names()

    def get_dataset_size(self):
        """The number of rows (batches after batch) one epoch yields."""
        return self._child.get_dataset_size()

    def _sharded(self):
        return self._child._sharded() if self._child is not None else False

    # Chaining, MindSpore's names.
    def map(self, operations, input_columns=None, output_columns=None, num_parallel_workers=None,
            **kwargs):
        return MapDataset(self, operations, input_columns, output_columns)

    def shuffle(self, buffer_size):
        return ShuffleDataset(self, buffer_size)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None, **kwargs):
        return BatchDataset(self, batch_size, drop_remainder)

    def repeat(self, count=None):
        return RepeatDataset(self, count)

    # Iteration.
    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False,
                              do_copy=True):
        return _Iterator(self, num_epochs, output_numpy, as_dict=False, columns=columns)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        return _Iterator(self, num_epochs, output_numpy, as_dict=True)

    def __iter__(self):
        return iter(self.create_tuple_iterator(num_epochs=1))


def _to_tensor(array):
    """A modeflow Tensor from a column value. modeflow has no unsigned or 8/16-bit dtypes: uint8,
    int8, uint16 and int16 widen to int32, uint32 to int64 (every value kept); float16 to
    float32."""
    array = np.asarray(array)
    kind, size = array.dtype.kind, array.dtype.itemsize
    if kind in "iu" and (size < 4 or (kind == "u" and size == 4)):
        array = array.astype(np.int64 if size == 4 else np.int32)
    elif kind == "u":
        raise TypeError(f"a column of {array.dtype} cannot become a modeflow Tensor (no unsigned "
                        "64-bit dtype); cast it with transforms.TypeCast or use output_numpy=True")
    elif kind == "f" and size == 2:
        array = array.astype(np.float32)
    return _modeflow.Tensor(np.asarray(array, order="C"))  # ascontiguousarray makes 0-d 1-d


class _Iterator:
    """MindSpore's iterator: each pass (a for loop over it) is one epoch, num_epochs of them (-1:
    no limit). Epochs are numbered from 0 for each new iterator, so a fixed seed repeats."""

    def __init__(self, dataset, num_epochs, output_numpy, as_dict, columns=None):
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, numbers.Integral):
            raise TypeError(f"num_epochs must be an int, got {type(num_epochs).__name__}")
        if num_epochs == 0 or num_epochs < -1:
            raise ValueError(f"num_epochs must be -1 (no limit) or positive, got {num_epochs}")
        self._dataset = dataset
        self._num_epochs = int(num_epochs)
        self._output_numpy = bool(output_numpy)
        self._as_dict = as_dict
        self._names = dataset.get_col_names()
        self._pick = None
        if columns is not None:
            columns = [columns] if isinstance(columns, str) else list(columns)
            missing = [c for c in columns if c not in self._names]
            if missing:
                raise ValueError(f"columns {missing} are not among {self._names}")
            self._pick = [self._names.index(c) for c in columns]
        self._seed = config._pipeline_seed(dataset._sharded())
        self._epoch = 0
        self._rows = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._rows is None:
            if self._num_epochs != -1 and self._epoch >= self._num_epochs:
                raise StopIteration
            self._rows = self._dataset._rows(self._epoch, self._seed)
        try:
            row = next(self._rows)
        except StopIteration:
            self._rows = None
            self._epoch += 1
            raise
        if self._pick is not None:
            row = tuple(row[i] for i in self._pick)
        values = [np.asarray(v) if self._output_numpy else _to_tensor(v) for v in row]
        if self._as_dict:
            return dict(zip(self._names, values))
        return values


class _MappableSource(Dataset):
    """A source read by index: the order of an epoch is its (shuffled, sharded, cut) indices."""

    def __init__(self, where, length, num_samples, shuffle, num_shards, shard_id, sampler=None):
        super().__init__()
        self._where = where
        _check_bool("shuffle", shuffle, where)
        if sampler is not None:
            raise NotImplementedError(f"{where}samplers are not supported yet; use shuffle, "
                                      "num_shards and shard_id")
        if num_samples is not None:
            num_samples = _check_int("num_samples", num_samples, 0, where=where)
        self._num_shards, self._shard_id = _check_shards(num_shards, shard_id, where)
        self._length = length
        self._num_samples = num_samples or None  # MindSpore: 0 reads everything, as None
        self._shuffle = True if shuffle is None else shuffle

    def _sharded(self):
        return self._num_shards is not None

    def _order(self, epoch, seed):
        if self._shuffle:
            order = _modeflow._shuffled_indices(self._length, seed, epoch)
        else:
            order = np.arange(self._length, dtype=np.int64)
        if self._num_shards is not None:
            order = order[self._shard_id :: self._num_shards]
        if self._num_samples is not None:
            order = order[: self._num_samples]
        return order

    def get_dataset_size(self):
        n = self._length
        if self._num_shards is not None:
            n = len(range(self._shard_id, n, self._num_shards))
        return n if self._num_samples is None else min(n, self._num_samples)


class FashionMnistDataset(_MappableSource):
    """Fashion-MNIST from dataset_dir (Debian's dataset-fashion-mnist package installs it in
    /usr/share/datasets/fashion-mnist): columns image, uint8 (28, 28, 1), and label, uint32 ().
    usage 'train' (60,000), 'test' (10,000) or 'all'/None (70,000). shuffle None means shuffled,
    as in MindSpore."""

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        where = "FashionMnistDataset: "
        if not isinstance(dataset_dir, (str, os.PathLike)):
            raise TypeError(f"{where}dataset_dir must be a str, got {type(dataset_dir).__name__}")
        if usage is None:
            usage = "all"
        if usage not in ("train", "test", "all"):
            raise ValueError(f"{where}usage {usage!r} is not one of 'train', 'test', 'all'")
        if not os.path.isdir(dataset_dir):
            raise ValueError(f"{where}the folder {os.fspath(dataset_dir)!r} does not exist or is "
                             "not a directory; install Debian's dataset-fashion-mnist package "
                             f"(files in {_modeflow._FASHION_MNIST_DIR})")
        # Arguments are checked before the files are read.
        _check_shards(num_shards, shard_id, where)
        self._images, self._labels = _modeflow._load_fashion_mnist(os.fspath(dataset_dir), usage)
        super().__init__(where, len(self._labels), num_samples, shuffle, num_shards, shard_id,
                         sampler)

    def get_col_names(self):
        return ["image", "label"]

    def _rows(self, epoch, seed):
        for i in self._order(epoch, seed):
            yield self._images[i], self._labels[i]


def _columns_of(data, column_names, where):
    """NumpySlicesDataset's rule: a dict gives one column per key, a tuple one per element, a
    list or array one column."""
    if isinstance(data, dict):
        names = list(data.keys())
        columns = list(data.values())
    elif isinstance(data, tuple):
        columns = list(data)
        names = [f"column_{i}" for i in range(len(columns))]
    elif isinstance(data, (list, np.ndarray)):
        columns = [data]
        names = ["column_0"]
    else:
        raise TypeError(f"{where}data must be a list, tuple, dict or numpy array, got "
                        f"{type(data).__name__}")
    if column_names is not None:
        column_names = [column_names] if isinstance(column_names, str) else list(column_names)
        if len(column_names) != len(columns):
            raise ValueError(f"{where}{len(column_names)} column_names for {len(columns)} columns")
        names = column_names
    arrays = [np.asarray(c) for c in columns]
    for name, array in zip(names, arrays):
        if array.ndim == 0:
            raise ValueError(f"{where}column {name!r} is a scalar; it must have one row per "
                             "sample")
    lengths = {len(a) for a in arrays}
    if len(lengths) > 1:
        raise ValueError(f"{where}the columns have different numbers of rows: "
                         + ", ".join(f"{n} {len(a)}" for n, a in zip(names, arrays)))
    return names, arrays


class NumpySlicesDataset(_MappableSource):
    """Rows sliced along the first axis of data (list, tuple, dict or numpy array)."""

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        where = "NumpySlicesDataset: "
        self._names, self._arrays = _columns_of(data, column_names, where)
        super().__init__(where, len(self._arrays[0]), num_samples, shuffle, num_shards, shard_id,
                         sampler)

    def get_col_names(self):
        return list(self._names)

    def _rows(self, epoch, seed):
        for i in self._order(epoch, seed):
            yield tuple(a[i] for a in self._arrays)


def _as_row(item, count, where):
    if count == 1 and not isinstance(item, tuple):
        item = (item,)
    if not isinstance(item, (tuple, list)) or len(item) != count:
        raise RuntimeError(f"{where}the source gave {item!r:.80}; expected a tuple of {count} "
                           "values, one per column")
    return tuple(np.asarray(v) for v in item)


class GeneratorDataset(_MappableSource):
    """Rows from a Python source: random-accessible (__getitem__ and __len__; shuffled by default,
    as in MindSpore), or an iterable or a callable returning one (read in order; shuffle=True is
    refused). Each item is a tuple of one value per column."""

    def __init__(self, source, column_names=None, column_types=None, schema=None,
                 num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                 num_shards=None, shard_id=None, python_multiprocessing=True, max_rowsize=None):
        where = "GeneratorDataset: "
        if column_names is None:
            raise ValueError(f"{where}column_names is required (one name per value of a row)")
        self._names = [column_names] if isinstance(column_names, str) else list(column_names)
        if not self._names or not all(isinstance(n, str) for n in self._names):
            raise TypeError(f"{where}column_names must be a str or a non-empty list of str")
        self._source = source
        self._random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__")
        if not self._random_access:
            if not (callable(source) or hasattr(source, "__iter__")):
                raise TypeError(f"{where}source must be random-accessible, iterable or callable, "
                                f"got {type(source).__name__}")
            if shuffle:
                raise ValueError(f"{where}shuffle=True needs a random-accessible source "
                                 "(__getitem__ and __len__)")
            shuffle = False
        length = len(source) if self._random_access else 0
        super().__init__(where, length, num_samples, shuffle, num_shards, shard_id, sampler)

    def get_col_names(self):
        return list(self._names)

    def get_dataset_size(self):
        if self._random_access:
            return super().get_dataset_size()
        # An iterable's size is known only by reading it, once.
        return sum(1 for _ in self._rows(0, 0))

    def _rows(self, epoch, seed):
        if self._random_access:
            for i in self._order(epoch, seed):
                yield _as_row(self._source[int(i)], len(self._names), self._where)
            return
        items = self._source() if callable(self._source) else iter(self._source)
        produced = 0
        for index, item in enumerate(items):
            if self._num_shards is not None and index % self._num_shards != self._shard_id:
                continue
            if self._num_samples is not None and produced >= self._num_samples:
                return
            produced += 1
            yield _as_row(item, len(self._names), self._where)


class MapDataset(Dataset):
    """Applies operations, in order, to input_columns (default: the first column)."""

    def __init__(self, child, operations, input_columns, output_columns):
        super().__init__(child)
        ops = operations if isinstance(operations, (list, tuple)) else [operations]
        if not ops:
            raise ValueError("map: operations is empty")
        for op in ops:
            if not callable(op):
                raise TypeError(f"map: operation {op!r} is not callable")
        names = child.get_col_names()
        if input_columns is None:
            input_columns = [names[0]]
        elif isinstance(input_columns, str):
            input_columns = [input_columns]
        for column in input_columns:
            if column not in names:
                raise ValueError(f"map: input column {column!r} is not among {names}")
        if output_columns is not None:
            output_columns = [output_columns] if isinstance(output_columns, str) else list(
                output_columns)
            if len(output_columns) != len(input_columns):
                raise ValueError("map: output_columns must name one column per input column "
                                 "(adding or removing columns is not supported yet)")
        self._ops = list(ops)
        self._inputs = [names.index(c) for c in input_columns]
        self._names = list(names)
        for i, name in zip(self._inputs, output_columns or []):
            self._names[i] = name

    def get_col_names(self):
        return list(self._names)

    def _rows(self, epoch, seed):
        for row in self._child._rows(epoch, seed):
            values = tuple(row[i] for i in self._inputs)
            for op in self._ops:
                values = op(*values)
                if not isinstance(values, tuple):
                    values = (values,)
                if len(values) != len(self._inputs):
                    raise RuntimeError(f"map: {op!r} returned {len(values)} values for "
                                       f"{len(self._inputs)} input columns")
            row = list(row)
            for i, value in zip(self._inputs, values):
                row[i] = np.asarray(value)
            yield tuple(row)


class ShuffleDataset(Dataset):
    """MindSpore's buffer shuffle: a buffer of buffer_size rows, each next row drawn at random
    from it and replaced by the next row of the input."""

    def __init__(self, child, buffer_size):
        super().__init__(child)
        self._buffer_size = _check_int("buffer_size", buffer_size, 2, where="shuffle: ")

    def _rows(self, epoch, seed):
        # Its own stream, apart from the sources' permutations.
        rng = _Rng(seed * 0x100000001B3 + epoch * 0x9E3779B97F4A7C15 + 0x5348554646)
        buffer = []
        for row in self._child._rows(epoch, seed):
            if len(buffer) < self._buffer_size:
                buffer.append(row)
                continue
            i = rng.below(len(buffer))
            yield buffer[i]
            buffer[i] = row
        while buffer:
            i = rng.below(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()


class BatchDataset(Dataset):
    """Stacks batch_size rows into one; the last short batch is kept unless drop_remainder."""

    def __init__(self, child, batch_size, drop_remainder):
        super().__init__(child)
        self._batch_size = _check_int("batch_size", batch_size, 1, where="batch: ")
        if not isinstance(drop_remainder, bool):
            raise TypeError("batch: drop_remainder must be a bool, got "
                            f"{type(drop_remainder).__name__}")
        self._drop_remainder = drop_remainder

    def get_dataset_size(self):
        n = self._child.get_dataset_size()
        b = self._batch_size
        return n // b if self._drop_remainder else -(-n // b)

    def _stack(self, rows):
        names = self.get_col_names()
        out = []
        for c, name in enumerate(names):
            values = [r[c] for r in rows]
            shapes = {v.shape for v in values}
            if len(shapes) > 1:
                raise RuntimeError(f"batch: column {name!r} has rows of different shapes "
                                   f"{sorted(shapes)}; they cannot be stacked")
            out.append(np.stack(values))
        return tuple(out)

    def _rows(self, epoch, seed):
        rows = []
        for row in self._child._rows(epoch, seed):
            rows.append(row)
            if len(rows) == self._batch_size:
                yield self._stack(rows)
                rows = []
        if rows and not self._drop_remainder:
            yield self._stack(rows)


class RepeatDataset(Dataset):
    """The input count times per epoch (None or -1: without end), reshuffled each time."""

    def __init__(self, child, count):
        super().__init__(child)
        if count is None:
            count = -1
        if isinstance(count, bool) or not isinstance(count, numbers.Integral):
            raise TypeError(f"repeat: count must be an int, got {type(count).__name__}")
        if count == 0 or count < -1:
            raise ValueError(f"repeat: count must be -1 or positive, got {count}")
        self._count = int(count)

    def get_dataset_size(self):
        if self._count == -1:
            return -1
        return self._child.get_dataset_size() * self._count

    def _rows(self, epoch, seed):
        r = 0
        while self._count == -1 or r < self._count:
            # Each repetition is an epoch of the input, so shuffled sources draw a new order.
            inner = epoch * (self._count if self._count > 0 else 1) + r
            yield from self._child._rows(inner, seed)
            r += 1
