"""Dynamic shapes from Python: Cell.set_inputs with Tensor(shape=[None, ...]) and an ONNX export
with dynamic_axes run every size with one compile in GRAPH mode, equal to PYNATIVE and to a
compile of each size alone; calls that contradict the declaration are ValueErrors naming the
input and the axis."""

import os

import numpy as np
import pytest

import modeflow as ms
from modeflow import nn
from conftest import DATA_DIR


class Mlp(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(784, 64)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(64, 10)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def test_dynamic_declaration_is_a_placeholder_without_data():
    d = ms.Tensor(shape=[None, 784], dtype=ms.float32)
    assert d.shape == (-1, 784)
    assert d.dtype == ms.float32
    with pytest.raises(TypeError, match="holds no data"):
        d.asnumpy()
    assert ms.Tensor(shape=(2, 3), dtype=ms.float32, init="zeros").asnumpy().sum() == 0
    with pytest.raises(ValueError, match="init='zeros' or 'ones'"):
        ms.Tensor(shape=(2, 3), dtype=ms.float32)
    with pytest.raises(ValueError, match="a dimension is a size"):
        ms.Tensor(shape=[None, -5], dtype=ms.float32)


@pytest.mark.parametrize("jit_level", ["O0", "O1", "O2"])
def test_set_inputs_compiles_once_for_every_size(jit_level):
    net = Mlp()
    net.set_inputs(ms.Tensor(shape=[None, 784], dtype=ms.float32))
    assert net.get_inputs()[0].shape == (-1, 784)
    rng = np.random.default_rng(0)
    compiles = 0
    for batch in (1, 7, 64):
        x = ms.Tensor(rng.standard_normal((batch, 784)).astype(np.float32))
        ms.set_context(mode=ms.PYNATIVE_MODE)
        eager = net(x).asnumpy()
        ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": jit_level})
        compiled = net(x).asnumpy()
        report = net.compile_report()
        compiles += report["compiled"]
        assert report["specialized"], report["dynamic_note"]
        assert report["dynamic_note"] == "one compile serves every size"
        alone = Mlp()
        for name, value in net.parameters_and_names():
            alone.set_parameter(name, value)
        fixed = alone(x).asnumpy()
        assert compiled.shape == (batch, 10)
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(compiled, fixed, rtol=1e-5, atol=1e-5)
    assert compiles == 1


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_a_call_that_contradicts_the_declaration_names_the_input_and_axis(mode):
    ms.set_context(mode=mode)
    net = Mlp()
    net.set_inputs(ms.Tensor(shape=["batch", 784], dtype=ms.float32))
    with pytest.raises(ValueError, match=r"input 'x' dimension 1 is 783 but is declared 784 in "
                                         r"\(batch, 784\)"):
        net(ms.Tensor(np.zeros((2, 783), np.float32)))
    with pytest.raises(ValueError, match=r"input 'x' has rank 3"):
        net(ms.Tensor(np.zeros((2, 784, 1), np.float32)))
    assert net(ms.Tensor(np.zeros((5, 784), np.float32))).shape == (5, 10)
    with pytest.raises(TypeError, match="declares one or more inputs, got none"):
        net.set_inputs()


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_onnx_export_with_dynamic_axes_runs_every_size(mode):
    ms.set_context(mode=mode)
    model = ms.onnx.load(os.path.join(DATA_DIR, "dynamic_mlp.onnx"))
    assert model.input_signature == "x: Float32 (batch, seq, 8)"
    cases = np.load(os.path.join(DATA_DIR, "dynamic_mlp_cases.npz"))
    compiles = 0
    for batch, seq in ((1, 3), (7, 5), (64, 2)):
        got = model(cases[f"x_{batch}_{seq}"]).asnumpy()
        np.testing.assert_allclose(got, cases[f"y_{batch}_{seq}"], rtol=1e-5, atol=1e-6)
        if mode == ms.GRAPH_MODE:
            compiles += model.compile_report()["compiled"]
    if mode == ms.GRAPH_MODE:
        assert compiles == 1
    with pytest.raises(ValueError, match=r"input 'x' dimension 2 is 9 but is declared 8"):
        model(np.zeros((2, 3, 9), np.float32))
