"""Cells: ``Cell`` to subclass in Python, and the engine's layers."""

from ._modeflow.nn import (  # noqa: F401
    GELU,
    BatchNorm2d,
    Dropout,
    Cell,
    Conv2d,
    Dense,
    Flatten,
    LayerNorm,
    MaxPool2d,
    MultiHeadAttention,
    ReLU,
    Softmax,
    TransformerEncoderLayer,
)


class SequentialCell(Cell):
    """Runs its cells in order; they are named "0", "1", ... as in MindSpore (and the C++ API)."""

    def __init__(self, *args):
        super().__init__()
        cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        object.__setattr__(self, "_cells", [])
        for cell in cells:
            self.append(cell)

    def append(self, cell):
        setattr(self, str(len(self._cells)), cell)
        self._cells.append(cell)

    def __len__(self):
        return len(self._cells)

    def __getitem__(self, index):
        return self._cells[index]

    def construct(self, x):
        for cell in self._cells:
            x = cell(x)
        return x


# ---- Training: losses, optimizers and the training cells (engine/train/, bound in bind_train.cc).

from ._modeflow.nn import (  # noqa: E402,F401
    Adam,
    AdamWeightDecay,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    L1Loss,
    LossBase,
    Momentum,
    MSELoss,
    Optimizer,
    SGD,
    SoftmaxCrossEntropyWithLogits,
    _DistributedGradReducer,
    _TrainOneStepCell,
    _WithLossCell,
    cosine_decay_lr,
    exponential_decay_lr,
    piecewise_constant_lr,
)


class _FunctionLoss(LossBase):
    """A plain callable ``fn(logits, labels)`` as a loss."""

    def __init__(self, fn):
        super().__init__()
        self._fn = fn

    def construct(self, logits, labels):
        return self._fn(logits, labels)


def _as_loss(loss_fn):
    if isinstance(loss_fn, LossBase):
        return loss_fn
    if not callable(loss_fn):
        raise TypeError(
            "loss_fn must be a loss (nn.LossBase) or a callable of (logits, labels), got "
            + type(loss_fn).__name__
        )
    return _FunctionLoss(loss_fn)


def WithLossCell(backbone, loss_fn):  # noqa: N802 (MindSpore's class name)
    """MindSpore's nn.WithLossCell: ``loss_fn(backbone(data), label)`` as one cell, called with
    ``(data, label)``; GRAPH mode compiles forward and loss as one graph."""
    if not isinstance(backbone, Cell):
        raise TypeError("WithLossCell: backbone must be a Cell, got " + type(backbone).__name__)
    return _WithLossCell(backbone, _as_loss(loss_fn))


class TrainOneStepCell:
    """MindSpore's nn.TrainOneStepCell(network, optimizer, sens=1.0): each call
    ``train_net(data, label)`` computes the loss, its gradient with respect to the optimizer's
    parameters (one compiled graph, forward and backward, in GRAPH mode) and lets the optimizer
    update them in place; it returns the loss. A network that is not a WithLossCell (a Cell or
    function of several inputs returning the loss) is differentiated on the tape."""

    def __init__(self, network, optimizer, sens=1.0):
        if not isinstance(optimizer, Optimizer):
            raise TypeError("TrainOneStepCell: optimizer must be an nn optimizer, got "
                            + type(optimizer).__name__)
        if isinstance(sens, bool) or not isinstance(sens, (int, float)):
            raise TypeError("TrainOneStepCell: sens must be a number, got " + type(sens).__name__)
        self.network = network
        self.optimizer = optimizer
        self.sens = float(sens)
        self._step = None
        if isinstance(network, _WithLossCell):
            self._step = _TrainOneStepCell(network, optimizer, self.sens)
        else:
            from ._grad import value_and_grad

            self._grad = value_and_grad(network, None, optimizer.parameters)

    def set_train(self, mode=True):
        if hasattr(self.network, "set_train"):
            self.network.set_train(mode)
        return self

    def __call__(self, *inputs):
        if self._step is not None:
            if len(inputs) != 2:
                raise TypeError("TrainOneStepCell over a WithLossCell takes (data, label), got "
                                f"{len(inputs)} arguments")
            return self._step(*inputs)
        reducer = self._data_parallel_reducer()
        loss, grads = self._grad(*inputs)
        if self.sens != 1.0:
            grads = [g * self.sens for g in grads]
        if reducer is not None:
            grads = reducer(list(grads))
        self.optimizer(list(grads))
        return loss

    def _data_parallel_reducer(self):
        from ._modeflow import get_auto_parallel_context

        if get_auto_parallel_context("parallel_mode").lower() != "data_parallel":
            return None
        if getattr(self, "_reducer", None) is None:
            self._reducer = DistributedGradReducer(self.optimizer.parameters)
            self._reducer._broadcast_parameters()
        return self._reducer


class DistributedGradReducer:
    """MindSpore's nn.DistributedGradReducer(parameters, mean=None, degree=None): call it with the
    gradients of ``parameters`` (in order) to get them summed over the workers of the group, or
    averaged with mean=True (None: the auto-parallel context's gradients_mean). Gradients travel
    in buckets (all_reduce_fusion_config). docs/distributed.md."""

    def __init__(self, parameters, mean=None, degree=None, fusion_type=1, group=None):
        from ._modeflow import get_auto_parallel_context
        from .communication import get_group_size

        if mean is None:
            mean = bool(get_auto_parallel_context("gradients_mean"))
        if degree is not None and degree != get_group_size():
            raise ValueError(f"For 'DistributedGradReducer', degree={degree} but the group has "
                             f"{get_group_size()} workers")
        self._impl = _DistributedGradReducer(list(parameters), bool(mean))
        self.mean = bool(mean)

    def __call__(self, grads):
        return tuple(self._impl(list(grads)))

    def _broadcast_parameters(self):
        self._impl._broadcast_parameters()
