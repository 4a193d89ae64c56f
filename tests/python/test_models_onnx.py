"""ms.models.load and ms.onnx.load."""

import os

import numpy as np
import pytest

import modeflow as ms
from conftest import require

ONNX_NODE_TESTS = "/usr/share/libonnx-testdata/data/node"


def test_models_load_runs_in_both_modes():
    assert "mlp" in ms.models.names() and "mlp" in ms.models.describe()
    net = ms.models.load("mlp")
    assert isinstance(net, ms.nn.Cell)
    assert [n for n, _ in net.parameters_and_names()][:2] == ["fc1.weight", "fc1.bias"]
    x = ms.models.make_input("mlp")
    ms.set_context(deterministic="ON")
    eager = net(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    assert net(x).asnumpy().tobytes() == eager.tobytes()
    assert eager.shape == (64, 10)
    with pytest.raises(ValueError, match="mlp"):  # NotFound lists the names
        ms.models.load("no_such_net")


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_onnx_load_runs_a_model(mode):
    require(os.path.isdir(ONNX_NODE_TESTS), "libonnx-testdata not installed")
    ms.set_context(mode=mode)
    model = ms.onnx.load(os.path.join(ONNX_NODE_TESTS, "test_relu", "model.onnx"))
    assert len(model.input_names) == 1 and len(model.output_names) == 1
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(model(x).asnumpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(model(**{model.input_names[0]: x}).asnumpy(), np.maximum(x, 0))
    with pytest.raises(TypeError, match="no input"):
        model(nope=x)


def test_onnx_load_errors(tmp_path):
    with pytest.raises(ValueError):
        ms.onnx.load(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    with pytest.raises(RuntimeError):
        ms.onnx.load(str(bad))


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_onnx_load_cell_differentiates_the_models_weights(mode):
    path = os.path.join(os.path.dirname(ONNX_NODE_TESTS), "pytorch-converted", "test_Linear",
                        "model.onnx")
    require(os.path.isfile(path), "libonnx-testdata not installed")
    ms.set_context(mode=mode)
    cell = ms.onnx.load_cell(path)
    weight, bias = cell.trainable_params()  # the file's initializers, by name
    w, b = weight.asnumpy().copy(), bias.asnumpy().copy()
    x = np.linspace(-1, 1, 40, dtype=np.float32).reshape(4, 10)
    y, (dx, (dw, db)) = ms.value_and_grad(cell, grad_position=0, weights=[weight, bias])(
        ms.Tensor(x))
    np.testing.assert_allclose(y.asnumpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    # d sum(x W^T + b): every row of dW is the column sums of x, db the batch size.
    np.testing.assert_allclose(dw.asnumpy(), np.tile(x.sum(axis=0), (w.shape[0], 1)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(db.asnumpy(), np.full(b.shape, 4.0))
    np.testing.assert_allclose(dx.asnumpy(), np.tile(w.sum(axis=0), (4, 1)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="is not an .onnx file"):
        ms.onnx.load_cell("model.ir")


def test_an_onnx_model_trains_as_a_cell_with_the_same_losses_in_both_modes():
    path = os.path.join(os.path.dirname(ONNX_NODE_TESTS), "pytorch-converted", "test_Linear",
                        "model.onnx")
    require(os.path.isfile(path), "libonnx-testdata not installed")
    curves = []
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode, deterministic="ON")
        cell = ms.onnx.load_cell(path)
        x = ms.Tensor(np.linspace(-1, 1, 40, dtype=np.float32).reshape(4, 10))
        y = ms.Tensor(np.zeros((4, 8), np.float32))
        step = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(cell, ms.nn.MSELoss()),
                                      ms.nn.Momentum(cell.trainable_params(), 0.1, 0.9))
        curves.append([float(step(x, y).asnumpy()) for _ in range(10)])
    ms.set_context(deterministic="OFF")
    assert curves[0] == curves[1]
    assert curves[0][-1] < curves[0][0] / 4
