"""``@ms.jit``: a function or a Cell's construct compiled as a graph (MindSpore 2.x).

On a function, the first call traces it (per input signature and settings) and compiles it with
the context's compile settings or its own ``jit_level``; in PYNATIVE mode the compiled run is
queued like one op and the code around it stays op by op. On ``construct``, every cell of the class
is marked for jit. The function takes one or more tensors and returns one, like a cell; each
argument is an input of the compiled graph, bound at every call.
"""

import functools
import types
import warnings

from ._modeflow import Tensor, TracedValueError
from ._modeflow.nn import Cell

_LEVELS = ("", "O0", "O1", "O2")


class JitConfig:
    """A network's own compile settings (MindSpore's JitConfig); they beat the context's
    jit_config. Only jit_level changes what modeflow does; the other arguments are accepted."""

    def __init__(self, jit_level="", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
                 infer_boost="off", **kwargs):
        if jit_level not in _LEVELS:
            raise ValueError(f"For 'JitConfig', jit_level must be one of 'O0', 'O1', 'O2' or '', "
                             f"but got {jit_level!r}.")
        self.jit_level = jit_level
        self.exc_mode = exc_mode
        self.jit_syntax_level = jit_syntax_level
        self.debug_level = debug_level
        self.infer_boost = infer_boost
        self.options = kwargs


class _FunctionCell(Cell):
    """A jit-compiled function as a cell; its class is named after the function, so graphs and
    dumps are too."""

    def __init__(self, fn, level):
        super().__init__()
        object.__setattr__(self, "_fn", fn)
        self.set_jit_config(level)

    def construct(self, *args):
        return self._fn(*args)


class _JitFunction:
    def __init__(self, fn, level, fullgraph):
        functools.update_wrapper(self, fn)
        self.__modeflow_jit_level__ = level
        self._fn = fn
        self._fullgraph = fullgraph
        self._cell = None
        self._eager = False

    def __get__(self, obj, objtype=None):
        # On a Cell's construct: the cell calls the plain method (the cell itself is compiled).
        if obj is None:
            return self
        return types.MethodType(self._fn, obj)

    def compile_report(self):
        """What the last compiled call did (see Cell.compile_report); None before the first."""
        return None if self._cell is None else self._cell.compile_report()

    def __call__(self, *args):
        if self._eager:
            return self._fn(*args)
        if not args or not all(isinstance(a, Tensor) for a in args):
            # The engine compiles functions of tensors; other values would be baked in.
            kinds = ", ".join(type(a).__name__ for a in args) or "no arguments"
            message = (f"jit: {self._fn.__name__} is called with ({kinds}); modeflow compiles "
                       "functions of tensors only")
            if self._fullgraph:
                raise TypeError(message + " (fullgraph=True)")
            warnings.warn(message + ", so this one runs op by op from now on (fullgraph=True "
                          "makes this an error).", stacklevel=2)
            self._eager = True
            return self._fn(*args)
        if self._cell is None:
            cls = type(self._fn.__name__, (_FunctionCell,), {})
            self._cell = cls(self._fn, self.__modeflow_jit_level__)
        try:
            return self._cell(*args)
        except TracedValueError as error:
            if self._fullgraph:
                raise
            warnings.warn(f"jit: {self._fn.__name__} cannot be traced as one graph ({error}); "
                          "it runs op by op from now on (fullgraph=False). Use fullgraph=True "
                          "to make this an error.", stacklevel=2)
            self._eager = True
            return self._fn(*args)


def jit(function=None, *, jit_level=None, fullgraph=False, jit_config=None, **options):
    """Compiles ``function`` (or, as ``@jit`` on ``construct``, the cells of a class).

    jit_level: "O0", "O1" or "O2" (default: the context's jit_config). fullgraph=True makes Python
    control flow on a traced tensor (or an optimizer's host update) an error; with False
    (MindSpore's default) such a function runs op by op, with a warning.
    """
    level = jit_level if jit_level is not None else (jit_config.jit_level if jit_config else "")
    if level not in _LEVELS:
        raise ValueError(f"For 'jit', jit_level must be one of 'O0', 'O1', 'O2', but got "
                         f"{level!r}.")

    def decorate(fn):
        if not callable(fn):
            raise TypeError(f"jit decorates a function or construct, got {type(fn).__name__}")
        return _JitFunction(fn, level, fullgraph)

    return decorate(function) if function is not None else decorate
