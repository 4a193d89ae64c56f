"""Every op of the engine's registry as a function, made when modeflow is imported: an op added in
C++ (runtime/ops/) appears here with no Python code. Leading tensor arguments are the op's inputs
(numbers and numpy arrays are converted); attributes are keywords: ``ops.softmax(x, axis=-1)``,
``ops.reduce_sum(x, axes=[1], keep_dims=True)``. ``help(ms.ops.NAME)`` shows an op's inputs and
attributes. Also ``cond``, ``while_loop`` (control flow that compiles in GRAPH mode) and ``sync``.
"""

from ._modeflow import ops as _registry

registered = list(_registry.registered)
globals().update({name: getattr(_registry, name) for name in registered})
cond = _registry.cond
while_loop = _registry.while_loop
sync = _registry.sync


def gelu(x, approximate="none"):
    """MindSpore's ops.gelu: approximate="none" is the registry's gelu_erf, "tanh" gelu_tanh."""
    if approximate == "none":
        return gelu_erf(x)  # noqa: F821 - generated above
    if approximate == "tanh":
        return gelu_tanh(x)  # noqa: F821
    raise ValueError(f"For 'gelu', approximate must be 'none' or 'tanh', but got {approximate!r}.")


__all__ = registered + ["cond", "while_loop", "sync", "gelu"]
