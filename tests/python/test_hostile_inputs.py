"""Hostile input from Python: each case gets a clear Python exception (or the right answer), never
a crash, a hang or a silent wrong result. Cases that could take the interpreter down run in a
fresh interpreter, so a regression fails one test instead of the whole suite."""

import numpy as np
import pytest

import modeflow as ms
from conftest import run_python


def test_a_dict_that_contains_itself_is_a_value_error():
    looped = {"jit_level": "O1"}
    looped["self"] = looped
    with pytest.raises(ValueError, match="nests dicts and lists more than 128 deep"):
        ms.set_context(jit_config=looped)
    listed = []
    listed.append(listed)
    with pytest.raises(ValueError, match="contains itself"):
        ms.set_context(jit_config={"x": listed})


def test_nesting_a_hundred_thousand_deep_is_a_value_error():
    deep = "leaf"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="more than 128 deep"):
        ms.set_context(jit_config={"jit_level": deep})
    assert ms.get_context("jit_config")["jit_level"] == ""  # nothing was set


def test_big_endian_arrays_are_read_as_their_values():
    for dtype in (">f4", ">f8", ">i4", ">i8"):
        values = np.arange(-3, 3).astype(dtype)
        t = ms.Tensor(values)
        np.testing.assert_array_equal(t.asnumpy(), values.astype(values.dtype.newbyteorder("=")))


def test_a_zero_stride_view_of_two_to_the_thirty_elements_never_crashes(tmp_path):
    result = run_python("""
        import numpy as np
        import modeflow as ms
        view = np.broadcast_to(np.float32(1.5), (2 ** 30,))
        try:
            t = ms.Tensor(view)
            print("ok", t.shape, float(t[2 ** 30 - 1].item()))
        except MemoryError as error:
            print("MemoryError", error)
    """, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(("ok (1073741824,) 1.5", "MemoryError")), result.stdout


def test_fill_refuses_values_its_integer_dtype_cannot_hold():
    for value in (1e300, 3e9, float("nan"), -1e19):
        with pytest.raises(ValueError, match="does not fit dtype Int32"):
            ms.ops.fill(shape=[2], value=value, dtype=ms.int32)
    assert ms.ops.fill(shape=[2], value=-2147483648.0, dtype=ms.int32).asnumpy().tolist() == [
        -2147483648, -2147483648]


def test_asnumpy_of_the_traced_input_is_a_traced_value_error():
    class Reads(ms.nn.Cell):
        def construct(self, x):
            return ms.Tensor(x.asnumpy() * 2)

    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ms.TracedValueError, match="asnumpy"):
        Reads()(ms.Tensor(np.ones(3, np.float32)))


def test_a_nul_byte_in_a_path_is_a_value_error():
    with pytest.raises(ValueError, match="NUL byte"):
        ms.onnx.load("model\0.onnx")
    with pytest.raises(ValueError, match="without NUL bytes"):
        ms.set_context(save_graphs_path="ir\0x")


def test_thousands_of_nested_cells_are_built_and_a_cycle_is_refused():
    class Wrap(ms.nn.Cell):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def construct(self, x):
            return self.inner(x)

    class Leaf(ms.nn.Cell):
        def construct(self, x):
            return x

    leaf = Leaf()
    cell = leaf
    for _ in range(3000):
        cell = Wrap(cell)
    with pytest.raises(ValueError, match="would make a cycle"):
        leaf.back = cell


def test_a_cell_calling_itself_recurses_and_stops_cleanly(tmp_path):
    result = run_python("""
        import numpy as np
        import modeflow as ms

        class Countdown(ms.nn.Cell):
            def construct(self, x):
                if float(x.asnumpy()[0]) <= 0:
                    return x
                return self(x - 1)

        print(Countdown()(ms.Tensor(np.array([5.0], np.float32))).asnumpy().tolist())

        class Forever(ms.nn.Cell):
            def construct(self, x):
                return self(x)

        try:
            Forever()(ms.Tensor(np.ones(1, np.float32)))
        except (RecursionError, ValueError) as error:
            print(type(error).__name__)
    """, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[0] == "[0.0]", result.stdout
    assert lines[1] in ("RecursionError", "ValueError"), result.stdout
