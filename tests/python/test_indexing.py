"""Tensor indexing for reading, against numpy: ints, slices with steps (negative too), None, ...,
one integer or boolean array/Tensor index; traced in GRAPH mode like any op; the errors."""

import re

import numpy as np
import pytest

import modeflow as ms

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
ROW_MASK = np.array([True, False, True])

# (index for the Tensor, index for numpy): the same unless a Tensor is involved.
CASES = [
    1, -1, (0, 1), (2, -1, -5), (slice(None), 2), slice(1, None), slice(None, None, 2),
    slice(5, 1), slice(-2, None), (Ellipsis, slice(None, None, -1)), slice(None, None, -1),
    (slice(None), slice(3, 0, -2)), (slice(None), slice(None), slice(None, None, -3)),
    (slice(None), slice(0, 4, -1)), None, (None, 0), (0, None, slice(1, 3)), Ellipsis,
    (Ellipsis, 1), (1, Ellipsis, None), (Ellipsis, slice(-2, None), slice(None, None, 3)),
    [2, 0], [-1], [], (slice(None), [3, -1, 0]), (slice(None), np.array([[0, 1], [2, 3]])),
    np.array(1), (slice(None), np.array(1), 0), ROW_MASK, [True, False, True],
    (slice(None), np.array([True, False, True, True])), X[..., 0] > 20.0,
    # numpy's rule: advanced indices (ints too) apart from each other put their axes first.
    (0, slice(None), [1, 2]), (0, None, [1, 2]), (slice(None), 0, [1, 2]), ([1, 2], slice(None), 0),
    (0, Ellipsis, np.array([[0, 1], [2, 3]])),
]


@pytest.mark.parametrize("index", CASES, ids=[repr(c) for c in CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_reading_matches_numpy(index, dtype):
    array = (X % 7).astype(dtype)
    got = ms.Tensor(array)[index]
    want = array[index]
    assert got.shape == want.shape
    assert got.dtype == ms.Tensor(np.asarray(want)).dtype
    np.testing.assert_array_equal(got.asnumpy(), want)


def test_tensor_indices_match_numpy():
    x = ms.Tensor(X)
    for index in (np.array([2, 0, -1], np.int32), np.array([[1], [0]], np.int64),
                  np.array(2, np.int64)):
        np.testing.assert_array_equal(x[ms.Tensor(index)].asnumpy(), X[index])
        np.testing.assert_array_equal(x[:, ms.Tensor(index)].asnumpy(), X[:, index])
        np.testing.assert_array_equal(x[0, :, ms.Tensor(index)].asnumpy(), X[0, :, index])
    mask = X[:, :, 0] > 12.0
    np.testing.assert_array_equal(x[ms.Tensor(mask)].asnumpy(), X[mask])  # PYNATIVE: values known
    np.testing.assert_array_equal(x[1, ms.Tensor(mask[1])].asnumpy(), X[1, mask[1]])


def test_iteration_and_zero_d():
    rows = list(ms.Tensor(X[0]))
    assert len(rows) == 4
    for row, want in zip(rows, X[0]):
        np.testing.assert_array_equal(row.asnumpy(), want)
    scalar = ms.Tensor(X)[1, 2, 3]
    assert scalar.shape == () and scalar.item() == X[1, 2, 3]
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(scalar)
    assert ms.Tensor(np.float32(2.0))[...].item() == 2.0
    assert ms.Tensor(np.float32(2.0))[None].shape == (1,)


@pytest.mark.parametrize("index, error, message", [
    (3, IndexError, "index 3 is out of bounds for axis 0 with size 3"),
    (-4, IndexError, "index -4 is out of bounds for axis 0 with size 3"),
    ((0, 4), IndexError, "index 4 is out of bounds for axis 1 with size 4"),
    ((0, 0, 0, 0), IndexError, "too many indices for tensor of dimension 3"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    ([0, 5], IndexError, "index 5 is out of bounds for axis 0 with size 3"),
    (np.array([True, False]), IndexError, "boolean index did not match"),
    (slice(None, None, 0), ValueError, "slice step cannot be zero"),
    (1.5, TypeError, "Tensor indices must be int, slice, None, Ellipsis"),
    ("a", TypeError, "got str"),
    (True, TypeError, "a bool is not a Tensor index"),
    (np.array([0.5]), TypeError, "must be integer or boolean, got dtype float64"),
    (ms.Tensor(np.array([1.0], np.float32)), TypeError, "must be int32, int64 or bool"),
    (([0], [1]), TypeError, "more than one integer/boolean array"),
    ({0: 1}, TypeError, "got dict"),
])
def test_index_errors(index, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ms.Tensor(X)[index]


def test_assignment_is_a_type_error_naming_what_to_use():
    t = ms.Tensor(X)
    with pytest.raises(TypeError, match="do not support item assignment") as error:
        t[0] = 1.0
    assert "ms.ops.select" in str(error.value)


class Indexing(ms.nn.Cell):
    def construct(self, x):
        a = x[1:, ::-1, None, 2]              # slice, reverse, new axis, int
        b = x[..., [3, 0]]                     # a list along the last axis
        c = x[ROW_MASK]                        # a constant mask
        i = ms.ops.reduce_sum(x[0, 0, :2].astype(ms.int64))  # a traced 0-d index: x[0,0,0]+x[0,0,1]
        d = x[:, i]
        e = x[0, :, [4, 1]]                    # advanced axes first
        return (ms.ops.reduce_sum(a) + ms.ops.reduce_sum(b) * 2.0 + ms.ops.reduce_sum(c) * 3.0
                + ms.ops.reduce_sum(d) * 5.0 + ms.ops.reduce_sum(e * e[:, :1]) * 7.0)


def indexing_reference(x):
    i = int(x[0, 0, :2].astype(np.int64).sum())
    e = x[0, :, [4, 1]]
    return (x[1:, ::-1, None, 2].sum() + x[..., [3, 0]].sum() * 2 + x[ROW_MASK].sum() * 3
            + x[:, i].sum() * 5 + (e * e[:, :1]).sum() * 7)


def test_graph_mode_traces_indexing_and_matches_pynative():
    x0 = X / 10.0
    x1 = (X % 2).astype(np.float32)  # x[0,0,:2] = (0, 1): the traced index is 1, not 0
    eager = [Indexing()(ms.Tensor(v)).asnumpy() for v in (x0, x1)]
    ms.set_context(mode=ms.GRAPH_MODE)
    net = Indexing()
    first = net(ms.Tensor(x0)).asnumpy()
    assert net.compile_report()["compiled"]
    second = net(ms.Tensor(x1)).asnumpy()  # the same graph, new values: nothing was frozen
    assert not net.compile_report()["compiled"]
    np.testing.assert_allclose([first, second], eager, rtol=1e-6)
    np.testing.assert_allclose([first, second], [indexing_reference(x0), indexing_reference(x1)],
                               rtol=1e-5)


class TracedMask(ms.nn.Cell):
    def construct(self, x):
        return x[x > 3.0]


def test_a_traced_boolean_mask_is_a_type_error_in_graph_mode():
    x = ms.Tensor(X)
    np.testing.assert_array_equal(TracedMask()(x).asnumpy(), X[X > 3.0])  # PYNATIVE: fine
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(TypeError, match="ms.ops.select"):
        TracedMask()(x)
