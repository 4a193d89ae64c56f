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


_registry_clip = clip  # noqa: F821 - generated above: clip(x, lo, hi), tensors or numbers


def clip(input, min=None, max=None):  # noqa: A002 - MindSpore's argument names
    """clip(input, min=None, max=None): MindSpore's ops.clip (also ops.clamp). Bounds are numbers
    or tensors; a bound left None is not applied; at least one must be given. With both, the
    registry's clip op (one pass); with one, maximum or minimum."""
    if min is None and max is None:
        raise ValueError("For 'clip', at least one of 'min' and 'max' must not be None.")
    if max is None:
        return maximum(input, min)  # noqa: F821
    if min is None:
        return minimum(input, max)  # noqa: F821
    return _registry_clip(input, min, max)


clamp = clip

__all__ = registered + ["cond", "while_loop", "sync", "gelu", "clamp"]
