"""MindSpore's ``mindspore.train``: ``Model`` (train, eval, predict over a dataset), the callbacks
``Callback``, ``LossMonitor`` and ``TimeMonitor``, and the metrics ``Accuracy`` and ``Loss``.
``Model.train`` builds ``WithLossCell`` and ``TrainOneStepCell`` (GRAPH mode: one compiled graph
per step's forward and backward, parameters updated in place) and runs the callbacks around each
step and epoch."""

import math
import time

import numpy as np

from .. import nn as _nn

__all__ = ["Accuracy", "Callback", "Loss", "LossMonitor", "Model", "RunContext", "TimeMonitor"]


# ---- Metrics


class Accuracy:
    """The fraction of samples whose largest logit is at the label (labels as indices or one-hot)."""

    def __init__(self, eval_type="classification"):
        self.clear()

    def clear(self):
        self._correct = 0
        self._total = 0

    def update(self, logits, labels):
        y_pred = np.asarray(logits.asnumpy() if hasattr(logits, "asnumpy") else logits)
        y = np.asarray(labels.asnumpy() if hasattr(labels, "asnumpy") else labels)
        if y.ndim == y_pred.ndim:
            y = y.argmax(axis=-1)
        if y_pred.ndim != 2 or y.shape != y_pred.shape[:1]:
            raise ValueError(
                f"Accuracy: logits {y_pred.shape} and labels {y.shape} do not match: logits "
                "must be (batch, classes), labels (batch,)")
        self._correct += int((y_pred.argmax(axis=-1) == y).sum())
        self._total += y.shape[0]

    def eval(self):
        if self._total == 0:
            raise RuntimeError("Accuracy: no samples were evaluated (the dataset is empty)")
        return self._correct / self._total


class Loss:
    """The mean of the losses seen."""

    def __init__(self):
        self.clear()

    def clear(self):
        self._sum = 0.0
        self._count = 0

    def update(self, loss):
        value = np.asarray(loss.asnumpy() if hasattr(loss, "asnumpy") else loss)
        self._sum += float(value.mean())
        self._count += 1

    def eval(self):
        if self._count == 0:
            raise RuntimeError("Loss: no batches were evaluated (the dataset is empty)")
        return self._sum / self._count


_METRICS = {"accuracy": Accuracy, "acc": Accuracy, "loss": Loss}


def _metrics_of(metrics):
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        return dict(metrics)
    if isinstance(metrics, (set, list, tuple)):
        out = {}
        for name in metrics:
            if name not in _METRICS:
                raise ValueError(f"unknown metric {name!r}; modeflow has 'accuracy' and 'loss'")
            out[name] = _METRICS[name]()
        return out
    raise TypeError("metrics must be a set of names or a dict of metric objects")


# ---- Callbacks


class RunContext:
    """What a callback sees: ``original_args()`` are the run's parameters (cur_epoch_num,
    cur_step_num, batch_num, epoch_num, net_outputs, train_network, optimizer)."""

    def __init__(self, cb_params):
        self._params = cb_params
        self._stop = False

    def original_args(self):
        return self._params

    def request_stop(self):
        self._stop = True

    def get_stop_requested(self):
        return self._stop


class _Params(dict):
    __getattr__ = dict.__getitem__

    def __setattr__(self, key, value):
        self[key] = value


class Callback:
    """Override any of on_train_begin/end, on_train_epoch_begin/end, on_train_step_begin/end."""

    def on_train_begin(self, run_context):
        pass

    def on_train_epoch_begin(self, run_context):
        pass

    def on_train_step_begin(self, run_context):
        pass

    def on_train_step_end(self, run_context):
        pass

    def on_train_epoch_end(self, run_context):
        pass

    def on_train_end(self, run_context):
        pass


class LossMonitor(Callback):
    """Prints ``epoch: E step: S, loss is L`` every per_print_times steps; stops the run on a NaN
    or infinite loss, as MindSpore does."""

    def __init__(self, per_print_times=1):
        if isinstance(per_print_times, bool) or not isinstance(per_print_times, int) \
                or per_print_times < 0:
            raise ValueError("per_print_times must be an int >= 0")
        self._per_print_times = per_print_times

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        loss = float(np.asarray(p.net_outputs.asnumpy()).mean())
        step_in_epoch = (p.cur_step_num - 1) % p.batch_num + 1
        if not math.isfinite(loss):
            raise ValueError(f"epoch: {p.cur_epoch_num} step: {step_in_epoch}. Invalid loss "
                             f"{loss}, terminating training.")
        if self._per_print_times and p.cur_step_num % self._per_print_times == 0:
            print(f"epoch: {p.cur_epoch_num} step: {step_in_epoch}, loss is {loss}", flush=True)


class TimeMonitor(Callback):
    """Prints each epoch's time and its time per step."""

    def __init__(self, data_size=None):
        self._data_size = data_size

    def on_train_epoch_begin(self, run_context):
        self._start = time.time()

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        ms = (time.time() - self._start) * 1000
        steps = self._data_size or p.batch_num or 1
        print(f"epoch time: {ms:.3f} ms, per step time: {ms / steps:.3f} ms", flush=True)


# ---- Model


class Model:
    """MindSpore's Model(network, loss_fn=None, optimizer=None, metrics=None): ``train(epoch,
    train_dataset, callbacks=None)``, ``eval(valid_dataset)`` and ``predict(*inputs)``. Without
    loss_fn, ``network`` already returns the loss of (data, label)."""

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                 amp_level="O0", **kwargs):
        if amp_level not in ("O0", None):
            raise ValueError(f"amp_level {amp_level!r}: modeflow trains in float32 (O0) only")
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._metrics = _metrics_of(metrics)
        self._eval_network = eval_network
        self._train_network = None

    @property
    def train_network(self):
        if self._train_network is None:
            if self._optimizer is None:
                raise ValueError("Model.train needs an optimizer: Model(network, loss_fn, optimizer)")
            net = self._network if self._loss_fn is None else _nn.WithLossCell(self._network,
                                                                               self._loss_fn)
            self._train_network = _nn.TrainOneStepCell(net, self._optimizer)
        return self._train_network

    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False,
              sink_size=-1, initial_epoch=0):
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise ValueError(f"epoch must be a positive int, got {epoch!r}")
        if isinstance(sink_size, bool) or not isinstance(sink_size, int) or \
                (sink_size != -1 and sink_size < 1):
            raise ValueError(f"For 'Model.train', 'sink_size' must be -1 or a positive int, but "
                             f"got {sink_size!r}")
        # As MindSpore on a CPU target: dataset sink mode is not supported there, so the data is
        # fed step by step (callbacks per step) whatever dataset_sink_mode says.
        callbacks = list(callbacks or [])
        if isinstance(callbacks, Callback):
            callbacks = [callbacks]
        step_net = self.train_network
        step_net.set_train(True)
        batch_num = train_dataset.get_dataset_size()
        params = _Params(epoch_num=epoch, batch_num=batch_num, cur_epoch_num=initial_epoch,
                         cur_step_num=initial_epoch * batch_num, net_outputs=None,
                         train_network=step_net, optimizer=self._optimizer,
                         train_dataset=train_dataset)
        context = RunContext(params)
        for cb in callbacks:
            cb.on_train_begin(context)
        for e in range(initial_epoch, epoch):
            params.cur_epoch_num = e + 1
            for cb in callbacks:
                cb.on_train_epoch_begin(context)
            for row in train_dataset.create_tuple_iterator(num_epochs=1):
                params.cur_step_num += 1
                for cb in callbacks:
                    cb.on_train_step_begin(context)
                params.net_outputs = step_net(*row)
                for cb in callbacks:
                    cb.on_train_step_end(context)
                if context.get_stop_requested():
                    break
            for cb in callbacks:
                cb.on_train_epoch_end(context)
            if context.get_stop_requested():
                break
        for cb in callbacks:
            cb.on_train_end(context)
        step_net.set_train(False)

    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        if not self._metrics:
            raise ValueError("Model.eval needs metrics: Model(..., metrics={'accuracy'})")
        net = self._eval_network or self._network
        if hasattr(net, "set_train"):
            net.set_train(False)
        for metric in self._metrics.values():
            metric.clear()
        for data, label in valid_dataset.create_tuple_iterator(num_epochs=1):
            logits = net(data)
            for metric in self._metrics.values():
                if isinstance(metric, Loss):
                    if self._loss_fn is None:
                        raise ValueError("the 'loss' metric needs Model(..., loss_fn=...)")
                    metric.update(self._loss_fn(logits, label))
                else:
                    metric.update(logits, label)
        return {name: metric.eval() for name, metric in self._metrics.items()}

    def predict(self, *predict_data):
        net = self._eval_network or self._network
        return net(*predict_data)
