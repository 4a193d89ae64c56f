"""nn.Cell subclassed in Python: attributes become children and parameters, scopes are MindSpore's,
GRAPH mode traces construct once and runs the compiled graph without Python, Python control flow on
a traced tensor is an error naming the line, jit, dumps, fusion and the compile cache."""

import glob
import inspect
import os

import numpy as np
import pytest

import modeflow as ms

from conftest import run_python


class Net(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = ms.nn.Dense(8, 4, seed=3)
        self.scale = ms.Parameter(ms.Tensor(np.full(4, 2.0, np.float32)))
        self.calls = 0

    def construct(self, x):
        self.calls += 1
        return ms.ops.relu(self.fc(x)) * self.scale


def expected(net, x):
    w = net.fc.parameters_dict()["weight"].asnumpy()
    b = net.fc.parameters_dict()["bias"].asnumpy()
    return np.maximum(x @ w.T + b, 0) * 2.0


def test_attributes_become_children_and_parameters():
    net = Net()
    assert list(net.parameters_dict()) == ["scale", "fc.weight", "fc.bias"]
    assert net.cls_name == "Net" and net.fc.instance_name == "fc"
    assert list(net.name_cells()) == ["fc"]
    np.testing.assert_array_equal(net.scale.asnumpy(), np.full(4, 2.0, np.float32))
    net.scale = ms.Parameter(ms.Tensor(np.full(4, 3.0, np.float32)))  # replaces the value
    np.testing.assert_array_equal(net.scale.asnumpy(), np.full(4, 3.0, np.float32))
    with pytest.raises(ValueError, match="Float32"):
        net.scale = ms.Parameter(ms.Tensor(np.ones(5, np.float32)))
    with pytest.raises(AttributeError):
        net.no_such_attribute


def test_pynative_runs_construct_every_call():
    net = Net()
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    y = net(ms.Tensor(x))
    np.testing.assert_allclose(y.asnumpy(), expected(net, x), rtol=1e-5, atol=1e-6)
    net(ms.Tensor(x))
    assert net.calls == 2


def test_graph_mode_traces_once_and_retraces_for_a_new_signature():
    ms.set_context(mode=ms.GRAPH_MODE)
    net = Net()
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    y = net(ms.Tensor(x))
    assert net.calls == 1 and net.compile_report()["compiled"]
    np.testing.assert_allclose(y.asnumpy(), expected(net, x), rtol=1e-5, atol=1e-6)
    x2 = x + 1
    y2 = net(ms.Tensor(x2))
    assert net.calls == 1, "a compiled call entered Python"
    assert not net.compile_report()["compiled"]
    np.testing.assert_allclose(y2.asnumpy(), expected(net, x2), rtol=1e-5, atol=1e-6)
    x3 = np.ones((5, 8), np.float32)
    net(ms.Tensor(x3))
    assert net.calls == 2 and net.compile_report()["compiled"]
    # A parameter changed after compiling is seen by the compiled graph (bound by name).
    net.scale = ms.Parameter(ms.Tensor(np.full(4, 4.0, np.float32)))
    np.testing.assert_allclose(net(ms.Tensor(x)).asnumpy(), expected(net, x) * 2,
                               rtol=1e-5, atol=1e-6)


class Inner(ms.nn.Cell):
    def construct(self, x):
        return ms.ops.matmul(x, x)


class Outer(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def construct(self, x):
        return self.inner(x)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_errors_name_the_scope(mode):
    ms.set_context(mode=mode)
    with pytest.raises(ValueError) as error:
        Outer()(ms.Tensor(np.ones((2, 3), np.float32)))
    assert "Default/net-Outer/inner-Inner" in str(error.value)


class Branchy(ms.nn.Cell):
    LINE = inspect.currentframe().f_lineno + 3

    def construct(self, x):
        if ms.ops.reduce_sum(x) > 0:
            return x * 2.0
        return -x


def test_python_if_on_a_traced_tensor_is_an_error_naming_the_line():
    x = ms.Tensor(np.ones(3, np.float32))
    np.testing.assert_array_equal(Branchy()(x).asnumpy(), np.full(3, 2.0))  # PYNATIVE: fine
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ms.TracedValueError) as error:
        Branchy()(x)
    text = str(error.value)
    assert f"test_cells.py:{Branchy.LINE}" in text, text
    assert "ms.ops.cond" in text and "ms.ops.while_loop" in text


class Cond(ms.nn.Cell):
    def construct(self, x):
        return ms.ops.cond(ms.ops.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: -x)


class Loop(ms.nn.Cell):
    def construct(self, x):
        def cond_fn(v):
            return ms.ops.reduce_sum(v) < 100.0

        def body_fn(v):
            return v * 2.0

        return ms.ops.while_loop(cond_fn, body_fn, x)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_cond_and_while_loop_compile(mode):
    ms.set_context(mode=mode)
    cell = Cond()
    np.testing.assert_array_equal(cell(ms.Tensor(np.ones(3, np.float32))).asnumpy(), [2, 2, 2])
    np.testing.assert_array_equal(cell(ms.Tensor(-np.ones(3, np.float32))).asnumpy(), [1, 1, 1])
    loop = Loop()
    np.testing.assert_array_equal(loop(ms.Tensor(np.ones(4, np.float32))).asnumpy(),
                                  np.full(4, 32.0))


def test_jit_function_in_pynative():
    @ms.jit(jit_level="O1")
    def head(x):
        return ms.ops.softmax(x + 1.0)

    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    y = head(ms.Tensor(x)).asnumpy()
    report = head.compile_report()
    assert report["jit_region"] and report["jit_level"] == "O1" and report["compiled"]
    e = np.exp(x + 1 - (x + 1).max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5)
    head(ms.Tensor(x))
    assert not head.compile_report()["compiled"]

    @ms.jit
    def plain(x):
        return x * 3.0

    np.testing.assert_array_equal(plain(ms.Tensor(np.ones(2, np.float32))).asnumpy(), [3, 3])


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_a_jit_function_sees_the_parameters_it_reads_change(mode):
    # A Dense of 3 -> 2 has six weights and two biases: small enough that a captured plain tensor
    # would become a constant of the graph. Parameters never do: set_data and optimizers change
    # them in place.
    ms.set_context(mode=mode)
    dense = ms.nn.Dense(3, 2)
    f = ms.jit(lambda x: dense(x))
    x = ms.Tensor(np.ones((1, 3), np.float32))
    np.testing.assert_array_equal(f(x).asnumpy(), dense(x).asnumpy())
    dense.bias.set_data(ms.Tensor(np.array([100.0, 200.0], np.float32)))
    dense.weight.set_data(ms.Tensor(np.full((2, 3), 0.5, np.float32)))
    np.testing.assert_array_equal(f(x).asnumpy(), [[101.5, 201.5]])
    # A parameter replaced by another (not written in place) is followed too.
    dense.weight = ms.Parameter(ms.Tensor(np.full((2, 3), 2.0, np.float32)))
    np.testing.assert_array_equal(f(x).asnumpy(), [[106.0, 206.0]])
    dense.weight = ms.Parameter(ms.Tensor(np.zeros((2, 3), np.float32)))
    np.testing.assert_array_equal(f(x).asnumpy(), [[100.0, 200.0]])
    ms.reset_context()


def test_jit_fullgraph_and_fallback():
    def branchy(x):
        if ms.ops.reduce_sum(x) > 0:
            return x
        return -x

    strict = ms.jit(branchy, fullgraph=True)
    with pytest.raises(ms.TracedValueError):
        strict(ms.Tensor(np.ones(2, np.float32)))
    lenient = ms.jit(branchy)
    with pytest.warns(UserWarning, match="runs op by op"):
        y = lenient(ms.Tensor(-np.ones(2, np.float32)))
    np.testing.assert_array_equal(y.asnumpy(), [1, 1])


def test_a_jit_function_of_several_tensors_compiles_and_differentiates():
    def scaled(a, b):
        return ms.ops.tanh(a) * b

    a = ms.Tensor(np.full((2, 2), 0.5, np.float32))
    b = ms.Tensor(np.full((2, 2), 2.0, np.float32))
    compiled = ms.jit(scaled, fullgraph=True)
    y = compiled(a, b)
    assert compiled.compile_report()["compiled"]
    np.testing.assert_allclose(y.asnumpy(), np.tanh(0.5) * 2, rtol=1e-6)
    # Every argument is bound at every call: a new b reuses the graph and is read.
    y = compiled(a, ms.Tensor(np.full((2, 2), 3.0, np.float32)))
    assert not compiled.compile_report()["compiled"]
    np.testing.assert_allclose(y.asnumpy(), np.tanh(0.5) * 3, rtol=1e-6)
    da, db = ms.grad(compiled, grad_position=(0, 1))(a, b)
    np.testing.assert_allclose(da.asnumpy(), 2 * (1 - np.tanh(0.5) ** 2), rtol=1e-6)
    np.testing.assert_allclose(db.asnumpy(), np.tanh(0.5), rtol=1e-6)
    # A Python number would be baked into the graph: such a call runs op by op instead.
    with pytest.raises(TypeError, match=r"called with \(Tensor, float\)"):
        compiled(a, 2.0)
    lenient = ms.jit(scaled)
    with pytest.warns(UserWarning, match="runs op by op"):
        y = lenient(a, 2.0)
    np.testing.assert_allclose(y.asnumpy(), np.tanh(0.5) * 2, rtol=1e-6)


class JitNet(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = ms.nn.Dense(4, 4, seed=1)

    @ms.jit(jit_level="O2")
    def construct(self, x):
        return ms.ops.tanh(self.fc(x))


def test_jit_on_construct_marks_the_cell():
    net = JitNet()
    assert net.jit
    # A jit region of a PYNATIVE run is never sunk: O2 runs at O0 (MindSpore warns, once).
    y = net(ms.Tensor(np.ones((2, 4), np.float32)))
    report = net.compile_report()
    assert report["jit_region"] and report["jit_level"] == "O0"
    assert report["executor"] == "KernelExecutor"
    assert y.shape == (2, 4)
    # In GRAPH mode the cell's own O2 holds.
    ms.set_context(mode=ms.GRAPH_MODE)
    net(ms.Tensor(np.ones((2, 4), np.float32)))
    report = net.compile_report()
    assert report["jit_level"] == "O2" and report["executor"] == "SinkExecutor"


class ElementwiseChain(ms.nn.Cell):
    def construct(self, x):
        y = ms.ops.relu(x * 1.5 + 0.5)
        return ms.ops.minimum(y, 6.0) - 0.25 * x + abs(x)


def test_python_cells_dump_and_fuse(tmp_path):
    x = ms.Tensor.randn((64, 256), seed=3)
    ms.set_context(deterministic="ON")
    reference = ElementwiseChain()(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"}, save_graphs=2,
                   save_graphs_path=str(tmp_path / "ir"))
    cell = ElementwiseChain()
    y = cell(x).asnumpy()
    assert y.tobytes() == reference.tobytes()  # fused kernels give the unfused bits
    report = cell.compile_report()
    assert report["fusion_level"] == 2
    dumps = report["dump_files"]
    assert dumps and all(os.path.exists(f) for f in dumps)
    backend = [f for f in dumps if f.endswith("_backend.ir")]
    assert backend, dumps
    text = open(backend[0]).read()
    assert "fused" in text
    assert "ElementwiseChain" in os.path.basename(backend[0])
    assert glob.glob(str(tmp_path / "ir" / "**" / "graph_kernel_dump" / "*"), recursive=True) or \
        glob.glob(str(tmp_path / "ir" / "graph_kernel_dump" / "*"))


CACHE_SCRIPT = """
import sys, hashlib
import numpy as np
import modeflow as ms

class Net(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = ms.nn.Dense(32, 64, seed=1)
        self.fc2 = ms.nn.Dense(64, 8, seed=2)
    def construct(self, x):
        return self.fc2(ms.ops.gelu(self.fc1(x)))

ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"}, enable_compile_cache=True,
               compile_cache_path=sys.argv[1], deterministic="ON")
net = Net()
y = net(ms.Tensor.randn((16, 32), seed=5)).asnumpy()
r = net.compile_report()
print("hit" if r["cache_hit"] else "miss", r["cache_key"], hashlib.sha256(y.tobytes()).hexdigest())
"""


def test_python_cell_hits_the_compile_cache_from_a_second_process(tmp_path):
    script = tmp_path / "cached_net.py"
    script.write_text(CACHE_SCRIPT)
    cache = str(tmp_path / "cache")
    code = f"import sys; sys.argv = ['cached_net.py', {cache!r}]; exec(open({str(script)!r}).read())"
    runs = [run_python(code, cwd=tmp_path) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (run.stdout.split() for run in runs)
    assert first[0] == "miss" and second[0] == "hit", (first, second)
    assert first[1] == second[1] and first[1]
    assert first[2] == second[2]  # the same bits from the loaded entry


def test_cell_errors_in_python_use():
    class NoConstruct(ms.nn.Cell):
        pass

    with pytest.raises(TypeError, match="defines no construct"):
        NoConstruct()(ms.Tensor(np.ones(2, np.float32)))
    with pytest.raises(TypeError, match=r"construct\(\) takes 2 positional arguments but 3"):
        Net()(ms.Tensor(np.ones((1, 8), np.float32)), ms.Tensor(np.ones(1, np.float32)))

    class Early(ms.nn.Cell):
        def __init__(self):
            self.fc = ms.nn.Dense(2, 2)
            super().__init__()

    with pytest.raises(TypeError, match="super\\(\\).__init__\\(\\) first"):
        Early()
    with pytest.raises(TypeError, match="built-in layer"):
        ms.nn.Dense(2, 2).extra = ms.nn.ReLU()

    class ReturnsTuple(ms.nn.Cell):
        def construct(self, x):
            return x, x

    with pytest.raises(TypeError, match="must return one Tensor"):
        ReturnsTuple()(ms.Tensor(np.ones(2, np.float32)))


def test_python_exceptions_in_construct_propagate_unchanged():
    class Raises(ms.nn.Cell):
        def construct(self, x):
            raise KeyError("from construct")

    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        with pytest.raises(KeyError, match="from construct"):
            Raises()(ms.Tensor(np.ones(2, np.float32)))


def test_sequential_cell_names_children_like_mindspore():
    seq = ms.nn.SequentialCell([ms.nn.Dense(4, 3, seed=1), ms.nn.ReLU(), ms.nn.Dense(3, 2, seed=2)])
    assert list(seq.parameters_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert seq.cls_name == "SequentialCell" and len(seq) == 3
    x = ms.Tensor(np.ones((1, 4), np.float32))
    eager = seq(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(seq(x).asnumpy(), eager, rtol=1e-6)
    names = [name for name, _ in seq.cells_and_names()]
    assert names == ["", "0", "1", "2"]


def test_precompile_only_returns_none():
    ms.set_context(mode=ms.GRAPH_MODE, precompile_only=True)
    assert Net()(ms.Tensor(np.ones((1, 8), np.float32))) is None
