#!/usr/bin/python3
"""Compares modeflow with ONNX Runtime on the networks that export_models.py wrote.

For each network x thread count x engine (ORT; modeflow PYNATIVE, GRAPH O1, GRAPH O2) it runs the
engines in alternating rounds, so that drift of the machine (other load, frequency, cache state)
hits every engine alike, until each engine has at least --min-runs timed runs and --min-seconds of
timed work in the cell; it prints the median ms per cell, modeflow's ratio to ORT, how far each
output is from ORT's and from PyTorch's, and a second table of first-run time and peak memory.

  /usr/bin/python3 benchmarks/compare/compare.py [--nets a,b] [--threads 1,2]
      [--engines ort,pynative,o1,o2] [--min-runs 30] [--min-seconds 2] [--json FILE]

Modeflow is run as `mf run NET.onnx --input NAME=NET.input.npy --iters N --output-dir DIR
--set runtime_num_threads=T --set inter_op_parallel_num=1 [--mode graph --set
jit_config.jit_level=O1|O2]`, ORT through ort_bench.js (node + onnxruntime-node, T intra-op threads,
sequential). inter_op_parallel_num=1 keeps both engines on T cores: modeflow's default fills the
cores its intra-op pool leaves idle with independent ops (two at once at T=1 on two cores). A missing node or onnxruntime-node skips ORT with a note;
the modeflow engines still run. Nothing here is needed by the build or the tests.
"""

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import numpy as np
except ImportError:  # the diffs need numpy; the timings do not
    np = None

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ORT_BENCH = HERE / "ort_bench.js"

ENGINES = {
    # key: (label, mf mode arguments or None for ORT)
    "ort": ("ORT", None),
    "pynative": ("mf PYNATIVE", ["--mode", "pynative"]),
    "o0": ("mf GRAPH O0", ["--mode", "graph", "--set", "jit_config.jit_level=O0"]),
    "o1": ("mf GRAPH O1", ["--mode", "graph", "--set", "jit_config.jit_level=O1"]),
    "o2": ("mf GRAPH O2", ["--mode", "graph", "--set", "jit_config.jit_level=O2"]),
    # jit_config.infer_boost=on: the ONNX weights compiled in as constants, as ORT treats
    # initializers (and MindSpore's inference mode); O0 for the "O1 vs O0" comparison.
    "o0-boost": ("mf GRAPH O0 infer_boost", ["--mode", "graph", "--set", "jit_config.jit_level=O0",
                                             "--set", "jit_config.infer_boost=on"]),
    "o1-boost": ("mf GRAPH O1 infer_boost", ["--mode", "graph", "--set", "jit_config.jit_level=O1",
                                             "--set", "jit_config.infer_boost=on"]),
    # The same without conv-epilogue-fusion: what taking activations into convolutions buys.
    "o1-boost-noepi": ("mf O1 boost, no conv epilogue",
                       ["--mode", "graph", "--set", "jit_config.jit_level=O1", "--set",
                        "jit_config.infer_boost=on", "--set",
                        "graph_kernel_flags=--disable_pass=conv-epilogue-fusion"]),
    "o2-boost": ("mf GRAPH O2 infer_boost", ["--mode", "graph", "--set", "jit_config.jit_level=O2",
                                             "--set", "jit_config.infer_boost=on"]),
}
ALIASES = {"graph-o1": "o1", "graph-o2": "o2", "graph_o1": "o1", "graph_o2": "o2",
           "onnxruntime": "ort", "pynative_mode": "pynative"}
DEFAULT_NETS = ["mlp", "cnn", "transformer", "transformer12", "resnet18", "mobilenet_v2",
                "squeezenet1_0"]

TIME_RE = re.compile(r"time: first ([0-9.eE+-]+) ms, median ([0-9.eE+-]+) ms over (\d+) iteration")
MEM_RE = re.compile(r"memory: peak ([0-9.]+ ?[KMGT]?i?B) in use, ([0-9.]+ ?[KMGT]?i?B) reserved")
COMPILE_RE = re.compile(r"graph: compiled in ([0-9.eE+-]+) ms")
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def default_cache() -> Path:
    env = os.environ.get("MODEFLOW_PEERS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "modeflow-peers"


def parse_bytes(text: str) -> int:
    number, unit = re.match(r"([0-9.]+) ?(\S+)", text).groups()
    return int(float(number) * UNITS[unit])


def fmt_bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def fmt_ms(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def fmt_diff(x) -> str:
    return "-" if x is None else f"{x:.2g}"


class Proc:
    """A finished child process: exit code, output, wall time and its own peak RSS."""

    def __init__(self, cmd, env=None, timeout=None):
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
            # wait4 rather than wait: it returns the rusage of this child alone (its ru_maxrss).
            deadline = None if timeout is None else start + timeout
            while True:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG if deadline else 0)
                if pid != 0:
                    break
                if time.monotonic() > deadline:
                    p.kill()
                    pid, status, usage = os.wait4(p.pid, 0)
                    break
                time.sleep(0.02)
            p.returncode = os.waitstatus_to_exitcode(status)
            self.wall_s = time.monotonic() - start
            self.rc = p.returncode
            self.max_rss = usage.ru_maxrss * 1024  # Linux: KiB
            out.seek(0)
            err.seek(0)
            self.stdout = out.read().decode(errors="replace")
            self.stderr = err.read().decode(errors="replace")

    def error(self) -> str:
        text = (self.stderr.strip() or self.stdout.strip() or f"exit {self.rc}").splitlines()
        return "\n".join(text[-6:])


class Result:
    """One engine in one cell: what every round measured."""

    def __init__(self, engine):
        self.engine = engine
        self.round_medians = []   # ms, one per round
        self.all_times = []       # ms, every timed run (ORT only: mf prints medians)
        self.runs = 0
        self.timed_ms = 0.0
        self.first_ms = []        # first iteration of each process
        self.compile_ms = []
        self.load_ms = []         # ORT: session creation
        self.peak_bytes = None    # mf: pool peak in use
        self.reserved_bytes = None
        self.max_rss = []
        self.wall_s = []
        self.output = None        # path of the last round's output .npy
        self.error = None

    def median(self):
        return statistics.median(self.round_medians) if self.round_medians else None

    def spread(self):
        """(max - min) of the round medians relative to their median, in percent."""
        if len(self.round_medians) < 2:
            return None
        return 100.0 * (max(self.round_medians) - min(self.round_medians)) / self.median()

    def to_json(self):
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def mf_output_file(outdir: Path, onnx_output: str):
    """modeflow writes <name>.npy: today output0.npy, soon the ONNX output's own name."""
    for candidate in (onnx_output, "output0"):
        f = outdir / f"{candidate}.npy"
        if f.exists():
            return f
    files = sorted(outdir.glob("*.npy"))
    return files[0] if len(files) == 1 else None


class Runner:
    def __init__(self, args, node):
        self.args = args
        self.node = node

    def run_mf(self, engine, manifest, models, threads, iters, outdir: Path):
        mode_args = ENGINES[engine][1]
        for f in outdir.glob("*.npy"):
            f.unlink()
        cmd = [str(self.args.mf), "run", str(models / manifest["model"]),
               "--input", f"{manifest['input_name']}={models / manifest['input']}",
               "--iters", str(iters), "--output-dir", str(outdir),
               "--set", f"runtime_num_threads={threads}", "--set", "inter_op_parallel_num=1",
               *mode_args]
        for attempt in range(4):
            # The binary may be mid-rebuild: wait for it rather than fail the whole run.
            if not self.args.mf.exists():
                time.sleep(15)
                continue
            p = Proc(cmd, timeout=self.args.timeout)
            if p.rc == 0 or "Text file busy" not in p.stderr:
                break
            time.sleep(5)
        else:
            return None, f"{self.args.mf} missing or busy"
        if p.rc != 0:
            return None, p.error()
        m = TIME_RE.search(p.stdout)
        if not m:
            return None, f"no 'time:' line in mf's output:\n{p.stdout[-500:]}"
        mem = MEM_RE.search(p.stdout)
        comp = COMPILE_RE.search(p.stdout)
        return {
            "first_ms": float(m.group(1)), "median_ms": float(m.group(2)), "runs": int(m.group(3)),
            "peak_bytes": parse_bytes(mem.group(1)) if mem else None,
            "reserved_bytes": parse_bytes(mem.group(2)) if mem else None,
            "compile_ms": float(comp.group(1)) if comp else None,
            "output": mf_output_file(outdir, manifest["output_name"]),
            "max_rss": p.max_rss, "wall_s": p.wall_s,
        }, None

    def run_ort(self, manifest, models, threads, runs, min_seconds, outdir: Path, warmup=3):
        out = outdir / "ort_output.npy"
        cmd = [self.node, str(ORT_BENCH), "--model", str(models / manifest["model"]),
               "--input-name", manifest["input_name"], "--input", str(models / manifest["input"]),
               "--threads", str(threads), "--warmup", str(warmup), "--min-runs", str(runs),
               "--min-seconds", str(min_seconds), "--output", str(out),
               "--ort-dir", str(self.args.cache)]
        p = Proc(cmd, timeout=self.args.timeout)
        if p.rc != 0:
            return None, p.error()
        r = json.loads(p.stdout.strip().splitlines()[-1])
        return {
            "first_ms": r["first_ms"], "median_ms": r["median_ms"], "runs": r["runs"],
            "times": r["times_ms"], "load_ms": r["load_ms"], "output": out,
            "max_rss": p.max_rss, "wall_s": p.wall_s, "version": r.get("version"),
        }, None

    def run(self, engine, manifest, models, threads, runs, outdir, min_seconds=0.0):
        """One process of one engine: `runs` timed runs (mf: runs iterations, the first included)."""
        outdir.mkdir(parents=True, exist_ok=True)
        if engine == "ort":
            return self.run_ort(manifest, models, threads, runs, min_seconds, outdir)
        return self.run_mf(engine, manifest, models, threads, runs, outdir)


def ort_available(node, cache: Path):
    if node is None or shutil.which(node) is None:
        return False, f"node not found ({node or 'not on PATH'}; apt-get install nodejs npm)"
    p = Proc([node, "-e", (
        "const {createRequire}=require('module');const path=require('path');"
        f"try{{createRequire(path.join({json.dumps(str(cache))},'package.json'))('onnxruntime-node');"
        "}catch(e){require('onnxruntime-node');}")], timeout=60)
    if p.rc != 0:
        return False, f"onnxruntime-node not loadable from {cache} (run tools/install-peers.sh)"
    return True, ""


def max_abs_diff(a_file, b_file):
    if np is None or a_file is None or b_file is None:
        return None
    if not Path(a_file).exists() or not Path(b_file).exists():
        return None
    a, b = np.load(a_file), np.load(b_file)
    if a.shape != b.shape:
        if a.size != b.size:
            return float("inf")
        b = b.reshape(a.shape)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def run_cell(runner, args, manifest, models, threads, engines, workdir):
    """All engines of one (network, threads) cell, in alternating rounds."""
    results = {e: Result(e) for e in engines}
    # Calibration: one short process per engine estimates its time per run (and warms the page
    # cache with the model); its numbers are not kept.
    estimate = {}
    for e in engines:
        r, err = runner.run(e, manifest, models, threads, 3, workdir / e)
        if err:
            results[e].error = err
            print(f"    {ENGINES[e][0]}: FAILED: " + err.replace("\n", "\n      "), flush=True)
            continue
        estimate[e] = max(r["median_ms"], 0.01)
    active = [e for e in engines if e in estimate]
    if not active:
        return results

    need_ms = args.min_seconds * 1000.0
    rounds = max(1, args.rounds)

    def runs_per_process(e, done_rounds):
        # What is still missing, spread over the rounds still planned (at least one). After the
        # first round the measured median replaces the calibration's estimate.
        res = results[e]
        est = res.median() or estimate[e]
        missing = max(args.min_runs - res.runs, math.ceil(1.05 * (need_ms - res.timed_ms) / est), 0)
        return max(args.min_per_round, math.ceil(missing / max(1, rounds - done_rounds)))

    done_rounds = 0
    while True:
        pending = [e for e in active if not results[e].error and (
            done_rounds < rounds or results[e].runs < args.min_runs
            or results[e].timed_ms < need_ms)]
        if not pending or done_rounds >= 3 * rounds:
            break
        per_round = {e: runs_per_process(e, done_rounds) for e in active}
        # Every engine runs in every round (not only the pending ones) so drift stays shared;
        # the rotation of the order spreads "runs first after a switch" evenly too.
        order = active[done_rounds % len(active):] + active[:done_rounds % len(active)]
        for e in order:
            if results[e].error:
                continue
            res = results[e]
            r, err = runner.run(e, manifest, models, threads, per_round[e], workdir / e)
            if err:
                res.error = err
                print(f"    {ENGINES[e][0]}: FAILED: " + err.replace("\n", "\n      "), flush=True)
                continue
            res.round_medians.append(r["median_ms"])
            res.runs += r["runs"]
            res.timed_ms += r["median_ms"] * r["runs"] if e != "ort" else sum(r["times"])
            res.all_times += r.get("times", [])
            res.first_ms.append(r["first_ms"])
            if r.get("compile_ms") is not None:
                res.compile_ms.append(r["compile_ms"])
            if r.get("load_ms") is not None:
                res.load_ms.append(r["load_ms"])
            if r.get("peak_bytes") is not None:
                res.peak_bytes = max(res.peak_bytes or 0, r["peak_bytes"])
                res.reserved_bytes = max(res.reserved_bytes or 0, r["reserved_bytes"])
            res.max_rss.append(r["max_rss"])
            res.wall_s.append(r["wall_s"])
            res.output = r["output"]
            if r.get("version"):
                res.version = r["version"]
        done_rounds += 1
    return results


def print_tables(cells, engines, out=sys.stdout):
    w = out.write
    w("\nTable 1: median ms per run (median of the per-round medians), modeflow/ORT, output error\n")
    w(f"{'network':14s} {'thr':>3s} {'engine':12s} {'median ms':>10s} {'spread':>7s} "
      f"{'runs':>5s} {'rounds':>6s} {'x ORT':>6s} {'|d ORT|':>8s} {'|d torch|':>9s}\n")
    for cell in cells:
        ort = cell["results"].get("ort")
        ort_med = ort.median() if ort else None
        for e in engines:
            r = cell["results"].get(e)
            if r is None:
                continue
            label = ENGINES[e][0]
            if r.error and not r.round_medians:
                w(f"{cell['net']:14s} {cell['threads']:>3d} {label:12s} {'FAILED':>10s}  "
                  f"{r.error.splitlines()[-1][:80]}\n")
                continue
            med = r.median()
            ratio = f"{med / ort_med:.2f}" if (e != "ort" and ort_med) else "-"
            spread = r.spread()
            w(f"{cell['net']:14s} {cell['threads']:>3d} {label:12s} {fmt_ms(med):>10s} "
              f"{'-' if spread is None else f'{spread:.0f}%':>7s} {r.runs:>5d} "
              f"{len(r.round_medians):>6d} {ratio:>6s} "
              f"{fmt_diff(cell['diff_ort'].get(e)) if e != 'ort' else '-':>8s} "
              f"{fmt_diff(cell['diff_torch'].get(e)):>9s}\n")
    w("\nTable 2: first run and memory (per process; medians over the rounds' processes)\n")
    w(f"{'network':14s} {'thr':>3s} {'engine':12s} {'first ms':>9s} {'compile':>8s} "
      f"{'load ms':>8s} {'pool peak':>10s} {'reserved':>10s} {'max RSS':>10s} {'proc s':>7s}\n")
    for cell in cells:
        for e in engines:
            r = cell["results"].get(e)
            if r is None or not r.round_medians:
                continue
            med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
            w(f"{cell['net']:14s} {cell['threads']:>3d} {ENGINES[e][0]:12s} "
              f"{fmt_ms(med(r.first_ms)):>9s} {fmt_ms(med(r.compile_ms)):>8s} "
              f"{fmt_ms(med(r.load_ms)):>8s} {fmt_bytes(r.peak_bytes):>10s} "
              f"{fmt_bytes(r.reserved_bytes):>10s} {fmt_bytes(max(r.max_rss)):>10s} "
              f"{med(r.wall_s):>7.2f}\n")


# The mode rule: GRAPH at any level is never slower than PYNATIVE, O1 and O2 never slower than O0.
# (slower engine, faster engine it must not lose to)
MODE_RULE = [("o0", "pynative"), ("o1", "pynative"), ("o2", "pynative"), ("o1", "o0"),
             ("o2", "o0"), ("o1-boost", "o1")]


def mode_rule_breaks(cells):
    """Cells where an engine is slower than one it must not lose to, beyond the two engines'
    own round-to-round spread: [(net, threads, engine, other, ratio, noise)]."""
    breaks = []
    for cell in cells:
        res = cell["results"]
        for a, b in MODE_RULE:
            ra, rb = res.get(a), res.get(b)
            if not (ra and rb and ra.round_medians and rb.round_medians):
                continue
            ratio = ra.median() / rb.median()
            noise = max(ra.spread() or 0.0, rb.spread() or 0.0) / 100.0
            if ratio > 1.0 + noise:
                breaks.append((cell["net"], cell["threads"], a, b, ratio, noise))
    return breaks


def print_mode_rule(cells, out=sys.stdout):
    w = out.write
    w("\nTable 3: the mode rule (GRAPH never slower than PYNATIVE; O1, O2 never slower than O0)\n")
    breaks = mode_rule_breaks(cells)
    if not breaks:
        w("held in every cell measured (slower only within the engines' round-to-round spread)\n")
    for net, t, a, b, ratio, noise in breaks:
        w(f"{net:14s} {t:>3d} {ENGINES[a][0]} / {ENGINES[b][0]} = {ratio:.2f} "
          f"(spread {100 * noise:.0f}%): BROKEN\n")
    return breaks


def write_markdown(cells, engines, path: Path):
    """One row per network: ORT's ms and each modeflow engine's time over ORT's, per thread
    count, and the largest output difference from PyTorch relative to its largest value."""
    threads = sorted({c["threads"] for c in cells})
    ours = [e for e in engines if e != "ort"]
    head = ["network"]
    for t in threads:
        head += [f"ORT ms T={t}"] + [f"{ENGINES[e][0].replace('mf ', '')} T={t}" for e in ours]
    head.append("max rel. diff vs PyTorch")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_net = {}
    for c in cells:
        by_net.setdefault(c["net"], {})[c["threads"]] = c
    for net, per_t in by_net.items():
        row, worst = [net], None
        for t in threads:
            c = per_t.get(t)
            ort = c["results"].get("ort") if c else None
            ort_med = ort.median() if ort and ort.round_medians else None
            row.append(fmt_ms(ort_med) if ort_med else "-")
            for e in ours:
                r = c["results"].get(e) if c else None
                ok = r and r.round_medians and ort_med
                row.append(f"{r.median() / ort_med:.2f}" if ok else "-")
                if c and c.get("rel_torch", {}).get(e) is not None:
                    worst = max(worst or 0.0, c["rel_torch"][e])
        row.append(f"{worst:.1e}" if worst is not None else "-")
        lines.append("| " + " | ".join(row) + " |")
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--mf", type=Path, default=REPO / "build" / "mf",
                    help="the mf binary (default: build/mf of this repository)")
    ap.add_argument("--cache", type=Path, default=default_cache(),
                    help="cache directory (default $MODEFLOW_PEERS_CACHE or ~/.cache/modeflow-peers)")
    ap.add_argument("--nets", default=",".join(DEFAULT_NETS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--engines", default="ort,pynative,o1,o2",
                    help="comma-separated: ort, pynative, o1 (graph-o1), o2 (graph-o2)")
    ap.add_argument("--min-runs", type=int, default=30,
                    help="timed runs per engine per cell, at least (default 30)")
    ap.add_argument("--min-seconds", type=float, default=2.0,
                    help="timed seconds per engine per cell, at least (default 2)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds the runs are spread over (default 5; more if the minimums need)")
    ap.add_argument("--min-per-round", type=int, default=10,
                    help="timed runs per process, at least (default 10: a process's median "
                         "over few runs moves with each one; mf's leaves out its first iteration)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per process (default 600)")
    ap.add_argument("--node", default=shutil.which("node"), help="the node binary")
    ap.add_argument("--json", type=Path, help="write every measurement to this JSON file")
    ap.add_argument("--markdown", type=Path,
                    help="write a table of the ratios to ORT (one row per network) to this file")
    ap.add_argument("--check-mode-rule", action="store_true",
                    help="exit 3 when GRAPH is slower than PYNATIVE or O1/O2 slower than O0 in "
                         "a cell, beyond the engines' spread (Table 3)")
    args = ap.parse_args()

    engines = []
    for e in args.engines.split(","):
        e = ALIASES.get(e.strip().lower(), e.strip().lower())
        if e not in ENGINES:
            ap.error(f"unknown engine {e}; known: {', '.join(ENGINES)}")
        engines.append(e)
    threads = [int(t) for t in args.threads.split(",") if t]
    args.mf = args.mf.resolve()
    models = args.cache / "models"

    notes = []
    if "ort" in engines:
        ok, why = ort_available(args.node, args.cache)
        if not ok:
            engines.remove("ort")
            notes.append(f"ORT skipped: {why}")
            print(f"compare: note: ORT skipped: {why}", flush=True)
    if any(e != "ort" for e in engines) and not args.mf.exists():
        for _ in range(20):  # it may be mid-rebuild
            time.sleep(15)
            if args.mf.exists():
                break
        else:
            print(f"compare: {args.mf} not found: build modeflow first, or pass --mf", file=sys.stderr)
            return 1
    if np is None:
        notes.append("numpy missing: no output diffs")

    cells = []
    with tempfile.TemporaryDirectory(prefix="mf-compare-") as tmp:
        for net in [n for n in args.nets.split(",") if n]:
            mfile = models / f"{net}.json"
            if not mfile.exists():
                msg = f"{net}: no {mfile} (run benchmarks/compare/export_models.py)"
                print(f"compare: note: {msg}", flush=True)
                notes.append(msg)
                continue
            manifest = json.loads(mfile.read_text())
            for t in threads:
                print(f"compare: {net}, {t} thread{'s' if t > 1 else ''}", flush=True)
                results = run_cell(Runner(args, args.node), args, manifest, models, t, engines,
                                   Path(tmp) / net / f"t{t}")
                torch_out = models / manifest["torch_output"]
                ort_out = results["ort"].output if "ort" in results else None
                cell = {"net": net, "threads": t, "results": results, "diff_ort": {},
                        "diff_torch": {}}
                cell["rel_torch"] = {}
                scale = None
                if np is not None and torch_out.exists():
                    scale = float(np.max(np.abs(np.load(torch_out)))) or None
                for e, r in results.items():
                    cell["diff_torch"][e] = max_abs_diff(r.output, torch_out)
                    if scale and cell["diff_torch"][e] is not None:
                        cell["rel_torch"][e] = cell["diff_torch"][e] / scale
                    if e != "ort":
                        cell["diff_ort"][e] = max_abs_diff(r.output, ort_out)
                cells.append(cell)
                for e, r in results.items():
                    if r.round_medians:
                        print(f"    {ENGINES[e][0]:12s} {fmt_ms(r.median()):>8s} ms "
                              f"({r.runs} runs, {len(r.round_medians)} rounds)", flush=True)

        print_tables(cells, engines)
        breaks = print_mode_rule(cells)
        if args.markdown:
            write_markdown(cells, engines, args.markdown)
            print(f"compare: wrote {args.markdown}")
    for n in notes:
        print(f"note: {n}")
    print("\nmedian: of the per-round medians (each round one process per engine; mf's median "
          "leaves out its first iteration,\nas ORT's its warm-up). spread: (max - min) of the "
          "round medians / median. x ORT: median / ORT's median.\n|d ORT|, |d torch|: max abs "
          "difference of the output from ORT's and PyTorch's. first ms: the first run of a "
          "process\n(mf GRAPH: includes compiling). load ms: ORT session creation. pool peak, "
          "reserved: mf's memory pool.\nmax RSS: the process's peak resident memory (both "
          "engines; includes the runtime and the weights).")
    if args.json:
        payload = {
            "argv": sys.argv, "mf": str(args.mf), "engines": engines, "notes": notes,
            "min_runs": args.min_runs, "min_seconds": args.min_seconds,
            "cells": [{"net": c["net"], "threads": c["threads"], "diff_ort": c["diff_ort"],
                       "diff_torch": c["diff_torch"],
                       "results": {e: dict(r.to_json(), median_ms=r.median())
                                   for e, r in c["results"].items()}} for c in cells],
        }
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"compare: wrote {args.json}")
    if args.check_mode_rule and breaks:
        print(f"compare: the mode rule is broken in {len(breaks)} cell(s) (Table 3)")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
