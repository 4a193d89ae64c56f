"""Time per training step of data parallelism: run alone (``--threads 2``: one process, two
intra-op threads, the whole batch) or under ``mf launch --worker_num=2`` (``--threads 1``: two
processes, one thread each, half the batch each, gradients all-reduced). Prints the median step in
ms from worker 0. GRAPH mode at jit_level O1, Momentum, MSE loss against zeros (the time does not
depend on the labels). Used by benchmarks/distributed/run.sh."""

import argparse
import os
import time

import numpy as np

import modeflow as ms
from modeflow import nn
from modeflow.communication import get_group_size, get_rank, init


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--net", choices=("mlp", "lenet5"), required=True)
    parser.add_argument("--batch", type=int, default=64, help="the global batch")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--mode", choices=("graph", "pynative"), default="graph")
    parser.add_argument("--fusion", default="", help="all_reduce_fusion_config, e.g. 2,4")
    args = parser.parse_args()

    init()
    size, rank = get_group_size(), get_rank()
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE,
                   jit_config={"jit_level": "O1"}, runtime_num_threads=args.threads)
    if size > 1:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True, all_reduce_fusion_config=[
                                         int(i) for i in args.fusion.split(",") if i])
    x = ms.models.make_input(args.net).asnumpy()
    x = np.concatenate([x] * (args.batch // x.shape[0] + 1))[:args.batch]
    part = args.batch // size
    x = ms.Tensor(np.ascontiguousarray(x[rank * part:(rank + 1) * part]))
    net = ms.models.load(args.net)
    y = ms.Tensor(np.zeros(net(x).shape, np.float32))
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                               nn.Momentum(net.trainable_params(), 0.01, 0.9))
    times, reduce, hidden = [], [], []
    for i in range(args.steps + 5):
        start = time.perf_counter()
        step(x, y).asnumpy()
        if i >= 5:
            times.append(time.perf_counter() - start)
            if size > 1:
                r, h = step._step._reduce_seconds
                reduce.append(r)
                hidden.append(h)
    if rank == 0:
        line = (f"{args.net} {args.mode} fusion [{args.fusion}] batch {args.batch} workers {size} threads {args.threads}: "
                f"median step {1e3 * float(np.median(times)):.3f} ms")
        if reduce:
            line += (f", all-reduce {1e3 * float(np.median(reduce)):.3f} ms of which "
                     f"{1e3 * float(np.median(hidden)):.3f} ms overlapped the backward")
        print(line, flush=True)
    ms.communication.release()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
