"""Gradients of the sample networks against PyTorch's autograd, and forward+backward time.

For mlp, cnn and transformer (the networks of ``mf nets``, their weights copied into an equivalent
PyTorch module): the gradient of sum(output) with respect to the input and every parameter, in
modeflow's PYNATIVE and GRAPH O1, against PyTorch 1.13 in float32 (the largest difference relative
to each gradient's largest magnitude; the issue asks for 1e-5). Then, at batch 8, the median time of
one forward+backward step in each engine, side by side in one run, and modeflow's forward alone in
GRAPH O1 (the backward's cost against its forward).

PyTorch multiplies through the BLAS that libblas.so.3 resolves to: Debian's stock package gets the
reference BLAS, so this script re-runs itself on OpenBLAS when Debian's libopenblas0-pthread is
installed (``apt-get install libopenblas0-pthread``) and says which one it compared against.

Not part of the build or the tests. Run with Debian's python3, alone on the machine:
    PYTHONPATH=build/python /usr/bin/python3 benchmarks/grad/grad_vs_torch.py [--iters 20]
"""

import argparse
import math
import os
import statistics
import sys
import time

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"

# PyTorch splits its work over its own intra-op threads; OpenBLAS's threads on top of them made
# the MLP's step 2.5x slower here, so OpenBLAS runs one thread per call (as PyTorch's MKL builds do).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if os.path.isdir(OPENBLAS_DIR) and OPENBLAS_DIR not in os.environ.get("LD_LIBRARY_PATH", ""):
    os.environ["LD_LIBRARY_PATH"] = OPENBLAS_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    os.execv(sys.executable, [sys.executable] + sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import modeflow as ms  # noqa: E402


def blas_name():
    with open("/proc/self/maps") as maps:
        text = maps.read()
    return "OpenBLAS" if "openblas" in text.lower() else "the reference BLAS (stock Debian)"


def torch_mlp(p, x):
    h = x
    for i in (1, 2, 3):
        h = F.linear(h, p[f"fc{i}.weight"], p[f"fc{i}.bias"])
        if i < 3:
            h = F.relu(h)
    return h


def torch_cnn(p, x):
    h = F.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=1))
    h = F.relu(F.conv2d(h, p["conv2.weight"], p["conv2.bias"], padding=1))
    h = F.max_pool2d(h, 2, 2)
    h = F.relu(F.conv2d(h, p["conv3.weight"], p["conv3.bias"], padding=1))
    h = F.max_pool2d(h, 2, 2)
    h = torch.flatten(h, 1)
    h = F.relu(F.linear(h, p["fc1.weight"], p["fc1.bias"]))
    return F.linear(h, p["fc2.weight"], p["fc2.bias"])


def torch_transformer(p, x):
    e = "encoder."

    def norm(t, name):
        return F.layer_norm(t, (t.shape[-1],), p[e + name + ".gamma"], p[e + name + ".beta"], 1e-5)

    def dense(t, name):
        return F.linear(t, p[e + name + ".weight"], p[e + name + ".bias"])

    b, s, d = x.shape
    heads, hd = 4, d // 4
    n = norm(x, "norm1")

    def split(t):
        return t.reshape(b, s, heads, hd).permute(0, 2, 1, 3)

    q, k, v = (split(dense(n, "attention." + w)) for w in ("query", "key", "value"))
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    ctx = torch.softmax(scores, -1) @ v
    y = x + dense(ctx.permute(0, 2, 1, 3).reshape(b, s, d), "attention.output")
    return y + dense(F.gelu(dense(norm(y, "norm2"), "dense1"), approximate="tanh"), "dense2")


TORCH = {"mlp": torch_mlp, "cnn": torch_cnn, "transformer": torch_transformer}


def modeflow_grads(net, x, mode, level="O1"):
    ms.set_context(mode=mode, jit_config={"jit_level": level})
    params = net.trainable_params()
    step = ms.value_and_grad(net, 0, params)
    return step, params


def median_ms(fn, iters):
    fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ms.set_context(runtime_num_threads=args.threads)
    print(f"PyTorch {torch.__version__} on {blas_name()}, {args.threads} threads; "
          f"modeflow GRAPH O1 and PYNATIVE; batch {args.batch} for the times\n")
    print("| network | gradient | PYNATIVE vs torch | GRAPH O1 vs torch |")
    print("|---|---|---:|---:|")
    rows = []
    for name, torch_fn in TORCH.items():
        net = ms.models.load(name)
        x_full = ms.models.make_input(name).asnumpy()
        params = {n: torch.tensor(v.asnumpy(), requires_grad=True)
                  for n, v in net.parameters_and_names()}
        xt = torch.tensor(x_full, requires_grad=True)
        torch_fn(params, xt).sum().backward()
        want = {"x": xt.grad.numpy()}
        want.update({n: t.grad.numpy() for n, t in params.items()})
        worst = {}
        for mode, label in ((ms.PYNATIVE_MODE, "pynative"), (ms.GRAPH_MODE, "graph")):
            step, plist = modeflow_grads(net, x_full, mode)
            _, (dx, dws) = step(ms.Tensor(x_full))
            got = {"x": dx.asnumpy()}
            got.update({p.name: g.asnumpy() for p, g in zip(plist, dws)})
            # Relative to the gradient's largest magnitude, or to a thousandth of the network's
            # largest gradient for one that is zero in exact arithmetic (the attention's key bias:
            # softmax ignores a shift shared by a row), where both engines return rounding noise.
            floor = 1e-3 * max(float(np.abs(w).max()) for w in want.values())
            for key, w in want.items():
                scale = max(float(np.abs(w).max()), floor)
                err = float(np.abs(got[key] - w).max()) / scale
                worst.setdefault(key, {})[label] = err
        for key, errs in worst.items():
            print(f"| {name} | {key} | {errs['pynative']:.1e} | {errs['graph']:.1e} |")
        # Times at the benchmark batch.
        xb = x_full[: args.batch]
        xb_ms = ms.Tensor(np.ascontiguousarray(xb))
        tparams = {n: t.detach().clone().requires_grad_(True) for n, t in params.items()}
        xbt = torch.tensor(xb, requires_grad=True)

        def torch_step():
            for t in tparams.values():
                t.grad = None
            xbt.grad = None
            torch_fn(tparams, xbt).sum().backward()

        times = {"torch": median_ms(torch_step, args.iters)}
        for mode, label in ((ms.PYNATIVE_MODE, "pynative"), (ms.GRAPH_MODE, "graph_o1")):
            step, _ = modeflow_grads(net, xb, mode)

            def ms_step():
                _, (dx, dws) = step(xb_ms)
                ms.ops.sync()
                dx.asnumpy()

            times[label] = median_ms(ms_step, args.iters)
        ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O1"})

        def ms_forward():
            net(xb_ms).asnumpy()

        times["graph_o1_forward"] = median_ms(ms_forward, args.iters)
        rows.append((name, times))
    print("\nforward+backward, median ms (ratio to PyTorch):\n")
    print("| network | PyTorch | modeflow GRAPH O1 | modeflow PYNATIVE | GRAPH O1 backward / forward |")
    print("|---|---:|---:|---:|---:|")
    for name, t in rows:
        backward = t["graph_o1"] - t["graph_o1_forward"]
        print(f"| {name} | {t['torch']:.3g} | {t['graph_o1']:.3g} ({t['graph_o1'] / t['torch']:.2f}x) "
              f"| {t['pynative']:.3g} ({t['pynative'] / t['torch']:.2f}x) "
              f"| {backward / t['graph_o1_forward']:.2f} |")


if __name__ == "__main__":
    main()
