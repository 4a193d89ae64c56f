"""The examples of MindSpore 2.6's set_context docstring, as a MindSpore user would type them: each
runs here, except device_target="Ascend", which is refused because this build runs on CPU."""

import warnings

import pytest

import modeflow as ms

EXAMPLES = [
    {"mode": ms.PYNATIVE_MODE},
    {"precompile_only": True},
    {"device_id": 0},
    {"save_graphs": True, "save_graphs_path": "./model.ms"},
    {"enable_reduce_precision": True},
    {"reserve_class_name_in_scope": True},
    {"variable_memory_max_size": "6GB"},
    {"aoe_tune_mode": "online"},
    {"aoe_config": {"job_type": "2"}},
    {"check_bprop": True},
    {"max_device_memory": "3.5GB"},
    {"mempool_block_size": "1GB"},
    {"print_file_path": "print.pb"},
    {"max_call_depth": 80},
    {"env_config_path": "./env_config.json"},
    {"grad_for_scalar": True},
    {"enable_compile_cache": True, "compile_cache_path": "./cache.ms"},
    {"pynative_synchronize": True},
    {"runtime_num_threads": 10},
    {"inter_op_parallel_num": 4},
    {"disable_format_transform": True},
    {"memory_optimize_level": "O0"},
    {"deterministic": "ON"},
    {"ascend_config": {"precision_mode": "force_fp16", "jit_compile": True,
                       "atomic_clean_policy": 1, "op_precision_mode": "./op_precision_config_file",
                       "op_debug_option": "oom",
                       "ge_options": {"global": {"ge.opSelectImplmode": "high_precision"},
                                      "session": {"ge.exec.atomicCleanPolicy": "0"}}}},
    {"jit_syntax_level": ms.STRICT},
    {"debug_level": ms.context.DEBUG},
    {"gpu_config": {"conv_fprop_algo": "performance", "conv_allow_tf32": True,
                    "matmul_allow_tf32": True}},
    {"jit_config": {"jit_level": "O0"}},
    {"exec_order": "bfs"},
]


@pytest.mark.parametrize("kwargs", EXAMPLES, ids=[",".join(e) for e in EXAMPLES])
def test_each_docstring_example_runs(kwargs, tmp_path):
    (tmp_path / "env_config.json").write_text("{}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ascend- and GPU-only keys warn that they do nothing here
        ms.set_context(**kwargs)
    # Stored as MindSpore stores them: save_graphs=True is level 2, the constants by their names.
    stored = {"save_graphs": {True: 2}, "jit_syntax_level": {ms.STRICT: "STRICT"},
              "debug_level": {ms.context.DEBUG: "DEBUG"}}
    for key, value in kwargs.items():
        if isinstance(value, dict):
            continue  # dicts are filled in with their defaults
        assert ms.get_context(key) == stored.get(key, {}).get(value, value), key


def test_the_ascend_example_is_refused_on_cpu():
    with pytest.raises(RuntimeError, match="modeflow runs on CPU only"):
        ms.set_context(device_target="Ascend")
    assert len(EXAMPLES) == 29  # the docstring's 30 examples, less the Ascend one above
