"""Each sample network written in Python gives the same bits as its C++ twin, op by op and
compiled (deterministic=ON), and the Python twin's compiled graph is the C++ one."""

import pytest

import modeflow as ms

from sample_nets import TWINS


def test_every_sample_network_has_a_python_twin():
    assert sorted(TWINS) == sorted(ms.models.names())


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE], ids=["pynative", "graph"])
@pytest.mark.parametrize("name", sorted(TWINS))
def test_python_twin_gives_the_cpp_bits(name, mode):
    ms.set_context(mode=mode, deterministic="ON")
    seed = 2
    x = ms.models.make_input(name, seed)
    cpp = ms.models.load(name, seed)
    python = TWINS[name](seed)
    assert [n for n, _ in python.parameters_and_names()] == \
        [n for n, _ in cpp.parameters_and_names()]
    want = cpp(x).asnumpy()
    got = python(x).asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"{name}: the Python twin differs from the C++ network"
    if mode == ms.GRAPH_MODE:
        assert python.compile_report()["compiled"]
