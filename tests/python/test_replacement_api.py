"""MindSpore 2.5+'s replacement functions set the same keys as set_context, with its errors."""
import pytest

import modeflow as ms


@pytest.fixture(autouse=True)
def fresh_context():
    ms.reset_context()
    yield
    ms.reset_context()


def test_each_function_sets_its_set_context_key():
    ms.set_device("CPU")
    assert ms.get_context("device_target") == "CPU"
    ms.set_deterministic(True)
    assert ms.get_context("deterministic") == "ON"
    ms.set_recursion_limit(321)
    assert ms.get_context("max_call_depth") == 321
    ms.runtime.set_memory(max_size="2GB", optimize_level="O1", huge_page_reserve_size="1GB")
    assert ms.get_context("max_device_memory") == "2GB"
    assert ms.get_context("memory_optimize_level") == "O1"
    assert ms.get_context("mempool_block_size") == "2GB"
    ms.runtime.set_memory(increase_size="4GB")  # the others back to MindSpore's defaults
    assert ms.get_context("max_device_memory") == "1024GB"
    assert ms.get_context("memory_optimize_level") == "O0"
    assert ms.get_context("mempool_block_size") == "4GB"
    ms.runtime.launch_blocking()
    assert ms.get_context("pynative_synchronize") is True
    ms.runtime.dispatch_threads_num(3)
    assert ms.get_context("inter_op_parallel_num") == 3
    ms.device_context.cpu.op_tuning.threads_num(2)
    assert ms.get_context("runtime_num_threads") == 2


def test_bad_values_raise_as_set_context_does():
    with pytest.raises(ValueError):
        ms.set_recursion_limit(-5)
    with pytest.raises(ValueError):
        ms.runtime.set_memory(max_size="lots")
    with pytest.raises((ValueError, RuntimeError)):
        ms.set_device("Ascend")
