"""Distributed training from Python as MindSpore scripts write it: communication.init /
get_rank / get_group_size / release, ops.AllReduce / AllGather / Broadcast, and
TrainOneStepCell under parallel_mode=DATA_PARALLEL, for a built-in network (the C++ step) and a
network written in Python (the tape and nn.DistributedGradReducer). Two workers are started here
with the variables mf launch sets."""

import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import modeflow as ms
from modeflow import nn, ops
from modeflow.communication import GlobalComm, get_group_size, get_rank, init, release

WORKER = textwrap.dedent("""
    import sys
    import numpy as np
    import modeflow as ms
    from modeflow import nn, ops
    from modeflow.communication import init, get_rank, get_group_size, release

    mode, network, out = sys.argv[1], sys.argv[2], sys.argv[3]
    init()
    rank, size = get_rank(), get_group_size()
    assert ms.get_auto_parallel_context("device_num") == size
    assert ms.get_auto_parallel_context("global_rank") == rank
    x = ms.Tensor(np.full((3,), rank + 1.0, np.float32))
    assert ops.AllReduce()(x).asnumpy().tolist() == [3.0] * 3
    assert ops.AllReduce(ops.ReduceOp.MAX)(x).asnumpy().tolist() == [2.0] * 3
    assert ops.AllGather()(ms.Tensor(np.array([[rank]], np.int32))).asnumpy().ravel().tolist() == [0, 1]
    (b,) = ops.Broadcast(1)((ms.Tensor(np.array([10.0 * rank], np.float32)),))
    assert b.asnumpy().tolist() == [10.0]

    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE, deterministic="ON")

    # A network's own collective (hybrid_parallel), traced and compiled in GRAPH mode; the dump
    # names it, below rank_<id>/ since init() set device_num.
    class Summed(nn.Cell):
        def __init__(self):
            super().__init__()
            self.all_reduce = ops.AllReduce()

        def construct(self, x):
            return self.all_reduce(x * 2.0) + 1.0

    ms.set_context(save_graphs=1, save_graphs_path=out + "_ir")
    got = Summed()(ms.Tensor(np.full((2, 2), rank + 1.0, np.float32))).asnumpy()
    assert got.tolist() == [[7.0, 7.0], [7.0, 7.0]], got
    ms.set_context(save_graphs=0)
    if mode == "graph":
        import glob
        dumps = glob.glob(out + f"_ir/rank_{rank}/**/*.ir", recursive=True)
        assert dumps and any("all_reduce" in open(f).read() for f in dumps), dumps
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    rng = np.random.default_rng(7)
    data = rng.standard_normal((6, 16, 784)).astype(np.float32)
    labels = rng.integers(0, 10, (6, 16)).astype(np.int32)
    if network == "builtin":
        net = ms.models.load("mlp")
    else:
        net = nn.SequentialCell([nn.Dense(784, 32), nn.ReLU(), nn.Dense(32, 10)])
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    if network == "builtin":
        step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    else:
        step = nn.TrainOneStepCell(lambda x, y: loss(net(x), y), opt)
    half = slice(8 * rank, 8 * rank + 8)
    for s in range(6):
        step(ms.Tensor(data[s, half]), ms.Tensor(labels[s, half]))
    np.savez(out + f".{rank}.npz", *[p.asnumpy() for p in net.trainable_params()])
    release()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(tmp_path, *args, n=2):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = free_port()
    procs = []
    for rank in range(n):
        env = dict(os.environ, MS_WORKER_NUM=str(n), MS_NODE_ID=str(rank), MS_ROLE="MS_WORKER",
                   MS_SCHED_HOST="127.0.0.1", MS_SCHED_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(ms.__file__))))
        procs.append(subprocess.Popen([sys.executable, str(script), *map(str, args)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out
    return outputs


@pytest.mark.parametrize("mode", ["graph", "pynative"])
@pytest.mark.parametrize("network", ["builtin", "python"])
def test_two_workers_keep_the_same_weights(tmp_path, mode, network):
    run_workers(tmp_path, mode, network, tmp_path / "w")
    w0 = np.load(tmp_path / "w.0.npz")
    w1 = np.load(tmp_path / "w.1.npz")
    assert len(w0.files) in (4, 6)  # the Python net has 2 layers, the built-in mlp 3
    for name in w0.files:
        np.testing.assert_array_equal(w0[name], w1[name])


def test_init_outside_a_job_is_a_group_of_one(monkeypatch):
    monkeypatch.delenv("MS_WORKER_NUM", raising=False)
    with pytest.raises(ValueError, match="not initialized"):
        get_rank()
    init()
    try:
        assert (get_rank(), get_group_size(), GlobalComm.INITED) == (0, 1, True)
        x = ms.Tensor(np.arange(4, dtype=np.float32))
        np.testing.assert_array_equal(ops.AllReduce()(x).asnumpy(), x.asnumpy())
        with pytest.raises(ValueError, match="already initialized"):
            init()
    finally:
        release()
    assert not GlobalComm.INITED


def test_bad_backend_and_variables_are_clear_errors(monkeypatch):
    with pytest.raises(RuntimeError, match="needs Ascend"):
        init("hccl")
    with pytest.raises(ValueError, match="not known"):
        init("mpi")
    monkeypatch.setenv("MS_WORKER_NUM", "two")
    with pytest.raises(ValueError, match="MS_WORKER_NUM='two'"):
        init()


def test_semi_auto_parallel_is_validated_and_reported_inert():
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL)
    try:
        assert ms.get_auto_parallel_context("parallel_mode") == "semi_auto_parallel"
        with pytest.raises(ValueError, match="non-negative, ascending integers"):
            ms.set_auto_parallel_context(all_reduce_fusion_config=[4, 2])
    finally:
        ms.reset_auto_parallel_context()


def test_data_parallel_without_init_says_to_call_it():
    ms.set_auto_parallel_context(parallel_mode="data_parallel")
    try:
        net = ms.models.load("mlp")
        step = nn.TrainOneStepCell(
            nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
            nn.SGD(net.trainable_params()))
        x = ms.Tensor(np.zeros((2, 784), np.float32))
        with pytest.raises(ValueError, match="communication.init"):
            step(x, ms.Tensor(np.zeros((2,), np.int32)))
    finally:
        ms.reset_auto_parallel_context()
