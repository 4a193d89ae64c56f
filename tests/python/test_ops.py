"""ops: generated from the engine's op registry, keyword attributes checked against each op's
schema, engine errors as Python exceptions with the engine's text, asynchronous errors at the next
sync point naming the op and the Python line that queued it, and the GIL released while waiting."""

import inspect
import os
import re
import sys
import threading

import numpy as np
import pytest

import modeflow as ms

SOURCE_DIR = os.path.join(os.path.dirname(__file__), "..", "..")


def test_every_op_of_the_cpp_api_is_generated():
    # The op functions of the C++ API (engine/ops.h) and the literal op names of runtime/ops/
    # must all be there, without any list in the Python package.
    header = open(os.path.join(SOURCE_DIR, "engine", "ops.h")).read()
    cpp_functions = set(re.findall(r"^(?:Tensor|std::vector<Tensor>) (\w+)\(", header, re.M))
    # gelu(x, tanh_approximation) picks gelu_tanh or gelu_erf; ops.gelu is MindSpore's alias.
    cpp_functions -= {"call", "scalar", "cond", "while_loop", "gelu"}
    literal = set()
    ops_dir = os.path.join(SOURCE_DIR, "runtime", "ops")
    for name in os.listdir(ops_dir):
        literal |= set(re.findall(r'define_op\("(\w+)"\)', open(os.path.join(ops_dir, name)).read()))
    literal -= {"call", "cond", "while"}
    registered = set(ms.ops.registered)
    assert cpp_functions <= registered, cpp_functions - registered
    assert literal <= registered, literal - registered
    assert len(registered) >= 55
    for name in registered:
        function = getattr(ms.ops, name)
        assert callable(function) and function.__doc__.startswith(name + "("), name
    assert "axis=-1" in ms.ops.softmax.__doc__
    assert {"gelu_tanh", "gelu_erf"} <= registered
    package = open(ms.ops.__file__).read()
    assert '"softmax"' not in package and "'softmax'" not in package  # no hand list


def test_keyword_and_positional_attributes():
    x_np = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x = ms.Tensor(x_np)
    np.testing.assert_allclose(ms.ops.reduce_sum(x, axes=[1], keep_dims=True).asnumpy(),
                               x_np.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(ms.ops.reduce_sum(x, 1).asnumpy(), x_np.sum(1), rtol=1e-5)
    soft = ms.ops.softmax(x, axis=0).asnumpy()
    np.testing.assert_allclose(soft.sum(0), np.ones(4), rtol=1e-5)
    assert ms.ops.reshape(x, shape=(4, 3)).shape == (4, 3)
    assert ms.ops.cast(x, dtype=ms.int32).dtype == ms.int32
    assert ms.ops.cast(x, dtype=np.float64).dtype == ms.float64
    both = ms.ops.concat((x, x), axis=0)
    assert both.shape == (6, 4)
    parts = ms.ops.split(x, axis=1, num=2)
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [(3, 2), (3, 2)]
    assert ms.ops.zeros(shape=(2, 3)).shape == (2, 3)
    np.testing.assert_allclose(ms.ops.add(x, 1.0).asnumpy(), x_np + 1, rtol=1e-6)
    np.testing.assert_allclose(ms.ops.relu(x_np).asnumpy(), np.maximum(x_np, 0))
    assert ms.ops.gelu(x).asnumpy().tobytes() == ms.ops.gelu_erf(x).asnumpy().tobytes()
    assert ms.ops.gelu(x, approximate="tanh").asnumpy().tobytes() == \
        ms.ops.gelu_tanh(x).asnumpy().tobytes()
    with pytest.raises(ValueError, match="approximate"):
        ms.ops.gelu(x, approximate="fast")


def test_bad_attributes_are_type_errors_naming_the_op():
    x = ms.Tensor(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="unexpected keyword argument 'axs'.*softmax\\(x0, axis=-1\\)"):
        ms.ops.softmax(x, axs=0)
    with pytest.raises(TypeError, match="attribute 'axis' must be an int"):
        ms.ops.softmax(x, axis=0.5)
    with pytest.raises(TypeError, match="keep_dims' must be a bool"):
        ms.ops.reduce_sum(x, keep_dims=1)


def test_engine_errors_keep_their_text():
    a = ms.Tensor(np.ones((2, 3), np.float32))
    b = ms.Tensor(np.ones((4, 5), np.float32))
    with pytest.raises(ValueError) as error:
        ms.ops.matmul(a, b)
    text = str(error.value)
    assert "matmul" in text and "test_ops.py" in text  # the call site is this Python line
    with pytest.raises(ValueError, match="softmax"):
        ms.ops.softmax(a, axis=5)


def test_async_error_raised_at_the_sync_point_naming_op_and_python_line():
    ms.set_context(pynative_synchronize=False)
    x = ms.Tensor(np.ones((3, 2), np.float32))
    indices = ms.Tensor(np.array([0, 7], np.int64))
    y = ms.ops.gather(x, indices, axis=0); line = inspect.currentframe().f_lineno  # noqa: E702
    with pytest.raises(ValueError) as error:
        y.asnumpy()
    text = str(error.value)
    assert "gather" in text
    assert f"test_ops.py:{line}" in text, text
    ms.ops.sync()  # reported once; the engine is usable again
    np.testing.assert_array_equal((x + 1.0).asnumpy(), np.full((3, 2), 2, np.float32))


def test_synchronous_mode_raises_at_the_call():
    ms.set_context(pynative_synchronize=True)
    x = ms.Tensor(np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="gather"):
        ms.ops.gather(x, ms.Tensor(np.array([9], np.int64)), axis=0)


def other_thread_runs_during(action):
    """True when another Python thread ran while action() was inside the engine.

    With the interpreter's switch interval made huge, this thread keeps the GIL unless the engine
    releases it: the other thread then can only run while action() is in C++ code, and it records
    whether action() had returned. No clock decides anything: a GIL held throughout means the
    other thread runs only at join(), after `returned` is set."""
    state = {"returned": False, "saw_running": None}
    go = threading.Event()

    def other():
        go.wait()
        state["saw_running"] = not state["returned"]

    thread = threading.Thread(target=other)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        thread.start()
        go.set()
        action()
        state["returned"] = True
    finally:
        sys.setswitchinterval(interval)
        thread.join()
    return state["saw_running"]


@pytest.mark.parametrize("synchronous", [True, False], ids=["kernel", "wait"])
def test_gil_is_released_while_kernels_run_and_while_waiting(synchronous):
    # One large matmul (17 GFLOP): run on this thread (pynative_synchronize) or waited for by
    # asnumpy(). Holding the GIL through either would keep the other thread out for the whole call.
    # Waiting needs a queue thread, which needs a core the intra-op threads leave idle (when they
    # take every core, asynchronous ops run on the caller: pynative.queue_thread).
    if not synchronous and (os.cpu_count() or 1) < 2:
        pytest.skip("one core: asynchronous ops run on the caller, nothing is waited for")
    ms.set_context(pynative_synchronize=synchronous, runtime_num_threads=1)
    x = ms.Tensor.randn((2048, 2048), seed=1)
    ms.ops.sync()
    if synchronous:
        ran = other_thread_runs_during(lambda: ms.ops.matmul(x, x))
    else:
        y = ms.ops.matmul(x, x)
        ran = other_thread_runs_during(y.asnumpy)
    assert ran, "another Python thread could not run while the engine computed"


def _conv3x3_reference(x, w):
    """(N, C, H, W) * (O, C, 3, 3), padding 1, in float64."""
    n, _, h, width = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, width))
    for ky in range(3):
        for kx in range(3):
            window = padded[:, :, ky:ky + h, kx:kx + width]
            out += np.einsum("nchw,oc->nohw", window, w[:, :, ky, kx])
    return out


@pytest.mark.parametrize("disable", [False, True])
def test_convolution_results_read_back_in_nchw_order(disable):
    # Op by op a convolution may leave its output channels-last for the next op
    # (disable_format_transform turns that off); asnumpy() and the buffer protocol still give NCHW.
    ms.set_context(mode=ms.PYNATIVE_MODE, disable_format_transform=disable)
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (2, 8, 20, 20)).astype(np.float32)
    w = rng.uniform(-0.3, 0.3, (16, 8, 3, 3)).astype(np.float32)
    y = ms.ops.relu(ms.ops.conv2d(ms.Tensor(x), ms.Tensor(w), padding=[1, 1]))
    expected = np.maximum(_conv3x3_reference(x.astype(np.float64), w.astype(np.float64)), 0)
    assert y.shape == (2, 16, 20, 20)
    np.testing.assert_allclose(y.asnumpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(memoryview(y)), expected, rtol=1e-5, atol=1e-5)


def test_clip_takes_mindspore_keywords_numbers_tensors_and_one_sided_bounds():
    x = ms.Tensor(np.array([-1.0, 3.0, 8.0, np.nan], np.float32))
    expected = np.array([0.0, 3.0, 6.0, np.nan], np.float32)
    np.testing.assert_array_equal(ms.ops.clip(x, 0, 6).asnumpy(), expected)
    np.testing.assert_array_equal(ms.ops.clip(x, min=0.0, max=6.0).asnumpy(), expected)
    lo = ms.Tensor(np.array(0.0, np.float32))
    np.testing.assert_array_equal(ms.ops.clamp(x, min=lo, max=6.0).asnumpy(), expected)
    np.testing.assert_array_equal(ms.ops.clip(x, min=2.0).asnumpy(),
                                  np.array([2.0, 3.0, 8.0, np.nan], np.float32))
    np.testing.assert_array_equal(ms.ops.clip(x, max=2.0).asnumpy(),
                                  np.array([-1.0, 2.0, 2.0, np.nan], np.float32))
    with pytest.raises(ValueError, match="at least one of 'min' and 'max'"):
        ms.ops.clip(x)
    assert ms.ops.clip.__doc__.startswith("clip(")


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_mindspore_operator_classes_and_functional_names(mode):
    ops = ms.ops
    ms.set_context(mode=mode)
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 5 - 1
    b = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    x, y = ms.Tensor(a), ms.Tensor(b)
    close = np.testing.assert_allclose

    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.reduce = ops.ReduceSum(keep_dims=True)
            self.matmul = ops.MatMul(transpose_b=True)
            self.softmax = ops.Softmax(axis=-1)
            self.concat = ops.Concat(axis=1)

        def construct(self, x):
            h = self.matmul(x, x)
            return self.concat((self.softmax(h), self.reduce(h, 1)))

    h = a @ a.T
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    close(Net()(x).asnumpy(),
          np.concatenate([e / e.sum(axis=-1, keepdims=True), h.sum(axis=1, keepdims=True)], 1),
          rtol=1e-5, atol=1e-6)
    close(ops.ReduceMean()(x).asnumpy(), a.mean(), rtol=1e-6)
    close(ops.ReduceMax(keep_dims=False)(x, (0, 1)).asnumpy(), a.max())
    close(ops.BatchMatMul()(ops.ExpandDims()(x, 0), ops.ExpandDims()(y, 0)).asnumpy(),
          (a @ b)[None], rtol=1e-5)
    close(ops.Add()(x, x).asnumpy(), a + a)
    close(ops.ReLU()(x).asnumpy(), np.maximum(a, 0))
    assert ops.Reshape()(x, (4, 3)).shape == (4, 3)
    assert ops.Transpose()(x, (1, 0)).shape == (4, 3)
    assert ops.Cast()(x, ms.int32).dtype == ms.int32
    assert ops.Squeeze(0)(ops.ExpandDims()(x, 0)).shape == (3, 4)
    assert ops.Shape()(x) == (3, 4)
    close(ops.Stack(axis=-1)((x, x)).asnumpy(), np.stack([a, a], axis=-1))
    np.testing.assert_array_equal(ops.Argmax(axis=1)(x).asnumpy(), a.argmax(axis=1))
    assert ops.Argmax()(x).dtype == ms.int32
    close(ops.Tile()(x, (2, 1)).asnumpy(), np.tile(a, (2, 1)))
    close(ops.OnesLike()(x).asnumpy(), np.ones_like(a))
    close(ops.sum(x, 1).asnumpy(), a.sum(axis=1), rtol=1e-6)
    close(ops.mean(x, axis=0, keep_dims=True).asnumpy(), a.mean(axis=0, keepdims=True), rtol=1e-6)
    close(ops.cat((x, x), axis=0).asnumpy(), np.concatenate([a, a]))
    close(ops.stack([x, x]).asnumpy(), np.stack([a, a]))
    assert ops.unsqueeze(x, 1).shape == (3, 1, 4)
    close(ops.zeros_like(x).asnumpy(), np.zeros_like(a))
    close(ops.where(x > 0, x, ops.zeros_like(x)).asnumpy(), np.where(a > 0, a, 0))
    with pytest.raises(TypeError, match="'keep_dims' must be a bool"):
        ops.ReduceSum(keep_dims=1)
    with pytest.raises(TypeError, match="non-empty tuple or list of Tensors"):
        ops.Concat()(x)
    with pytest.raises(TypeError, match="'output_type' must be int32 or int64"):
        ops.Argmax(output_type=ms.float32)
    with pytest.raises(ValueError, match=r"'axis' must be in \[-3, 3\)"):
        ops.Stack(axis=5)((x,))
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_bucket_all_reduce_ops_refuse_bad_buckets_clearly():
    ops = ms.ops
    flat = ms.Tensor(np.arange(6, dtype=np.float32))
    # Outside a group both are copies: start packs, wait takes a slice out.
    packed = ops.all_reduce_start(flat, ms.Tensor(np.ones((2, 2), np.float32)))
    assert packed.shape == (10,)
    np.testing.assert_array_equal(
        ops.all_reduce_wait(packed, offset=6, shape=[2, 2], mean=True).asnumpy(), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"elements \[4, 4 \+ 5\) are outside the bucket of 6"):
        ops.all_reduce_wait(flat, offset=4, shape=[5])
    with pytest.raises(ValueError, match=r"elements \[-1, -1 \+ 1\) are outside the bucket"):
        ops.all_reduce_wait(flat, offset=-1, shape=[1])
    with pytest.raises(ValueError, match="more than 2\\^40"):
        ops.all_reduce_wait(flat, offset=0, shape=[1 << 40, 1 << 40])
    with pytest.raises(ValueError, match="every input must have one dtype; got Float32 and Int32"):
        ops.all_reduce_start(flat, ms.Tensor(np.ones((2,), np.int32)))
    with pytest.raises(ValueError, match="a Bool tensor is not reduced"):
        ops.all_reduce_start(ms.Tensor(np.ones((2,), bool)))
    with pytest.raises(ValueError, match="mean needs floating sums"):
        ops.all_reduce_wait(ms.Tensor(np.ones((2,), np.int32)), offset=0, shape=[2], mean=True)
