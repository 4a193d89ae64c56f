"""What the Python layer costs: the `chain` network (1,000 dependent adds on 16 floats) written in
Python (tests/python/sample_nets.py's twin: one Python `+` per op) against the C++ network called
from Python (ms.models.load("chain"): one Python call per run) and against modes_bench (pure C++),
in PYNATIVE (sync and async) and GRAPH (O0, O1). Every run waits for its output.

    flock /work/.build.lock env PYTHONPATH=build/python /usr/bin/python3 \
        python/bench/overhead_bench.py [--modes-bench build/benchmarks/modes_bench] [--rounds 7]

Prints microseconds per op (PYNATIVE: per `+`; GRAPH: per compiled call) as medians of rounds.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))

import modeflow as ms  # noqa: E402
from sample_nets import Chain  # noqa: E402

MODES = {
    "pynative_sync": dict(mode=ms.PYNATIVE_MODE, pynative_synchronize=True),
    "pynative_async": dict(mode=ms.PYNATIVE_MODE, pynative_synchronize=False),
    "graph_O0": dict(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O0"}),
    "graph_O1": dict(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"}),
}


def time_per_run(net, x, rounds, min_seconds):
    net(x).asnumpy()  # compile (GRAPH) and warm the pool outside the timing
    medians = []
    for _ in range(rounds):
        runs, start = 0, time.perf_counter()
        while True:
            net(x).asnumpy()
            runs += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        medians.append(elapsed / runs)
    return statistics.median(medians)


def cpp_figures(modes_bench):
    if not modes_bench or not os.path.exists(modes_bench):
        return {}
    out = subprocess.run([modes_bench, "--benchmark_filter=^chain/", "--benchmark_min_time=0.3",
                          "--benchmark_format=json"], capture_output=True, text=True, check=True)
    figures = {}
    for bench in json.loads(out.stdout)["benchmarks"]:
        figures[bench["name"].split("/")[1]] = bench["real_time"] * {"ms": 1e-3, "us": 1e-6,
                                                                      "ns": 1e-9}[bench["time_unit"]]
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-seconds", type=float, default=0.2)
    default_bench = os.path.join(HERE, "..", "..", "build", "benchmarks", "modes_bench")
    parser.add_argument("--modes-bench", default=default_bench)
    args = parser.parse_args()

    cpp = cpp_figures(args.modes_bench)
    x = ms.models.make_input("chain")
    print(f"{'mode':<16}{'Python construct':>18}{'C++ net from Python':>22}{'C++ (modes_bench)':>20}"
          "   per")
    for label, settings in MODES.items():
        ms.reset_context()
        ms.set_context(**settings)
        python_net, cpp_net = Chain(0), ms.models.load("chain")
        t_python = time_per_run(python_net, x, args.rounds, args.min_seconds)
        t_cpp = time_per_run(cpp_net, x, args.rounds, args.min_seconds)
        pure = cpp.get(label)
        if label.startswith("pynative"):
            scale, unit = 1e6 / 1000, "op (us)"
        else:
            scale, unit = 1e6, "call (us)"
        pure_text = f"{pure * scale:.3f}" if pure else "-"
        print(f"{label:<16}{t_python * scale:>18.3f}{t_cpp * scale:>22.3f}{pure_text:>20}   {unit}")


if __name__ == "__main__":
    main()
