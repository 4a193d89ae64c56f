"""nn.Dense and nn.Conv2d with MindSpore's weight_init / bias_init, modeflow.common.initializer, and
pad_mode of nn.Conv2d and nn.MaxPool2d ('same', 'valid', 'pad'), against numpy references."""

import math

import numpy as np
import pytest

import modeflow as ms
from modeflow.common.initializer import (Constant, HeNormal, HeUniform, Normal, One,
                                         TruncatedNormal, Uniform, XavierUniform, Zero,
                                         initializer)


def param(cell, name):
    return cell.parameters_dict()[name].asnumpy()


def within(w, bound):
    """|w| <= bound, allowing for the rounding of float64 draws to float32."""
    return np.abs(w).max() <= bound * (1 + 1e-6)


# ---- weight_init / bias_init ----

def test_dense_default_keeps_the_engines_seeded_weights():
    a, b = ms.nn.Dense(8, 4, seed=3), ms.nn.Dense(8, 4, seed=3)
    assert list(a.parameters_dict()) == ["weight", "bias"]
    assert param(a, "weight").tobytes() == param(b, "weight").tobytes()
    # MindSpore's default distribution: HeUniform(sqrt(5)), i.e. within 1/sqrt(fan_in).
    assert within(param(a, "weight"), 1 / math.sqrt(8))


@pytest.mark.parametrize("init, check", [
    ("zeros", lambda w: np.all(w == 0)),
    ("ones", lambda w: np.all(w == 1)),
    ("ONES", lambda w: np.all(w == 1)),
    (2.5, lambda w: np.all(w == 2.5)),
    (Zero(), lambda w: np.all(w == 0)),
    (One(), lambda w: np.all(w == 1)),
    (Constant(-3), lambda w: np.all(w == -3)),
    ("normal", lambda w: 0 < w.std() < 0.02),
    ("uniform", lambda w: within(w, 0.07) and w.std() > 0.02),
    (Uniform(scale=0.5), lambda w: within(w, 0.5) and w.std() > 0.1),
    (Normal(sigma=2.0, mean=10.0), lambda w: 9 < w.mean() < 11 and 1.5 < w.std() < 2.5),
    ("truncatedNormal", lambda w: within(w, 2.0) and 0 < w.std() < 0.02),
    (TruncatedNormal(sigma=1.0, a=-0.5, b=0.5), lambda w: within(w, 0.5)),
    # fan_in 64, fan_out 32: Glorot bound sqrt(6 / 96) = 0.25; He bound sqrt(6 / 64).
    ("xavier_uniform", lambda w: within(w, 0.25) and w.std() > 0.1),
    (XavierUniform(gain=2), lambda w: within(w, 0.5) and w.std() > 0.2),
    ("he_uniform", lambda w: within(w, math.sqrt(6 / 64)) and w.std() > 0.15),
    (HeUniform(math.sqrt(5)), lambda w: within(w, 1 / 8)),
    ("he_normal", lambda w: 0.13 < w.std() < 0.22),
    (HeNormal(mode="fan_out"), lambda w: 0.19 < w.std() < 0.31),
])
def test_dense_weight_init(init, check):
    dense = ms.nn.Dense(64, 32, weight_init=init, seed=4)
    w = param(dense, "weight")
    assert w.shape == (32, 64) and w.dtype == np.float32
    assert check(w), (init, w.min(), w.max(), w.mean(), w.std())


def test_initialized_values_are_reproducible_and_used():
    a = ms.nn.Dense(6, 3, weight_init="normal", bias_init="uniform", seed=7)
    b = ms.nn.Dense(6, 3, weight_init="normal", bias_init="uniform", seed=7)
    c = ms.nn.Dense(6, 3, weight_init="normal", bias_init="uniform", seed=8)
    for name in ("weight", "bias"):
        assert param(a, name).tobytes() == param(b, name).tobytes()
        assert param(a, name).tobytes() != param(c, name).tobytes()
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(a(ms.Tensor(x)).asnumpy(),
                               x @ param(a, "weight").T + param(a, "bias"), rtol=1e-5, atol=1e-6)


def test_tensor_and_array_inits():
    w = np.arange(12, dtype=np.float64).reshape(3, 4)
    dense = ms.nn.Dense(4, 3, weight_init=w, bias_init=ms.Tensor(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_array_equal(param(dense, "weight"), w.astype(np.float32))
    np.testing.assert_array_equal(param(dense, "bias"), [1, 2, 3])
    conv = ms.nn.Conv2d(2, 4, 3, group=2, weight_init=np.ones((4, 1, 3, 3), np.float32),
                        has_bias=True, bias_init="zeros")
    assert param(conv, "weight").shape == (4, 1, 3, 3) and np.all(param(conv, "weight") == 1)
    assert np.all(param(conv, "bias") == 0)


def test_init_errors():
    with pytest.raises(ValueError, match=r"\(4, 3\) does not match the weight's shape \(3, 4\)"):
        ms.nn.Dense(4, 3, weight_init=np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"\(2,\) does not match the bias's shape \(3,\)"):
        ms.nn.Dense(4, 3, bias_init=ms.Tensor(np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match="unknown initializer 'gaussian'.*'xavier_uniform'"):
        ms.nn.Conv2d(1, 1, 3, weight_init="gaussian")
    with pytest.raises(TypeError, match="init must be a str, a number, a Tensor"):
        ms.nn.Dense(4, 3, weight_init=[1, 2])
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        ms.nn.Dense(4, 3, bias_init="xavier_uniform")
    with pytest.raises(NotImplementedError, match="activation"):
        ms.nn.Dense(4, 3, activation="relu")


def test_bias_init_without_a_bias_is_ignored():
    dense = ms.nn.Dense(4, 3, bias_init="ones", has_bias=False)
    assert list(dense.parameters_dict()) == ["weight"]


def test_initializer_function():
    t = initializer("normal", (2, 3), ms.float32)
    assert isinstance(t, ms.Tensor) and t.shape == (2, 3) and t.dtype == ms.float32
    assert initializer("normal", (2, 3)).asnumpy().tobytes() == t.asnumpy().tobytes()  # seed 0
    assert initializer(Normal(), [4], seed=1).asnumpy().tobytes() != \
        initializer(Normal(), [4], seed=2).asnumpy().tobytes()
    assert initializer(One(), 3, ms.float64).dtype == ms.float64
    np.testing.assert_array_equal(initializer(Constant(7), (2,), ms.int32).asnumpy(), [7, 7])
    np.testing.assert_array_equal(initializer(np.ones(2), (2,)).asnumpy(), [1, 1])
    assert initializer(ms.Tensor(np.ones(2, np.float64))).dtype == ms.float32
    with pytest.raises(ValueError, match="does not match"):
        initializer(np.ones(3), (2,))
    with pytest.raises(ValueError, match="unknown initializer"):
        initializer("bogus", (2,))
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        initializer(HeUniform(mode="fan"), (2, 2))
    assert ms.common.initializer.initializer is initializer


# ---- pad_mode ----

def conv_reference(x, w, stride, pads, dilation=1):
    """Cross-correlation of NCHW x with OIHW w, pads = (top, bottom, left, right), groups 1."""
    top, bottom, left, right = pads
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h - (kh - 1) * dilation - 1) // stride + 1
    ow = (wd - (kw - 1) * dilation - 1) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + (kh - 1) * dilation + 1:dilation,
                      j * stride:j * stride + (kw - 1) * dilation + 1:dilation]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y


def same_pads(size, kernel, stride, dilation=1):
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


@pytest.mark.parametrize("h, w, kernel, stride, dilation", [
    (7, 8, 3, 2, 1),   # rows padded 1 + 1, columns 0 + 1
    (6, 6, 2, 1, 1),   # an even kernel: the odd cell at the bottom and right
    (9, 5, 3, 1, 2),   # dilation
    (5, 5, 1, 3, 1),   # no padding needed
])
def test_conv2d_same_is_mindspores_default(h, w, kernel, stride, dilation):
    conv = ms.nn.Conv2d(2, 3, kernel, stride=stride, dilation=dilation, seed=5)
    assert list(conv.parameters_dict()) == ["weight"]  # has_bias=False by default
    x = np.random.default_rng(1).standard_normal((2, 2, h, w)).astype(np.float32)
    y = conv(ms.Tensor(x)).asnumpy()
    assert y.shape == (2, 3, -(-h // stride), -(-w // stride))
    pads = same_pads(h, kernel, stride, dilation) + same_pads(w, kernel, stride, dilation)
    want = conv_reference(x, param(conv, "weight"), stride, pads, dilation)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_conv2d_valid_and_pad():
    x = np.random.default_rng(2).standard_normal((1, 2, 7, 7)).astype(np.float32)
    valid = ms.nn.Conv2d(2, 3, 3, stride=2, pad_mode="valid", has_bias=True, seed=1)
    want = conv_reference(x, param(valid, "weight"), 2, (0, 0, 0, 0))
    want += param(valid, "bias")[None, :, None, None]
    np.testing.assert_allclose(valid(ms.Tensor(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)
    pad = ms.nn.Conv2d(2, 3, 3, pad_mode="pad", padding=2, seed=1)
    want = conv_reference(x, param(pad, "weight"), 1, (2, 2, 2, 2))
    assert pad(ms.Tensor(x)).shape == (1, 3, 9, 9)
    np.testing.assert_allclose(pad(ms.Tensor(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layer", [ms.nn.Conv2d, ms.nn.MaxPool2d])
def test_pad_mode_errors(layer):
    args = (1, 1, 3) if layer is ms.nn.Conv2d else (3,)
    name = layer.__name__
    for mode in ("same", "valid"):
        with pytest.raises(ValueError, match=f"{name}: padding must be 0 when pad_mode is not "
                                             f"'pad', got padding 1 with pad_mode '{mode}'"):
            layer(*args, pad_mode=mode, padding=1)
    with pytest.raises(ValueError, match=f"{name}: pad_mode must be one of 'same', 'valid', "
                                         f"'pad', got 'full'"):
        layer(*args, pad_mode="full")
    layer(*args, pad_mode="PAD", padding=1)  # case-insensitive


def pool_reference(x, kernel, stride, pads):
    top, bottom, left, right = pads
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=-np.inf)
    oh = (x.shape[2] - kernel) // stride + 1
    ow = (x.shape[3] - kernel) // stride + 1
    rows = [[x[:, :, i * stride:i * stride + kernel, j * stride:j * stride + kernel]
             .max(axis=(2, 3)) for j in range(ow)] for i in range(oh)]
    return np.array(rows).transpose(2, 3, 0, 1)


@pytest.mark.parametrize("mode, padding, pads", [
    ("valid", 0, None), ("same", 0, "same"), ("pad", 1, (1, 1, 1, 1))])
def test_max_pool_pad_modes(mode, padding, pads):
    x = np.random.default_rng(3).standard_normal((1, 2, 7, 8)).astype(np.float32)
    pool = ms.nn.MaxPool2d(3, 2, pad_mode=mode, padding=padding)
    if pads == "same":
        pads = same_pads(7, 3, 2) + same_pads(8, 3, 2)
    want = pool_reference(x, 3, 2, pads or (0, 0, 0, 0))
    y = pool(ms.Tensor(x)).asnumpy()
    if mode == "same":
        assert y.shape == (1, 2, 4, 4)
    np.testing.assert_array_equal(y, want)
    assert ms.nn.MaxPool2d(2, 2)(ms.Tensor(x)).shape == (1, 2, 3, 4)  # 'valid' by default


class SameNet(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = ms.nn.Conv2d(3, 4, 3, stride=2, weight_init="he_normal", seed=2)
        self.pool = ms.nn.MaxPool2d(2, 2, pad_mode="same")

    def construct(self, x):
        return self.pool(ms.ops.relu(self.conv(x)))


def test_same_padding_follows_the_input_size_in_graph_mode():
    inputs = [np.random.default_rng(s).standard_normal((1, 3, h, h)).astype(np.float32)
              for s, h in ((0, 9), (1, 8))]
    eager = [SameNet()(ms.Tensor(x)).asnumpy() for x in inputs]
    ms.set_context(mode=ms.GRAPH_MODE)
    net = SameNet()
    for x, want, size in zip(inputs, eager, (3, 2)):  # 9 -> 5 -> 3 and 8 -> 4 -> 2
        y = net(ms.Tensor(x)).asnumpy()
        assert net.compile_report()["compiled"]  # a new input size: traced again, padding anew
        assert y.shape == want.shape == (1, 4, size, size)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
