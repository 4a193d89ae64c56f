"""Training as MindSpore scripts write it, in both modes: losses, optimizers over Parameters and
groups, WithLossCell / TrainOneStepCell, Model.train / eval with callbacks, checkpoints of a
trained net, errors with MindSpore's exception types, and the same bits in PYNATIVE and GRAPH."""

import os

import numpy as np
import pytest

import modeflow as ms
from modeflow import nn
from modeflow import dataset as ds

MODES = [ms.PYNATIVE_MODE, ms.GRAPH_MODE]
FASHION = "/usr/share/datasets/fashion-mnist"


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(16, 4)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def problem(n, seed):
    """Labels: the index of the largest of the first four features."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    return x, x[:, :4].argmax(axis=1).astype(np.int32)


def train_weights(mode, optimizer_name, steps=12):
    ms.set_context(mode=mode, deterministic="ON")
    net = Net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    params = net.trainable_params()
    if optimizer_name == "adam":
        opt = nn.Adam(params, learning_rate=0.01)
    elif optimizer_name == "sgd":
        opt = nn.SGD(params, learning_rate=0.1, momentum=0.9, weight_decay=1e-4)
    else:
        opt = nn.Momentum(params, learning_rate=0.1, momentum=0.9)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt).set_train()
    losses = []
    for s in range(steps):
        x, y = problem(16 if s + 1 < steps else 5, s % 4)
        losses.append(float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()))
    weights = {name: p.asnumpy().copy() for name, p in net.parameters_and_names()}
    ms.reset_context()
    return weights, losses


@pytest.mark.parametrize("optimizer_name", ["momentum", "adam", "sgd"])
def test_graph_and_pynative_train_to_the_same_bits(optimizer_name):
    w_py, l_py = train_weights(ms.PYNATIVE_MODE, optimizer_name)
    w_graph, l_graph = train_weights(ms.GRAPH_MODE, optimizer_name)
    assert l_py == l_graph
    for name in w_py:
        assert w_py[name].tobytes() == w_graph[name].tobytes(), name


@pytest.mark.parametrize("mode", MODES)
def test_mindspores_functional_step_under_jit_trains_as_trainonestepcell_does(mode):
    # value_and_grad of a function with an aux output, and the optimizer called on the
    # gradients: @ms.jit cannot keep the host update in its graph, so it warns and runs op by op,
    # giving the same weights as TrainOneStepCell's step.
    def weights_after(functional):
        ms.set_context(mode=mode, deterministic="ON")
        net = Net()
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
        if functional:
            def forward_fn(data, label):
                logits = net(data)
                return loss_fn(logits, label), logits

            grad_fn = ms.value_and_grad(forward_fn, None, opt.parameters, has_aux=True)

            @ms.jit
            def step(data, label):
                (loss, _), grads = grad_fn(data, label)
                opt(grads)
                return loss
        else:
            step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
        losses = []
        for s in range(4):
            x, y = problem(16, s)
            losses.append(float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()))
        ms.reset_context()
        return losses, {n: p.asnumpy() for n, p in net.parameters_and_names()}

    with pytest.warns(UserWarning, match="the optimizer .*runs op by op"):
        losses, weights = weights_after(True)
    want_losses, want = weights_after(False)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for name in want:
        np.testing.assert_allclose(weights[name], want[name], rtol=1e-5, atol=1e-6)


def test_an_optimizer_inside_a_fullgraph_jit_is_a_traced_value_error():
    net = Net()
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
    grad_fn = ms.value_and_grad(lambda x: ms.ops.reduce_sum(net(x)), None, opt.parameters)

    @ms.jit(fullgraph=True)
    def step(x):
        loss, grads = grad_fn(x)
        opt(grads)
        return loss

    before = net.fc1.weight.asnumpy().copy()
    with pytest.raises(ms.TracedValueError, match="TrainOneStepCell"):
        step(ms.Tensor(np.ones((2, 8), np.float32)))
    np.testing.assert_array_equal(net.fc1.weight.asnumpy(), before)


@pytest.mark.parametrize("mode", MODES)
def test_the_loss_falls_and_a_custom_loss_works(mode):
    ms.set_context(mode=mode)

    class MyLoss(nn.LossBase):
        def construct(self, logits, labels):
            return ms.ops.reduce_mean(ms.ops.square(logits - labels))

    net = Net()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, MyLoss()),
                               nn.SGD(net.trainable_params(), learning_rate=0.05))
    x, y = problem(32, 1)
    target = ms.Tensor(np.eye(4, dtype=np.float32)[y])
    first = float(step(ms.Tensor(x), target).asnumpy())
    for _ in range(30):
        last = float(step(ms.Tensor(x), target).asnumpy())
    assert last < 0.7 * first
    # A plain function is a loss too.
    fn_step = nn.TrainOneStepCell(
        nn.WithLossCell(net, lambda logits, labels: ms.ops.reduce_mean(ms.ops.abs(logits - labels))),
        nn.SGD(net.trainable_params(), learning_rate=0.05))
    assert np.isfinite(fn_step(ms.Tensor(x), target).asnumpy())
    ms.reset_context()


def test_one_step_equals_the_formulas():
    net = Net()
    x, y = problem(8, 3)
    before = {n: p.asnumpy().astype(np.float64) for n, p in net.parameters_and_names()}
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    # Gradients from ms.value_and_grad, then Adam's first step by hand (MindSpore's epsilon).
    params = net.trainable_params()
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, params)
    _, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
    grads = {p.name: g.asnumpy().astype(np.float64) for p, g in zip(params, grads)}
    opt = nn.Adam(params, learning_rate=0.01, eps=1e-3)
    nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)(ms.Tensor(x), ms.Tensor(y))
    for name, p in net.parameters_and_names():
        g = grads[name]
        m, v = 0.1 * g, 0.001 * g * g
        lr_t = 0.01 * np.sqrt(1 - 0.999) / (1 - 0.9)
        expected = before[name] - lr_t * m / (np.sqrt(v) + 1e-3)
        np.testing.assert_allclose(p.asnumpy(), expected, rtol=1e-4, atol=1e-6)
    assert opt.global_step == 1
    assert [p.name for p in opt.state()][:1] == ["moment1.fc1.weight"]


def test_groups_lr_schedules_and_frozen_parameters():
    net = Net()
    frozen_before = net.fc1.bias.asnumpy().copy()
    net.fc1.bias = ms.Parameter(net.fc1.bias, requires_grad=False)
    names = [p.name for p in net.trainable_params()]
    assert "fc1.bias" not in names and "fc1.weight" in names
    lr = nn.piecewise_constant_lr([2, 4], [0.1, 0.01])
    assert lr == pytest.approx([0.1, 0.1, 0.01, 0.01])
    assert nn.exponential_decay_lr(0.1, 0.9, 4, 2, 1) == pytest.approx([0.1, 0.1, 0.09, 0.09])
    params = net.trainable_params()
    groups = [{"params": params[:1], "lr": 0.5, "weight_decay": 0.01}, {"params": params[1:]}]
    opt = nn.Momentum(groups, learning_rate=lr, momentum=0.9)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt)
    x, y = problem(8, 2)
    step(ms.Tensor(x), ms.Tensor(y))
    np.testing.assert_array_equal(net.fc1.bias.asnumpy(), frozen_before)


def test_bad_settings_raise_mindspores_exceptions():
    params = Net().trainable_params()
    with pytest.raises(ValueError, match="loss_scale"):
        nn.SGD(params, loss_scale=0)
    with pytest.raises(ValueError, match="weight_decay"):
        nn.Momentum(params, 0.1, 0.9, weight_decay=-1.0)
    with pytest.raises(ValueError, match="params is empty"):
        nn.Adam([])
    with pytest.raises(TypeError, match="learning_rate"):
        nn.SGD(params, learning_rate="fast")
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(TypeError, match="loss_fn"):
        nn.WithLossCell(Net(), 3)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    with pytest.raises(ValueError, match="class-index labels must be int32 or int64"):
        loss(ms.Tensor(np.zeros((2, 4), np.float32)), ms.Tensor(np.zeros(2, np.float32)))
    other = Net()
    with pytest.raises(ValueError, match="not a parameter of the network"):
        nn.TrainOneStepCell(nn.WithLossCell(Net(), loss), nn.SGD(other.trainable_params()))


class Printed:
    def __init__(self):
        self.steps = 0

    def on_train_step_end(self, run_context):
        self.steps += 1


def test_model_trains_evaluates_and_the_checkpoint_reloads(tmp_path, capsys):
    x, y = problem(256, 5)
    train = ds.NumpySlicesDataset((x, y), column_names=["data", "label"], shuffle=False).batch(32)
    net = Net()
    model = ms.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                     nn.Momentum(net.trainable_params(), 0.1, 0.9), metrics={"accuracy", "loss"})
    counter = ms.train.Callback()
    counter.steps = 0

    def count(run_context):
        counter.steps += 1

    counter.on_train_step_end = count
    model.train(3, train, callbacks=[ms.train.LossMonitor(8), ms.train.TimeMonitor(), counter])
    out = capsys.readouterr().out
    assert "epoch: 3 step: 8, loss is" in out and "per step time" in out
    assert counter.steps == 24
    # Sink mode on a CPU target feeds step by step, as MindSpore does; sink_size is still checked.
    model.train(1, train, callbacks=[counter], dataset_sink_mode=True, sink_size=4)
    assert counter.steps == 32
    with pytest.raises(ValueError, match="'sink_size' must be -1 or a positive int"):
        model.train(1, train, dataset_sink_mode=True, sink_size=0)
    xt, yt = problem(256, 6)
    test = ds.NumpySlicesDataset((xt, yt), column_names=["data", "label"], shuffle=False).batch(64)
    metrics = model.eval(test)
    assert metrics["accuracy"] > 0.6 and metrics["loss"] < 1.2
    ms.save_checkpoint(net, str(tmp_path / "net.ckpt"))
    fresh = Net()
    assert ms.load_param_into_net(fresh, ms.load_checkpoint(str(tmp_path / "net.ckpt"))) == ([], [])
    probe = ms.Tensor(xt[:4])
    np.testing.assert_array_equal(fresh(probe).asnumpy(), net(probe).asnumpy())


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist is not installed")
@pytest.mark.parametrize("mode", MODES)
def test_fashion_mnist_mlp_learns_in_a_few_hundred_steps(mode):
    ms.set_context(mode=mode)
    ds.config.set_seed(1)

    def prepare(usage, n):
        data = ds.FashionMnistDataset(FASHION, usage=usage, num_samples=n, shuffle=False)
        data = data.map(lambda img: (img.reshape(784) / 255.0).astype(np.float32), ["image"])
        data = data.map(lambda label: label.astype(np.int32), ["label"])
        return data.batch(64, drop_remainder=True)

    net = nn.SequentialCell([nn.Dense(784, 128), nn.ReLU(), nn.Dense(128, 10)])
    model = ms.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                     nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"accuracy"})
    model.train(1, prepare("train", 19200))  # 300 steps
    accuracy = model.eval(prepare("test", 2048))["accuracy"]
    assert accuracy > 0.75, accuracy
    ms.reset_context()


class ConvBnDrop(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, pad_mode="pad", padding=1, has_bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.drop = nn.Dropout(p=0.2, seed=3)  # seed=: modeflow's, as Dense's
        self.fc = nn.Dense(4 * 6 * 6, 3)

    def construct(self, x):
        return self.fc(self.drop(self.flatten(self.relu(self.bn(self.conv(x))))))


def train_conv_bn_drop(mode):
    ms.set_context(mode=mode, deterministic="ON")
    net = ConvBnDrop()
    step = nn.TrainOneStepCell(
        nn.WithLossCell(net, nn.CrossEntropyLoss()),
        nn.Momentum(net.trainable_params(), 0.05, 0.9)).set_train()
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.standard_normal((8, 1, 6, 6)).astype(np.float32)
        step(ms.Tensor(x), ms.Tensor(np.arange(8, dtype=np.int32) % 3))
    net.set_train(False)
    out = net(ms.Tensor(np.ones((2, 1, 6, 6), np.float32))).asnumpy()
    params = {n: p.asnumpy().copy() for n, p in net.parameters_and_names()}
    ms.reset_context()
    return params, out


def test_batchnorm_and_dropout_train_to_the_same_bits_in_both_modes():
    py_params, py_out = train_conv_bn_drop(ms.PYNATIVE_MODE)
    graph_params, graph_out = train_conv_bn_drop(ms.GRAPH_MODE)
    names = [n for n in py_params]
    assert "bn.moving_mean" in names and "bn.moving_variance" in names
    assert not np.all(py_params["bn.moving_mean"] == 0)  # the averages moved while training
    assert py_params["drop.counter"] == 4
    for name in names:
        assert py_params[name].tobytes() == graph_params[name].tobytes(), name
    assert py_out.tobytes() == graph_out.tobytes()
    trainable = [p.name for p in ConvBnDrop().trainable_params()]
    assert "bn.gamma" in trainable and "bn.moving_mean" not in trainable


def test_dropout_and_batchnorm_arguments():
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(p=1.0)
    with pytest.raises(ValueError, match="not both"):
        nn.Dropout(keep_prob=0.5, p=0.5)
    with pytest.raises(ValueError, match="data_format"):
        nn.BatchNorm2d(3, data_format="NHWC")
    bn = nn.BatchNorm2d(3, gamma_init="zeros", beta_init=0.5, moving_mean_init=1.5,
                        moving_var_init=ms.Tensor(np.array([1, 2, 3], np.float32)))
    values = {name: p.asnumpy() for name, p in bn.parameters_and_names()}
    np.testing.assert_array_equal(values["gamma"], [0, 0, 0])
    np.testing.assert_array_equal(values["beta"], [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(values["moving_mean"], [1.5, 1.5, 1.5])
    np.testing.assert_array_equal(values["moving_variance"], [1, 2, 3])
    with pytest.raises(ValueError, match="unknown initializer 'bogus'"):
        nn.BatchNorm2d(3, gamma_init="bogus")
    drop = nn.Dropout(keep_prob=0.9)
    x = ms.Tensor(np.ones((4, 4), np.float32))
    np.testing.assert_array_equal(drop(x).asnumpy(), x.asnumpy())  # not training: identity
