"""A first walk through modeflow from Python: the same network op by op (PYNATIVE) and compiled
(GRAPH), the IR dumps save_graphs writes, jit inside PYNATIVE, and what each graph-kernel fusion
level does to an elementwise chain.

    PYTHONPATH=build/python /usr/bin/python3 examples/quickstart.py [--out DIR]
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import modeflow as ms


class Net(ms.nn.Cell):
    """A cell as MindSpore writes one: children and weights are attributes, construct computes."""

    def __init__(self):
        super().__init__()
        self.fc1 = ms.nn.Dense(784, 256, seed=1)
        self.fc2 = ms.nn.Dense(256, 10, seed=2)
        self.temperature = ms.Parameter(ms.Tensor(np.float32(2.0)))

    def construct(self, x):
        h = ms.ops.relu(self.fc1(x))
        return ms.ops.softmax(self.fc2(h) / self.temperature, axis=-1)


class Activation(ms.nn.Cell):
    """Eight elementwise ops over a large tensor: what fusion is for."""

    def construct(self, x):
        y = ms.ops.relu(x * 1.5 + 0.5)
        y = ms.ops.minimum(y, 6.0)
        return y - 0.25 * x + abs(x)


def median_ms(fn, runs=10):
    fn()  # compile and warm up outside the timing
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None, help="where the dumps go (default: a temp dir)")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="modeflow_quickstart_")
    x = ms.Tensor(np.random.default_rng(0).standard_normal((64, 784)).astype(np.float32))
    net = Net()

    print("1. PYNATIVE_MODE (the default): each op runs as Python reaches it")
    ms.set_context(mode=ms.PYNATIVE_MODE, deterministic="ON")
    eager = net(x).asnumpy()
    print(f"   output {eager.shape}, row sums {eager.sum(axis=1)[:3]} ...")
    print(f"   parameters: {list(net.parameters_dict())}")

    print("2. GRAPH_MODE: the first call traces construct once and compiles it; later calls run "
          "the compiled graph without entering Python")
    ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"}, save_graphs=2,
                   save_graphs_path=os.path.join(out, "ir"))
    graph = net(x).asnumpy()
    report = net.compile_report()
    print(f"   compiled in {report['compile_ms']:.2f} ms (trace {report['trace_ms']:.2f} ms), "
          f"{report['executor']}, jit_level {report['jit_level']}, fusion {report['fusion_level']}")
    print(f"   same bits as PYNATIVE: {graph.tobytes() == eager.tobytes()}")
    print(f"3. save_graphs=2 wrote {len(report['dump_files'])} files under {out}/ir, e.g.:")
    for path in report["dump_files"][:4]:
        print(f"   {os.path.relpath(path, out)}")
    ms.set_context(save_graphs=0)

    print("4. jit inside PYNATIVE: only the decorated function is compiled")
    ms.set_context(mode=ms.PYNATIVE_MODE)

    @ms.jit(jit_level="O1")
    def head(t):
        return ms.ops.softmax(t * 2.0 + 1.0)

    y = head(ms.Tensor(eager))
    print(f"   {head.__name__}: jit region {head.compile_report()['jit_region']}, "
          f"output {y.shape}")

    print("5. Fusion levels (graph_kernel_flags=--opt_level=N) on 8M-element activation, GRAPH O1:")
    big = ms.Tensor.randn((8 * 1024 * 1024,), seed=3)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    reference = Activation()(big).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"})
    for level in range(4):
        ms.set_context(graph_kernel_flags=f"--opt_level={level}")
        cell = Activation()
        median = median_ms(lambda: cell(big).asnumpy())
        same = cell(big).asnumpy().tobytes() == reference.tobytes()
        print(f"   opt_level {level}: {median:7.2f} ms per call, same bits as op by op: {same}")
    ms.reset_context()


if __name__ == "__main__":
    main()
