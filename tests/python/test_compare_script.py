"""benchmarks/compare/compare.py's own logic, without the peers: the mode rule it checks (GRAPH
never slower than PYNATIVE, O1/O2 never slower than O0, beyond the engines' spread) and the
markdown table of ratios it writes."""

import importlib.util
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
spec = importlib.util.spec_from_file_location(
    "compare", os.path.join(ROOT, "benchmarks", "compare", "compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def result(engine, medians):
    r = compare.Result(engine)
    r.round_medians = list(medians)
    r.runs = 3 * len(medians)
    return r


def cell(net, threads, **medians):
    return {"net": net, "threads": threads, "diff_ort": {}, "diff_torch": {},
            "rel_torch": {e: 1e-6 for e in medians},
            "results": {e.replace("_", "-"): result(e.replace("_", "-"), m)
                        for e, m in medians.items()}}


def test_the_mode_rule_flags_only_what_is_beyond_the_spread():
    cells = [
        # O0 5% slower than PYNATIVE, but the rounds spread by 10%: noise, not a break.
        cell("a", 1, pynative=[10.0, 10.5, 11.0], o0=[10.5, 11.0, 11.5], o1=[9.0, 9.0, 9.0]),
        # O1 20% slower than O0 with 2% spreads: broken.
        cell("b", 2, pynative=[12.0, 12.1, 12.2], o0=[10.0, 10.1, 10.2], o1=[12.0, 12.1, 12.2]),
    ]
    breaks = compare.mode_rule_breaks(cells)
    assert [(net, t, a, b) for net, t, a, b, _, _ in breaks] == [("b", 2, "o1", "o0")]
    assert abs(breaks[0][4] - 12.1 / 10.1) < 1e-9


def test_the_markdown_table_has_one_row_per_network_with_ratios_to_ort(tmp_path):
    cells = [cell("net", 1, ort=[10.0], o1=[8.0]), cell("net", 2, ort=[5.0], o1=[6.0])]
    path = tmp_path / "t.md"
    compare.write_markdown(cells, ["ort", "o1"], path)
    lines = path.read_text().splitlines()
    assert lines[0] == ("| network | ORT ms T=1 | GRAPH O1 T=1 | ORT ms T=2 | GRAPH O1 T=2 | "
                        "max rel. diff vs PyTorch |")
    assert lines[2].startswith("| net | 10") and "| 0.80 |" in lines[2] and "| 1.20 |" in lines[2]
    assert lines[2].endswith("| 1.0e-06 |")
