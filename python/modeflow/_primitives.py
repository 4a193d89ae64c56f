"""MindSpore's operator classes (``ops.ReduceSum(keep_dims=True)(x, 1)``, ``ops.MatMul(
transpose_b=True)``, ``ops.Concat(axis=1)((a, b))``, ...) and the functional names of MindSpore 2.x
that differ from the registry's (``ops.sum``, ``ops.mean``, ``ops.cat``, ``ops.stack``,
``ops.unsqueeze``, ``ops.ones_like``, ``ops.zeros_like``, ``ops.where``). Each is made of registry
ops, so a GRAPH-mode ``construct`` traces it; attributes are given when the operator is built, the
inputs when it is called, as in MindSpore."""

from . import ops
from ._tensor_methods import _shown
from ._modeflow import Tensor, int32, int64


def _axes(axis, name):
    if isinstance(axis, bool) or not isinstance(axis, (int, tuple, list)):
        raise TypeError(f"For '{name}', the 'axis' must be an int or a tuple of ints, but got "
                        f"{type(axis).__name__}")
    return [axis] if isinstance(axis, int) else list(axis)


def _tensors(values, name):
    if not isinstance(values, (tuple, list)) or not values:
        raise TypeError(f"For '{name}', the input must be a non-empty tuple or list of Tensors")
    return list(values)


class Primitive:
    """MindSpore's ops.Primitive: built with its attributes, called with its inputs."""

    def __repr__(self):
        attrs = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({attrs})"


def _reduction(name, op):
    class Reduce(Primitive):
        def __init__(self, keep_dims=False):
            if not isinstance(keep_dims, bool):
                raise TypeError(f"For '{name}', the 'keep_dims' must be a bool, but got "
                                f"{type(keep_dims).__name__}")
            self.keep_dims = keep_dims

        def __call__(self, x, axis=()):
            return op(x, axes=_axes(axis, name), keep_dims=self.keep_dims)

    Reduce.__name__ = Reduce.__qualname__ = name
    Reduce.__doc__ = (f"MindSpore's ops.{name}(keep_dims=False)(x, axis=()): an empty axis "
                      "reduces every axis.")
    return Reduce


def _pointwise(name, op):
    class Pointwise(Primitive):
        def __call__(self, *inputs):
            return op(*inputs)

    Pointwise.__name__ = Pointwise.__qualname__ = name
    Pointwise.__doc__ = f"MindSpore's ops.{name}()(...): ops.{op.__name__}."
    return Pointwise


class MatMul(Primitive):
    """MindSpore's ops.MatMul(transpose_a=False, transpose_b=False)(x, y)."""

    def __init__(self, transpose_a=False, transpose_b=False):
        self.transpose_a, self.transpose_b = bool(transpose_a), bool(transpose_b)

    def __call__(self, x, y):
        return ops.matmul(x, y, transpose_a=self.transpose_a, transpose_b=self.transpose_b)


class BatchMatMul(MatMul):
    """MindSpore's ops.BatchMatMul(transpose_a=False, transpose_b=False)(x, y)."""

    def __call__(self, x, y):
        return ops.batch_matmul(x, y, transpose_a=self.transpose_a, transpose_b=self.transpose_b)


class Softmax(Primitive):
    """MindSpore's ops.Softmax(axis=-1)(x); a one-element tuple axis is taken too."""

    def __init__(self, axis=-1):
        axes = _axes(axis, type(self).__name__)
        if len(axes) != 1:
            raise ValueError(f"For '{type(self).__name__}', softmax over several axes is not "
                             f"supported, got axis={_shown(axis)}")
        self.axis = axes[0]

    def __call__(self, x):
        return ops.softmax(x, axis=self.axis)


class LogSoftmax(Softmax):
    """MindSpore's ops.LogSoftmax(axis=-1)(x)."""

    def __call__(self, x):
        return ops.log_softmax(x, axis=self.axis)


class Reshape(Primitive):
    """MindSpore's ops.Reshape()(x, shape)."""

    def __call__(self, x, shape):
        return ops.reshape(x, shape=tuple(shape))


class Transpose(Primitive):
    """MindSpore's ops.Transpose()(x, perm)."""

    def __call__(self, x, perm):
        return ops.transpose(x, perm=tuple(perm))


class Cast(Primitive):
    """MindSpore's ops.Cast()(x, dtype)."""

    def __call__(self, x, dtype):
        return ops.cast(x, dtype=dtype)


class ExpandDims(Primitive):
    """MindSpore's ops.ExpandDims()(x, axis)."""

    def __call__(self, x, axis):
        return ops.expand_dims(x, axis=axis)


class Squeeze(Primitive):
    """MindSpore's ops.Squeeze(axis=())(x): every size-1 axis when axis is empty."""

    def __init__(self, axis=()):
        self.axis = _axes(axis, "Squeeze")

    def __call__(self, x):
        return ops.squeeze(x, axes=self.axis)


class Concat(Primitive):
    """MindSpore's ops.Concat(axis=0)(tensors)."""

    def __init__(self, axis=0):
        self.axis = axis

    def __call__(self, tensors):
        return ops.concat(_tensors(tensors, "Concat"), axis=self.axis)


class Stack(Primitive):
    """MindSpore's ops.Stack(axis=0)(tensors): a new axis, then one concat."""

    def __init__(self, axis=0):
        self.axis = axis

    def __call__(self, tensors):
        tensors = _tensors(tensors, "Stack")
        rank = tensors[0].ndim + 1
        if isinstance(self.axis, bool) or not isinstance(self.axis, int) or \
                not -rank <= self.axis < rank:
            raise ValueError(f"For 'Stack', the 'axis' must be in [{-rank}, {rank}) for inputs of "
                             f"rank {rank - 1}, but got {_shown(self.axis)}")
        axis = self.axis if self.axis >= 0 else self.axis + rank
        return ops.concat([ops.expand_dims(t, axis=axis) for t in tensors], axis=axis)


class Shape(Primitive):
    """MindSpore's ops.Shape()(x): the shape as a tuple of ints."""

    def __call__(self, x):
        return tuple(x.shape)


class Tile(Primitive):
    """MindSpore's ops.Tile()(x, multiples)."""

    def __call__(self, x, multiples):
        return ops.tile(x, multiples=tuple(multiples))


class Gather(Primitive):
    """MindSpore's ops.Gather()(params, indices, axis)."""

    def __call__(self, params, indices, axis):
        return ops.gather(params, indices, axis=axis)


class Argmax(Primitive):
    """MindSpore's ops.Argmax(axis=-1, output_type=mstype.int32)(x)."""

    def __init__(self, axis=-1, output_type=int32):
        if output_type not in (int32, int64):
            raise TypeError(f"For '{type(self).__name__}', the 'output_type' must be int32 or "
                            f"int64, but got {output_type}")
        self.axis, self.output_type = axis, output_type

    def __call__(self, x):
        return ops.cast(ops.argmax(x, axis=self.axis), dtype=self.output_type)


class Argmin(Argmax):
    """MindSpore's ops.Argmin(axis=-1, output_type=mstype.int32)(x)."""

    def __call__(self, x):
        return ops.cast(ops.argmin(x, axis=self.axis), dtype=self.output_type)


class OnesLike(Primitive):
    """MindSpore's ops.OnesLike()(x)."""

    def __call__(self, x):
        return ops.ones(shape=tuple(x.shape), dtype=x.dtype)


class ZerosLike(Primitive):
    """MindSpore's ops.ZerosLike()(x)."""

    def __call__(self, x):
        return ops.zeros(shape=tuple(x.shape), dtype=x.dtype)


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001,A002 - MindSpore's names
    """MindSpore's ops.sum(input, dim=None, keepdim=False, *, dtype=None)."""
    return Tensor.sum(input, axis=dim, dtype=dtype, keepdims=keepdim)


def mean(x, axis=None, keep_dims=False):
    """MindSpore's ops.mean(x, axis=None, keep_dims=False)."""
    return Tensor.mean(x, axis=axis, keep_dims=keep_dims)


def cat(tensors, axis=0):
    """MindSpore's ops.cat(tensors, axis=0)."""
    return Concat(axis)(tensors)


def stack(tensors, axis=0):
    """MindSpore's ops.stack(tensors, axis=0)."""
    return Stack(axis)(tensors)


def unsqueeze(input, dim):  # noqa: A002
    """MindSpore's ops.unsqueeze(input, dim)."""
    return ops.expand_dims(input, axis=dim)


def ones_like(input, dtype=None):  # noqa: A002
    """MindSpore's ops.ones_like(input, dtype=None)."""
    return ops.ones(shape=tuple(input.shape), dtype=dtype or input.dtype)


def zeros_like(input, dtype=None):  # noqa: A002
    """MindSpore's ops.zeros_like(input, dtype=None)."""
    return ops.zeros(shape=tuple(input.shape), dtype=dtype or input.dtype)


def where(condition, x, y):
    """MindSpore's ops.where(condition, x, y): x where condition holds, else y."""
    return ops.select(condition, x, y)


_POINTWISE = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "RealDiv": "div", "Pow": "pow",
    "Maximum": "maximum", "Minimum": "minimum", "Equal": "equal", "Greater": "greater",
    "Less": "less", "Neg": "neg", "Abs": "abs", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Rsqrt": "rsqrt", "Square": "square", "Sigmoid": "sigmoid", "Tanh": "tanh", "ReLU": "relu",
    "Erf": "erf", "Sin": "sin", "Cos": "cos", "Floor": "floor", "Ceil": "ceil", "Sign": "sign",
    "Select": "select", "BiasAdd": "bias_add",
}
_REDUCTIONS = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
               "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod"}
_CLASSES = [MatMul, BatchMatMul, Softmax, LogSoftmax, Reshape, Transpose, Cast, ExpandDims,
            Squeeze, Concat, Stack, Shape, Tile, Gather, Argmax, Argmin, OnesLike, ZerosLike]
_FUNCTIONS = [sum, mean, cat, stack, unsqueeze, ones_like, zeros_like, where]


def install(namespace):
    """Puts the operator classes and functions into ``namespace`` (modeflow.ops)."""
    namespace.Primitive = Primitive
    for name, op in _POINTWISE.items():
        setattr(namespace, name, _pointwise(name, getattr(ops, op)))
    for name, op in _REDUCTIONS.items():
        setattr(namespace, name, _reduction(name, getattr(ops, op)))
    for cls in _CLASSES:
        setattr(namespace, cls.__name__, cls)
    for fn in _FUNCTIONS:
        setattr(namespace, fn.__name__, fn)
