#!/usr/bin/python3
"""Exports the networks of the peer comparison as ONNX files, with inputs and PyTorch's outputs.

Writes into the cache directory ($MODEFLOW_PEERS_CACHE, else ~/.cache/modeflow-peers; or --cache),
under models/, for each network NAME:
  NAME.onnx            random weights (fixed seeds; BatchNorm statistics from random inputs),
                       static shapes, opset --opset (default 17)
  NAME.input.npy       the input (float32, fixed seed)
  NAME.torch.npy       PyTorch's output for that input (float32), to check the engines against
  NAME.json            the manifest: model file, input name and file, output name, torch output file

Networks:
  resnet18, mobilenet_v2, squeezenet1_0   torchvision, 1x3x224x224
  mlp           modeflow's `mlp`: 64x784 through 784-512-512-10, ReLU between layers
  cnn           modeflow's `cnn`: 32x3x32x32, conv3x3(3->32)+ReLU, conv3x3(32->32)+ReLU, maxpool 2,
                conv3x3(32->64)+ReLU, maxpool 2, flatten, dense 4096->128 + ReLU, dense 128->10
  transformer   modeflow's `transformer`: one pre-LN encoder block, 8x128x256, 4 heads, FFN 1024,
                GELU (tanh)
  transformer12 twelve such blocks with 8 heads: about 528 ONNX nodes, 38 MB of weights

The sample networks mirror engine/models/*.cc and engine/nn/layers.cc: the same layers, shapes and
weight distributions (uniform +-1/sqrt(fan_in); LayerNorm gamma 1, beta 0, epsilon 1e-5), though
not the same random values, since PyTorch's generator is not modeflow's.

With --check, runs `mf run NAME.onnx --input input=NAME.input.npy` on each export and reports
whether modeflow imports it and how far its output is from PyTorch's.

Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision, python3-onnx,
python3-numpy: tools/install-peers.sh installs them). Nothing here is needed by the build or tests.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - the message is the point
    sys.exit(f"export_models: {e}; run tools/install-peers.sh and use /usr/bin/python3")

REPO = Path(__file__).resolve().parents[2]
INPUT_NAME = "input"
OUTPUT_NAME = "output"
FORMAT = 3  # bumped when an export changes, so that stale files in the cache are redone


def default_cache() -> Path:
    env = os.environ.get("MODEFLOW_PEERS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "modeflow-peers"


# --- modeflow's sample networks in PyTorch ------------------------------------------------------

def uniform_(t: torch.Tensor, fan_in: int) -> None:
    bound = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        t.uniform_(-bound, bound)


class Dense(nn.Linear):
    """nn::Dense: weight (out, in) and bias, both uniform +-1/sqrt(in)."""

    def __init__(self, fin: int, fout: int):
        super().__init__(fin, fout)
        uniform_(self.weight, fin)
        uniform_(self.bias, fin)


class Conv(nn.Conv2d):
    """nn::Conv2d: 3x3, padding 1; weight uniform +-1/sqrt(in*k*k), bias +-1/sqrt(in)."""

    def __init__(self, cin: int, cout: int):
        super().__init__(cin, cout, kernel_size=3, padding=1)
        uniform_(self.weight, cin * 9)
        uniform_(self.bias, cin)


class Mlp(nn.Module):
    def __init__(self, sizes=(784, 512, 512, 10)):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(Dense(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            Conv(3, 32), nn.ReLU(), Conv(32, 32), nn.ReLU(), nn.MaxPool2d(2, 2),
            Conv(32, 64), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
            Dense(4096, 128), nn.ReLU(), Dense(128, 10))

    def forward(self, x):
        return self.layers(x)


class MultiHeadAttention(nn.Module):
    """nn::MultiHeadAttention: q, k, v, output dense layers; softmax(q k^T * 1/sqrt(hd)) v."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.d_model, self.heads = d_model, heads
        self.query, self.key, self.value, self.output = (Dense(d_model, d_model) for _ in range(4))

    def forward(self, x):
        b, s, d = x.shape
        hd = d // self.heads

        def split(t):  # (b, s, d) -> (b, heads, s, hd)
            return t.reshape(b, s, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.output(context.transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    """nn::TransformerEncoderLayer, pre-LN: y = x + attn(ln1(x)); y + dense2(gelu(dense1(ln2(y))))."""

    def __init__(self, d_model: int, heads: int, ffn: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.attention = MultiHeadAttention(d_model, heads)
        self.dense1 = Dense(d_model, ffn)
        self.dense2 = Dense(ffn, d_model)

    def forward(self, x):
        y = x + self.attention(self.norm1(x))
        return y + self.dense2(F.gelu(self.dense1(self.norm2(y)), approximate="tanh"))


class Encoder(nn.Module):
    def __init__(self, layers: int, d_model: int, heads: int, ffn: int):
        super().__init__()
        self.blocks = nn.Sequential(*(EncoderLayer(d_model, heads, ffn) for _ in range(layers)))

    def forward(self, x):
        return self.blocks(x)


def torchvision_model(name: str):
    import torchvision.models as tvm
    ctor = getattr(tvm, name)
    try:
        return ctor(weights=None)  # torchvision >= 0.13: random weights, nothing downloaded
    except TypeError:
        return ctor(pretrained=False)


# name -> (constructor, input shape, description)
NETWORKS = {
    "mlp": (lambda: Mlp(), (64, 784), "modeflow's mlp: 784-512-512-10, ReLU"),
    "cnn": (lambda: Cnn(), (32, 3, 32, 32), "modeflow's cnn: 3 conv3x3, 2 max-pools, 2 dense"),
    "transformer": (lambda: Encoder(1, 256, 4, 1024), (8, 128, 256),
                    "modeflow's transformer: 1 pre-LN encoder block, 4 heads, FFN 1024, GELU tanh"),
    "transformer12": (lambda: Encoder(12, 256, 8, 1024), (8, 128, 256),
                      "12 pre-LN encoder blocks, d_model 256, 8 heads, FFN 1024, GELU tanh"),
    "resnet18": (lambda: torchvision_model("resnet18"), (1, 3, 224, 224), "torchvision resnet18"),
    "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), (1, 3, 224, 224),
                     "torchvision mobilenet_v2"),
    "squeezenet1_0": (lambda: torchvision_model("squeezenet1_0"), (1, 3, 224, 224),
                      "torchvision squeezenet1_0"),
}


def torchvision_classifiers() -> list[str]:
    """Every classification network torchvision lists (80 in 0.14), by its constructor's name."""
    try:
        import torchvision.models as tvm
        return list(tvm.list_models(module=tvm))
    except (ImportError, AttributeError):
        return []


SAMPLE_AND_COMPARED = list(NETWORKS)

# `--nets zoo`: every torchvision classification network, batch 1, at the size it is trained at
# (224x224; inception_v3 299x299), under its torchvision name.
for _name in torchvision_classifiers():
    _side = 299 if _name == "inception_v3" else 224
    NETWORKS.setdefault(_name, ((lambda n=_name: torchvision_model(n)), (1, 3, _side, _side),
                                f"torchvision {_name}"))


def calibrate_batch_norm(model: nn.Module, shape, seed: int, batches: int = 4) -> None:
    """Gives BatchNorm layers running statistics from random inputs.

    A freshly initialized torchvision network has running mean 0 and variance 1 everywhere, so in
    eval mode nothing normalizes it: mobilenet_v2's output comes out around 1e-9, too small for an
    output comparison to say anything. A few training-mode passes (cumulative averages) bring every
    network's output to order 1.
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average over the calibration batches
    g = torch.Generator().manual_seed(seed + 2000)
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(max(8, shape[0]), *shape[1:], generator=g))


def max_opset() -> int:
    try:
        from torch.onnx import _constants
        return int(getattr(_constants, "ONNX_MAX_OPSET", getattr(_constants, "onnx_main_opset", 13)))
    except Exception:
        return 13


def export(name: str, out: Path, opset: int, seed: int) -> dict:
    make, shape, description = NETWORKS[name]
    torch.manual_seed(seed)
    model = make()
    # Some networks start with zeros (vit's and swin's heads): an output of zeros would make the
    # comparison with modeflow say nothing, so those tensors get small random values.
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 3000)
        for p in model.parameters():
            if p.numel() > 1 and not p.abs().max().item():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    calibrate_batch_norm(model, shape, seed)
    model.eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 1000))
    with torch.no_grad():
        y = model(x)
    onnx_file = out / f"{name}.onnx"
    torch.onnx.export(model, x, str(onnx_file), opset_version=opset, do_constant_folding=True,
                      input_names=[INPUT_NAME], output_names=[OUTPUT_NAME])
    np.save(out / f"{name}.input.npy", x.numpy().astype(np.float32))
    np.save(out / f"{name}.torch.npy", y.numpy().astype(np.float32))
    info = {}
    try:
        import onnx
        m = onnx.load(str(onnx_file))
        info["nodes"] = len(m.graph.node)
        info["weight_bytes"] = sum(
            int(np.prod(t.dims)) * 4 for t in m.graph.initializer)  # all float32 here
        info["opset"] = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                             opset)
        info["op_types"] = sorted({n.op_type for n in m.graph.node})
    except ImportError:
        info["opset"] = opset
    manifest = {
        "name": name,
        "description": description,
        "model": onnx_file.name,
        "input_name": INPUT_NAME,
        "input": f"{name}.input.npy",
        "input_shape": list(shape),
        "output_name": OUTPUT_NAME,
        "output_shape": list(y.shape),
        "torch_output": f"{name}.torch.npy",
        "seed": seed,
        "format": FORMAT,
        "torch_version": torch.__version__,
        **info,
    }
    (out / f"{name}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def mf_output_file(outdir: Path, onnx_output: str) -> Path | None:
    """modeflow writes <name>.npy: today output0.npy, soon the ONNX output's name."""
    for candidate in (onnx_output, "output0"):
        f = outdir / f"{candidate}.npy"
        if f.exists():
            return f
    files = sorted(outdir.glob("*.npy"))
    return files[0] if len(files) == 1 else None


# The output must agree with PyTorch's within this fraction of its largest magnitude.
CHECK_TOLERANCE = 1e-4


def check(manifest: dict, out: Path, mf: Path) -> tuple[bool, str]:
    """Runs the export in PYNATIVE and in GRAPH mode (jit_level O1) and compares with PyTorch."""
    want = np.load(out / manifest["torch_output"]).astype(np.float64)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    notes, ok = [], True
    for mode, extra in (("pynative", []), ("graph", ["--set", "jit_config.jit_level=O1"])):
        with tempfile.TemporaryDirectory(prefix="mf-check-") as tmp:
            cmd = [str(mf), "run", str(out / manifest["model"]), "--mode", mode, "--input",
                   f"{manifest['input_name']}={out / manifest['input']}", "--output-dir", tmp,
                   "--iters", "1"] + extra
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                return False, f"{mode}: " + (p.stderr.strip() or p.stdout.strip()
                                              or f"exit {p.returncode}")
            f = mf_output_file(Path(tmp), manifest["output_name"])
            if f is None:
                return False, f"{mode}: no output .npy in --output-dir; stdout:\n{p.stdout}"
            got = np.load(f).astype(np.float64)
        if got.shape != want.shape:
            return False, f"{mode}: output shape {got.shape}, PyTorch's {want.shape}"
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        relative = diff / scale if scale else diff
        ok = ok and relative <= CHECK_TOLERANCE
        notes.append(f"{mode} {relative:.2g}")
    return ok, (f"max |mf - torch| / max |torch| ({scale:.3g}): " + ", ".join(notes) +
                ("" if ok else f"; more than {CHECK_TOLERANCE:g}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=default_cache(),
                    help="cache directory (default $MODEFLOW_PEERS_CACHE or ~/.cache/modeflow-peers)")
    ap.add_argument("--nets", default=",".join(SAMPLE_AND_COMPARED),
                    help=f"comma-separated subset of {','.join(SAMPLE_AND_COMPARED)} or of "
                         "torchvision's classification networks; `zoo` for all of torchvision's")
    ap.add_argument("--opset", type=int, default=0,
                    help="ONNX opset (modeflow reads 7..18; default: min(17, torch's highest))")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="export again even if the files exist")
    ap.add_argument("--check", action="store_true",
                    help="run each export through `mf run` and compare with PyTorch's output")
    ap.add_argument("--mf", type=Path, default=REPO / "build" / "mf", help="the mf binary")
    args = ap.parse_args()

    opset = args.opset or min(17, max_opset())
    if not 7 <= opset <= 18:
        print(f"export_models: note: modeflow's importer reads opsets 7..18, not {opset}")
    out = args.cache / "models"
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    nets = []
    for n in args.nets.split(","):
        nets += torchvision_classifiers() if n == "zoo" else [n] if n else []
    unknown = [n for n in nets if n not in NETWORKS]
    if unknown:
        ap.error(f"unknown network(s) {','.join(unknown)}; known: {','.join(NETWORKS)}")

    failures = 0
    for name in nets:
        manifest_file = out / f"{name}.json"
        manifest = None
        if manifest_file.exists() and not args.force:
            manifest = json.loads(manifest_file.read_text())
            if (manifest.get("opset") != opset or manifest.get("seed") != args.seed
                    or manifest.get("format") != FORMAT
                    or not all((out / manifest[k]).exists()
                               for k in ("model", "input", "torch_output"))):
                manifest = None
        if manifest is None:
            try:
                manifest = export(name, out, opset, args.seed)
            except Exception as e:  # noqa: BLE001 - PyTorch's exporter raises many kinds
                print(f"{name:14s} does not export at opset {opset}: {type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''}")
                continue
            state = "exported"
        else:
            state = "present"
        size = (out / manifest["model"]).stat().st_size / 2**20
        print(f"{name:14s} {state:8s} {manifest['model']} opset {manifest.get('opset')}, "
              f"{manifest.get('nodes', '?')} nodes, {size:.1f} MiB, input "
              f"{'x'.join(map(str, manifest['input_shape']))}")
        if args.check:
            if not args.mf.exists():
                print(f"  check: skipped, {args.mf} not found (build modeflow first)")
                continue
            ok, message = check(manifest, out, args.mf)
            failures += not ok
            print(f"  mf import+run: {'ok' if ok else 'FAILED'}: " +
                  message.replace("\n", "\n    "))
    print(f"export_models: files in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
