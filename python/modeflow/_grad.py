"""MindSpore's gradient API: ``ms.grad``, ``ms.value_and_grad``, ``ops.GradOperation``,
``ParameterTuple`` and ``Cell.trainable_params``.

A Cell differentiated with respect to its first input and weights (its other inputs, if any,
being tensors) is one engine GradFunction: in GRAPH_MODE the traced graph is differentiated and
compiled, forward and backward as one graph (dumped, fused and cached like any other); in
PYNATIVE_MODE it runs op by op on a tape. Any other function (a gradient of a later input,
``has_aux``) is recorded on a tape in either mode. The return structures are MindSpore's.
"""

from ._modeflow import Parameter, Tensor, float32, float64
from ._modeflow import autodiff as _autodiff
from ._modeflow.nn import Cell


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore's ParameterTuple), for ``weights=``."""

    def __new__(cls, iterable=()):
        items = tuple(iterable)
        for item in items:
            if not isinstance(item, Tensor):
                raise TypeError(f"ParameterTuple takes Parameters, got {type(item).__name__}")
        return super().__new__(cls, items)


def _positions(grad_position, count):
    if grad_position is None:
        return None
    single = isinstance(grad_position, int) and not isinstance(grad_position, bool)
    positions = (grad_position,) if single else tuple(grad_position)
    if not positions:
        raise ValueError("grad_position must not be an empty tuple; use None for no input")
    for p in positions:
        if not isinstance(p, int) or isinstance(p, bool):
            raise TypeError(f"grad_position must be an int or a tuple of ints, got {p!r}")
        if p < 0 or p >= count:
            raise IndexError(f"Position index {p} is exceed input size.")
    return positions


def _weights(weights):
    """(list of parameter tensors, whether a single Parameter was given)."""
    if weights is None:
        return [], False
    if isinstance(weights, Tensor):
        return [weights], True
    items = list(weights)
    for w in items:
        if not isinstance(w, Tensor):
            raise TypeError(f"weights must be Parameters, got {type(w).__name__}")
    return items, False


def _is_floating(tensor):
    return tensor.dtype in (float32, float64)


def _as_tensor(value, what):
    if isinstance(value, Tensor):
        return value
    raise TypeError(f"{what} must be a Tensor to be differentiated, got {type(value).__name__}")


def _structure(input_grads, weight_grads, positions, single_position, single_weight):
    inputs = None
    if positions is not None:
        inputs = input_grads[0] if single_position and input_grads else tuple(input_grads)
    weights = None
    if weight_grads is not None:
        weights = weight_grads[0] if single_weight else tuple(weight_grads)
    if inputs is not None and weights is not None:
        return inputs, weights
    return inputs if weights is None else weights


def _differentiate(fn, args, positions, weights, has_aux, sens=None, held=None):
    """(forward output as fn returned it, input grads, weight grads). `held` keeps a cell's
    GradFunction between calls: it holds the compiled graph in GRAPH mode."""
    if (isinstance(fn, Cell) and not has_aux and positions in (None, (0,)) and args
            and all(isinstance(a, Tensor) for a in args[1:])):
        key = (positions is not None, tuple(id(w) for w in weights), sens is not None)
        gradient = held.get(key) if held is not None else None
        if gradient is None:
            gradient = _autodiff.GradFunction(fn, positions is not None, weights, sens is not None)
            if held is not None:
                held.clear()
                held[key] = gradient
        value, input_grad, weight_grads = gradient(args, sens)
        return value, ([input_grad] if positions is not None else []), list(weight_grads)
    for p in positions or ():
        arg = _as_tensor(args[p], f"input {p}")
        if not _is_floating(arg):
            raise TypeError(f"The gradient of input {p} is asked for, but it is of type "
                            f"{arg.dtype}: only floating-point inputs have gradients.")
    with _autodiff.Tape() as tape:
        wrt = []
        for p in positions or ():
            tape.watch(args[p], f"input {p}")
            wrt.append(args[p])
        for i, w in enumerate(weights):
            tape.watch(w, getattr(w, "name", "") or f"weight {i}")
            wrt.append(w)
        out = fn(*args)
        if isinstance(out, tuple):
            if not out:
                raise ValueError("the function returned an empty tuple: nothing to differentiate")
            if has_aux:
                first = _as_tensor(out[0], "the first output")
            else:
                # MindSpore differentiates every output, each with an all-ones sensitivity.
                first = None
                for item in out:
                    term = _autodiff_sum(_as_tensor(item, "an output"))
                    first = term if first is None else first + term
        else:
            if has_aux:
                raise ValueError("has_aux=True needs a function returning more than one output")
            first = _as_tensor(out, "the output")
        grads = tape.gradients(first, sens, wrt)
    count = len(positions or ())
    return out, grads[:count], grads[count:]


def _scalars(args, positions):
    """Python int and float arguments under grad_for_scalar: tensors with gradients (True), or
    constants whose positions are dropped from the gradients (False, MindSpore's default)."""
    numbers = {i for i, a in enumerate(args) if isinstance(a, (int, float)) and
               not isinstance(a, bool)}
    if not numbers:
        return args, positions
    if _autodiff.grad_for_scalar():
        return tuple(Tensor(float(a), float32) if i in numbers else a
                     for i, a in enumerate(args)), positions
    if positions is not None:
        positions = tuple(p for p in positions if p not in numbers)
    return args, positions


def _autodiff_sum(tensor):
    from . import ops
    return ops.reduce_sum(tensor)


def _make(fn, grad_position, weights, has_aux, with_value):
    weight_list, single_weight = _weights(weights)
    if grad_position is None and not weight_list:
        raise ValueError("grad_position is None and weights is None: nothing to differentiate")
    single_position = isinstance(grad_position, int) and not isinstance(grad_position, bool)
    held = {}

    def gradient(*args):
        positions = _positions(grad_position, len(args))
        args, positions = _scalars(args, positions)
        out, input_grads, weight_grads = _differentiate(fn, args, positions, weight_list, has_aux,
                                                        held=held)
        grads = _structure(input_grads, weight_grads if weight_list else None, positions,
                           single_position, single_weight)
        if with_value:
            return out, grads
        if has_aux:
            return grads, tuple(out[1:])
        return grads

    gradient.__name__ = ("value_and_grad_" if with_value else "grad_") + getattr(
        fn, "__name__", type(fn).__name__)
    return gradient


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """MindSpore's ms.grad: a function returning the gradients of fn's output with respect to
    the inputs at ``grad_position`` (an int: one tensor; a tuple: a tuple; None: no input) and to
    ``weights`` (then ``(input_grads, weight_grads)``, or the weight grads alone when
    grad_position is None). A non-scalar output is differentiated with an all-ones sensitivity.
    ``has_aux``: fn returns several outputs, the first is differentiated and the call returns
    ``(grads, aux)``."""
    if return_ids:
        raise ValueError("return_ids=True is not supported by modeflow")
    return _make(fn, grad_position, weights, has_aux, with_value=False)


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """MindSpore's ms.value_and_grad: as ``grad``, returning ``(value, grads)``; with has_aux the
    value is every output."""
    if return_ids:
        raise ValueError("return_ids=True is not supported by modeflow")
    return _make(fn, grad_position, weights, has_aux, with_value=True)


class GradOperation:
    """MindSpore's ops.GradOperation(get_all=False, get_by_list=False, sens_param=False):
    ``GradOperation(...)(fn, weights)`` is a function of fn's inputs (and, with sens_param, the
    sensitivity last) returning the first input's gradient, every input's (get_all), the weights'
    (get_by_list) or both as ``(inputs, weights)``."""

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        self.get_all = bool(get_all)
        self.get_by_list = bool(get_by_list)
        self.sens_param = bool(sens_param)

    def __call__(self, fn, weights=None):
        weight_list, _ = _weights(weights)
        if self.get_by_list and weights is None:
            raise ValueError("GradOperation(get_by_list=True) needs weights: grad_op(fn, weights)")
        held = {}

        def gradient(*args):
            sens = None
            if self.sens_param:
                if not args:
                    raise TypeError("GradOperation(sens_param=True) takes the sensitivity as the "
                                    "last argument")
                args, sens = args[:-1], args[-1]
            if self.get_all:
                positions = tuple(range(len(args)))
            elif self.get_by_list:
                positions = None
            else:
                positions = _positions(0, len(args))
            _, input_grads, weight_grads = _differentiate(
                fn, args, positions, weight_list if self.get_by_list else [], False, sens, held)
            if self.get_all and self.get_by_list:
                return tuple(input_grads), tuple(weight_grads)
            if self.get_by_list:
                return tuple(weight_grads)
            if self.get_all:
                return tuple(input_grads)
            return input_grads[0]

        return gradient


def trainable_params(self, recurse=True):
    """The cell's parameters as named Parameters ('fc1.weight'), those with requires_grad."""
    return [p for p in self.get_parameters() if p.requires_grad]

