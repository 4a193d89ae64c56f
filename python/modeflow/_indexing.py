"""Tensor indexing for reading (``x[index]``), with numpy's and MindSpore's semantics, built from
the registry's ops (slice, gather, squeeze, expand_dims, reshape, transpose), so GRAPH mode traces it
like any other op.

Supported: ints (negative ones count from the end), slices with any step (a negative step slices
the same positions and reverses them with a gather), ``None`` (a new axis), ``...``, tuples of these, and one
advanced index: an integer Tensor, numpy array or list (any rank, along one axis; a Tensor's
values may be traced), or a boolean mask (numpy array, list or Tensor whose values are known:
the result's shape depends on them, so a traced mask is a TypeError). As in numpy, ints combined
with an advanced index count as advanced too: when they are not next to each other, the advanced
result axes come first. Assignment (``x[index] = v``) is not supported: tensors are values.
"""

import operator

import numpy as np

from ._modeflow import Tensor, TracedValueError, bool_, int32, int64
from ._modeflow import ops as _ops

_SUPPORTED = ("int, slice, None, Ellipsis (...), an integer or boolean Tensor / numpy array / "
              "list, or a tuple of these")


class _Advanced:
    """The one advanced index: integer positions (of any shape) along one axis of x, or a mask's
    flat positions over the `axes` axes it covers."""

    def __init__(self, indices, axes, tensor):
        self.indices = indices  # a Tensor (int32/int64) or an int64 numpy array
        self.axes = axes        # how many axes of x it consumes (a mask's rank, else 1)
        self.tensor = tensor    # True when `indices` is a Tensor (values not checked here)

    @property
    def ndim(self):
        return len(self.indices.shape)


def _type_error(item):
    return TypeError(f"Tensor indices must be {_SUPPORTED}; got {type(item).__name__}")


def _as_array_index(item):
    """An integer or boolean numpy array from a list, tuple or numpy array index."""
    array = np.asarray(item)
    if array.size == 0 and array.dtype.kind == "f":  # x[[]]: numpy reads an empty list as ints
        array = array.astype(np.int64)
    if array.dtype.kind not in "biu":
        raise TypeError(f"arrays used as Tensor indices must be integer or boolean, got dtype "
                        f"{array.dtype}; {_SUPPORTED} are supported")
    return array


def _mask_values(mask):
    try:
        return mask.asnumpy()
    except TracedValueError:
        raise TypeError(
            "indexing with a boolean mask Tensor needs the mask's values (the result's shape "
            "depends on them), and a traced Tensor (GRAPH mode or jit) has none: keep the shape "
            "with ms.ops.select(mask, x, other), pass the mask as a numpy array, or index in "
            "PYNATIVE_MODE") from None


def _classify(item):
    """('int', i) | ('slice', s) | ('none',) | ('ellipsis',) | ('array', ndarray | Tensor)."""
    if item is None:
        return ("none",)
    if item is Ellipsis:
        return ("ellipsis",)
    if isinstance(item, slice):
        return ("slice", item)
    if isinstance(item, (bool, np.bool_)):
        raise TypeError("a bool is not a Tensor index (numpy would add an axis); use None for a "
                        "new axis, or a boolean mask array")
    if isinstance(item, Tensor):
        if item.dtype == bool_:
            return ("array", _mask_values(item))
        if item.dtype not in (int32, int64):
            raise TypeError(f"a Tensor used as an index must be int32, int64 or bool, got "
                            f"{item.dtype}")
        return ("array", item)
    if isinstance(item, (list, tuple, np.ndarray)):
        return ("array", _as_array_index(item))
    try:
        return ("int", operator.index(item))
    except TypeError:
        raise _type_error(item) from None


def _check_range(index, size, axis):
    if index < -size or index >= size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
    return index + size if index < 0 else index


def getitem(x, index):
    """x[index] (see the module's docstring)."""
    items = [_classify(item) for item in (index if isinstance(index, tuple) else (index,))]
    shape = tuple(x.shape)
    rank = len(shape)

    if sum(kind == "ellipsis" for kind, *_ in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    arrays = [i for i, (kind, *_) in enumerate(items) if kind == "array"]
    if len(arrays) > 1:
        raise TypeError("indexing with more than one integer/boolean array or Tensor at once is "
                        "not supported (numpy would broadcast them together); index one axis at "
                        "a time, or gather with ms.ops.gather")

    def consumed(entry):
        kind = entry[0]
        if kind in ("int", "slice"):
            return 1
        if kind == "array":
            value = entry[1]
            is_mask = isinstance(value, np.ndarray) and value.dtype == np.bool_
            return value.ndim if is_mask else 1
        return 0

    used = sum(consumed(entry) for entry in items)
    if used > rank:
        raise IndexError(f"too many indices for tensor of dimension {rank}: the index uses "
                         f"{used} axes")
    expanded = []
    for entry in items:
        if entry[0] == "ellipsis":
            expanded.extend([("slice", slice(None))] * (rank - used))
        else:
            expanded.append(entry)
    if not any(kind == "ellipsis" for kind, *_ in items):
        expanded.extend([("slice", slice(None))] * (rank - used))

    # One pass over the axes: what the slice op keeps, which axes are reversed (negative steps),
    # which are dropped (ints), where the advanced index and the new axes go.
    begin, end, strides = [0] * rank, list(shape), [1] * rank
    reversed_axes, int_axes = [], []
    advanced = None  # (_Advanced, input axis, output position)
    new_axes = []    # output positions of None, in order
    out_rank = 0     # output axes so far (before the advanced transposition)
    advanced_at = []  # item positions of advanced indices (ints count when an array is present)
    axis = 0
    for position, entry in enumerate(expanded):
        kind = entry[0]
        if kind == "none":
            new_axes.append(out_rank)
            out_rank += 1
        elif kind == "int":
            i = _check_range(entry[1], shape[axis], axis)
            begin[axis], end[axis] = i, i + 1
            int_axes.append(axis)
            advanced_at.append(position)
            axis += 1
        elif kind == "slice":
            step = entry[1].step
            if step is not None and operator.index(step) == 0:
                raise ValueError("slice step cannot be zero")
            start, stop, step = entry[1].indices(shape[axis])
            if step > 0:
                begin[axis], end[axis], strides[axis] = start, stop, step
            else:
                count = len(range(start, stop, step))
                if count > 0:  # the same positions ascending, reversed after the slice
                    begin[axis], end[axis] = start + (count - 1) * step, start + 1
                    strides[axis] = -step
                    reversed_axes.append((axis, count))
                else:
                    begin[axis], end[axis] = 0, 0
            out_rank += 1
            axis += 1
        else:  # array
            value = entry[1]
            advanced_at.append(position)
            if isinstance(value, Tensor):
                adv = _Advanced(value, 1, True)
            elif value.dtype == np.bool_:
                mask_shape = shape[axis:axis + value.ndim]
                for k, (got, want) in enumerate(zip(value.shape, mask_shape)):
                    if got != want:
                        raise IndexError(f"boolean index did not match indexed tensor along "
                                         f"dimension {axis + k}; dimension is {want} but "
                                         f"corresponding boolean dimension is {got}")
                flat = np.flatnonzero(value.reshape(-1)).astype(np.int64)
                adv = _Advanced(flat, value.ndim, False)
            else:
                value = value.astype(np.int64)
                size = shape[axis]
                bad = (value < -size) | (value >= size)
                if bad.any():
                    raise IndexError(f"index {int(value[bad].flat[0])} is out of bounds for axis "
                                     f"{axis} with size {size}")
                adv = _Advanced(np.where(value < 0, value + size, value), 1, False)
            advanced = (adv, axis, out_rank)  # its input axis and output position
            out_rank += adv.ndim
            axis += adv.axes

    y = x
    if begin != [0] * rank or end != list(shape) or strides != [1] * rank:
        y = _ops.slice(y, begin=begin, end=end, strides=strides)
    for axis, count in reversed_axes:
        y = _ops.gather(y, Tensor(np.arange(count - 1, -1, -1, dtype=np.int64)), axis=axis)
    if int_axes:
        y = _ops.squeeze(y, axes=int_axes)
    if advanced is not None:
        adv, axis, _ = advanced
        at = axis - sum(a < axis for a in int_axes)  # its axis once the ints are gone
        if adv.axes != 1:  # a mask over several axes: one axis of their flat positions
            current = list(y.shape)
            merged = int(np.prod(current[at:at + adv.axes], dtype=np.int64))
            y = _ops.reshape(y, shape=current[:at] + [merged] + current[at + adv.axes:])
        indices = adv.indices if adv.tensor else Tensor(adv.indices)
        y = _ops.gather(y, indices, axis=at)
    for position in new_axes:
        y = _ops.expand_dims(y, axis=position)
    # numpy: advanced indices (ints included) that are not next to each other put their result
    # axes first.
    if advanced is not None and advanced_at != list(range(advanced_at[0], advanced_at[-1] + 1)):
        adv, _, start = advanced
        if start > 0 and adv.ndim > 0:
            axes = list(range(len(y.shape)))
            moved = axes[start:start + adv.ndim]
            y = _ops.transpose(y, perm=moved + axes[:start] + axes[start + adv.ndim:])
    return y


def setitem(x, index, value):
    raise TypeError(
        "modeflow Tensors do not support item assignment (x[index] = value): a tensor is a value "
        "(GRAPH mode traces it as one). Build a new tensor instead: ms.ops.select(mask, value, x) "
        "for a masked update, or ms.ops.concat of slices for a range")


def iterate(x):
    if len(x.shape) == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(x.shape[0]):
        yield getitem(x, i)
