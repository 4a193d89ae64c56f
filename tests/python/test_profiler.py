"""ms.Profiler: MindSpore's names (Profiler(output_path=...), analyse()), also as a context
manager; the files it writes in both modes, and its errors."""

import json
import os

import numpy as np
import pytest

import modeflow as ms


class Net(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = ms.nn.Dense(8, 4, seed=3)

    def construct(self, x):
        return ms.ops.relu(self.fc(x))


@pytest.fixture(autouse=True)
def reset():
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_profiler_writes_a_trace_and_a_summary_of_the_kernels(tmp_path, mode):
    ms.set_context(mode=mode)
    net = Net()
    x = ms.Tensor(np.ones((2, 8), np.float32))
    net(x).asnumpy()  # compiled (GRAPH) outside the profile
    profiler = ms.Profiler(output_path=str(tmp_path / "prof"))
    for _ in range(3):
        net(x).asnumpy()
    assert profiler.analyse() == str(tmp_path / "prof")
    trace = json.load(open(tmp_path / "prof" / "trace.json"))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    names = {e["name"] for e in kernels}
    assert "relu" in names and len(kernels) >= 3
    expected_mode = "GRAPH" if mode == ms.GRAPH_MODE else "PYNATIVE"
    assert {e["args"]["mode"] for e in kernels} == {expected_mode}
    summary = open(tmp_path / "prof" / "summary.md").read()
    assert "## Ops by total time" in summary and "| relu |" in summary
    assert open(tmp_path / "prof" / "roofline.svg").read().startswith("<svg")


def test_profiler_as_a_context_manager_and_its_errors(tmp_path):
    with ms.Profiler(output_path=str(tmp_path / "ctx")):
        ms.ops.relu(ms.Tensor(np.ones(4, np.float32))).asnumpy()
    assert os.path.isfile(tmp_path / "ctx" / "trace.json")

    with pytest.raises(ValueError, match="max_events"):
        ms.Profiler(output_path=str(tmp_path), max_events=0)
    with pytest.raises(TypeError, match="output_path"):
        ms.Profiler(output_path=3)
    first = ms.Profiler(output_path=str(tmp_path / "a"))
    with pytest.raises(ValueError, match="already on"):
        ms.Profiler(output_path=str(tmp_path / "b"))
    first.stop()
    with pytest.raises(RuntimeError, match="nothing was profiled"):
        first.analyse()
    # An unwritable place is an error naming it, and the profile is over either way.
    (tmp_path / "file").write_text("x")
    bad = ms.Profiler(output_path=str(tmp_path / "file" / "prof"))
    with pytest.raises(ValueError, match="cannot write the profile"):
        bad.analyse()
    ms.Profiler(output_path=str(tmp_path / "again")).analyse()
