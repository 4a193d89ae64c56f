"""Every `>>>` example of the seed pages (copies in data/seeds/) runs with modeflow in place of
mindspore, in the 1.x form (`from modeflow import context; context.set_context(...)`) and the 2.x
form (`import modeflow as ms; ms.set_context(...)`), each page in a fresh process (the engine warns
once per key per process). An example runs cleanly unless this table says otherwise: keys that
MindSpore documents for Ascend or GPU only warn, deprecated keys warn, keys the 1.0 page has and
later versions removed raise ValueError, and what cannot exist on CPU raises RuntimeError."""

import json
import os
import sys

import pytest

from conftest import DATA_DIR, run_python

HERE = os.path.dirname(os.path.abspath(__file__))
PAGES = ["context.r1.0.en.txt", "context.r1.x.en.txt"]

# example (as written) -> (outcome, words the warning or error must contain)
NOT_CLEAN = {
    'context.set_context(device_target="Ascend")':
        ("RuntimeError", ["device_target 'Ascend'", "CPU only"]),
    'context.set_context(mode=context.GRAPH_MODE,\ndevice_target="Ascend",device_id=0, '
    'save_graphs=True,\nsave_graphs_path="/mindspore")':
        ("RuntimeError", ["device_target 'Ascend'"]),
    "context.set_context(enable_reduce_precision=True)":
        ("warns", ["enable_reduce_precision", "has no effect here"]),
    'context.set_context(save_ms_model=True, save_ms_model_path=".")':
        ("ValueError", ["'save_ms_model' is not recognized"]),
    'context.set_context(enable_dump=True, save_dump_path=".")':
        ("warns", ["'enable_dump' is deprecated", "'save_dump_path' is deprecated"]),
    'context.set_context(variable_memory_max_size="6GB")':
        ("warns", ["'variable_memory_max_size' is deprecated", "max_device_memory"]),
    'context.set_context(enable_profiling=True, profiling_options="training_trace")':
        ("warns", ["'enable_profiling' is deprecated", "'profiling_options' is deprecated"]),
    'context.set_context(enable_profiling=True,\n'
    'profiling_options=\'{"output":"/home/data/output","training_trace":"on"}\')':
        ("warns", ["'enable_profiling' is deprecated", "'profiling_options' is deprecated"]),
    "context.set_auto_parallel_context(mirror_mean=True)":
        ("ValueError", ["'mirror_mean' is not recognized"]),
    "context.set_auto_parallel_context(cast_before_mirror=False)":
        ("ValueError", ["'cast_before_mirror' is not recognized"]),
    'context.set_auto_parallel_context(auto_parallel_search_mode="dynamic_programming")':
        ("warns", ["'auto_parallel_search_mode' is deprecated", "search_mode"]),
    "context.set_context(enable_sparse=True)":
        ("warns", ["'enable_sparse' is deprecated"]),
    'context.set_context(auto_tune_mode="GA,RL")':
        ("warns", ["'auto_tune_mode' is deprecated"]),
    "context.set_ps_context(enable_ps=True, enable_ssl=True, client_password='123456', "
    "server_password='123456')":
        ("RuntimeError", ["enable_ps=True is not supported"]),
}


def run_page(page, form, cwd):
    # The page assumes ./env_config.json exists (its env_config_path example).
    with open(os.path.join(cwd, "env_config.json"), "w") as f:
        json.dump({"sys": {"mem_Reuse": True}}, f)
    code = (f"import sys; sys.path.insert(0, {HERE!r}); sys.argv = ['seed_examples.py', "
            f"{os.path.join(DATA_DIR, 'seeds', page)!r}, {form!r}]; "
            "import seed_examples; seed_examples.main()")
    result = run_python(code, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("form", ["context", "ms"])
@pytest.mark.parametrize("page", PAGES)
def test_seed_page_examples(page, form, tmp_path):
    records = run_page(page, form, str(tmp_path))
    assert len(records) >= 20, "the page's examples were not found"
    seen = set()
    for record in records:
        example = record["example"]
        outcome, words = NOT_CLEAN.get(example, ("ok", []))
        seen.add(example)
        # Keys that do nothing on one CPU device (device_id, most auto-parallel keys) are accepted
        # with their "has no effect here" warning, as the issue asks of device-only keys.
        if (outcome == "ok" and record["outcome"] == "warns" and record["warnings"] and
                all("has no effect here" in w for w in record["warnings"])):
            outcome = "warns"
        assert record["outcome"] == outcome, (record["run"], record)
        text = record["error"] + " ".join(record["warnings"])
        for word in words:
            assert word in text, (record["run"], word, text)
        if outcome == "warns":
            assert not record["error"]
    # Every entry of the table names a real example of some page.
    if page == PAGES[-1] and form == "ms":
        all_examples = set()
        sys.path.insert(0, HERE)
        import seed_examples
        for p in PAGES:
            all_examples |= set(seed_examples.examples(open(os.path.join(DATA_DIR, "seeds", p)).read()))
        assert set(NOT_CLEAN) <= all_examples, set(NOT_CLEAN) - all_examples


def test_examples_are_extracted_with_their_continuations():
    sys.path.insert(0, HERE)
    import seed_examples
    page = open(os.path.join(DATA_DIR, "seeds", "context.r1.0.en.txt")).read()
    found = seed_examples.examples(page)
    assert 'context.set_context(mode=context.GRAPH_MODE,\ndevice_target="Ascend",device_id=0, ' \
           'save_graphs=True,\nsave_graphs_path="/mindspore")' in found
    assert seed_examples.rewrite("from mindspore import context\ncontext.set_context(mode=1)",
                                 "ms") == "import modeflow as ms\nms.set_context(mode=1)"
