"""Dynamic input declarations: ``Tensor(shape=[None, 784], dtype=ms.float32)`` and
``Cell.set_inputs``, as in MindSpore. A dimension given as None (or -1) is dynamic; a string names
it (a symbol two inputs may share). The engine checks every call against the declaration and, in
GRAPH mode and jit, compiles once for every size it allows (docs/dynamic-shapes.md)."""

from . import _modeflow


class DynamicTensor:
    """What ``Tensor(shape=[None, 784], dtype=ms.float32)`` makes: a declaration with no data, for
    ``Cell.set_inputs``. ``shape`` shows a dynamic dimension as -1, as MindSpore does."""

    __slots__ = ("_dims", "dtype")

    def __init__(self, shape, dtype=None):
        dims = []
        for d in shape:
            if d is None or (isinstance(d, int) and not isinstance(d, bool) and d == -1):
                dims.append((-1, ""))
            elif isinstance(d, str):
                dims.append((-1, d))
            elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
                dims.append((d, ""))
            else:
                raise ValueError(
                    "Tensor(shape=...): a dimension is a size >= 0, None or -1 (dynamic), or a "
                    "symbol name; got %r" % (d,)
                )
        self._dims = dims
        self.dtype = _modeflow.float32 if dtype is None else dtype

    @property
    def shape(self):
        return tuple(size for size, _ in self._dims)

    @property
    def ndim(self):
        return len(self._dims)

    def __repr__(self):
        text = ", ".join(
            str(size) if size >= 0 else (symbol or "None") for size, symbol in self._dims
        )
        return "Tensor(shape=[%s], dtype=%s) (dynamic declaration, no data)" % (text, self.dtype)

    def __getattr__(self, name):
        raise TypeError(
            "a Tensor declared with dynamic dimensions holds no data (it has no '%s'): give it "
            "to Cell.set_inputs, and call the cell with real tensors" % name
        )


_tensor_new = _modeflow.Tensor.__new__


def tensor_new(cls, *args, **kwargs):
    """Tensor(shape=[None, ...], dtype=...) without data is a DynamicTensor; anything else is a
    Tensor, made by the engine's constructor."""
    shape = kwargs.get("shape")
    if (
        shape is not None
        and not args
        and kwargs.get("input_data") is None
        and not isinstance(shape, (int, str))
        and any(d is None or isinstance(d, str) or d == -1 for d in shape)
    ):
        return DynamicTensor(shape, kwargs.get("dtype"))
    return _tensor_new(cls)


def set_inputs(self, *inputs):
    """Declares the cell's inputs, in construct's order (MindSpore's Cell.set_inputs): a Tensor
    fixes every dimension, ``Tensor(shape=[None, 784], dtype=...)`` leaves None dimensions
    dynamic, and a dimension named by a string is one size across all the inputs."""
    if not inputs:
        raise TypeError("%s.set_inputs declares one or more inputs, got none" % type(self).__name__)
    declarations = []
    for index, declared in enumerate(inputs):
        if isinstance(declared, DynamicTensor):
            declarations.append((declared._dims, declared.dtype))
        elif isinstance(declared, _modeflow.Tensor):
            declarations.append(([(d, "") for d in declared.shape], declared.dtype))
        else:
            raise TypeError(
                "%s.set_inputs takes Tensors or Tensor(shape=[None, ...], dtype=...), got %s for "
                "input %d" % (type(self).__name__, type(declared).__name__, index)
            )
    self._declare_inputs(declarations)


def get_inputs(self):
    """The declarations set_inputs made, as a tuple of DynamicTensors, or None."""
    declared = self._declared_inputs()
    if not declared:
        return None
    return tuple(
        DynamicTensor([symbol if size < 0 and symbol else (None if size < 0 else size)
                       for size, symbol in dims], dtype)
        for dims, dtype in declared
    )
