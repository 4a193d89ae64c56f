"""Every op of the engine's registry as a function, made when modeflow is imported: an op added in
C++ (runtime/ops/) appears here with no Python code. Leading tensor arguments are the op's inputs
(numbers and numpy arrays are converted); attributes are keywords: ``ops.softmax(x, axis=-1)``,
``ops.reduce_sum(x, axes=[1], keep_dims=True)``. ``help(ms.ops.NAME)`` shows an op's inputs and
attributes. Also ``cond``, ``while_loop`` (control flow that compiles in GRAPH mode) and ``sync``;
MindSpore's operator classes (``ReduceSum``, ``MatMul``, ...) and functional names (``sum``,
``cat``, ...) are added by _primitives.py.
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


class ReduceOp:
    """The reductions of AllReduce, as MindSpore's ops.ReduceOp."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


def _check_group(group):
    if group is not None and not isinstance(group, str):
        raise TypeError(f"group must be a str, got {type(group).__name__}")


class AllReduce:
    """MindSpore's ops.AllReduce(op=ReduceOp.SUM, group): reduces a tensor over the workers of
    the group (the registry's all_reduce; docs/distributed.md)."""

    def __init__(self, op=ReduceOp.SUM, group=None):
        if op not in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD):
            raise ValueError(f"For 'AllReduce', op must be a ReduceOp, got {op!r}")
        _check_group(group)
        self.op = op

    def __call__(self, x):
        return all_reduce(x, op=self.op)  # noqa: F821 - generated above


class AllGather:
    """MindSpore's ops.AllGather(group): concatenates every worker's tensor along axis 0."""

    def __init__(self, group=None):
        _check_group(group)

    def __call__(self, x):
        from .communication import get_group_size

        return all_gather(x, rank_size=get_group_size())  # noqa: F821


class Broadcast:
    """MindSpore's ops.Broadcast(root_rank, group): every worker gets root_rank's tensors; takes
    and returns a tuple."""

    def __init__(self, root_rank, group=None):
        if isinstance(root_rank, bool) or not isinstance(root_rank, int) or root_rank < 0:
            raise ValueError(f"For 'Broadcast', root_rank must be a non-negative int, got {root_rank!r}")
        _check_group(group)
        self.root_rank = root_rank

    def __call__(self, input_x):
        tensors = input_x if isinstance(input_x, (tuple, list)) else (input_x,)
        return tuple(broadcast(t, root_rank=self.root_rank) for t in tensors)  # noqa: F821


__all__ = registered + ["cond", "while_loop", "sync", "gelu", "clamp", "ReduceOp", "AllReduce",
                        "AllGather", "Broadcast"]
