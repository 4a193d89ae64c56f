"""MindSpore's ``mindspore.common.initializer``: initializer objects, ``initializer(init, shape,
dtype)``, and the weight_init / bias_init arguments of nn.Dense and nn.Conv2d.

Values are drawn with numpy from an explicit seed (``initializer(..., seed=0)``; a layer uses its
own ``seed=``), so a network built twice is the same network. fan_in / fan_out are MindSpore's:
for a shape (out, in, *kernel), fan_in = in * prod(kernel) and fan_out = out * prod(kernel).
"""

import math
import numbers

import numpy as np

from .._modeflow import Tensor, float32, float64, int32, int64, bool_

_NUMPY_DTYPES = {float32: np.float32, float64: np.float64, int32: np.int32, int64: np.int64,
                 bool_: np.bool_}


def _fans(shape):
    if len(shape) < 2:
        raise ValueError(f"'fan_in' and 'fan_out' can not be computed for a tensor with fewer than "
                         f"2 dimensions, but got dimensions {len(shape)} (shape {tuple(shape)})")
    receptive = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    """MindSpore's (and PyTorch's) recommended gain of a nonlinearity."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, numbers.Number):
            raise ValueError(f"negative_slope {slope!r} is not a number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity!r}; use one of "
                     f"{', '.join(linear)}, tanh, relu, leaky_relu, selu")


class Initializer:
    """The base of the initializers: ``_sample(shape, rng)`` returns a numpy array of that shape."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs

    def _sample(self, shape, rng):
        raise NotImplementedError(f"{type(self).__name__} draws no values")

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"


class Zero(Initializer):
    """All zeros."""

    def _sample(self, shape, rng):
        return np.zeros(shape)


class One(Initializer):
    """All ones."""

    def _sample(self, shape, rng):
        return np.ones(shape)


class Constant(Initializer):
    """Every element ``value``."""

    def __init__(self, value):
        super().__init__(value=value)
        self.value = value

    def _sample(self, shape, rng):
        return np.full(shape, self.value)


class Normal(Initializer):
    """N(mean, sigma^2)."""

    def __init__(self, sigma=0.01, mean=0.0):
        super().__init__(sigma=sigma, mean=mean)
        self.sigma, self.mean = sigma, mean

    def _sample(self, shape, rng):
        return rng.normal(self.mean, self.sigma, shape)


class Uniform(Initializer):
    """U(-scale, scale)."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _sample(self, shape, rng):
        return rng.uniform(-self.scale, self.scale, shape)


class TruncatedNormal(Initializer):
    """N(mean, sigma^2) restricted to [a, b] (values outside are drawn again), as MindSpore 2.x."""

    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        super().__init__(sigma=sigma, mean=mean, a=a, b=b)
        if not a < b:
            raise ValueError(f"TruncatedNormal needs a < b, got a={a}, b={b}")
        self.sigma, self.mean, self.a, self.b = sigma, mean, a, b

    def _sample(self, shape, rng):
        values = rng.normal(self.mean, self.sigma, shape)
        for _ in range(1000):
            outside = (values < self.a) | (values > self.b)
            if not outside.any():
                return values
            values[outside] = rng.normal(self.mean, self.sigma, int(outside.sum()))
        return np.clip(values, self.a, self.b)


class XavierUniform(Initializer):
    """U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""

    def __init__(self, gain=1):
        super().__init__(gain=gain)
        self.gain = gain

    def _sample(self, shape, rng):
        fan_in, fan_out = _fans(shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, shape)


def _he_std(shape, negative_slope, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', but got {mode!r}")
    fan_in, fan_out = _fans(shape)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, negative_slope) / math.sqrt(fan)


class HeUniform(Initializer):
    """U(-bound, bound), bound = sqrt(3) * gain / sqrt(fan) (Kaiming); HeUniform(math.sqrt(5)) is
    MindSpore's default weight of Dense and Conv2d."""

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        super().__init__(negative_slope=negative_slope, mode=mode, nonlinearity=nonlinearity)
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _sample(self, shape, rng):
        bound = math.sqrt(3.0) * _he_std(shape, self.negative_slope, self.mode, self.nonlinearity)
        return rng.uniform(-bound, bound, shape)


class HeNormal(Initializer):
    """N(0, (gain / sqrt(fan))^2) (Kaiming)."""

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        super().__init__(negative_slope=negative_slope, mode=mode, nonlinearity=nonlinearity)
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _sample(self, shape, rng):
        std = _he_std(shape, self.negative_slope, self.mode, self.nonlinearity)
        return rng.normal(0.0, std, shape)


# The strings MindSpore accepts for an init (case-insensitive), with its aliases.
_ALIASES = {
    "normal": Normal, "uniform": Uniform, "zeros": Zero, "ones": One,
    "xavier_uniform": XavierUniform, "xavieruniform": XavierUniform,
    "he_uniform": HeUniform, "heuniform": HeUniform,
    "he_normal": HeNormal, "henormal": HeNormal,
    "truncatednormal": TruncatedNormal,
}
_ACCEPTED = ("'normal', 'uniform', 'zeros', 'ones', 'xavier_uniform', 'he_uniform', 'he_normal', "
             "'truncatedNormal'")


def _shape_tuple(shape, what):
    if shape is None:
        raise ValueError(f"{what}: a shape is needed unless init is a Tensor or numpy array")
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{what}: shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{what}: shape {shape} has a negative dimension")
    return shape


def _from_init(init, shape, dtype, rng, what):
    """The numpy array (or Tensor) for `init`; shape None only for a Tensor / array."""
    if isinstance(init, Tensor):
        if shape is not None and tuple(init.shape) != tuple(shape):
            raise ValueError(f"{what}: the Tensor's shape {tuple(init.shape)} does not match the "
                             f"shape {tuple(shape)}")
        return init if init.dtype == dtype else init.astype(dtype)
    if isinstance(init, np.ndarray):
        if shape is not None and init.shape != tuple(shape):
            raise ValueError(f"{what}: the array's shape {init.shape} does not match the shape "
                             f"{tuple(shape)}")
        return Tensor(np.ascontiguousarray(init, dtype=_NUMPY_DTYPES[dtype]))
    if isinstance(init, str):
        cls = _ALIASES.get(init.lower())
        if cls is None:
            raise ValueError(f"{what}: unknown initializer {init!r}; accepted (case-insensitive): "
                             f"{_ACCEPTED}, or an Initializer, a number, a Tensor or an array")
        init = cls()
    elif isinstance(init, numbers.Number) and not isinstance(init, bool):
        init = Constant(init)
    if not isinstance(init, Initializer):
        raise TypeError(f"{what}: init must be a str, a number, a Tensor, a numpy array or an "
                        f"Initializer, got {type(init).__name__}")
    shape = _shape_tuple(shape, what)
    values = np.asarray(init._sample(shape, rng)).reshape(shape)
    return Tensor(np.ascontiguousarray(values, dtype=_NUMPY_DTYPES[dtype]))


def _ms_dtype(dtype):
    if dtype in _NUMPY_DTYPES:
        return dtype
    try:
        wanted = np.dtype(dtype)
    except TypeError:
        wanted = None
    for ms_type, np_type in _NUMPY_DTYPES.items():
        if wanted == np.dtype(np_type):
            return ms_type
    raise TypeError(f"initializer: dtype must be ms.float32, ms.float64, ms.int32, ms.int64 or "
                    f"ms.bool_, got {dtype!r}")


def initializer(init, shape=None, dtype=float32, *, seed=0):
    """A Tensor of `shape` and `dtype` made by `init`: an Initializer, one of the strings
    MindSpore accepts (case-insensitive: 'normal', 'uniform', 'zeros', 'ones', 'xavier_uniform',
    'he_uniform', 'he_normal', 'truncatedNormal'), a number (every element), or a Tensor / numpy
    array (returned with `dtype`; its shape must equal `shape` when given). Random values come
    from numpy seeded with `seed` (modeflow's keyword: the same seed gives the same values)."""
    dtype = _ms_dtype(dtype)
    if shape is not None:
        shape = _shape_tuple(shape, "initializer")
    return _from_init(init, shape, dtype, np.random.default_rng(seed), "initializer")


def _parameter_value(init, shape, seed, stream, layer, name):
    """A layer's weight_init / bias_init as the float32 Tensor of its parameter `name` (the binding
    in python/src/bind_nn.cc calls this); drawn from numpy seeded with (seed, stream)."""
    what = f"For '{layer}', {name}_init"
    shape = tuple(shape)
    if isinstance(init, (Tensor, np.ndarray)) and tuple(init.shape) != shape:
        raise ValueError(f"{what}: the given shape {tuple(init.shape)} does not match the "
                         f"{name}'s shape {shape}")
    return _from_init(init, shape, float32, np.random.default_rng([seed, stream]), what)


__all__ = ["Initializer", "Zero", "One", "Constant", "Normal", "Uniform", "TruncatedNormal",
           "XavierUniform", "HeUniform", "HeNormal", "initializer", "calculate_gain"]
