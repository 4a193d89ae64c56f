"""The context functions: MindSpore's names at the top level and in modeflow.context, its argument
forms, its exception types, the engine's message text, and warnings through Python's warnings."""

import json

import pytest

import modeflow as ms
from modeflow import context

from conftest import run_python


def test_top_level_and_context_module_are_the_same_functions():
    for name in ["set_context", "get_context", "reset_context", "set_auto_parallel_context",
                 "get_auto_parallel_context", "reset_auto_parallel_context", "set_ps_context",
                 "get_ps_context", "reset_ps_context", "GRAPH_MODE", "PYNATIVE_MODE"]:
        assert getattr(ms, name) is getattr(context, name), name
    assert (ms.GRAPH_MODE, ms.PYNATIVE_MODE) == (0, 1)


def test_set_and_get_round_trip_with_dicts():
    ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"}, save_graphs=2)
    assert ms.get_context("mode") == ms.GRAPH_MODE
    assert ms.get_context("jit_config")["jit_level"] == "O1"
    assert ms.get_context("jit_config.jit_level") == "O1"
    assert ms.get_context("save_graphs") == 2
    context.set_context(mode=context.PYNATIVE_MODE)
    assert context.get_context("mode") == ms.PYNATIVE_MODE
    ms.reset_context()
    assert ms.get_context("jit_config.jit_level") == ms.get_context("jit_config")["jit_level"]
    assert ms.get_context("save_graphs") == 0


def test_unknown_key_is_value_error_with_the_engine_text():
    with pytest.raises(ValueError) as error:
        ms.set_context(jit_levl="O1")
    # The engine's text, unchanged (the C++ tests check the same sentence).
    assert str(error.value).startswith(
        "For 'context.set_context', the keyword argument 'jit_levl' is not recognized")
    with pytest.raises(ValueError, match="did you mean 'jit_config.jit_level'"):
        ms.set_context(jit_level="O1")
    with pytest.raises(ValueError):
        ms.get_context("no_such_key")


def test_bad_value_is_value_error_and_wrong_type_is_type_error():
    with pytest.raises(ValueError, match="jit_level"):
        ms.set_context(jit_config={"jit_level": "O9"})
    with pytest.raises(TypeError, match="max_call_depth"):
        ms.set_context(max_call_depth="80")
    with pytest.raises(TypeError, match="pynative_synchronize"):
        ms.set_context(pynative_synchronize=1)
    with pytest.raises(TypeError, match="jit_config"):
        ms.set_context(jit_config="O1")
    with pytest.raises(TypeError):
        ms.set_context(**{"jit_config.jit_level": 1})
    with pytest.raises(ValueError):
        ms.set_context(max_call_depth=0)  # the right type, out of range


def test_set_is_all_or_nothing():
    with pytest.raises(ValueError):
        ms.set_context(mode=ms.GRAPH_MODE, no_such_key=1)
    assert ms.get_context("mode") == ms.PYNATIVE_MODE


def test_parallel_and_ps_contexts():
    ms.set_auto_parallel_context(device_num=8, parallel_mode=context.ParallelMode.AUTO_PARALLEL)
    assert ms.get_auto_parallel_context("device_num") == 8
    assert ms.get_auto_parallel_context("parallel_mode") == "auto_parallel"
    ms.reset_auto_parallel_context()
    assert ms.get_auto_parallel_context("device_num") == 1
    with pytest.raises(ValueError, match="not recognized"):
        ms.set_auto_parallel_context(no_such_key=1)
    assert ms.get_ps_context("enable_ps") is False
    with pytest.raises(RuntimeError, match="enable_ps=True is not supported"):
        ms.set_ps_context(enable_ps=True)


def test_device_only_key_warns_through_python_warnings(tmp_path):
    # A fresh process: the engine warns once per key per process.
    result = run_python("""
        import json, warnings
        import modeflow as ms
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ms.set_context(enable_reduce_precision=True)
            ms.set_context(mode=ms.GRAPH_MODE)
        print(json.dumps([[str(w.category.__name__), str(w.message), w.filename] for w in caught]))
    """, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    caught = json.loads(result.stdout)
    assert len(caught) == 1, caught
    category, message, filename = caught[0]
    assert category == "UserWarning"
    assert "enable_reduce_precision" in message
    assert filename == "<string>"  # points at the user's line, not modeflow's internals
    assert "enable_reduce_precision" not in result.stderr  # not printed a second time


def test_warnings_as_errors_raise_at_the_call(tmp_path):
    result = run_python("""
        import warnings
        import modeflow as ms
        warnings.simplefilter("error")
        try:
            ms.set_context(enable_reduce_precision=True)
        except UserWarning as w:
            print("raised:", w)
        ms.set_context(mode=ms.PYNATIVE_MODE)
        print("still usable")
    """, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "raised:" in result.stdout and "enable_reduce_precision" in result.stdout
    assert "still usable" in result.stdout


def test_import_reads_mindsporess_environment_variables(tmp_path):
    # MindSpore 2.6 moves users to these variables: `import modeflow` reads them as `mf` does. The
    # dump variables, the graph-kernel flags and MS_COMPILER_CACHE_ENABLE=1 win over a later
    # set_context (which warns and keeps them); the cache path stays below it.
    result = run_python("""
        import json, os, warnings
        import numpy as np
        import modeflow as ms
        warnings.simplefilter("ignore")
        ms.set_context(save_graphs=0, graph_kernel_flags="--opt_level=1",
                       enable_compile_cache=False)
        ms.set_context(mode=ms.GRAPH_MODE)
        net = ms.models.load("mlp")
        net(ms.models.make_input("mlp"))
        print(json.dumps({
            "save_graphs": ms.get_context("save_graphs"),
            "save_graphs_path": ms.get_context("save_graphs_path"),
            "graph_kernel_flags": ms.get_context("graph_kernel_flags"),
            "enable_compile_cache": ms.get_context("enable_compile_cache"),
            "compile_cache_path": ms.get_context("compile_cache_path"),
            "dumped": sorted(os.listdir("x"))[:1] != [],
        }))
    """, cwd=tmp_path, env={"MS_DEV_SAVE_GRAPHS": "2", "MS_DEV_SAVE_GRAPHS_PATH": "./x",
                            "MS_DEV_GRAPH_KERNEL_FLAGS": "--opt_level=3",
                            "MS_COMPILER_CACHE_ENABLE": "1", "MS_COMPILER_CACHE_PATH": "./cc"})
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["save_graphs"] == 2
    assert got["save_graphs_path"] == "./x"
    assert got["graph_kernel_flags"] == "--opt_level=3"
    assert got["enable_compile_cache"] is True
    assert got["compile_cache_path"] == "./cc"
    assert got["dumped"]


def test_a_bad_environment_variable_is_an_error_at_import(tmp_path):
    result = run_python("import modeflow", cwd=tmp_path, env={"MS_DEV_SAVE_GRAPHS": "7"})
    assert result.returncode != 0
    assert "MS_DEV_SAVE_GRAPHS='7' is not valid" in result.stderr


def test_syntax_and_debug_levels_take_mindspores_integer_constants():
    ms.set_context(jit_syntax_level=ms.STRICT)
    assert ms.get_context("jit_syntax_level") == "STRICT"
    ms.set_context(jit_syntax_level=ms.LAX, debug_level=ms.context.DEBUG)
    assert ms.get_context("jit_syntax_level") == "LAX"
    assert ms.get_context("debug_level") == "DEBUG"
    ms.set_context(debug_level=ms.context.RELEASE, jit_syntax_level="COMPATIBLE")
    assert ms.get_context("debug_level") == "RELEASE"
    assert (ms.STRICT, ms.COMPATIBLE, ms.LAX) == (0, 1, 2)
    with pytest.raises(ValueError, match="or its integer 0 to 2"):
        ms.set_context(jit_syntax_level=3)
