"""Cells whose construct takes several tensors (construct(self, x, y, ...)), as MindSpore scripts
write them: the same bits in PYNATIVE and GRAPH at every jit_level, every input bound at every
call, gradients of any input in both modes, training through TrainOneStepCell, and clear errors
for what a cell's inputs cannot be."""

import numpy as np
import pytest

import modeflow as ms
from modeflow import nn, ops


class Gated(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3, seed=5)

    def construct(self, x, gate):
        return self.fc(x) * ops.sigmoid(gate)


class ThreeInputs(nn.Cell):
    def __init__(self):
        super().__init__()
        self.gated = Gated()
        self.w = ms.Parameter(ms.Tensor(np.full(3, 0.5, np.float32)), name="w")

    def construct(self, x, gate, shift):
        return self.gated(x, gate) + shift * self.w


def inputs(seed=0, batch=2):
    rng = np.random.default_rng(seed)
    return [ms.Tensor(rng.standard_normal(shape).astype(np.float32))
            for shape in ((batch, 4), (batch, 3), (batch, 3))]


def test_every_mode_gives_the_same_bits():
    ms.set_context(deterministic="ON")
    net = ThreeInputs()
    args = inputs()
    eager = net(*args).asnumpy()
    for level in ("O0", "O1", "O2"):
        ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": level})
        graph = net(*args).asnumpy()
        assert net.compile_report()["compiled"], level
        assert graph.tobytes() == eager.tobytes(), level


def test_every_input_is_read_at_every_call():
    net = ThreeInputs()
    first, second = inputs(0), inputs(1)
    expected = net(*second).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    net(*first)
    np.testing.assert_array_equal(net(*second).asnumpy(), expected)
    assert not net.compile_report()["compiled"]
    # The same tensor as two inputs, then distinct ones: still two inputs of the graph.
    x, gate, shift = first
    net(x, gate, gate)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    eager = net(x, gate, shift).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_array_equal(net(x, gate, shift).asnumpy(), eager)


def test_a_new_shape_of_a_later_input_compiles_again_and_says_so():
    ms.set_context(mode=ms.GRAPH_MODE)
    net = ThreeInputs()
    x, gate, shift = inputs()
    net(x, gate, shift)
    net(x, gate, ms.Tensor(np.ones(3, np.float32)))  # broadcasts
    report = net.compile_report()
    assert report["compiled"]
    assert "input 2 changed from" in report["recompile_reason"]


def test_inputs_are_not_parameters():
    net = ThreeInputs()
    net(*inputs())
    assert [name for name, _ in net.parameters_and_names()] == [
        "w", "gated.fc.weight", "gated.fc.bias"]
    loss_net = nn.WithLossCell(nn.Dense(4, 3, seed=1), nn.SoftmaxCrossEntropyWithLogits(
        sparse=True, reduction="mean"))
    assert [name for name, _ in loss_net.parameters_and_names()] == [
        "_backbone.weight", "_backbone.bias"]


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_gradients_of_every_input_and_the_weights(mode):
    ms.set_context(mode=mode, deterministic="ON")
    net = ThreeInputs()
    x, gate, shift = inputs()
    _, (grads, weight_grads) = ms.value_and_grad(
        net, grad_position=(0, 1, 2), weights=net.trainable_params())(x, gate, shift)
    # out = fc(x) * s(gate) + shift * w, summed by an all-ones sensitivity.
    fc_x = net.gated.fc(x).asnumpy()
    s = 1 / (1 + np.exp(-gate.asnumpy()))
    np.testing.assert_allclose(grads[1].asnumpy(), fc_x * s * (1 - s), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(grads[2].asnumpy(), np.full((2, 3), 0.5), rtol=1e-6)
    np.testing.assert_allclose(weight_grads[0].asnumpy(), shift.asnumpy().sum(0), rtol=1e-5)
    np.testing.assert_allclose(grads[0].asnumpy(), s @ net.gated.fc.weight.asnumpy(), rtol=1e-5)


def test_the_compiled_gradient_of_the_first_input_equals_the_tape():
    args = inputs()
    results = []
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode, deterministic="ON")
        net = ThreeInputs()
        value, (dx, dw) = ms.value_and_grad(net, 0, net.trainable_params())(*args)
        results.append([value.asnumpy(), dx.asnumpy()] + [g.asnumpy() for g in dw])
    ms.set_context(mode=ms.GRAPH_MODE)
    for eager, graph in zip(*results):
        assert eager.tobytes() == graph.tobytes()


class LossOfTwo(nn.Cell):
    """A network that computes its own loss from (data, label): not a WithLossCell."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3, seed=2)
        self.loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, data, label):
        return self.loss(self.fc(data), label)


def test_train_one_step_over_a_cell_of_two_inputs_in_both_modes():
    rng = np.random.default_rng(3)
    data = ms.Tensor(rng.standard_normal((8, 4)).astype(np.float32))
    label = ms.Tensor(rng.integers(0, 3, 8).astype(np.int32))
    weights = []
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode, deterministic="ON")
        net = LossOfTwo()
        step = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.5))
        losses = [float(step(data, label).asnumpy()) for _ in range(5)]
        assert losses[-1] < losses[0]
        weights.append(net.fc.weight.asnumpy())
    assert weights[0].tobytes() == weights[1].tobytes()


def test_what_a_cell_input_cannot_be():
    net = ThreeInputs()
    x, gate, shift = inputs()
    with pytest.raises(TypeError, match="by position"):
        net(x, gate, shift=shift)
    with pytest.raises(TypeError, match="input 1 is None"):
        net(x, None, shift)
    with pytest.raises(TypeError):
        net(x, gate)  # construct's own signature
    with pytest.raises(TypeError, match="at least one input"):
        net()
    with pytest.raises(TypeError, match="input 2 is a sequence of Tensors"):
        net(x, gate, (shift, shift))


@pytest.mark.parametrize("jit_level", ["O0", "O1", "O2"])
def test_set_inputs_of_several_compiles_once_for_every_size(jit_level):
    net = ThreeInputs()
    dyn = [ms.Tensor(shape=["batch", 4], dtype=ms.float32),
           ms.Tensor(shape=["batch", 3], dtype=ms.float32),
           ms.Tensor(shape=["batch", 3], dtype=ms.float32)]
    net.set_inputs(*dyn)
    assert [d.shape for d in net.get_inputs()] == [(-1, 4), (-1, 3), (-1, 3)]
    compiles = 0
    for batch in (1, 5, 16):
        args = inputs(batch, batch)
        ms.set_context(mode=ms.PYNATIVE_MODE)
        eager = net(*args).asnumpy()
        ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": jit_level})
        graph = net(*args).asnumpy()
        report = net.compile_report()
        compiles += report["compiled"]
        assert report["dynamic_note"] == "one compile serves every size", report["dynamic_note"]
        np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-6)
    assert compiles == 1
    # A named size is one size across the inputs; the count is the declared one.
    x, gate, shift = inputs(0, 4)
    with pytest.raises(ValueError, match="input 'x1'"):
        net(x, ms.Tensor(np.ones((3, 3), np.float32)), shift)
    with pytest.raises(ValueError, match="declared with 3 inputs by set_inputs and is called with 2"):
        g = Gated2()
        g.set_inputs(*dyn)
        g(x, gate)
    # Sizes the network cannot take apart (shift's rows must be the batch): each size compiles on
    # its own, and the report says why.
    net.set_inputs(dyn[0], dyn[1], ms.Tensor(shape=[None, 3], dtype=ms.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    graph = net(x, gate, shift).asnumpy()
    assert net.compile_report()["dynamic_note"].startswith("compiled per size: the probe sizes")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(graph, net(x, gate, shift).asnumpy(), rtol=1e-5, atol=1e-6)


class Gated2(Gated):
    def construct(self, x, gate, *rest):
        return super().construct(x, gate)
