"""ms.grad, ms.value_and_grad and ops.GradOperation as MindSpore users write them, in both modes:
return structures, sensitivities, has_aux, weights, errors with MindSpore's messages, and the same
gradients in PYNATIVE and GRAPH."""

import numpy as np
import pytest

import modeflow as ms
from modeflow import nn, ops

MODES = [ms.PYNATIVE_MODE, ms.GRAPH_MODE]


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 3)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(3, 2)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def numpy_grads(net, x):
    """The gradients of sum(net(x)) by hand, in float64: (dx, {name: grad})."""
    p = {name: value.asnumpy().astype(np.float64) for name, value in net.parameters_and_names()}
    h = x @ p["fc1.weight"].T + p["fc1.bias"]
    a = np.maximum(h, 0)
    dy = np.ones((x.shape[0], 2))
    da = dy @ p["fc2.weight"]
    dh = da * (h > 0)
    grads = {
        "fc2.weight": dy.T @ a,
        "fc2.bias": dy.sum(0),
        "fc1.weight": dh.T @ x,
        "fc1.bias": dh.sum(0),
    }
    return dh @ p["fc1.weight"], grads


@pytest.mark.parametrize("mode", MODES)
def test_value_and_grad_of_a_cell_matches_the_hand_derivation(mode):
    ms.set_context(mode=mode)
    net = Net()
    x = np.random.default_rng(0).standard_normal((5, 4))
    params = net.trainable_params()
    assert [p.name for p in params] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    value, (dx, dws) = ms.value_and_grad(net, 0, params)(ms.Tensor(x.astype(np.float32)))
    assert value.shape == (5, 2)
    want_dx, want = numpy_grads(net, x)
    np.testing.assert_allclose(dx.asnumpy(), want_dx, rtol=1e-4, atol=1e-5)
    for p, g in zip(params, dws):
        np.testing.assert_allclose(g.asnumpy(), want[p.name], rtol=1e-4, atol=1e-5)


def test_graph_and_pynative_gradients_are_the_same_bits():
    results = []
    for mode in MODES:
        ms.set_context(mode=mode, deterministic="ON")
        net = Net()
        x = ms.Tensor(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32))
        _, grads = ms.value_and_grad(net, None, net.trainable_params())(x)
        results.append([g.asnumpy() for g in grads])
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("mode", MODES)
def test_return_structures_follow_mindspore(mode):
    ms.set_context(mode=mode)

    def fn(x, y, z):
        return ops.reduce_sum(x * y * z)

    x, y, z = (ms.Tensor(np.array(v, np.float32)) for v in ([1.0, 2.0], [3.0, 4.0], [5.0, 6.0]))
    one = ms.grad(fn)(x, y, z)
    np.testing.assert_array_equal(one.asnumpy(), [15.0, 24.0])
    two = ms.grad(fn, grad_position=(1, 2))(x, y, z)
    assert isinstance(two, tuple) and len(two) == 2
    np.testing.assert_array_equal(two[0].asnumpy(), [5.0, 12.0])
    np.testing.assert_array_equal(two[1].asnumpy(), [3.0, 8.0])
    value, g = ms.value_and_grad(fn, 2)(x, y, z)
    np.testing.assert_array_equal(value.asnumpy(), 15.0 + 48.0)
    np.testing.assert_array_equal(g.asnumpy(), [3.0, 8.0])


@pytest.mark.parametrize("mode", MODES)
def test_non_scalar_outputs_take_an_all_ones_sensitivity_and_has_aux_the_first(mode):
    ms.set_context(mode=mode)
    x = ms.Tensor(np.array([1.0, -2.0, 3.0], np.float32))
    np.testing.assert_array_equal(ms.grad(lambda t: t * t)(x).asnumpy(), [2.0, -4.0, 6.0])

    def fn(t):
        return t * 3.0, t + 1.0

    grads, aux = ms.grad(fn, has_aux=True)(x)
    np.testing.assert_array_equal(grads.asnumpy(), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(aux[0].asnumpy(), [2.0, -1.0, 4.0])
    (out, extra), g = ms.value_and_grad(fn, has_aux=True)(x)
    np.testing.assert_array_equal(out.asnumpy(), [3.0, -6.0, 9.0])
    np.testing.assert_array_equal(g.asnumpy(), [3.0, 3.0, 3.0])


@pytest.mark.parametrize("mode", MODES)
def test_grad_operation_get_all_get_by_list_and_sens(mode):
    ms.set_context(mode=mode)
    net = Net()
    x = ms.Tensor(np.ones((2, 4), np.float32))
    weights = ms.ParameterTuple(net.trainable_params())
    first = ops.GradOperation()(net)(x)
    assert first.shape == (2, 4)
    by_list = ops.GradOperation(get_by_list=True)(net, weights)(x)
    assert [g.shape for g in by_list] == [(3, 4), (3,), (2, 3), (2,)]
    inputs, ws = ops.GradOperation(get_all=True, get_by_list=True)(net, weights)(x)
    assert len(inputs) == 1 and len(ws) == 4
    sens = ms.Tensor(np.full((2, 2), 2.0, np.float32))
    doubled = ops.GradOperation(sens_param=True)(net)(x, sens)
    np.testing.assert_allclose(doubled.asnumpy(), 2 * first.asnumpy(), rtol=1e-6)


def test_errors_carry_mindspore_messages():
    def fn(x):
        return ops.reduce_sum(x)

    x = ms.Tensor(np.ones(3, np.float32))
    with pytest.raises(IndexError, match="Position index 1 is exceed input size."):
        ms.grad(fn, 1)(x)
    with pytest.raises(TypeError, match="only floating-point inputs have gradients"):
        ms.grad(fn)(ms.Tensor(np.ones(3, np.int32)))
    with pytest.raises(ValueError, match="nothing to differentiate"):
        ms.grad(fn, None, None)


@pytest.mark.parametrize("mode", MODES)
def test_an_op_without_a_rule_names_itself_and_its_scope(mode):
    ms.set_context(mode=mode)

    # det has no backward rule yet; when it gets one, pick another op without a rule here.
    class Det(nn.Cell):
        def construct(self, x):
            return ops.det(x * 2.0)

    with pytest.raises(Exception, match=r"op `det` at Default/net-Det has no gradient rule"):
        ms.grad(Det())(ms.Tensor(np.eye(2, dtype=np.float32)))
        ms.ops.sync()


@pytest.mark.parametrize("mode", MODES)
def test_grad_for_scalar_makes_python_numbers_differentiable(mode):
    def fn(x, s):
        return ops.reduce_sum(x * s)

    x = ms.Tensor(np.array([1.0, 2.0], np.float32))
    ms.set_context(mode=mode)
    # Off (MindSpore's default): the number is a constant and its position is dropped.
    grads = ms.grad(fn, (0, 1))(x, 3.0)
    assert len(grads) == 1
    np.testing.assert_array_equal(grads[0].asnumpy(), [3.0, 3.0])
    ms.set_context(grad_for_scalar=True)
    dx, ds = ms.grad(fn, (0, 1))(x, 3.0)
    np.testing.assert_array_equal(dx.asnumpy(), [3.0, 3.0])
    np.testing.assert_array_equal(ds.asnumpy(), 3.0)


@pytest.mark.parametrize("mode", MODES)
def test_stop_gradient_blocks_the_gradient(mode):
    ms.set_context(mode=mode)

    def fn(x):
        return ops.reduce_sum(x * ops.stop_gradient(x))

    x = ms.Tensor(np.array([1.0, -2.0, 3.0], np.float32))
    # d/dx of x * c with c = x held constant: c.
    np.testing.assert_array_equal(ms.grad(fn)(x).asnumpy(), [1.0, -2.0, 3.0])


class Doubled(nn.Cell):
    """y = x * 3, with a custom backward that says dx = 2 * dout: the custom rule must win."""

    def construct(self, x):
        return x * 3.0

    def bprop(self, x, out, dout):
        return (dout * 2.0,)


class Outer(nn.Cell):
    def __init__(self):
        super().__init__()
        self.inner = Doubled()

    def construct(self, x):
        return ops.reduce_sum(self.inner(x * x))


@pytest.mark.parametrize("mode", MODES)
def test_a_custom_bprop_replaces_the_derived_backward(mode):
    ms.set_context(mode=mode)
    x = ms.Tensor(np.array([1.0, -2.0, 3.0], np.float32))
    # d/dx sum(inner(x^2)) with inner's backward 2*dout: 2 * 2x.
    np.testing.assert_array_equal(ms.grad(Outer())(x).asnumpy(), [4.0, -8.0, 12.0])


class WrongShape(nn.Cell):
    def construct(self, x):
        return x * 3.0

    def bprop(self, x, out, dout):
        return (ops.reduce_sum(dout),)


class TwoGrads(Doubled):
    def bprop(self, x, out, dout):
        return dout, dout


class ReturnsNone(Doubled):
    def bprop(self, x, out, dout):
        return None


@pytest.mark.parametrize("mode", MODES)
def test_check_bprop_checks_count_shape_and_dtype(mode):
    ms.set_context(mode=mode, check_bprop=True)
    x = ms.Tensor(np.ones(3, np.float32))

    def grad_of(cell):
        return ms.grad(lambda t: ops.reduce_sum(cell(t)))(x)

    with pytest.raises(ValueError, match="should have the same shape as the 0th arg"):
        grad_of(WrongShape())
        ms.ops.sync()
    with pytest.raises(TypeError, match=r"the number of return values\(gradients\) must be equal"):
        grad_of(TwoGrads())
    with pytest.raises(TypeError, match="returned None"):
        grad_of(ReturnsNone())
    ms.set_context(check_bprop=False)
    grad_of(TwoGrads())  # unchecked: the first gradient is taken
    with pytest.raises(TypeError, match="returned None"):
        grad_of(ReturnsNone())  # None is always an error


def test_a_jit_cell_inside_a_pynative_gradient_runs_compiled_with_the_same_bits():
    ms.set_context(mode=ms.PYNATIVE_MODE, deterministic="ON")
    x = ms.Tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    plain, jitted = Net(), Net()
    for p, q in zip(plain.trainable_params(), jitted.trainable_params()):
        q.set_data(p)
    jitted.set_jit_config(ms.JitConfig(jit_level="O1"))

    def loss_of(net):
        return lambda x: ops.reduce_sum(net(x) * net(-x))

    expected = ms.grad(loss_of(plain), grad_position=0, weights=plain.trainable_params())(x)
    got = ms.grad(loss_of(jitted), grad_position=0, weights=jitted.trainable_params())(x)
    assert np.array_equal(got[0].asnumpy(), expected[0].asnumpy())
    for g, e in zip(got[1], expected[1]):
        assert np.array_equal(g.asnumpy(), e.asnumpy())
    assert jitted.compile_report()["jit_region"], "the jit cell's forward ran compiled"
    ms.set_context(deterministic="OFF")


def test_parameter_set_data_writes_in_place_with_mindspores_rules():
    net = Net()
    weight = net.trainable_params()[0]
    held = net.fc1.weight
    weight.set_data(ms.Tensor(np.full((3, 4), 2, np.int32)))  # narrower: cast
    assert weight.dtype == ms.float32
    assert np.array_equal(held.asnumpy(), np.full((3, 4), 2, np.float32)), "every holder sees it"
    with pytest.raises(ValueError, match="Can not change the shape of Parameter"):
        weight.set_data(ms.Tensor(np.ones((4, 3), np.float32)))
    with pytest.raises(TypeError, match="wider than the parameter's"):
        weight.set_data(ms.Tensor(np.ones((3, 4), np.float64)))
    assert np.array_equal(held.asnumpy(), np.full((3, 4), 2, np.float32)), "a refused value writes nothing"


class Wide(nn.Cell):
    def __init__(self):
        super().__init__()
        self.up = nn.Dense(4, 32)
        self.relu = nn.ReLU()
        self.down = nn.Dense(32, 4)

    def construct(self, x):
        return x + self.down(self.relu(self.up(x)))


class Stack(nn.Cell):
    def __init__(self):
        super().__init__()
        self.a = Wide()
        self.b = Wide()

    def construct(self, x):
        return ops.tanh(self.b(self.a(x)))


@pytest.mark.parametrize("mode", MODES)
def test_recompute_keeps_the_gradients_bit_for_bit(mode):
    ms.set_context(mode=mode, deterministic="ON")
    x = ms.Tensor(np.linspace(-2, 2, 32, dtype=np.float32).reshape(8, 4))
    net = Stack()
    grad = ms.value_and_grad(net, grad_position=0, weights=net.trainable_params())
    loss, (dx, dw) = grad(x)
    net.a.recompute()
    net.b.recompute(mp_comm_recompute=True)
    loss2, (dx2, dw2) = grad(x)
    assert net.a._recompute and net.b._recompute
    assert np.array_equal(loss.asnumpy(), loss2.asnumpy())
    assert np.array_equal(dx.asnumpy(), dx2.asnumpy())
    for g, g2 in zip(dw, dw2):
        assert np.array_equal(g.asnumpy(), g2.asnumpy())
    with pytest.raises(TypeError, match="unexpected keyword argument 'recompute_everything'"):
        net.a.recompute(recompute_everything=True)
    with pytest.raises(TypeError, match="must be bool"):
        net.a.recompute(mp_comm_recompute=1)
    ms.set_context(deterministic="OFF")


def test_cells_hand_out_named_parameters_as_mindspore_does():
    net = Net()
    net.fc2.bias.requires_grad  # a Parameter, reachable as an attribute
    frozen = net.fc2.bias
    frozen.requires_grad = False
    net.fc2.bias = frozen
    params = net.get_parameters()
    assert [p.name for p in params] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(isinstance(p, ms.Parameter) for p in params)
    assert [p.requires_grad for p in params] == [True, True, True, False]
    names, values = zip(*net.parameters_and_names())
    assert names == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    assert [v.name for v in values] == list(names)
    assert isinstance(net.parameters_dict()["fc1.weight"], ms.Parameter)
    assert [p.name for p in net.trainable_params()] == ["fc1.weight", "fc1.bias", "fc2.weight"]


def test_a_child_cells_parameters_carry_the_path_it_was_assigned_under():
    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(3, 2)

        def construct(self, x):
            return self.fc1(x)

    block = Block()
    assert block.fc1.weight.name == "fc1.weight"  # named once assigned, as in MindSpore
    outer = nn.SequentialCell([block])
    assert block.fc1.weight.name == "0.fc1.weight"
    assert [p.name for p in block.trainable_params()] == ["0.fc1.weight", "0.fc1.bias"]
    # parameters_and_names keys stay the paths from the cell asked.
    assert [n for n, _ in block.parameters_and_names()] == ["fc1.weight", "fc1.bias"]
    assert [p.name for p in outer.trainable_params()] == ["0.fc1.weight", "0.fc1.bias"]
    # A cell replaced by another keeps the name it had; once its adopter is gone it names itself
    # from its own parameters again.
    dense = block.fc1
    block.fc1 = nn.Dense(3, 2)
    assert dense.weight.name == "weight"
    del outer
    assert block.fc1.weight.name == "fc1.weight"
    # A deep chain of adoptions names by its whole path, without recursion.
    class Wrap(nn.Cell):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def construct(self, x):
            return self.inner(x)

    leaf = nn.Dense(2, 2)
    cell = leaf
    for _ in range(3000):
        cell = Wrap(cell)
    assert leaf.weight.name == "inner." * 3000 + "weight"


class Tanh2(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(np.array([0.5, -1.5], np.float32)), name="w")

    def construct(self, x):
        return ops.tanh(x * self.w)


@pytest.mark.parametrize("mode", MODES)
def test_gradients_of_gradients(mode):
    ms.set_context(mode=mode)
    x = ms.Tensor(np.array([0.3, -0.7], np.float32))
    xs = x.asnumpy().astype(np.float64)

    def cube(t):
        return ops.reduce_sum(t * t * t)

    # grad of grad (the inner gradient's sum, by the all-ones sensitivity): 6x; then 6.
    np.testing.assert_allclose(ms.grad(ms.grad(cube))(x).asnumpy(), 6 * xs, rtol=1e-6)
    np.testing.assert_allclose(ms.grad(ms.grad(ms.grad(cube)))(x).asnumpy(), [6, 6], rtol=1e-6)
    # Through a cell (its compiled gradient in GRAPH mode becomes ops on the outer tape):
    # d/dx sum(d tanh(w x)/dx) = d/dx sum(w (1 - tanh^2)) = -2 w^2 tanh (1 - tanh^2).
    net = Tanh2()
    w = np.array([0.5, -1.5])
    t = np.tanh(w * xs)
    np.testing.assert_allclose(ms.grad(ms.grad(net))(x).asnumpy(), -2 * w * w * t * (1 - t * t),
                               rtol=1e-5)
    # Mixed: the weights' gradient of the input gradient's sum.
    _, dw = ms.grad(lambda v: ops.reduce_sum(ms.grad(net)(v)), 0, net.trainable_params())(x)
    want = (1 - t * t) + w * (-2 * t * (1 - t * t) * xs)
    np.testing.assert_allclose(dw[0].asnumpy(), want, rtol=1e-5)


class Branching(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3, seed=2)
        self.w = ms.Parameter(ms.Tensor(np.array([2.0, -3.0, 0.5], np.float32)), name="w")

    def construct(self, x):
        h = self.fc(x)
        y = ops.cond(ops.reduce_sum(h) > 0, lambda: ops.tanh(h) * self.w, lambda: ops.sin(h) * h)
        return y + h * self.w


def test_gradients_through_cond_are_the_same_bits_in_both_modes():
    rng = np.random.default_rng(4)
    taken = set()
    for _ in range(6):
        x = ms.Tensor(rng.standard_normal((2, 4)).astype(np.float32))
        results = []
        for mode in MODES:
            ms.set_context(mode=mode, deterministic="ON")
            net = Branching()
            value, (dx, dw) = ms.value_and_grad(net, 0, net.trainable_params())(x)
            results.append([value.asnumpy(), dx.asnumpy()] + [g.asnumpy() for g in dw])
        taken.add(float(net.fc(x).asnumpy().sum()) > 0)
        for eager, graph in zip(*results):
            assert eager.tobytes() == graph.tobytes()
    assert taken == {True, False}, "both branches were differentiated"


def test_a_compiled_while_loop_gradient_says_what_to_do():
    class Doubling(nn.Cell):
        def construct(self, x):
            return ops.while_loop(lambda v: ops.reduce_sum(v) < 10, lambda v: v * 2, x)

    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ValueError, match="compiled while loop is not differentiated"):
        ms.grad(Doubling())(ms.Tensor(np.ones(2, np.float32)))
