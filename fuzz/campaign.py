#!/usr/bin/python3
"""A reproducible hostile-input campaign against every reader of modeflow.

Where the libFuzzer targets in fuzz/*.cc call one reader function in-process, this script drives the
built `mf` command and the Python module the way a new user or an attacker would: whole processes,
real files (including FIFOs, directories and /dev/zero behind a file name), hostile argv, hostile
Python objects. Every case runs in its own process and is classified:

  ok            exit 0 (a Python call that returned) where success is legitimate
  clean         `mf`: exit 1 and exactly one stderr line starting "error: ";
                Python: an exception of a documented type (ValueError, TypeError, MemoryError,
                IndexError, RuntimeError, OverflowError, RecursionError, ms.TracedValueError)
  crash         killed by a signal, or a Python interpreter that died without reporting
  hang          still running after --timeout seconds (then killed with its process group)
  unescaped     a clean error (or a warning / stdout line) carrying a raw control byte, or an error
                longer than 2,000 characters (Python: newlines and tabs inside a message are allowed)
  silent_wrong  success where the script knows the answer is different: a value compared with
                numpy or with an unmutated reference run, invalid input that was accepted, a file
                written outside the directory the command was given
  other         any other ending: an exit code other than 0/1, exit 1 without exactly one
                "error: " line, a Python exception of an undocumented type
  endless       (not a finding) a run of an .ir program with a while loop that did not end in
                5 s: a mutation made the loop endless, which the program then does as written

Classes (generators are seeded and deterministic: case i of a class depends only on --seed, the
class and i): ir, onnx, npy, context, python, print, cache. Each class has fixed cases (reference
runs, special files, named cases from earlier campaigns) and --cases N random mutants on top.

Run it from anywhere, with the project already built (it never builds anything, and runs one
process at a time):

    /usr/bin/python3 fuzz/campaign.py                          # all classes, defaults: ~5 minutes
    /usr/bin/python3 fuzz/campaign.py --seed 7 --cases 100     # 100 random mutants in every class
    /usr/bin/python3 fuzz/campaign.py --classes ir,npy --cases ir=200,npy=10 --out /tmp/mfc

Output: a table per class on stdout (also --out/report.txt and --out/summary.json) and, for every
non-clean outcome, --out/repro/<class>/<case>/ with cmd.sh (the exact command line, under the same
resource limits), the inputs in run/, and the stdout/stderr seen. Exit status: 1 if any crash,
hang, unescaped, silent_wrong or other outcome was found, else 0.

Every child runs with an 8 GiB address-space limit and no core files, so that a "huge dimension"
case fails inside the child instead of taking memory from the rest of this (shared) machine; a
crash under that limit is still a finding, since every real machine has finite memory. `MS_*` and
`MF_*` environment variables are removed from the children's environment so that a run does not
depend on the shell it was started from.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

REPO = Path(__file__).resolve().parent.parent
MF = str(REPO / "build" / "mf")
PY_PATH = str(REPO / "build" / "python")
PYTHON = "/usr/bin/python3"
CORPUS = REPO / "fuzz" / "corpus"

CLASSES = ["ir", "onnx", "npy", "context", "python", "print", "cache"]
# Random mutants per class on top of the fixed cases; most cases take 20-100 ms here, so these give
# about 5,000 cases in about 5 minutes on 2 cores.
DEFAULT_CASES = {"ir": 400, "onnx": 600, "npy": 60, "context": 400, "python": 100, "print": 300,
                 "cache": 40}
OUTCOMES = ["ok", "clean", "crash", "hang", "unescaped", "silent_wrong", "other", "endless"]
BAD = {"crash", "hang", "unescaped", "silent_wrong", "other"}
ADDRESS_SPACE_LIMIT = 8 << 30
# A build with AddressSanitizer (--build of a MODEFLOW_ASAN_UBSAN=ON directory) reserves terabytes
# of shadow address space, so its children get a resident-memory limit from ASan itself instead of
# the address-space limit; every sanitizer report is a crash.
SANITIZED = False
SANITIZER_ENV = {"ASAN_OPTIONS": "hard_rss_limit_mb=8192:allocator_may_return_null=1:detect_leaks=0"
                                 ":abort_on_error=1:symbolize=1",
                 "UBSAN_OPTIONS": "halt_on_error=1:abort_on_error=1:print_stacktrace=1"}
MAX_ERROR_CHARS = 2000

# Bytes an attacker puts into names and values: terminal escapes (colour, title, clear screen),
# carriage return and backspace (overwrite what was printed), NUL, DEL, a lone invalid UTF-8 byte
# (passed through argv and files via surrogateescape) and a right-to-left override.
CTRL = ["\x1b[31m", "\x1b]0;owned\x07", "\x1b[2J", "\r", "\x08", "\x00", "\x07", "\x7f", "\n",
        "\udcff", "\u202e"]


# --------------------------------------------------------------------------------------------
# Cases, running and classifying


@dataclasses.dataclass
class Case:
    cls: str
    cid: str
    desc: str
    argv: list
    # Relative path -> bytes, or a special: ("fifo",), ("dir",), ("symlink", target), ("sparse", n).
    files: dict = dataclasses.field(default_factory=dict)
    kind: str = "mf"  # "mf" or "py"
    # Why success would be wrong (the input is known to be invalid); None: success is legitimate.
    expect_error: str | None = None
    # Called with (Result, run directory) after a run; returns why the result is wrong, or None.
    check: Callable | None = None
    # Entries the command may create in its directory; anything else is a file written outside
    # the place it was given (None: do not check).
    allowed_new: tuple | None = None
    timeout: float | None = None
    # The program has a while loop, which a mutation can make endless: a timeout is then the
    # program's own behaviour (outcome "endless"), not a hang of the reader.
    may_loop: bool = False


@dataclasses.dataclass
class Result:
    outcome: str
    reason: str
    rc: int | None
    stdout: bytes
    stderr: bytes
    secs: float


def child_limits():
    if not SANITIZED:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def child_env(python: bool) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MS_", "MF_", "MINDSPORE", "PYTHON"))}
    if python:
        env["PYTHONPATH"] = PY_PATH
    if SANITIZED:
        env.update(SANITIZER_ENV)
    return env


def prepare(rundir: Path, files: dict):
    rundir.mkdir(parents=True, exist_ok=True)
    for name, spec in files.items():
        path = rundir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, (bytes, bytearray)):
            path.write_bytes(spec)
        elif spec[0] == "fifo":
            os.mkfifo(path)
        elif spec[0] == "dir":
            path.mkdir()
        elif spec[0] == "symlink":
            os.symlink(spec[1], path)
        elif spec[0] == "sparse":
            with open(path, "wb") as f:
                f.truncate(spec[1])
        else:
            raise ValueError(f"unknown file spec {spec!r}")


def run_process(argv, cwd: Path, timeout: float, python: bool):
    start = time.monotonic()
    # A session of its own, so that a hung case is killed with every process it started, and only
    # those.
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=child_limits, env=child_env(python))
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    return proc.returncode, out, err, timed_out, time.monotonic() - start


def bad_bytes(line: bytes, allow=b"") -> bytes:
    """The raw control bytes of one line (C0 and DEL), minus those in `allow`."""
    return bytes(sorted({b for b in line if (b < 0x20 or b == 0x7F) and b not in allow}))


def classify_mf(rc, out: bytes, err: bytes, timed_out: bool) -> tuple[str, str]:
    if timed_out:
        return "hang", "no exit before the timeout"
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return "crash", f"killed by {name}"
    for report in (b"ERROR: AddressSanitizer", b"runtime error:", b"ERROR: LeakSanitizer"):
        if report in err:
            return "crash", report.decode() + " (a sanitizer report)"
    lines = err.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    errors = [ln for ln in lines if ln.startswith(b"error: ")]
    # Warnings and stdout may hold tabs and line breaks, never an escape sequence or a CR that
    # rewrites what the user sees; an error line may hold nothing but printable text.
    for where, text in (("stderr", lines), ("stdout", out.split(b"\n"))):
        for ln in text:
            if ln.startswith(b"error: "):
                continue
            bad = bad_bytes(ln, allow=b"\t")
            if bad:
                return "unescaped", f"raw control byte(s) {bad!r} in a {where} line: {esc(ln, 120)}"
            if len(ln) > MAX_ERROR_CHARS and where == "stderr":
                return "unescaped", f"a {len(ln)}-character stderr line"
    if rc == 0:
        return "ok", ""
    if rc == 1 and len(errors) == 1:
        bad = bad_bytes(errors[0])
        if bad:
            return "unescaped", f"raw control byte(s) {bad!r} in the error line"
        if len(errors[0]) > MAX_ERROR_CHARS:
            return "unescaped", f"a {len(errors[0])}-character error line"
        return "clean", ""
    return "other", f"exit {rc} with {len(errors)} 'error: ' line(s) among {len(lines)} stderr lines"


RESULT_MARK = b"@@CAMPAIGN-RESULT@@ "


def classify_py(rc, out: bytes, err: bytes, timed_out: bool) -> tuple[str, str, dict]:
    if timed_out:
        return "hang", "no exit before the timeout", {}
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return "crash", f"interpreter killed by {name}", {}
    report = None
    for ln in out.split(b"\n"):
        if ln.startswith(RESULT_MARK):
            report = json.loads(ln[len(RESULT_MARK):])
    if report is None:
        return "crash", f"interpreter died (exit {rc}) without reporting", {}
    if report["status"] == "ok":
        return "ok", "", report
    what = f"{report['type']}: {report['msg']}"
    if not report["documented"]:
        return "other", f"undocumented exception type {what}", report
    if report["ctrl"]:
        return "unescaped", f"raw control byte(s) {report['ctrl']} in {what}", report
    if report["length"] > MAX_ERROR_CHARS:
        return "unescaped", f"a {report['length']}-character message: {what[:200]}", report
    return "clean", what, report


def stray_entries(casedir: Path, rundir: Path, before: set, allowed: tuple) -> list:
    # The run directory is one level below the case directory, so "../x" from an output directory
    # inside run/ lands in run/ and "../../x" in the case directory: both are seen here.
    strays = [p for p in os.listdir(casedir) if p != "run"]
    strays += [p for p in os.listdir(rundir) if p not in before and p not in allowed]
    return strays


def execute(case: Case, work: Path, timeout: float) -> Result:
    casedir = work / case.cls / case.cid
    rundir = casedir / "run"
    if casedir.exists():
        shutil.rmtree(casedir)
    prepare(rundir, case.files)
    before = set(os.listdir(rundir))
    python = case.kind == "py"
    rc, out, err, timed_out, secs = run_process(case.argv, rundir, case.timeout or timeout, python)
    if python:
        outcome, reason, _ = classify_py(rc, out, err, timed_out)
    else:
        outcome, reason = classify_mf(rc, out, err, timed_out)
    if outcome == "hang" and case.may_loop:
        outcome, reason = "endless", "the program's while loop did not end before the timeout"
    if outcome in ("ok", "clean", "unescaped") and case.allowed_new is not None:
        strays = stray_entries(casedir, rundir, before, case.allowed_new)
        if strays:
            outcome, reason = "silent_wrong", f"created {strays!r} outside the places it was given"
    if outcome == "ok" and case.expect_error:
        outcome, reason = "silent_wrong", f"accepted: {case.expect_error}"
    if outcome == "ok" and case.check:
        try:
            why = case.check(Result(outcome, reason, rc, out, err, secs), rundir)
        except Exception as e:  # noqa: BLE001 - a broken output is a finding, not a script error
            why = f"could not check the result: {type(e).__name__}: {e}"
        if why:
            outcome, reason = "silent_wrong", why
    shutil.rmtree(casedir, ignore_errors=True)
    return Result(outcome, reason, rc, out, err, secs)


def esc(data, limit=300) -> str:
    """Printable text for the report: control and non-ASCII bytes as \\xNN, cut to `limit`."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    text = data[:limit].decode("ascii", "backslashreplace")
    text = "".join(c if 0x20 <= ord(c) < 0x7F else f"\\x{ord(c):02x}" for c in text)
    return text + (f"... ({len(data)} bytes)" if len(data) > limit else "")


def write_repro(case: Case, res: Result, repro_root: Path):
    d = repro_root / case.cls / case.cid
    if d.exists():
        shutil.rmtree(d)
    prepare(d / "run", case.files)
    env = f"PYTHONPATH={shlex.quote(PY_PATH)} " if case.kind == "py" else ""
    if SANITIZED:
        env += " ".join(f"{k}={shlex.quote(v)}" for k, v in SANITIZER_ENV.items()) + " "
    limit = "" if SANITIZED else f"ulimit -v {ADDRESS_SPACE_LIMIT >> 10}; "
    cmd = " ".join(shlex.quote(a) for a in case.argv)
    script = (f"#!/bin/sh\n# {case.cls}/{case.cid}: {esc(case.desc, 500)}\n"
              f"# outcome: {res.outcome}: {esc(res.reason, 500)}\n"
              f'cd "$(dirname "$0")/run" || exit 2\n'
              f"{limit}ulimit -c 0\n"
              f"{env}exec {cmd}\n")
    (d / "cmd.sh").write_bytes(script.encode("utf-8", "surrogateescape"))
    (d / "cmd.sh").chmod(0o755)
    (d / "stdout.txt").write_bytes(res.stdout[:1 << 16])
    (d / "stderr.txt").write_bytes(res.stderr[:1 << 16])


# --------------------------------------------------------------------------------------------
# Helpers shared by the generators


def rng_for(seed: int, cls: str, index) -> random.Random:
    # Seeding from a string is stable across runs and Python versions (it hashes with SHA-512), so
    # a case is reproducible from (seed, class, index) alone.
    return random.Random(f"{seed}:{cls}:{index}")


def load_outputs(rundir: Path, sub="out") -> list:
    d = rundir / sub
    if not d.is_dir():
        return []
    return [np.load(d / n, allow_pickle=False) for n in sorted(os.listdir(d)) if n.endswith(".npy")]


def compare_outputs(got: list, want: list, rtol=1e-5, atol=1e-6) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} output(s) where the reference has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape} where the reference has {w.shape}"
        if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                           equal_nan=True):
            diff = np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64)))
            return f"output {i}: differs from the reference by up to {diff:.3g}"
    return None


def text_to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def bytes_to_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------------------------
# 1. IR text

IR_NUMBERS = ["0", "-1", "2147483648", "4294967296", "9223372036854775807", "9223372036854775808",
              "18446744073709551616", "1099511627776", "99999999999999999999999999"]
IR_DIMS = ["0", "-1", "2147483648", "1099511627777", "4611686018427387904", "9223372036854775807",
           "9223372036854775808"]
IR_JUNK_LINES = [
    "(" * 100_000,
    "  %0 = relu(" + "<Tensor[" * 20_000,
    "  %0 = relu(" + "%para1_x, " * 20_000 + "%para1_x) : () -> ()",
    "subgraph @x(",
    "}",
    "\x00\x00\x00\x00",
    "A" * 1_000_000,
    "  %c9 = Constant <Tensor[Float32], (1099511627776)> [1]",
    "  %c9 = Constant <Tensor[Float32], (3)> [1, 2]",
    "  %c9 = Constant <Tensor[Float32], (2)> [1e999, nan]",
    "  %c9 = Constant <Tensor[Int64], (1)> [99999999999999999999999]",
    "# IR entry: @main",
    "subgraph @main() {",
]
IR_OUTPUT_NAMES = ["../escaped", "../../escaped2", "a/b", "", ".", "..", "\x1b[2Jx", "x" * 5000,
                   "out\nput"]
IR_ENTRY_LINES = ["# IR entry: @nosuch", "# IR entry: @", "# IR entry:", "",
                  "# IR entry: @main\x1b[2J", "# IR entry: @" + "A" * 5000,
                  "# IR entry: @main\n# IR entry: @f0", "# IR entry: @@main"]


def ir_subgraphs(lines):
    """(name, first line, closing line) of each subgraph block."""
    blocks, start, name = [], None, None
    for i, ln in enumerate(lines):
        m = re.match(r"subgraph @([^(]+)\(", ln)
        if m:
            start, name = i, m.group(1)
        elif ln == "}" and start is not None:
            blocks.append((name, start, i))
            start = None
    return blocks


def mutate_ir(rng: random.Random, text: str):
    """One mutation: (new text, tag, whether the program's values are unchanged)."""
    for _ in range(20):
        mutated = mutate_ir_once(rng, text)
        if mutated is not None:
            return mutated
    return text + "\n", "newline", True


def mutate_ir_once(rng: random.Random, text: str):
    """A random mutation, or None when the one drawn does not apply to this text."""
    lines = text.split("\n")
    applied = True
    choice = rng.choice(["delete", "duplicate", "swap", "number", "dim", "dim", "ctrl_name",
                         "ctrl_name", "self_call", "self_call", "two_main", "entry", "junk",
                         "truncate", "output_name", "comment"])
    if choice == "delete" and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    elif choice == "duplicate":
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif choice == "swap" and len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    elif choice == "number":
        spans = list(re.finditer(r"-?\d+", text))
        if spans:
            m = rng.choice(spans)
            return text[:m.start()] + rng.choice(IR_NUMBERS) + text[m.end():], "number", False
    elif choice == "dim":
        shapes = list(re.finditer(r"\((-?\d+(?:, -?\d+)*)?\)>", text))
        if shapes:
            m = rng.choice(shapes)
            dims = m.group(1).split(", ") if m.group(1) else []
            how = rng.choice(["one", "everywhere", "rank"])
            if how == "rank":
                new = "(" + ", ".join(["1"] * rng.choice([65, 1000])) + ")>"
            else:
                if dims:
                    dims[rng.randrange(len(dims))] = rng.choice(IR_DIMS)
                else:
                    dims = [rng.choice(IR_DIMS)]
                new = "(" + ", ".join(dims) + ")>"
            if how == "one":
                return text[:m.start()] + new + text[m.end():], "dim", False
            # The same shape changed everywhere keeps the types consistent, so the run gets past
            # type checks and allocates (zero-sized or huge tensors) for real.
            return text.replace(m.group(0), new), f"dim-{how}", False
    elif choice == "ctrl_name":
        names = sorted(set(re.findall(r"[%@][A-Za-z_][\w.]*", text)))
        if names:
            old = rng.choice(names)
            pos = rng.randrange(1, len(old) + 1)
            new = old[:pos] + rng.choice(CTRL) + old[pos:]
            if rng.random() < 0.6:
                text = text.replace(old, new)
                if old.startswith("@"):
                    text = text.replace(f'"{old[1:]}"', f'"{new[1:]}"')
                return text, "ctrl_name-everywhere", False
            i = text.index(old)
            return text[:i] + new + text[i + len(old):], "ctrl_name-one", False
    elif choice == "self_call":
        blocks = ir_subgraphs(lines)
        sites = [(name, i) for name, s, e in blocks for i in range(s, e)
                 if re.search(r'graph: "[^"]*"', lines[i])]
        if sites:
            name, i = rng.choice(sites)
            callee = name if rng.random() < 0.7 else rng.choice(blocks)[0]
            lines[i] = re.sub(r'graph: "[^"]*"', f'graph: "{callee}"', lines[i], count=1)
            return "\n".join(lines), "self_call" if callee == name else "call_other", False
    elif choice == "two_main":
        blocks = ir_subgraphs(lines)
        if blocks:
            _, s, e = blocks[0]
            copy = lines[s:e + 1]
            if rng.random() < 0.5:
                copy = [ln.replace("relu(", "neg(") for ln in copy]
            lines[e + 1:e + 1] = [""] + copy
            return "\n".join(lines), "two_main", False
    elif choice == "entry":
        idx = [i for i, ln in enumerate(lines) if ln.startswith("# IR entry:")]
        new = rng.choice(IR_ENTRY_LINES + [f"# IR entry: @{b[0]}" for b in ir_subgraphs(lines)])
        if idx:
            lines[idx[0]] = new
        else:
            lines.insert(0, new)
    elif choice == "junk":
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(IR_JUNK_LINES))
    elif choice == "truncate":
        return text[:rng.randrange(len(text))], "truncate", False
    elif choice == "output_name":
        rets = [i for i, ln in enumerate(lines) if ln.strip().startswith("Return(")]
        if rets:
            i = rets[0]
            name = rng.choice(IR_OUTPUT_NAMES).replace('"', "")
            lines[i] = re.sub(r"Return\((%[^ )]+)(?: as \"[^\"]*\")?\)",
                              lambda m: f'Return({m.group(1)} as "{name}")', lines[i])
            return "\n".join(lines), "output_name", False
    elif choice == "comment":
        # A comment line changes nothing the program computes.
        body = rng.choice(["# " + "".join(CTRL).replace("\n", ""), "# " + "c" * 200_000, "#", ""])
        lines.insert(rng.randrange(1, len(lines) + 1), body)
        return "\n".join(lines), "comment", True
    else:
        applied = False
    if choice in ("number", "dim", "ctrl_name", "self_call", "two_main", "output_name"):
        applied = False  # these return above when they apply
    return ("\n".join(lines), choice, False) if applied else None


def ir_commands(name: str):
    run = ["--iters", "1", "--output-dir", "out"]
    return [("run-pynative", [MF, "run", name, "--mode", "pynative"] + run),
            ("run-graph", [MF, "run", name, "--mode", "graph"] + run),
            ("dump", [MF, "dump", name, "--out", "dump"]),
            ("check", [MF, "ir", "check", name])]


def known_answer_ir(base: str, x: np.ndarray, p: bool) -> np.ndarray | None:
    if base in ("chain.ir", "calls.ir", "nested_calls.ir"):
        return np.maximum(x, 0)
    if base == "control_flow.ir":
        y = x + x
        y = (y + y) if p else -y
        while np.float32(y.sum()) < 100:  # noqa: PLR2004 - the @small graph's constant
            y = y + y
        return y
    return None


def gen_ir(seed: int, n: int) -> Iterator[Case]:
    bases = sorted(CORPUS.glob("ir_parser_fuzz/*.ir"))
    refs: dict = {}

    # References: every corpus file unmutated in both modes (the base of the differential checks),
    # and the four small files also with known inputs, against numpy.
    for base in bases:
        data = base.read_bytes()
        for mode in ("pynative", "graph"):
            def check(res, rundir, key=(base.name, mode)):
                refs[key] = load_outputs(rundir)
                other = refs.get((base.name, "pynative"))
                if key[1] == "graph" and other is not None:
                    why = compare_outputs(refs[key], other, rtol=1e-4, atol=1e-5)
                    return why and f"GRAPH differs from PYNATIVE: {why}"
                return None
            yield Case("ir", f"ref-{base.stem}-{mode}", f"unmutated {base.name}",
                       [MF, "run", "case.ir", "--mode", mode, "--iters", "1", "--output-dir", "out"],
                       {"case.ir": data}, check=check, allowed_new=("out",))
            x = np.random.RandomState(seed).uniform(-3, 3, 4).astype(np.float32)
            # control_flow.ir doubles its value while the sum is below 100: p must make it positive.
            p = bool(x.sum() > 0)
            want = known_answer_ir(base.name, x, p)
            if want is None:
                continue
            files = {"case.ir": data, "x.npy": npy_of(x)}
            argv = [MF, "run", "case.ir", "--mode", mode, "--iters", "1", "--output-dir", "out",
                    "--input", "x=x.npy"]
            if base.name == "control_flow.ir":
                files["p.npy"] = npy_of(np.array(p))
                argv += ["--input", "p=p.npy"]
            yield Case("ir", f"known-{base.stem}-{mode}", f"{base.name} on x={x.tolist()} p={p}",
                       argv, files, allowed_new=("out",),
                       check=lambda res, rundir, w=want: compare_outputs(load_outputs(rundir), [w]))

    # Files that are not files: a reader must refuse them without blocking or reading forever.
    specials = {"empty": b"", "fifo": ("fifo",), "directory": ("dir",),
                "dev-zero": ("symlink", "/dev/zero"), "dangling": ("symlink", "nosuch.ir"),
                "sparse-3GiB": ("sparse", 3 << 30)}
    for label, spec in specials.items():
        for cmd, argv in ir_commands("case.ir"):
            yield Case("ir", f"special-{label}-{cmd}", f"case.ir is {label}", argv,
                       {"case.ir": spec}, expect_error=None if label == "empty" else
                       f"case.ir is {label}", allowed_new=("out", "dump"))

    for i in range(n):
        rng = rng_for(seed, "ir", i)
        base = rng.choice(bases)
        text = bytes_to_text(base.read_bytes())
        tags, preserving = [], True
        for _ in range(rng.choices([1, 2, 3], [5, 3, 2])[0]):
            text, tag, keeps = mutate_ir(rng, text)
            tags.append(tag)
            preserving = preserving and keeps
        data = text_to_bytes(text)
        desc = f"{base.name} mutated: {', '.join(tags)}"
        # Unconditional recursion (these files have no cond or while) can only end in an error.
        recursion = (tags == ["self_call"] and base.name != "control_flow.ir")
        for cmd, argv in ir_commands("case.ir"):
            check = None
            if preserving and cmd.startswith("run"):
                key = (base.name, cmd.split("-")[1])

                def check(res, rundir, key=key):
                    if key not in refs:
                        return None
                    why = compare_outputs(load_outputs(rundir), refs[key])
                    return why and f"a mutation that keeps the program changed its outputs: {why}"
            loops = cmd.startswith("run") and "while(" in text
            yield Case("ir", f"{i:04d}-{cmd}", desc, argv, {"case.ir": data},
                       expect_error=("unbounded recursion" if recursion and cmd.startswith("run")
                                     else None),
                       check=check, allowed_new=("out", "dump"), may_loop=loops,
                       timeout=5 if loops else None)


# --------------------------------------------------------------------------------------------
# 2. ONNX


def mutate_bytes(rng: random.Random, data: bytes, others: list) -> tuple[bytes, str]:
    buf = bytearray(data)
    how = rng.choice(["flip", "flip", "set", "truncate", "splice", "varint", "insert", "repeat"])
    if not buf:
        return bytes(rng.randrange(256) for _ in range(16)), "random"
    if how == "flip":
        for _ in range(rng.randint(1, 16)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif how == "set":
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.choice([0x00, 0xFF, 0x7F, 0x80])
    elif how == "truncate":
        del buf[rng.randrange(len(buf)):]
    elif how == "splice":
        other = rng.choice(others)
        buf = buf[:rng.randrange(len(buf))] + other[rng.randrange(max(1, len(other))):]
    elif how == "varint":
        # The largest varint protobuf reads: lengths and counts of 2^63 or 2^64 - 1.
        at = rng.randrange(len(buf))
        buf[at:at + 1] = b"\xff" * 9 + b"\x01"
    elif how == "insert":
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif how == "repeat":
        a = rng.randrange(len(buf))
        b = min(len(buf), a + rng.randint(1, 256))
        buf[a:a] = buf[a:b] * rng.randint(2, 50)
    return bytes(buf), how


def gen_onnx(seed: int, n: int) -> Iterator[Case]:
    paths = sorted(CORPUS.glob("onnx_import_fuzz/*.onnx"))
    blobs = [p.read_bytes() for p in paths]
    argv = [MF, "run", "case.onnx", "--mode", "graph", "--iters", "1", "--output-dir", "out"]
    specials = {"empty": b"", "fifo": ("fifo",), "directory": ("dir",),
                "dev-zero": ("symlink", "/dev/zero"), "sparse-3GiB": ("sparse", 3 << 30),
                "ir-text": (CORPUS / "ir_parser_fuzz" / "chain.ir").read_bytes()}
    for label, spec in specials.items():
        yield Case("onnx", f"special-{label}", f"case.onnx is {label}", argv, {"case.onnx": spec},
                   expect_error=f"case.onnx is {label}", allowed_new=("out",))
    for i in range(n):
        rng = rng_for(seed, "onnx", i)
        k = rng.randrange(len(blobs))
        data, tags = blobs[k], []
        for _ in range(rng.choices([1, 2, 3], [6, 3, 1])[0]):
            data, tag = mutate_bytes(rng, data, blobs)
            tags.append(tag)
        yield Case("onnx", f"{i:04d}", f"{paths[k].name} mutated: {', '.join(tags)}", argv,
                   {"case.onnx": data}, allowed_new=("out",))


# --------------------------------------------------------------------------------------------
# 3. .npy


def npy_of(a: np.ndarray) -> bytes:
    import io
    f = io.BytesIO()
    np.save(f, a, allow_pickle=True)
    return f.getvalue()


def npy_raw(header, data: bytes, version=(1, 0), magic=b"\x93NUMPY", header_len=None,
            pad=True) -> bytes:
    """An .npy file from a hand-written header, so headers numpy itself never writes can be tried."""
    h = header.encode("latin1") if isinstance(header, str) else header
    if pad:
        fixed = len(magic) + 2 + (2 if version[0] == 1 else 4)
        h = h + b" " * ((-(fixed + len(h) + 1)) % 64) + b"\n"
    hl = len(h) if header_len is None else header_len
    length = struct.pack("<H", hl & 0xFFFF) if version[0] == 1 else struct.pack("<I", hl)
    return magic + bytes(version) + length + h + data


def npy_header(descr="'<f4'", fortran="False", shape="(64, 784)") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


def gen_npy(seed: int, n: int) -> Iterator[Case]:
    x = np.random.RandomState(seed).standard_normal((64, 784)).astype(np.float32)
    raw = x.tobytes()
    refs: dict = {}
    # (label, file, why success would be wrong or None, whether the values equal x's)
    variants = [
        ("reference", npy_of(x), None, True),
        ("big-endian", npy_of(x.astype(">f4")), None, True),
        ("fortran-order", npy_of(np.asfortranarray(x)), None, True),
        ("float64", npy_of(x.astype(np.float64)), None, True),
        ("float16", npy_of(x.astype(np.float16)), None, False),
        ("int32", npy_of((x * 10).astype(np.int32)), None, False),
        ("uint8", npy_of((x > 0).astype(np.uint8)), None, False),
        ("bool", npy_of(x > 0), None, False),
        ("complex64", npy_of(x.astype(np.complex64)), None, False),
        ("object-pickle", npy_of(np.array([{"a": 1}] * 4, dtype=object)), "a pickled object array",
         False),
        ("unicode", npy_of(np.array(["abc"] * 8)), "a string array", False),
        ("structured", npy_of(np.zeros(8, dtype=[("a", "<f4"), ("b", "<i4")])),
         "a structured array", False),
        ("nan-inf", npy_of(np.where(x > 1, np.nan, np.where(x < -1, np.inf, x)).astype(np.float32)),
         None, False),
        ("zero-rows", npy_of(np.zeros((0, 784), np.float32)), None, False),
        ("zero-cols", npy_of(np.zeros((64, 0), np.float32)), None, False),
        ("zero-zero", npy_of(np.zeros((0, 0), np.float32)), None, False),
        ("zero-1d", npy_of(np.zeros((0,), np.float32)), None, False),
        ("scalar", npy_of(np.float32(1.5)), None, False),
        ("zero-3d", npy_of(np.zeros((64, 784, 0), np.float32)), None, False),
        ("batch-32", npy_of(x[:32]), None, False),
        ("cols-783", npy_of(x[:, :783]), None, False),
        ("rank-3", npy_of(x[None]), None, False),
        ("transposed-shape", npy_of(np.ascontiguousarray(x.T)), None, False),
        ("flat", npy_of(x.reshape(-1)), None, False),
        ("truncated-1", npy_of(x)[:-1], "data one byte short", False),
        ("truncated-half", npy_of(x)[:len(npy_of(x)) // 2], "data half missing", False),
        ("header-only", npy_of(x)[:128], "no data", False),
        ("trailing-4", npy_of(x) + b"\0\0\0\0", "4 bytes after the data", False),
        ("shape-2^62", npy_raw(npy_header(shape="(4611686018427387904, 784)"), raw),
         "shape (2^62, 784) with 64x784 floats of data", False),
        ("shape-2^31-sq", npy_raw(npy_header(shape="(2147483648, 2147483648)"), raw),
         "shape (2^31, 2^31)", False),
        ("shape-2^64", npy_raw(npy_header(shape="(18446744073709551616,)"), raw),
         "a dimension of 2^64", False),
        ("shape-overflow-0", npy_raw(npy_header(shape="(0, 9223372036854775807, 4)"), b""), None,
         False),
        ("shape-negative", npy_raw(npy_header(shape="(-1, 784)"), raw), "a negative dimension",
         False),
        ("shape-negative-pair", npy_raw(npy_header(shape="(-64, -784)"), raw),
         "negative dimensions", False),
        ("rank-65", npy_raw(npy_header(shape="(" + "1, " * 65 + ")"), raw[:4]), None, False),
        ("rank-10000", npy_raw(npy_header(shape="(" + "1, " * 10000 + ")"), raw[:4], version=(2, 0)),
         None, False),
        ("shape-unbalanced", npy_raw(npy_header(shape="(64, 784"), raw), "an unbalanced header",
         False),
        ("shape-float", npy_raw(npy_header(shape="(64.0, 784)"), raw), "a float dimension", False),
        ("shape-trailing-comma", npy_raw(npy_header(shape="(64, 784,)"), raw), None, True),
        ("fortran-yes", npy_raw(npy_header(fortran="'yes'"), raw), "fortran_order 'yes'", False),
        ("descr-missing", npy_raw("{'fortran_order': False, 'shape': (64, 784), }", raw),
         "no descr", False),
        ("descr-void", npy_raw(npy_header(descr="'|V4'"), raw), None, False),
        ("descr-ctrl", npy_raw(npy_header(descr="'<f4\x1b[31m'"), raw), "a descr with ESC", False),
        ("header-python", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (64, 784), "
                                  "'x': __import__('os').system('touch pwned')}", raw),
         "code in the header", False),
        ("header-not-dict", npy_raw("'hello'", raw), "a header that is not a dict", False),
        ("header-len-huge", npy_raw(npy_header(), raw, header_len=0xFFFF), "a wrong header length",
         False),
        ("header-len-v2-huge", npy_raw(npy_header(), raw, version=(2, 0), header_len=0xFFFFFFF0),
         "a 4 GiB header length", False),
        ("header-1MiB", npy_raw(npy_header() + " " * (1 << 20), raw, version=(2, 0)), None, True),
        ("header-nul", npy_raw(npy_header().replace(", }", ", \x00}"), raw), None, False),
        ("bad-magic", npy_raw(npy_header(), raw, magic=b"\x93NUMPX"), "a wrong magic", False),
        ("version-9", npy_raw(npy_header(), raw, version=(9, 9)), "format version 9.9", False),
        ("v3-utf8", npy_raw(npy_header(), raw, version=(3, 0)), None, True),
        ("fifo", ("fifo",), "a FIFO", False),
        ("directory", ("dir",), "a directory", False),
        ("dev-zero", ("symlink", "/dev/zero"), "/dev/zero", False),
        ("sparse-3GiB", ("sparse", 3 << 30), "3 GiB of zeros", False),
    ]
    for i in range(n):
        # Random mutants: a few bytes of a valid file's header or its first data bytes changed.
        rng = rng_for(seed, "npy", i)
        data, tags = npy_of(x)[:256], []
        for _ in range(rng.randint(1, 3)):
            data, tag = mutate_bytes(rng, data, [npy_of(x)[:256]])
            tags.append(tag)
        variants.append((f"{i:04d}", data + npy_of(x)[256:], None, False))
        variants[-1] = (f"{i:04d}-{'-'.join(tags)}",) + variants[-1][1:]
    for label, spec, invalid, same_values in variants:
        for mode in ("pynative", "graph"):
            def check(res, rundir, mode=mode, label=label, same=same_values):
                got = load_outputs(rundir)
                if label == "reference":
                    refs[mode] = got
                    if mode == "graph" and "pynative" in refs:
                        why = compare_outputs(got, refs["pynative"], rtol=1e-4, atol=1e-5)
                        return why and f"GRAPH differs from PYNATIVE: {why}"
                    return None
                if same and mode in refs:
                    why = compare_outputs(got, refs[mode])
                    return why and f"the same values as the reference input gave other outputs: {why}"
                return None
            yield Case("npy", f"{label}-{mode}", f"mlp --input x= {label} .npy",
                       [MF, "run", "mlp", "--input", "x=x.npy", "--iters", "1", "--mode", mode,
                        "--output-dir", "out"],
                       {"x.npy": spec}, expect_error=invalid, check=check, allowed_new=("out",))


# --------------------------------------------------------------------------------------------
# 4. Context


def context_keys() -> list[tuple[str, str]]:
    rc, out, _, _, _ = run_process([MF, "context", "list"], Path("/"), 20, False)
    keys = []
    for ln in out.decode("utf-8", "replace").splitlines():
        m = re.match(r"^([a-z][a-z0-9_]*)\s{2,}(\S+(?: \(size\))?)\s{2,}", ln)
        if m and m.group(1) not in ("set_context",):
            keys.append((m.group(1), m.group(2)))
    return keys or [("device_id", "int"), ("print_file_path", "str"), ("jit_config", "dict")]


HUGE_INTS = ["9" * 400, "2147483648", "-2147483649", "4294967296", "9223372036854775807",
             "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e999",
             "-0", "NaN", "inf", "0x10", "1_000", "+1", "1.9", "1e3", "\u0663", " 1", "1 ", "0" * 5000 + "1"]
NUL_LIKE = ["\\0", "\\x00", "\\u0000", "%00", "^@", "\\000", "\\\\0", "a\\0b"]


def context_value(rng: random.Random, ktype: str) -> tuple[str, str]:
    kind = rng.choice(["ctrl", "nul", "unicode", "big", "deep", "int", "size", "dict", "empty"])
    if kind == "ctrl":
        return "ctrl", "".join(rng.choice(CTRL) if rng.random() < 0.4 else "v" for _ in range(8))
    if kind == "nul":
        return "nul", rng.choice(NUL_LIKE)
    if kind == "unicode":
        return "unicode", rng.choice(["\u202eO1", "\udcff\udcfe", "é" * 50, "\U0001F600", "O\u0301"])
    if kind == "big":
        # Linux limits one argv string to 128 KiB; 10 MB values go through --context files.
        return "big", rng.choice(["A" * 100_000, "%s" * 30_000, "{" * 100_000])
    if kind == "deep":
        d = rng.choice([200, 5000, 40_000])
        return "deep", rng.choice(["[" * d + "]" * d, '{"jit_level":' * d + '"O1"' + "}" * d,
                                   "[" * 100_000])
    if kind == "int":
        return "int", rng.choice(HUGE_INTS)
    if kind == "size":
        return "size", rng.choice(["99999999999999999999GB", "-1GB", "0.0000001GB", "1e308GB",
                                   "NaNGB", "18446744073GB", "1GB\x1b[31m", "GB", "1 GB", "1TB"])
    if kind == "dict":
        return "dict", rng.choice(['{"jit_level": "O1\x1b"}', '{"jit_level": {"a": 1}}', "{}",
                                   '{"": ""}', '{"jit_level": "O1", "jit_level": "O2"}',
                                   '{"a":1,}', "{'jit_level': 'O1'}", "{" + '"k":1,' * 20000 + "}"])
    return "empty", ""


def expected_int(value: str):
    """What a correct int key must print after accepting `value`: an int, "reject", or None."""
    try:
        return int(value, 10)
    except ValueError:
        pass
    try:
        f = float(value)
    except ValueError:
        f = None
    if f is not None:
        if not math.isfinite(f) or abs(f) > 2 ** 53:
            return None
        return int(f) if f == int(f) else "reject"
    try:
        return int(value, 0)
    except ValueError:
        return None


def gen_context(seed: int, n: int) -> Iterator[Case]:
    keys = context_keys()
    str_keys = [k for k, t in keys if t == "str"] or ["graph_kernel_flags"]
    int_keys = [k for k, t in keys if t == "int"] or ["device_id"]
    explain = [MF, "context", "explain"]

    # --context files: what argv cannot carry (10 MB, NUL, invalid UTF-8, nesting a million deep).
    deep = 1_000_000
    files = {
        "10MB-string": json.dumps({rng_for(seed, "context", "f").choice(str_keys): "A" * 10_000_000}),
        "10MB-ctrl-string": json.dumps({"graph_kernel_flags": "\x1b[31m" * 2_000_000}),
        "deep-1e6-list": '{"jit_config": ' + "[" * deep + "]" * deep + "}",
        "deep-1e6-dict": '{"jit_config": ' + '{"a":' * deep + "1" + "}" * deep + "}",
        "deep-129": '{"jit_config": ' + '{"a":' * 129 + "1" + "}" * 129 + "}",
        "deep-127": '{"jit_config": ' + '{"a":' * 127 + "1" + "}" * 127 + "}",
        "nul-in-value": '{"print_file_path": "a\\u0000b"}',
        "raw-nul": '{"print_file_path": "a\x00b"}',
        "invalid-utf8": b'{"graph_kernel_flags": "\xff\xfe"}',
        "huge-number": '{"device_id": 123456789012345678901234567890}',
        "number-1e999": '{"max_call_depth": 1e999}',
        "nan": '{"max_call_depth": NaN}',
        "bom": "\ufeff{}",
        "duplicate-keys": '{"device_id": 1, "device_id": 99999}',
        "top-level-list": "[1, 2, 3]",
        "empty": "",
        "key-ctrl": '{"\\u001b[31mdevice_id": 1}',
        "many-keys": "{" + ", ".join(f'"k{i}": {i}' for i in range(200_000)) + "}",
    }
    for label, content in files.items():
        data = content if isinstance(content, bytes) else text_to_bytes(content)
        yield Case("context", f"file-{label}", f"--context FILE: {label}",
                   explain + ["--context", "c.json"], {"c.json": data})
    for label, spec in {"fifo": ("fifo",), "directory": ("dir",),
                        "dev-zero": ("symlink", "/dev/zero")}.items():
        yield Case("context", f"file-{label}", f"--context FILE is {label}",
                   explain + ["--context", "c.json"], {"c.json": spec},
                   expect_error=f"the --context file is {label}")

    # Every int key with every out-of-range or odd integer, read back with `context get`.
    for key in int_keys:
        for j, value in enumerate(HUGE_INTS):
            want = expected_int(value)

            def check(res, rundir, want=want, value=value):
                got = res.stdout.decode("utf-8", "replace").strip()
                if want == "reject":
                    return f"accepted the non-integer {value!r} and reads back {got!r}"
                if isinstance(want, int) and got != str(want):
                    return f"set to {value!r} but reads back {got!r}"
                return None
            yield Case("context", f"int-{key}-{j:02d}", f"{key}={esc(value, 40)} read back",
                       [MF, "context", "get", key, "--set", f"{key}={value}"], check=check)

    hostile_keys = ["", "=", ".", "jit_config.", ".jit_level", "jit_config.jit_level.x.y",
                    "device_id\x1b[31m", "k" * 100_000, "jit_config..jit_level", "\u202ejit_config"]
    for i in range(n):
        rng = rng_for(seed, "context", i)
        argv, tags = list(explain), []
        if rng.random() < 0.3:
            argv.append("--json")
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            if rng.random() < 0.1:
                key, ktype = rng.choice(hostile_keys), "?"
            else:
                key, ktype = rng.choice(keys)
            kind, value = context_value(rng, ktype)
            # argv cannot carry NUL, and Linux refuses one argument over 128 KiB.
            argv += ["--set", f"{key}={value}".replace("\x00", "")[:131_000]]
            tags.append(f"{esc(key, 30)}={kind}")
        yield Case("context", f"{i:04d}", ", ".join(tags), argv)


# --------------------------------------------------------------------------------------------
# 5. Python

PY_PRELUDE = r'''
import json, math, sys
import numpy as np

_MARK = "@@CAMPAIGN-RESULT@@ "
_wrong = []


def check(cond, what):
    if not cond:
        _wrong.append(what)


def same(got, want, what, rtol=1e-5, atol=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        _wrong.append(f"{what}: shape {got.shape}, numpy says {want.shape}")
    elif got.dtype == bool or want.dtype == bool:
        if not np.array_equal(got.astype(bool), want.astype(bool)):
            _wrong.append(f"{what}: {got.tolist()} where numpy says {want.tolist()}")
    elif not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                         equal_nan=True):
        _wrong.append(f"{what}: {got.ravel()[:8].tolist()} where numpy says "
                      f"{want.ravel()[:8].tolist()}")


def _report(status, exc=None):
    r = {"status": status, "wrong": _wrong}
    if exc is not None:
        documented = (ValueError, TypeError, MemoryError, IndexError, RuntimeError, OverflowError,
                      RecursionError)
        ms = sys.modules.get("modeflow")
        if ms is not None and hasattr(ms, "TracedValueError"):
            documented += (ms.TracedValueError,)
        try:
            msg = str(exc)
        except BaseException as e2:  # noqa: BLE001
            msg = f"<str() raised {type(e2).__name__}>"
        # Newlines and tabs may lay out a Python message; escapes and CRs may not.
        ctrl = sorted({f"\\x{ord(c):02x}" for c in msg
                       if (ord(c) < 0x20 and c not in "\n\t") or ord(c) == 0x7f})
        r.update(type=type(exc).__name__, documented=isinstance(exc, documented), ctrl=ctrl,
                 length=len(msg), msg=msg[:300].encode("unicode_escape").decode("ascii"))
    sys.stdout.write("\n" + _MARK + json.dumps(r) + "\n")
    sys.stdout.flush()


def case():
    import modeflow as ms
'''

PY_EPILOGUE = r'''

try:
    case()
except BaseException as e:  # noqa: BLE001 - every ending is reported
    _report("exception", e)
else:
    _report("ok")
'''


def py_case(cid, desc, body, files=None, timeout=None, expect_error=None) -> Case:
    src = PY_PRELUDE + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + PY_EPILOGUE
    all_files = {"case.py": text_to_bytes(src)}
    all_files.update(files or {})
    def check(res, rundir):
        for ln in res.stdout.split(b"\n"):
            if ln.startswith(RESULT_MARK):
                wrong = json.loads(ln[len(RESULT_MARK):])["wrong"]
                return "; ".join(wrong) if wrong else None
        return None
    return Case("python", cid, desc, [PYTHON, "case.py"], all_files, kind="py",
                expect_error=expect_error, check=check, timeout=timeout)


# numpy's answer for elementwise ops, on the inputs the snippet names a and b.
NUMPY_REF = {
    "abs": "np.abs(a)", "neg": "-a", "exp": "np.exp(a)", "log": "np.log(a)", "sqrt": "np.sqrt(a)",
    "rsqrt": "1 / np.sqrt(a)", "square": "a * a", "tanh": "np.tanh(a)",
    "sigmoid": "1 / (1 + np.exp(-a))", "relu": "np.maximum(a, 0)", "floor": "np.floor(a)",
    "ceil": "np.ceil(a)", "round": "np.round(a)", "sign": "np.sign(a)",
    "erf": "np.vectorize(math.erf)(a.astype(np.float64))",
    "gelu_tanh": "0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))",
    "gelu_erf": "0.5 * a * (1 + np.vectorize(math.erf)(a.astype(np.float64) / np.sqrt(2)))",
    "isnan": "np.isnan(a)", "isinf": "np.isinf(a)", "logical_not": "np.logical_not(a)",
    "add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b", "maximum": "np.maximum(a, b)",
    "minimum": "np.minimum(a, b)", "pow": "np.power(a, b)", "equal": "a == b", "greater": "a > b",
    "less": "a < b", "logical_and": "np.logical_and(a, b)", "logical_or": "np.logical_or(a, b)",
    "logical_xor": "np.logical_xor(a, b)", "floor_mod": "np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b)))",
    "truncate_div": "np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b))).astype(a.dtype)",
    "truncate_mod": "np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b)))",
}
POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt", "pow"}
INT_OPS = {"floor_mod", "truncate_div", "truncate_mod"}
BOOL_OPS = {"logical_and", "logical_or", "logical_xor", "logical_not"}
# How the snippet lays its input out in memory: the values are the same, the strides are not.
LAYOUTS = {
    "plain": "v",
    "big-endian": "v.astype(v.dtype.newbyteorder('>'))",
    "broadcast-view": "np.broadcast_to(v[:1], v.shape)",
    "negative-stride": "np.ascontiguousarray(v[::-1])[::-1]",
    "fortran": "np.asfortranarray(v)",
    "transposed-view": "np.ascontiguousarray(v.T).T",
}


def op_inputs(name: str, layout: str) -> str:
    """Snippet lines defining a (and b) for op `name`, laid out as `layout`."""
    if name in BOOL_OPS:
        a, b = "np.array([[True, False, True], [False, True, True]])", \
               "np.array([[True, True, False], [False, False, True]])"
    elif name in INT_OPS:
        a, b = "np.array([[7, -7, 5], [-5, 0, 9]], np.int32)", \
               "np.array([[3, 3, -2], [-2, 4, 0]], np.int32)"
    elif name in ("isnan", "isinf"):
        a = b = "np.array([[np.nan, np.inf, -np.inf], [0.0, 1.0, -2.5]], np.float32)"
    elif name == "round":
        a = b = "np.array([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.5]], np.float32)"
    elif name in POSITIVE_DOMAIN:
        a, b = "np.array([[0.5, 1.0, 2.0], [3.0, 4.5, 9.0]], np.float32)", \
               "np.array([[2.0, -1.0, 0.5], [3.0, 0.0, -2.0]], np.float32)"
    elif name in ("div",):
        a, b = "np.array([[-1.5, -0.5, 0.0], [0.5, 1.5, 2.5]], np.float32)", \
               "np.array([[2.0, -4.0, 1.0], [0.25, 3.0, -1.0]], np.float32)"
    else:
        a, b = "np.array([[-1.5, -0.5, 0.0], [0.5, 1.5, 2.5]], np.float32)", \
               "np.array([[1.0, -0.5, 0.0], [2.5, 1.5, -3.0]], np.float32)"
    lay = LAYOUTS[layout]
    # numpy's answer is computed from the values as laid out: a broadcast view repeats a row.
    return (f"a = {a}\nb = {b}\nv = a\na_in = {lay}\nv = b\nb_in = {lay}\n"
            "a, b = np.array(a_in), np.array(b_in)\n")


def discover_ops() -> dict:
    src = ("import json, re, modeflow as ms\nout = {}\nfor n in ms.ops.registered:\n"
           "    d = getattr(ms.ops, n).__doc__ or ''\n"
           "    m = re.search(r'Inputs: ([^.]+?) tensor', d)\n"
           "    out[n] = {'inputs': m.group(1) if m else '?', "
           "'required': re.findall(r'^\\s+(\\w+) \\([^)]*required\\)', d, re.M)}\n"
           "print(json.dumps(out))\n")
    rc, out, _, _, _ = run_process([PYTHON, "-c", src], Path("/"), 60, True)
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


def gen_python(seed: int, n: int) -> Iterator[Case]:
    ops = discover_ops()
    relu_onnx = (CORPUS / "onnx_import_fuzz" / "relu_chain.onnx").read_bytes()

    # Context: objects that contain themselves, nesting far past any sane depth, odd values.
    contexts = {
        "self-dict-jit_config": "d = {}\nd['jit_level'] = d\nms.set_context(jit_config=d)",
        "self-dict-aoe_config": "d = {}\nd['job_type'] = d\nms.set_context(aoe_config=d)",
        "self-list-fusion": "l = []\nl.append(l)\nms.set_auto_parallel_context(all_reduce_fusion_config=l)",
        "self-tuple-strategy": "l = []\nl.append(l)\nms.set_auto_parallel_context(dataset_strategy=(tuple(l), l))",
        "deep-dict-1e5": "d = {'jit_level': 'O0'}\nfor _ in range(100000): d = {'jit_level': d}\nms.set_context(jit_config=d)",
        "deep-list-1e5": "l = [1]\nfor _ in range(100000): l = [l]\nms.set_auto_parallel_context(all_reduce_fusion_config=l)",
        "deep-tuple-1e5": "t = (1,)\nfor _ in range(100000): t = (t,)\nms.set_auto_parallel_context(dataset_strategy=t)",
        "deep-dict-129": "d = {'a': 1}\nfor _ in range(128): d = {'a': d}\nms.set_context(gpu_config=d)",
        "int-2^64": "ms.set_context(device_id=2**64)",
        "int-2^200": "ms.set_context(max_call_depth=2**200)",
        "float-nan-int-key": "ms.set_context(op_timeout=float('nan'))",
        "bool-subclass": "ms.set_context(device_id=True)",
        "key-ctrl": "ms.set_context(**{'\\x1b[31mdevice_id': 1})",
        "value-ctrl": "ms.set_context(graph_kernel_flags='--opt_level=\\x1b[2J\\r2')",
        "path-nul": "ms.set_context(print_file_path='a\\x00b')",
        "value-10MB": "ms.set_context(graph_kernel_flags='A' * 10_000_000)",
        "str-subclass": "class S(str):\n    def __str__(self): raise RuntimeError('boom')\nms.set_context(jit_syntax_level=S('LAX'))",
        "dict-subclass": "class D(dict):\n    def items(self): raise KeyError('boom')\nms.set_context(jit_config=D(jit_level='O1'))",
        "get-unknown-ctrl": "ms.get_context('\\x1b[31mnosuch')",
    }
    cases = [py_case(f"context-{k}", f"set_context: {k}", v) for k, v in contexts.items()]

    # Tensors from arrays whose memory is not plain C order, whose dtype is odd, or which are empty.
    tensors = {}
    for layout in LAYOUTS:
        for dt in ("float32", "float64", "int32", "int64", "bool_"):
            tensors[f"{layout}-{dt}"] = (
                f"v = (np.arange(12).reshape(3, 4) - 5).astype(np.{dt})\nx = {LAYOUTS[layout]}\n"
                f"t = ms.Tensor(x)\nsame(t.asnumpy(), np.array(x), 'round trip')\n"
                f"check(tuple(t.shape) == x.shape, f'shape {{t.shape}}')")
    tensors.update({
        "broadcast-1M": "x = np.broadcast_to(np.float32(2.5), (1 << 16, 1 << 4))\nt = ms.Tensor(x)\n"
                        "check(float(ms.ops.reduce_sum(t).asnumpy()) == 2.5 * (1 << 20), 'sum')",
        "broadcast-add": "base = np.arange(4, dtype=np.float32)\nx = np.broadcast_to(base, (3, 4))\n"
                         "same(ms.ops.add(ms.Tensor(x), ms.Tensor(x)).asnumpy(), x + x, 'add of views')",
        "big-endian-add": "x = np.arange(6, dtype='>f4').reshape(2, 3)\ny = np.arange(6, dtype='>i8')\n"
                          "same(ms.ops.add(ms.Tensor(x), ms.Tensor(x)).asnumpy(), x + x, 'add >f4')\n"
                          "same(ms.Tensor(y).asnumpy(), y, '>i8 round trip')",
        "zero-sizes": "for s in [(0, 3), (3, 0), (0,), (0, 0, 0), (1, 0, 1)]:\n"
                      "    t = ms.Tensor(np.zeros(s, np.float32))\n"
                      "    check(tuple(t.asnumpy().shape) == s, f'shape {s}')\n"
                      "    check(t.size == 0, f'size of {s}')",
        "float16": "x = np.array([1.5, -2.25], np.float16)\nsame(ms.Tensor(x).asnumpy(), x, 'f16')",
        "complex64": "x = np.array([1+2j], np.complex64)\nsame(ms.Tensor(x).asnumpy(), x, 'c64')",
        "uint64-huge": "x = np.array([2**64 - 1], np.uint64)\nt = ms.Tensor(x)\nsame(t.asnumpy(), x, 'u64')",
        "object-array": "ms.Tensor(np.array([object(), 1], dtype=object))",
        "str-array": "ms.Tensor(np.array(['a', 'b']))",
        "structured": "ms.Tensor(np.zeros(3, dtype=[('a', '<f4'), ('b', '<i4')]))",
        "datetime": "ms.Tensor(np.array(['2020-01-01'], dtype='datetime64[D]'))",
        "int-2^70": "ms.Tensor(2**70)",
        "deep-list-1e5": "l = [1.0]\nfor _ in range(100000): l = [l]\nms.Tensor(l)",
        "self-list": "l = [1.0]\nl.append(l)\nms.Tensor(l)",
        "ragged": "ms.Tensor([[1.0, 2.0], [3.0]])",
        "masked": "x = np.ma.masked_array(np.arange(3, dtype=np.float32), mask=[0, 1, 0])\n"
                  "same(ms.Tensor(x).asnumpy(), np.asarray(x), 'masked data')",
        "reshape-huge": "ms.Tensor(np.zeros((2, 3), np.float32)).reshape((2**62, 2**62))",
        "reshape-two-minus-one": "ms.Tensor(np.zeros((2, 3), np.float32)).reshape((-1, -1))",
        "item-empty": "ms.Tensor(np.zeros((0,), np.float32)).item()",
        "index-2^63": "ms.Tensor(np.zeros((3,), np.float32))[2**63]",
        "index-step-0": "ms.Tensor(np.zeros((3,), np.float32))[::0]",
        "index-array-huge": "ms.Tensor(np.zeros((3,), np.float32))[np.array([2**40])].asnumpy()",
        "readonly-view": "x = np.arange(6, dtype=np.float32)\nx.flags.writeable = False\n"
                         "same(ms.Tensor(x).asnumpy(), x, 'read-only')",
        "mutate-after": "x = np.arange(6, dtype=np.float32)\nt = ms.Tensor(x)\nx[:] = 100\n"
                        "r = t.asnumpy()\ncheck(r[0] in (0.0, 100.0), f'after the source changed: {r}')",
    })
    cases += [py_case(f"tensor-{k}", f"Tensor: {k}", v) for k, v in tensors.items()]

    # Every registered op: zero-sized inputs where its signature allows, and numpy's answer for
    # the elementwise ones.
    for name, sig in sorted(ops.items()):
        if sig["required"] and sig["inputs"] != "0":
            continue
        if sig["inputs"] == "0":
            if not set(sig["required"]) <= {"shape", "value"}:
                continue  # a generator with other required attributes (range): no shape to vary
            for label, shape in [("zero", "[0, 3]"), ("negative", "[-1, 3]"),
                                 ("huge", "[2**62, 2**62]"), ("wrap", "[2**32, 2**32, 2**32]")]:
                extra = ", value=1.5" if "value" in sig["required"] else ""
                body = f"t = ms.ops.{name}(shape={shape}{extra})\nr = t.asnumpy()\n"
                if label == "zero":
                    body += "check(r.shape == (0, 3), f'shape {r.shape}')"
                cases.append(py_case(f"op-{name}-{label}", f"ops.{name}(shape={shape})", body,
                                     expect_error=None if label == "zero" else
                                     f"shape {shape} (at most 2^40 elements)"))
            continue
        count = {"1": 1, "2": 2, "3": 3, "1 or more": 1, "2 to 3": 2}.get(sig["inputs"], 1)
        dt = "bool_" if name in BOOL_OPS else "int32" if name in INT_OPS else "float32"
        body = (f"z = ms.Tensor(np.zeros((0, 3), np.{dt}))\n"
                f"r = ms.ops.{name}({', '.join(['z'] * count)})\n"
                "r = r[0] if isinstance(r, (list, tuple)) else r\nr = r.asnumpy()\n")
        if name in NUMPY_REF:
            body += "check(r.shape == (0, 3), f'shape {r.shape} from (0, 3) inputs')\n"
        cases.append(py_case(f"op-{name}-zero", f"ops.{name} on (0, 3) {dt}", body))
        if name in NUMPY_REF:
            rtol = 1e-4 if name.startswith("gelu") or name == "erf" else 1e-5
            args = "a_in" if count == 1 else "a_in, b_in"
            body = (op_inputs(name, "plain") +
                    f"got = ms.ops.{name}(*[ms.Tensor(t) for t in ({args},)]).asnumpy()\n"
                    f"same(got, {NUMPY_REF[name]}, '{name}', rtol={rtol})")
            cases.append(py_case(f"op-{name}-values", f"ops.{name} against numpy", body))
            if count == 2:
                body = (f"z = ms.Tensor(np.zeros((0, 3), np.{dt}))\n"
                        f"o = ms.Tensor(np.ones((1, 3), np.{dt}))\n"
                        f"r = ms.ops.{name}(z, o).asnumpy()\n"
                        "check(r.shape == (0, 3), f'(0, 3) with (1, 3) gave {r.shape}')\n")
                cases.append(py_case(f"op-{name}-bcast0", f"ops.{name}: (0, 3) with (1, 3)", body))
                body = (f"z = ms.Tensor(np.zeros((0, 3), np.{dt}))\n"
                        f"o = ms.Tensor(np.ones((2, 3), np.{dt}))\n"
                        f"r = ms.ops.{name}(z, o).asnumpy()\n")
                cases.append(py_case(f"op-{name}-bcast-bad", f"ops.{name}: (0, 3) with (2, 3)",
                                     body, expect_error="(0, 3) and (2, 3) do not broadcast"))

    # Cells: 3,000 levels of nesting, a cell that calls itself, a jit function that calls itself.
    nested = ("class Wrap(ms.nn.Cell):\n    def __init__(self, inner):\n        super().__init__()\n"
              "        self.inner = inner\n    def construct(self, x):\n        return self.inner(x)\n"
              "net = ms.nn.ReLU()\nfor _ in range(3000):\n    net = Wrap(net)\n"
              "x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)\n"
              "y = net(ms.Tensor(x)).asnumpy()\nsame(y, np.maximum(x, 0), 'relu through 3000 cells')")
    selfcall = ("class Loop(ms.nn.Cell):\n    def construct(self, x):\n        return self(x)\n"
                "Loop()(ms.Tensor(np.ones((2, 2), np.float32))).asnumpy()")
    jitself = ("@ms.jit\ndef f(x):\n    return f(x)\nf(ms.Tensor(np.ones((2, 2), np.float32))).asnumpy()")
    for mode in ("PYNATIVE_MODE", "GRAPH_MODE"):
        for limit in (None, 20_000, 1_000_000):
            pre = f"ms.set_context(mode=ms.{mode})\n"
            if limit:
                pre += f"sys.setrecursionlimit({limit})\n"
            tag = f"{mode.split('_')[0].lower()}-limit{limit or 'default'}"
            if limit != 1_000_000:  # 20,000 frames are enough for 3,000 cells
                cases.append(py_case(f"cell-nested3000-{tag}", f"3,000 nested cells, {tag}",
                                     pre + nested, timeout=40))
                # With max_call_depth above the nesting, 3,000 levels are legitimate: they must
                # run and give relu's values, or stop with a clean error about the stack.
                cases.append(py_case(f"cell-nested3000-{tag}-depth10000",
                                     f"3,000 nested cells, {tag}, max_call_depth=10000",
                                     pre + "ms.set_context(max_call_depth=10000)\n" + nested,
                                     timeout=40))
            cases.append(py_case(f"cell-selfcall-{tag}", f"a cell calling itself, {tag}",
                                 pre + selfcall, expect_error="unbounded recursion"))
            cases.append(py_case(f"jit-selfcall-{tag}", f"a jit function calling itself, {tag}",
                                 pre + jitself, expect_error="unbounded recursion"))

    # onnx.load: a NUL in the path must not open the prefix before it.
    onnx = {
        "valid": ("m = ms.onnx.load('model.onnx')", None),
        "nul-suffix": ("m = ms.onnx.load('model.onnx\\x00junk')",
                       "a path with a NUL (it opened 'model.onnx')"),
        "nul-only": ("ms.onnx.load('\\x00')", None),
        "nul-bytes-path": ("ms.onnx.load(b'model.onnx\\x00junk')",
                           "a bytes path with a NUL (it opened 'model.onnx')"),
        "nul-pathlib": ("import pathlib\nms.onnx.load(pathlib.Path('model.onnx\\x00junk'))",
                        "a Path with a NUL (it opened 'model.onnx')"),
        "directory": ("ms.onnx.load('.')", "a directory"),
        "fifo": ("ms.onnx.load('fifo.onnx')", "a FIFO"),
        "dev-zero": ("ms.onnx.load('/dev/zero')", "/dev/zero"),
        "long-name": ("ms.onnx.load('x' * 100_000)", None),
        "ctrl-name": ("ms.onnx.load('\\x1b[31mbad.onnx')", "garbage content"),
        "not-a-string": ("ms.onnx.load(12345)", None),
    }
    for k, (body, invalid) in onnx.items():
        cases.append(py_case(f"onnx-{k}", f"onnx.load: {k}", body, expect_error=invalid,
                             files={"model.onnx": relu_onnx, "fifo.onnx": ("fifo",),
                                    "\x1b[31mbad.onnx": b"\x08\x07garbage"}))

    # Random extras: elementwise ops against numpy with inputs in odd memory layouts.
    elementwise = sorted(k for k in NUMPY_REF if k in ops)
    for i in range(n):
        rng = rng_for(seed, "python", i)
        name, layout = rng.choice(elementwise), rng.choice(sorted(LAYOUTS))
        count = 1 if ops[name]["inputs"] == "1" else 2
        rtol = 1e-4 if name.startswith("gelu") or name == "erf" else 1e-5
        args = "a_in" if count == 1 else "a_in, b_in"
        body = (op_inputs(name, layout) +
                f"got = ms.ops.{name}(*[ms.Tensor(t) for t in ({args},)]).asnumpy()\n"
                f"same(got, {NUMPY_REF[name]}, '{name} on {layout}', rtol={rtol})")
        cases.append(py_case(f"{i:04d}-{name}-{layout}", f"ops.{name} on {layout} inputs", body))
    yield from cases


# --------------------------------------------------------------------------------------------
# 6. Print files (protobuf: a FormatHeader and PrintRecords, each preceded by its length varint)


def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # protobuf's int64: ten bytes of two's complement
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def fields(msg: bytes) -> list:
    """(field number, wire type, value) of a message: ints for varints, bytes for lengths."""
    out, pos = [], 0
    while pos < len(msg):
        tag, pos = read_varint(msg, pos)
        if tag & 7 == 0:
            v, pos = read_varint(msg, pos)
        else:
            n, pos = read_varint(msg, pos)
            v, pos = msg[pos:pos + n], pos + n
        out.append((tag >> 3, tag & 7, v))
    return out


def ld(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def encode_record(rec: dict) -> bytes:
    shape = b"".join(varint(d) for d in rec["shape"])
    tensor = ld(1, rec["dtype"]) + ld(2, shape) + ld(3, rec["data"])
    return ld(1, rec["prefix"]) + ld(2, tensor)


def decode_print_file(data: bytes) -> tuple[bytes, list]:
    pos, msgs = 0, []
    while pos < len(data):
        n, pos = read_varint(data, pos)
        msgs.append(data[pos:pos + n])
        pos += n
    records = []
    for m in msgs[1:]:
        rec = {"prefix": b"", "dtype": b"", "shape": [], "data": b""}
        for num, _, v in fields(m):
            if num == 1:
                rec["prefix"] = v
            elif num == 2:
                for tnum, twire, tv in fields(v):
                    if tnum == 1:
                        rec["dtype"] = tv
                    elif tnum == 2 and twire == 2:
                        p = 0
                        while p < len(tv):
                            d, p = read_varint(tv, p)
                            rec["shape"].append(d - (1 << 64) if d >= 1 << 63 else d)
                    elif tnum == 2:
                        rec["shape"].append(tv)
                    elif tnum == 3:
                        rec["data"] = tv
        records.append(rec)
    return msgs[0], records


def encode_print_file(header: bytes, records: list) -> bytes:
    parts, encoded = [varint(len(header)), header], {}
    for r in records:
        # The "count" mutation repeats one record object up to 100,000 times: encode it once.
        body = encoded.get(id(r))
        if body is None:
            body = encoded[id(r)] = encode_record(r)
        parts += [varint(len(body)), body]
    return b"".join(parts)


DTYPE_SIZE = {b"Float32": 4, b"Float64": 8, b"Float16": 2, b"Int8": 1, b"Int16": 2, b"Int32": 4,
              b"Int64": 8, b"UInt8": 1, b"Bool": 1}


def inconsistent(rec: dict) -> str | None:
    """Why a record cannot be read as written, when the script can tell."""
    if rec["dtype"] not in DTYPE_SIZE:
        if not re.fullmatch(rb"[A-Za-z][A-Za-z0-9]*", rec["dtype"]):
            return f"dtype {rec['dtype']!r}"
        return None
    if any(d < 0 for d in rec["shape"]):
        return f"negative dimension in {rec['shape']}"
    count = math.prod(rec["shape"])
    if count * DTYPE_SIZE[rec["dtype"]] != len(rec["data"]):
        return f"shape {rec['shape']} of {rec['dtype'].decode()} with {len(rec['data'])} data bytes"
    return None


PRINT_IR = """# IR entry: @main

subgraph @main(%para1_x: <Tensor[Float32], (2, 3)>, %para2_e: <Tensor[Float32], (0, 3)>, %para3_i: <Tensor[Int64], (4)>) {
  %const1 = Constant <Tensor[Int32], (3)> [1, -2, 3]
  %const2 = Constant <Tensor[Bool], (2)> [true, false]
  %0 = print(%para1_x) {prefix: "x"} : (<Tensor[Float32], (2, 3)>) -> (<Tensor[Float32], (2, 3)>)
  %1 = print(%para2_e) {prefix: "e"} : (<Tensor[Float32], (0, 3)>) -> (<Tensor[Float32], (0, 3)>)
  %2 = print(%para3_i) {prefix: "i"} : (<Tensor[Int64], (4)>) -> (<Tensor[Int64], (4)>)
  %3 = print(%const1) {prefix: "c"} : (<Tensor[Int32], (3)>) -> (<Tensor[Int32], (3)>)
  %4 = print(%const2) {prefix: "b"} : (<Tensor[Bool], (2)>) -> (<Tensor[Bool], (2)>)
  %5 = relu(%0) : (<Tensor[Float32], (2, 3)>) -> (<Tensor[Float32], (2, 3)>)
  Return(%5)
}
"""
PRINT_X = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
PRINT_I = np.array([1, -2, 2 ** 40, -2 ** 62], np.int64)
# What print-parse must show for the file the IR above writes.
PRINT_EXPECTED = ["[[0, 0.25, 0.5],", "[0.75, 1, 1.25]]", "dtype=Int64", "1099511627776",
                  "-4611686018427387904", "[1, -2, 3]", "[True, False]", "shape=[0, 3]"]


def gen_print(seed: int, n: int) -> Iterator[Case]:
    generated: dict = {}
    inputs = {"p.ir": PRINT_IR.encode(), "x.npy": npy_of(PRINT_X),
              "e.npy": npy_of(np.zeros((0, 3), np.float32)), "i.npy": npy_of(PRINT_I)}
    feed = ["--input", "x=x.npy", "--input", "e=e.npy", "--input", "i=i.npy"]
    for mode in ("pynative", "graph"):
        def keep(res, rundir, mode=mode):
            data = (rundir / "print.pf").read_bytes() if (rundir / "print.pf").is_file() else b""
            generated[mode] = data
            return None if data else "the run printed, but print_file_path is empty or missing"
        yield Case("print", f"generate-{mode}", f"a printing .ir run in {mode} mode",
                   [MF, "run", "p.ir", "--mode", mode, "--iters", "1", "--set",
                    "print_file_path=print.pf"] + feed, dict(inputs), check=keep,
                   allowed_new=("print.pf",))
    for mode, data in generated.items():
        def values(res, rundir):
            text = res.stdout.decode("utf-8", "replace")
            missing = [s for s in PRINT_EXPECTED if s not in text]
            return missing and f"print-parse lacks {missing}"
        yield Case("print", f"parse-{mode}", f"print-parse of the {mode} file",
                   [MF, "print-parse", "print.pf"], {"print.pf": data}, check=values)

    base = generated.get("pynative") or (CORPUS / "print_file_fuzz" / "two_records.pf").read_bytes()
    header, records = decode_print_file(base)
    corpus = [p.read_bytes() for p in sorted(CORPUS.glob("print_file_fuzz/*.pf"))]
    argv = [MF, "print-parse", "print.pf"]
    for label, spec in {"empty": b"", "fifo": ("fifo",), "directory": ("dir",),
                        "dev-zero": ("symlink", "/dev/zero"),
                        "sparse-3GiB": ("sparse", 3 << 30)}.items():
        yield Case("print", f"special-{label}", f"print.pf is {label}", argv, {"print.pf": spec},
                   expect_error=f"print.pf is {label}")
    for k, data in enumerate(corpus):
        yield Case("print", f"corpus-{k}", f"corpus print file {k}", argv, {"print.pf": data})

    for i in range(n):
        rng = rng_for(seed, "print", i)
        recs = [dict(r, shape=list(r["shape"])) for r in records]
        hdr, tags, raw_tail = header, [], b""
        for _ in range(rng.choice([1, 1, 2])):
            r = rng.choice(recs)
            how = rng.choice(["prefix", "dtype", "shape", "shape", "shape", "data", "length",
                              "count", "header", "flip", "truncate"])
            tags.append(how)
            if how == "prefix":
                r["prefix"] = text_to_bytes(rng.choice(["\x1b[31mred\x1b[0m", "a\rb", "P" * 100_000,
                                                        "\udcff", "\x00\x00"]))
            elif how == "dtype":
                r["dtype"] = text_to_bytes(rng.choice(["Float64", "Int8", "Complex64", "",
                                                       "Float32\x1b[31m", "D" * 10_000, "String"]))
            elif how == "shape":
                r["shape"] = rng.choice([[0, 3], [2 ** 40, 0], [0, 2 ** 62], [2 ** 62, 2 ** 62],
                                         [2 ** 63 - 1], [-1, 6], [1] * 65, [1] * 1000, [],
                                         [math.prod(r["shape"])],
                                         [2 ** 32, 2 ** 32, 0], [0] * 100_000])
            elif how == "data":
                r["data"] = rng.choice([r["data"][:-1], r["data"] + b"\0", b"", r["data"] * 1000])
            elif how == "length":
                # A record whose length prefix lies: the raw bytes, not re-encoded.
                body = encode_record(r)
                recs.remove(r)
                raw_tail += rng.choice([varint(2 ** 63) + body, varint(len(body) + 1) + body,
                                        varint(0) + body, b"\xff" * 10 + body])
            elif how == "count":
                # Many records: the corpus has a timeout found with empty tensors.
                empty = dict(r, shape=[0, 2 ** 40], data=b"")
                recs.extend([empty if rng.random() < 0.5 else r] * rng.choice([1000, 100_000]))
            elif how == "header":
                hdr = rng.choice([hdr.replace(b"modeflow-print", b"modeflow-prinX"),
                                  hdr.replace(b"\x10\x01", b"\x10\x02"), b"", b"\xff" * 20,
                                  hdr + b"\x1a\x05extra"])
            elif how == "flip":
                pass  # applied to the encoded bytes below
        data = encode_print_file(hdr, recs) + raw_tail
        if "flip" in tags:
            buf = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
            data = bytes(buf)
        if "truncate" in tags:
            data = data[:rng.randrange(len(data))]
        why = next((w for w in map(inconsistent, [r for r in recs if isinstance(r, dict)]) if w),
                   None)
        if {"flip", "truncate", "length", "header"} & set(tags):
            why = None  # the script can no longer tell what the bytes mean
        yield Case("print", f"{i:04d}", f"{', '.join(tags)}", argv, {"print.pf": data},
                   expect_error=why)


# --------------------------------------------------------------------------------------------
# 7. Compile cache


def gen_cache(seed: int, n: int) -> Iterator[Case]:
    cache_set = ["--set", "enable_compile_cache=true", "--set", "compile_cache_path=cache"]
    run = [MF, "run", "mlp", "--mode", "graph", "--iters", "1", "--output-dir", "out"] + cache_set
    state: dict = {}

    def reference(res, rundir):
        state["ref"] = load_outputs(rundir)
        return None
    yield Case("cache", "ref-uncached", "mlp in GRAPH mode without the cache",
               [MF, "run", "mlp", "--mode", "graph", "--iters", "1", "--output-dir", "out"],
               check=reference, allowed_new=("out",))

    def store(res, rundir):
        entries = sorted((rundir / "cache").rglob("*.mfcc"))
        if len(entries) != 1:
            return f"expected one cache entry after a miss, found {len(entries)}"
        state["name"] = str(entries[0].relative_to(rundir))
        state["entry"] = entries[0].read_bytes()
        why = compare_outputs(load_outputs(rundir), state.get("ref", []))
        return why and f"the cached-miss run differs from the uncached one: {why}"
    yield Case("cache", "ref-miss", "first run: a miss that stores the entry", run, check=store,
               allowed_new=("out", "cache"))
    if "entry" not in state:
        return
    name, entry = state["name"], state["entry"]
    header_len = struct.unpack("<I", entry[8:12])[0]
    payload_at = 12 + header_len

    def same_as_ref(res, rundir):
        why = compare_outputs(load_outputs(rundir), state["ref"])
        return why and f"outputs with a damaged cache entry differ from the uncached run: {why}"
    yield Case("cache", "ref-hit", "second run: a hit", run, {name: entry}, check=same_as_ref,
               allowed_new=("out", "cache"))

    corpus = sorted(CORPUS.glob("cache_entry_fuzz/*.mfcc"))
    damages = {  # label -> (entry spec, why `cache verify` must fail, or None)
        "empty": (b"", "an empty entry"),
        "magic-only": (entry[:8], "8 bytes"),
        "header-len-only": (entry[:12], "no header"),
        "header-short": (entry[:payload_at - 1], "a truncated header"),
        "payload-half": (entry[:payload_at + (len(entry) - payload_at) // 2], "half a payload"),
        "payload-short-1": (entry[:-1], "a payload one byte short"),
        "append-1": (entry + b"\0", None),
        "append-1MiB": (entry + b"\xa5" * (1 << 20), None),
        "header-len-max": (entry[:8] + b"\xff\xff\xff\xff" + entry[12:], "header length 2^32-1"),
        "header-len-0": (entry[:8] + b"\0\0\0\0" + entry[12:], "header length 0"),
        "magic": (b"MFCCACHX" + entry[8:], "a wrong magic"),
        "fifo": (("fifo",), "a FIFO"),
        "directory": (("dir",), None),
        "dev-zero": (("symlink", "/dev/zero"), "/dev/zero"),
        "symlink-loop": (("symlink", Path(name).name), None),
        "dangling": (("symlink", "nosuch.mfcc"), None),
        "sparse-3GiB": (("sparse", 3 << 30), "3 GiB of zeros"),
    }
    for p in corpus:
        damages[f"foreign-{p.stem}"] = (p.read_bytes(), None)
    for i in range(n):
        rng = rng_for(seed, "cache", i)
        buf = bytearray(entry)
        if rng.random() < 0.7:
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(payload_at, len(buf))] ^= 1 << rng.randrange(8)
            damages[f"{i:04d}-payload-flip"] = (bytes(buf), "flipped payload bits")
        else:
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(12, payload_at)] ^= 1 << rng.randrange(8)
            damages[f"{i:04d}-header-flip"] = (bytes(buf), None)
    for label, (spec, invalid) in damages.items():
        files = {name: spec}
        yield Case("cache", f"{label}-verify", f"cache entry: {label}",
                   [MF, "cache", "verify"] + cache_set, files, expect_error=invalid,
                   allowed_new=("cache",))
        yield Case("cache", f"{label}-ls", f"cache entry: {label}", [MF, "cache", "ls"] + cache_set,
                   files, allowed_new=("cache",))
        yield Case("cache", f"{label}-run", f"cache entry: {label}", run, files,
                   check=same_as_ref, allowed_new=("out", "cache"))


# --------------------------------------------------------------------------------------------
# Driver

GENERATORS = {"ir": gen_ir, "onnx": gen_onnx, "npy": gen_npy, "context": gen_context,
              "python": gen_python, "print": gen_print, "cache": gen_cache}


def parse_cases(spec: str | None) -> dict:
    counts = dict(DEFAULT_CASES)
    if not spec:
        return counts
    for part in spec.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            if k not in counts:
                raise SystemExit(f"unknown class {k!r}; the classes are {', '.join(CLASSES)}")
            counts[k] = int(v)
        else:
            counts = {k: int(part) for k in counts}
    return counts


def format_table(stats: dict) -> str:
    cols = ["class", "cases"] + OUTCOMES + ["seconds"]
    rows = [cols]
    total = {c: 0 for c in cols[1:]}
    for cls, s in stats.items():
        row = [cls, str(s["cases"])] + [str(s[o]) for o in OUTCOMES] + [f"{s['seconds']:.0f}"]
        rows.append(row)
        for c in cols[1:]:
            total[c] += s[c] if c in s else 0
    rows.append(["total"] + [str(total[c]) if c != "seconds" else f"{total[c]:.0f}"
                             for c in cols[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join("  ".join(v.rjust(w) if j else v.ljust(w) for j, (v, w) in
                               enumerate(zip(r, widths))) for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="seed of every generator (default 0)")
    ap.add_argument("--cases", help="random mutants per class: N for all, or CLASS=N,... "
                    f"(defaults: {DEFAULT_CASES})")
    ap.add_argument("--classes", default=",".join(CLASSES),
                    help=f"comma-separated subset of {','.join(CLASSES)}")
    ap.add_argument("--out", default="/tmp/mf-campaign", help="reports and reproducers")
    ap.add_argument("--timeout", type=float, default=20, help="seconds before a case is a hang")
    ap.add_argument("--verbose", action="store_true", help="print every case as it ends")
    ap.add_argument("--build", default=str(REPO / "build"),
                    help="the build directory whose mf and Python module are run (default build/); "
                         "one configured with MODEFLOW_ASAN_UBSAN=ON runs the mf classes under "
                         "ASan+UBSan (the python class needs the module built there too)")
    args = ap.parse_args()
    global MF, PY_PATH, SANITIZED
    build = Path(args.build).resolve()
    MF, PY_PATH = str(build / "mf"), str(build / "python")
    cache = build / "CMakeCache.txt"
    SANITIZED = cache.exists() and "MODEFLOW_ASAN_UBSAN:BOOL=ON" in cache.read_text(errors="replace")

    counts = parse_cases(args.cases)
    classes = [c.strip() for c in args.classes.split(",") if c.strip()]
    for c in classes:
        if c not in GENERATORS:
            raise SystemExit(f"unknown class {c!r}; the classes are {', '.join(CLASSES)}")
    if not os.access(MF, os.X_OK):
        raise SystemExit(f"{MF} is not built")
    out = Path(args.out)
    work, repro = out / "work", out / "repro"
    for d in (work, repro):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)

    stats, findings, timings = {}, [], []
    started = time.monotonic()
    for cls in classes:
        s = {"cases": 0, "seconds": 0.0, **{o: 0 for o in OUTCOMES}}
        stats[cls] = s
        t0 = time.monotonic()
        gen = GENERATORS[cls](args.seed, counts[cls])
        for case in gen:
            try:
                res = execute(case, work, args.timeout)
            except (OSError, ValueError) as e:
                # The command could not even be started (an argv the kernel refuses): a defect of
                # this script's generator, not of modeflow; say so and go on.
                print(f"  not run: {cls}/{case.cid}: {type(e).__name__}: {e}", flush=True)
                continue
            s["cases"] += 1
            s[res.outcome] += 1
            timings.append((res.secs, f"{cls}/{case.cid}", res.outcome))
            if args.verbose:
                print(f"  {res.secs:6.2f} s {res.outcome:12s} {cls}/{case.cid}", flush=True)
            if res.outcome in BAD:
                write_repro(case, res, repro)
                findings.append((case, res))
                print(f"  {res.outcome:12s} {cls}/{case.cid}: {esc(res.reason, 160)}", flush=True)
        s["seconds"] = time.monotonic() - t0
        print(f"{cls}: {s['cases']} cases in {s['seconds']:.0f} s", flush=True)
    shutil.rmtree(work, ignore_errors=True)

    lines = [f"modeflow hostile-input campaign: seed {args.seed}, timeout {args.timeout:g} s, "
             f"{time.monotonic() - started:.0f} s", "", format_table(stats), ""]
    # Not findings, but where a reader spends its time on hostile input (a near-hang is a hint).
    lines.append("slowest cases: " + ", ".join(f"{name} {secs:.1f} s ({outcome})" for secs, name,
                                               outcome in sorted(timings, reverse=True)[:6]))
    lines.append("")
    for case, res in findings:
        lines.append(f"[{res.outcome}] {case.cls}/{case.cid}: {esc(res.reason, 400)}")
        lines.append(f"    input:   {esc(case.desc, 300)}")
        lines.append(f"    command: {esc(' '.join(shlex.quote(a) for a in case.argv), 300)}")
        lines.append(f"    exit:    {res.rc}  ({res.secs:.1f} s)")
        for ln in res.stderr.split(b"\n")[:4]:
            if ln:
                lines.append(f"    stderr:  {esc(ln, 300)}")
        lines.append(f"    repro:   {repro / case.cls / case.cid / 'cmd.sh'}")
    report = "\n".join(lines) + "\n"
    (out / "report.txt").write_text(report)
    (out / "summary.json").write_text(json.dumps(
        {"seed": args.seed, "classes": stats,
         "findings": [{"class": c.cls, "case": c.cid, "outcome": r.outcome, "reason": r.reason,
                       "input": esc(c.desc, 300), "exit": r.rc} for c, r in findings]}, indent=1))
    print()
    print(report)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
