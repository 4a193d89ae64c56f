"""Runs the `>>>` examples of a seed page with modeflow in place of mindspore, in this process,
and prints one JSON record per example: its source and what happened (ok, the warnings raised, or
the exception type and text). Usage: seed_examples.py PAGE FORM, FORM = context | ms."""

import codeop
import json
import sys
import warnings


def examples(page_text):
    """The page's examples, each one complete statement (continuations joined)."""
    out, pending = [], []
    for line in page_text.splitlines():
        stripped = line.strip()
        if stripped.startswith(">>>") or (pending and stripped.startswith("...")):
            pending.append(stripped[3:].lstrip(" ") if stripped[3:4] == " " else stripped[3:])
            source = "\n".join(pending)
            try:
                complete = codeop.compile_command(source, "<example>", "exec")
            except SyntaxError:
                complete = None
            if complete is not None:
                out.append(source)
                pending = []
    return out


def rewrite(source, form):
    """`mindspore` -> `modeflow`; with form "ms", the 2.x spelling `import modeflow as ms` and
    ms.set_context(...) instead of `from mindspore import context` and context.set_context."""
    source = source.replace("mindspore", "modeflow")
    if form == "ms":
        source = source.replace("from modeflow import context", "import modeflow as ms")
        source = source.replace("context.", "ms.")
    return source


def main():
    page, form = sys.argv[1], sys.argv[2]
    import modeflow as ms

    prelude = "import modeflow as ms" if form == "ms" else "from modeflow import context"
    namespace = {}
    exec(prelude, namespace)
    records = []
    for source in examples(open(page, encoding="utf-8").read()):
        ms.reset_context()
        ms.reset_auto_parallel_context()
        ms.reset_ps_context()
        code = rewrite(source, form)
        record = {"example": source, "run": code, "outcome": "ok", "warnings": [], "error": ""}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                exec(code, namespace)
            except Exception as error:  # noqa: BLE001 - the outcome is what we record
                record["outcome"] = type(error).__name__
                record["error"] = str(error)
        record["warnings"] = [str(w.message) for w in caught]
        if record["outcome"] == "ok" and record["warnings"]:
            record["outcome"] = "warns"
        records.append(record)
    print(json.dumps(records))


if __name__ == "__main__":
    main()
