"""Tensor: numpy interop with dtypes kept, safe views, the buffer protocol, arithmetic."""

import gc

import numpy as np
import pytest

import modeflow as ms


@pytest.mark.parametrize("np_dtype, ms_dtype", [
    (np.float32, ms.float32), (np.float64, ms.float64), (np.int32, ms.int32),
    (np.int64, ms.int64), (np.bool_, ms.bool_)])
def test_numpy_round_trip_keeps_dtype_and_values(np_dtype, ms_dtype):
    array = (np.arange(12).reshape(3, 4) % 3).astype(np_dtype)
    t = ms.Tensor(array)
    assert t.dtype == ms_dtype
    assert t.shape == (3, 4) and t.ndim == 2 and t.size == 12
    back = t.asnumpy()
    assert back.dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(back, array)


def test_python_scalars_and_lists_take_mindspore_defaults():
    assert ms.Tensor(1.5).dtype == ms.float32
    assert ms.Tensor(3).dtype == ms.int64
    assert ms.Tensor(True).dtype == ms.bool_
    assert ms.Tensor([1.0, 2.0]).dtype == ms.float32
    assert ms.Tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert ms.Tensor(1.5).shape == ()
    assert ms.Tensor([1.0, 2.0], dtype=ms.float64).dtype == ms.float64
    assert ms.Tensor(np.ones(2, np.float32), dtype=np.int32).dtype == ms.int32


def test_non_contiguous_arrays_are_copied_in_order():
    array = np.arange(12, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(ms.Tensor(array).asnumpy(), array)


def test_unsupported_dtypes_are_type_errors():
    with pytest.raises(TypeError, match="float16"):
        ms.Tensor(np.ones(3, np.float16))
    with pytest.raises(TypeError):
        ms.Tensor("text")
    with pytest.raises(TypeError):
        ms.Tensor(np.ones(2, np.float32), dtype="complex64")


def test_asnumpy_is_a_read_only_view_that_outlives_the_tensor():
    t = ms.Tensor(np.arange(6, dtype=np.float32)) + 1.0
    view = t.asnumpy()
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 5
    again = t.asnumpy()
    assert np.shares_memory(view, again)  # zero-copy: both views are the engine's buffer
    del t, again
    gc.collect()
    for _ in range(10):  # reuse the pool's memory
        (ms.Tensor(np.zeros(6, np.float32)) * 2.0).asnumpy()
    np.testing.assert_array_equal(view, np.arange(6, dtype=np.float32) + 1)


def test_buffer_protocol_and_array_interface():
    t = ms.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    m = memoryview(t)
    assert m.readonly and m.format == "i" and m.shape == (2, 3)
    assert m.tolist() == [[0, 1, 2], [3, 4, 5]]
    np.testing.assert_array_equal(np.asarray(t), np.arange(6).reshape(2, 3))
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_arithmetic_operators_match_numpy():
    a_np = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    b_np = np.random.default_rng(1).uniform(1, 2, (4, 5)).astype(np.float32)
    a, b = ms.Tensor(a_np), ms.Tensor(b_np)
    cases = [(a + b, a_np + b_np), (a - b, a_np - b_np), (a * b, a_np * b_np),
             (a / b, a_np / b_np), (-a, -a_np), (abs(a), np.abs(a_np)),
             (a * 1.5, a_np * np.float32(1.5)), (2.0 - a, np.float32(2.0) - a_np),
             (1.0 / b, np.float32(1.0) / b_np), (a + b_np, a_np + b_np),
             (b ** 2.0, b_np ** np.float32(2.0))]
    for got, want in cases:
        assert got.dtype == ms.float32
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=1e-6)
    m = ms.Tensor(np.ones((5, 3), np.float32))
    np.testing.assert_allclose((a @ m).asnumpy(), a_np @ np.ones((5, 3), np.float32), rtol=1e-5)
    np.testing.assert_array_equal((a < b).asnumpy(), a_np < b_np)
    np.testing.assert_array_equal((a > 0.0).asnumpy(), a_np > 0)
    np.testing.assert_array_equal((a == a).asnumpy(), np.ones((4, 5), bool))


def test_int_tensor_arithmetic_keeps_int():
    t = ms.Tensor(np.array([1, 2, 3], np.int32)) * 2
    assert t.dtype == ms.int32
    np.testing.assert_array_equal(t.asnumpy(), [2, 4, 6])


def test_scalars_methods_and_repr():
    t = ms.Tensor(np.array([2.5], np.float32))
    assert float(t) == 2.5 and t.item() == 2.5 and bool(t)
    assert int(ms.Tensor(np.array(7, np.int64))) == 7
    with pytest.raises(ValueError, match="one element"):
        bool(ms.Tensor(np.ones(3, np.float32)))
    assert "shape=(1)" in repr(t) or "shape=(1,)" in repr(t)
    assert "Float32" in repr(t)
    r = ms.Tensor(np.arange(6, dtype=np.float32)).reshape(2, 3).transpose(1, 0)
    assert r.shape == (3, 2)
    assert r.astype(ms.int64).dtype == ms.int64
    assert len(r) == 3
    assert {t: 1}[t] == 1  # hashable by identity


def test_randn_is_the_engines_generator():
    a = ms.Tensor.randn((3, 4), seed=7).asnumpy()
    b = ms.Tensor.randn((3, 4), seed=7).asnumpy()
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != ms.Tensor.randn((3, 4), seed=8).asnumpy().tobytes()


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_mindspore_tensor_methods_match_numpy(mode):
    ms.set_context(mode=mode)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7 - 1.5
    x = ms.Tensor(a)
    close = np.testing.assert_allclose
    close(x.sum().asnumpy(), a.sum(), rtol=1e-6)
    close(x.sum(axis=1).asnumpy(), a.sum(axis=1), rtol=1e-6)
    close(x.sum(axis=(0, 2), keepdims=True).asnumpy(), a.sum(axis=(0, 2), keepdims=True), rtol=1e-6)
    close(x.sum(initial=2.0).asnumpy(), a.sum(initial=2.0), rtol=1e-6)
    close(x.mean(axis=-1, keep_dims=True).asnumpy(), a.mean(axis=-1, keepdims=True), rtol=1e-6)
    close(x.max().asnumpy(), a.max())
    close(x.min(axis=2).asnumpy(), a.min(axis=2))
    values, indices = x.max(axis=1, return_indices=True)
    close(values.asnumpy(), a.max(axis=1))
    np.testing.assert_array_equal(indices.asnumpy(), a.argmax(axis=1))
    np.testing.assert_array_equal(x.argmax().asnumpy(), a.argmax())
    np.testing.assert_array_equal(x.argmin(axis=2).asnumpy(), a.argmin(axis=2))
    assert x[:, :1].squeeze().shape == (2, 4)
    assert x.expand_dims(0).shape == (1, 2, 3, 4)
    assert x.flatten().shape == (24,)
    assert x.flatten(start_dim=1).shape == (2, 12)
    assert x.view(6, 4).shape == (6, 4)
    np.testing.assert_array_equal(x[0].T.asnumpy(), a[0].T)
    close(x[0].matmul(x[1].T).asnumpy(), a[0] @ a[1].T, rtol=1e-5)
    close(x.abs().asnumpy(), np.abs(a))
    close(x.exp().asnumpy(), np.exp(a), rtol=1e-6)
    close(x.clip(-1.0, 1.0).asnumpy(), np.clip(a, -1.0, 1.0))
    close(x.abs().pow(2).asnumpy(), a ** 2, rtol=1e-6)
    with pytest.raises(TypeError, match="axis must be None, an int or a tuple"):
        x.sum(axis="1")
    with pytest.raises(ValueError, match="return_indices needs one int axis"):
        x.max(return_indices=True)
    with pytest.raises(ValueError, match="start_dim 10 is out of range for rank 3"):
        x.flatten(start_dim=10)
    with pytest.raises(ValueError, match=r"order must be 'C' \(row-major\), got 'FFFF.{35}\.\.\.$"):
        x.flatten(order="F" * 10000)  # a caller's text is cut before it is echoed
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_tensor_methods_trace_into_a_graph_mode_cell():
    class Net(ms.nn.Cell):
        def construct(self, x):
            return (x * x).sum(axis=1).mean() + x.max()

    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    ms.set_context(mode=ms.GRAPH_MODE)
    out = Net()(ms.Tensor(a))
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(out.asnumpy(), (a * a).sum(axis=1).mean() + a.max(), rtol=1e-6)
