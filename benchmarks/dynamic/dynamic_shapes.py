#!/usr/bin/python3
"""Dynamic shapes against static compiles: for each network and size, GRAPH O1 run time of the one
symbolic compile (an ONNX export with dynamic_axes) against a compile of that size alone (an
export with fixed shapes), and what the first call at a new size costs against a static compile's
first call.

Networks: torchvision resnet18 (dynamic batch; sizes 1 and 8) and one encoder block like the
`transformer` sample (d_model 256, 4 heads, FFN 1024, batch 8; dynamic batch and sequence; sizes
16 and 128). Exports are written once into $MODEFLOW_PEERS_CACHE/dynamic (default
~/.cache/modeflow-peers/dynamic) with Debian's python3-torch and python3-torchvision
(tools/install-peers.sh); nothing here is needed by the build or the tests.

Timing is `mf run` in alternating rounds (static, dynamic, static, ...), each the median of
--iters iterations after the first; the ratio is the median of the rounds' ratios. The dynamic
model is compiled at another size first (batch 2, sequence 40) and then bound to the measured
size, as a server meets sizes; its first call at the measured size includes importing the model
at that size, binding the symbolic compile and preparing kernels, where the static model's
first call includes its whole compile (both exclude reading the file).

    /usr/bin/python3 benchmarks/dynamic/dynamic_shapes.py --mf build/mf [--threads 1] [--rounds 3]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np


def cache_dir():
    env = os.environ.get("MODEFLOW_PEERS_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "modeflow-peers") / "dynamic"


def export(out):
    """Writes the dynamic and static exports and the inputs, once."""
    if (out / "done").exists():
        return
    import torch
    import torchvision

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18().eval()
    encoder = torch.nn.TransformerEncoderLayer(256, 4, 1024, activation="gelu",
                                               batch_first=True).eval()

    def save(model, shape, name, dynamic_axes=None):
        torch.onnx.export(model, torch.randn(*shape), str(out / name), opset_version=17,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes=dynamic_axes)

    save(resnet, (2, 3, 224, 224), "resnet18_dynamic.onnx", {"input": {0: "batch"}})
    save(encoder, (2, 16, 256), "encoder_dynamic.onnx", {"input": {0: "batch", 1: "seq"}})
    rng = np.random.default_rng(0)
    for name, model, shape in [("resnet18_b1", resnet, (1, 3, 224, 224)),
                               ("resnet18_b8", resnet, (8, 3, 224, 224)),
                               ("resnet18_b2", resnet, (2, 3, 224, 224)),
                               ("encoder_s16", encoder, (8, 16, 256)),
                               ("encoder_s128", encoder, (8, 128, 256)),
                               ("encoder_s40", encoder, (8, 40, 256))]:
        save(model, shape, name + ".onnx")
        np.save(out / (name + ".npy"), rng.standard_normal(shape).astype(np.float32))
    (out / "done").write_text("ok\n")


def mf_run(mf, args, threads):
    cmd = [mf, "run", *args, "--mode", "graph", "--set", "jit_config.jit_level=O1",
           "--set", f"runtime_num_threads={threads}", "--set", "inter_op_parallel_num=1"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def times(text):
    """(first, median) ms of `mf run --iters`."""
    m = re.search(r"time: first ([\d.e+-]+) ms, median ([\d.e+-]+) ms", text)
    return float(m.group(1)), float(m.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mf", default="build/mf")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    out = cache_dir()
    export(out)
    cases = [("resnet18 batch 1", "resnet18_dynamic", "resnet18_b1", "resnet18_b2"),
             ("resnet18 batch 8", "resnet18_dynamic", "resnet18_b8", "resnet18_b2"),
             ("encoder seq 16", "encoder_dynamic", "encoder_s16", "encoder_s40"),
             ("encoder seq 128", "encoder_dynamic", "encoder_s128", "encoder_s40")]
    print(f"GRAPH O1, {args.threads} thread(s), {args.rounds} rounds of {args.iters} iterations\n")
    print("| network, size | static ms | dynamic ms | dynamic/static | static first call | "
          "dynamic first call at a new size |")
    print("|---|---|---|---|---|---|")
    for label, dynamic, static, other in cases:
        x = str(out / (static + ".npy"))
        ratios, static_ms, dynamic_ms, static_first, dynamic_first = [], [], [], [], []
        for _ in range(args.rounds):
            s_first, s_med = times(mf_run(args.mf, [str(out / (static + ".onnx")), "--input",
                                                    f"input={x}", "--iters", str(args.iters)],
                                          args.threads))
            # The symbolic compile at another size, then this size bound to it: its first call
            # (the import at this size, binding, kernels, the run) and its steady state.
            sets = mf_run(args.mf, [str(out / (dynamic + ".onnx")), "--input",
                                    f"input={out / (other + '.npy')}", "--input", f"input={x}",
                                    "--iters", str(args.iters)], args.threads)
            m = re.search(r"input set 1 \([^)]*\)\): ([^\n]*), first ([\d.e+-]+) ms, median "
                          r"([\d.e+-]+) ms", sets)
            if not m or "bound the symbolic compile" not in m.group(1):
                sys.exit(f"{label}: the second size was not bound to the symbolic compile:\n{sets}")
            d_med = float(m.group(3))
            ratios.append(d_med / s_med)
            static_ms.append(s_med)
            dynamic_ms.append(d_med)
            static_first.append(s_first)
            dynamic_first.append(float(m.group(2)))
        med = statistics.median
        print(f"| {label} | {med(static_ms):.3g} | {med(dynamic_ms):.3g} | {med(ratios):.2f} | "
              f"{med(static_first):.3g} ms | {med(dynamic_first):.3g} ms |")


if __name__ == "__main__":
    main()
