"""Shared fixtures: every test starts from the default contexts, in its own working directory
(save_graphs and compile-cache files land there)."""

import os
import subprocess
import sys
import textwrap

import pytest

import modeflow as ms

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")


def require(available, why):
    """Skips the calling test when `available` is false, except under CI=true, whose machine has
    everything the suite needs: there a missing dependency fails instead of vanishing."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(why + " (required under CI=true)")
    pytest.skip(why)


@pytest.fixture(autouse=True)
def fresh_context(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ms.ops.sync()
    ms.reset_context()
    ms.reset_auto_parallel_context()
    ms.reset_ps_context()
    yield
    try:
        ms.ops.sync()
    finally:
        ms.reset_context()
        ms.reset_auto_parallel_context()
        ms.reset_ps_context()


def run_python(code, cwd, env=None):
    """Runs `code` in a fresh interpreter (the engine warns once per key per process, and the
    compile cache is tested across processes). Returns the CompletedProcess."""
    full_env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(ms.__file__)))
    full_env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in [full_env.get("PYTHONPATH")] if p])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600)
