"""MindSpore's Tensor methods that scripts reach for (``loss.sum()``, ``x.mean(axis=1)``,
``logits.argmax(axis=1)``, ``x.squeeze()``, ``w.T``), each made of registry ops, so GRAPH mode
traces them as it traces ``ops`` calls. Arguments follow MindSpore's Tensor methods (which follow
numpy's): ``axis`` is None (every axis), an int or a tuple of ints."""

from . import ops
from ._modeflow import Tensor


def _shown(value, limit=40):
    """A caller's value as an error echoes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _axes(axis, method):
    if axis is None:
        return []
    if isinstance(axis, bool) or not isinstance(axis, (int, tuple, list)):
        raise TypeError(f"For 'Tensor.{method}', axis must be None, an int or a tuple of ints, "
                        f"but got {type(axis).__name__}")
    axes = [axis] if isinstance(axis, int) else list(axis)
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
        raise TypeError(f"For 'Tensor.{method}', every axis must be an int, got {_shown(axis)}")
    return axes


def _reduced(op, x, axis, keepdims, method):
    axes = _axes(axis, method)
    if isinstance(axis, (tuple, list)) and not axes:
        return x  # an empty tuple of axes reduces nothing, as numpy's
    return op(x, axes=axes, keep_dims=bool(keepdims))


def _sum(self, axis=None, dtype=None, keepdims=False, initial=None):
    x = self if dtype is None else self.astype(dtype)
    out = _reduced(ops.reduce_sum, x, axis, keepdims, "sum")
    return out if initial is None else out + initial


def _mean(self, axis=None, keep_dims=False):
    return _reduced(ops.reduce_mean, self, axis, keep_dims, "mean")


def _extreme(reduce, arg, combine, name):
    def method(self, axis=None, keepdims=False, *, initial=None, where=None,
               return_indices=False):
        if where is not None:
            raise NotImplementedError(f"Tensor.{name}: where= is not supported; select the "
                                      "elements first (ops.select)")
        values = _reduced(reduce, self, axis, keepdims, name)
        if initial is not None:
            values = combine(values, initial)
        if not return_indices:
            return values
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise ValueError(f"Tensor.{name}: return_indices needs one int axis, got "
                             f"{_shown(axis)}")
        return values, arg(self, axis=axis, keep_dims=bool(keepdims))

    method.__name__ = name
    method.__doc__ = f"MindSpore's Tensor.{name}(axis=None, keepdims=False, *, initial=None)."
    return method


def _arg(op, name):
    def method(self, axis=None, keepdims=False):
        if axis is None:
            flat = self.reshape((self.size,))
            out = op(flat, axis=0)
            return out.reshape((1,) * self.ndim) if keepdims else out
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"For 'Tensor.{name}', axis must be None or an int, but got "
                            f"{type(axis).__name__}")
        return op(self, axis=axis, keep_dims=bool(keepdims))

    method.__name__ = name
    method.__doc__ = f"MindSpore's Tensor.{name}(axis=None, keepdims=False): Int64 positions."
    return method


def _squeeze(self, axis=None):
    return ops.squeeze(self, axes=_axes(axis, "squeeze"))


def _expand_dims(self, axis):
    return ops.expand_dims(self, axis=axis)


def _flatten(self, order="C", *, start_dim=0, end_dim=-1):
    if order != "C":
        raise ValueError(f"Tensor.flatten: order must be 'C' (row-major), got {_shown(order)}")
    shape = tuple(self.shape)
    if not shape:
        return self.reshape((1,))
    for name, dim in (("start_dim", start_dim), ("end_dim", end_dim)):
        if isinstance(dim, bool) or not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
            raise ValueError(f"Tensor.flatten: {name} {_shown(dim)} is out of range for rank "
                             f"{len(shape)} (expected {-len(shape)} <= {name} < {len(shape)})")
    start, end = start_dim % len(shape), end_dim % len(shape)
    if start > end:
        raise ValueError(f"Tensor.flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    middle = 1
    for d in shape[start:end + 1]:
        middle *= d
    return self.reshape(shape[:start] + (middle,) + shape[end + 1:])


def _view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return self.reshape(shape)


def _transposed(self):
    return self.transpose(tuple(reversed(range(self.ndim))))


def _unary(op, name):
    def method(self):
        return op(self)

    method.__name__ = name
    method.__doc__ = f"MindSpore's Tensor.{name}(): ops.{name}(x)."
    return method


def install():
    Tensor.sum = _sum
    Tensor.mean = _mean
    Tensor.max = _extreme(ops.reduce_max, ops.argmax, ops.maximum, "max")
    Tensor.min = _extreme(ops.reduce_min, ops.argmin, ops.minimum, "min")
    Tensor.argmax = _arg(ops.argmax, "argmax")
    Tensor.argmin = _arg(ops.argmin, "argmin")
    Tensor.squeeze = _squeeze
    Tensor.expand_dims = _expand_dims
    Tensor.flatten = _flatten
    Tensor.view = _view
    Tensor.T = property(_transposed)
    Tensor.matmul = lambda self, other: ops.matmul(self, other)
    Tensor.clip = lambda self, xmin=None, xmax=None: ops.clip(self, xmin, xmax)
    Tensor.pow = lambda self, power: ops.pow(self, power)
    for name in ("abs", "exp", "log", "sqrt", "square", "sigmoid", "tanh", "neg", "floor", "ceil",
                 "round", "sin", "cos", "sign"):
        setattr(Tensor, name, _unary(getattr(ops, name), name))
