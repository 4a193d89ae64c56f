"""dtype promotion of the Tensor operators (MindSpore 2.x, as PyTorch), with numpy as the oracle for
values: tensor with tensor by rank (bool < int32 < int64 < float32 < float64), Python numbers
adapting to the tensor, true division of integers in float32, comparisons giving bool; the casts
are ops, so GRAPH mode compiles them."""

import operator

import numpy as np
import pytest

import modeflow as ms

ORDER = [np.bool_, np.int32, np.int64, np.float32, np.float64]
MS = {np.bool_: ms.bool_, np.int32: ms.int32, np.int64: ms.int64, np.float32: ms.float32,
      np.float64: ms.float64}
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
       "**": operator.pow, "<": operator.lt, ">": operator.gt, "==": operator.eq}


def promoted(a, b):
    return max(a, b, key=ORDER.index)


def expected_dtype(symbol, common):
    if symbol in ("<", ">", "=="):
        return np.bool_
    if symbol == "/" and common not in (np.float32, np.float64):
        return np.float32
    return common


def operands(dtype, seed):
    values = np.random.default_rng(seed).integers(1, 4, (3, 4))  # positive: pow and / are defined
    if dtype is np.bool_:
        values = values % 2
    return values.astype(dtype)


def numpy_result(symbol, a, b, dtype):
    """The oracle: numpy in float64 (exact for these small integers), cast to the expected dtype."""
    with np.errstate(all="ignore"):
        value = OPS[symbol](np.asarray(a, np.float64), np.asarray(b, np.float64))
    return np.asarray(value).astype(dtype)


def check(got, want_dtype, want):
    assert got.dtype == MS[want_dtype], (got.dtype, want_dtype)
    if want_dtype in (np.float32, np.float64):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got.asnumpy(), want)


PAIRS = [(a, b) for a in ORDER for b in ORDER]


@pytest.mark.parametrize("symbol", list(OPS))
@pytest.mark.parametrize("left, right", PAIRS, ids=[f"{a.__name__}-{b.__name__}" for a, b in PAIRS])
def test_tensor_with_tensor(symbol, left, right):
    common = promoted(left, right)
    if common is np.bool_ and symbol in ("-", "**"):
        pytest.skip("two bools: a TypeError (test_two_bools)")
    a, b = operands(left, 1), operands(right, 2)
    want_dtype = expected_dtype(symbol, common)
    got = OPS[symbol](ms.Tensor(a), ms.Tensor(b))
    check(got, want_dtype, numpy_result(symbol, a, b, want_dtype))
    # A numpy array on either side is a tensor too.
    check(OPS[symbol](ms.Tensor(a), b), want_dtype, numpy_result(symbol, a, b, want_dtype))


# (tensor dtype, scalar, dtype of the result of + - * **): the scalar adapts to the tensor.
SCALARS = [
    (np.int32, 2, np.int32), (np.int64, 2, np.int64), (np.bool_, 2, np.int64),
    (np.float32, 2, np.float32), (np.float64, 2, np.float64),
    (np.int32, 1.5, np.float32), (np.int64, 1.5, np.float32), (np.bool_, 1.5, np.float32),
    (np.float32, 1.5, np.float32), (np.float64, 1.5, np.float64),
    (np.int32, True, np.int32), (np.float32, True, np.float32),
    (np.int32, np.float64(1.5), np.float32), (np.int32, np.int64(2), np.int32),
]


@pytest.mark.parametrize("symbol", ["+", "-", "*", "/", "**", "<", ">", "=="])
@pytest.mark.parametrize("dtype, scalar, arithmetic", SCALARS,
                         ids=[f"{d.__name__}-{s!r}" for d, s, _ in SCALARS])
def test_tensor_with_python_scalar_both_ways(symbol, dtype, scalar, arithmetic):
    a = operands(dtype, 3)
    want_dtype = expected_dtype(symbol, arithmetic)
    check(OPS[symbol](ms.Tensor(a), scalar), want_dtype,
          numpy_result(symbol, a, scalar, want_dtype))
    if symbol in ("<", ">") or isinstance(scalar, np.generic):
        return  # 2 < t is t > 2, covered above; a numpy scalar on the left computes in numpy
    check(OPS[symbol](scalar, ms.Tensor(a)), want_dtype,
          numpy_result(symbol, scalar, a, want_dtype))


def test_integer_division_is_true_division_in_float32():
    a = ms.Tensor(np.array([1, 2, 3, -7], np.int32))
    got = a / ms.Tensor(np.array(2, np.int64))
    assert got.dtype == ms.float32
    np.testing.assert_array_equal(got.asnumpy(), [0.5, 1.0, 1.5, -3.5])
    assert (7 / ms.Tensor(np.array([2], np.int64))).asnumpy().tolist() == [3.5]


def test_integer_power_stays_integer():
    got = ms.Tensor(np.array([2, 3, -4], np.int64)) ** 3
    assert got.dtype == ms.int64
    np.testing.assert_array_equal(got.asnumpy(), [8, 27, -64])
    assert (2 ** ms.Tensor(np.array([10, 20], np.int32))).asnumpy().tolist() == [1024, 1048576]


def test_two_bools():
    t = ms.Tensor(np.array([True, True, False, False]))
    u = ms.Tensor(np.array([True, False, True, False]))
    assert (t + u).dtype == ms.bool_ and (t + u).asnumpy().tolist() == [True, True, True, False]
    assert (t * u).asnumpy().tolist() == [True, False, False, False]
    assert (t < u).asnumpy().tolist() == [False, False, True, False]
    assert (t == u).asnumpy().tolist() == [True, False, False, True]
    assert (t / u).dtype == ms.float32
    with pytest.raises(TypeError, match="Tensor - on two bool operands is not supported"):
        t - u
    with pytest.raises(TypeError, match=r"Tensor \*\* on two bool operands is not supported"):
        t ** u


class Mixed(ms.nn.Cell):
    def construct(self, x):  # x is int32
        y = x * 0.5 + ms.Tensor(np.array([1, 2, 3], np.int64))  # float32
        z = (x / 2) * (x > 1)  # true division, bool promoted to float32
        return y + z + ms.Tensor(np.array(0.25, np.float64)) + (x ** 2)


def test_graph_mode_compiles_the_casts_and_matches_pynative():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    eager = Mixed()(ms.Tensor(x))
    ms.set_context(mode=ms.GRAPH_MODE)
    net = Mixed()
    graph = net(ms.Tensor(x))
    assert net.compile_report()["compiled"]
    assert eager.dtype == graph.dtype == ms.float64
    want = (x * 0.5 + np.array([1, 2, 3])) + (x / 2) * (x > 1) + 0.25 + x ** 2
    np.testing.assert_allclose(graph.asnumpy(), want, rtol=1e-6)
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-12)


def test_python_integers_are_exact_and_range_checked():
    # Exact beyond 2^53 (no trip through a double), as numpy.
    big = 2**53 + 1
    x = ms.Tensor(np.array([0, 1], np.int64))
    np.testing.assert_array_equal((x + big).asnumpy(), np.array([0, 1], np.int64) + big)
    assert ms.Tensor(big).asnumpy() == big
    # Out of the tensor's integer range: OverflowError naming the value and the dtype (numpy 2),
    # never a wrapped result.
    small = ms.Tensor(np.array([1, 2], np.int32))
    with pytest.raises(OverflowError, match="Python integer 1099511627776 out of bounds for int32"):
        small + 2**40
    with pytest.raises(OverflowError, match="out of bounds for int64"):
        x * 2**64
    # In range, both ways, exact.
    np.testing.assert_array_equal((2**31 - 2 - small).asnumpy(), np.array([2**31 - 3, 2**31 - 4]))
    # A float operand still rounds as numpy: int32 + 2**40 as a float is fine.
    assert (small + float(2**40)).dtype == ms.float32
