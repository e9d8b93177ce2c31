"""The cost-model report's verdicts as data (issue #55): computed from the results, the same as the recorded
report's Markdown table states."""

import json
import math
from pathlib import Path

from adaptstream_bench.costmodel_report import CONTEXT, targets

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def test_targets_from_the_recorded_results_match_the_recorded_report():
    doc = json.loads((RESULTS / "costmodel.json").read_text())
    ts = targets(doc["results"])
    assert [(t["target"], t["met"]) for t in ts] == [(t["target"], t["met"]) for t in doc["targets"]]
    table = (RESULTS / "costmodel.md").read_text().split("## Against the paper's headline figures", 1)[1]
    rows = [line for line in table.split("\n## ", 1)[0].splitlines() if line.startswith("| ") and "---" not in line]
    shown = [row.rstrip(" |").rsplit("| ", 1)[1].strip() for row in rows[1:]]  # the verdict column
    assert shown == [{True: "**met**", False: "**missed**", None: "undecided"}[t["met"]] for t in ts]
    assert all(CONTEXT in t["rule"] for t in ts)  # every verdict says what it compares


def test_a_missing_figure_is_missed_not_met():
    results = {"exp1": {"gnn": {}, "flat": {}}}
    ts = targets(results)
    assert ts and not any(t["met"] for t in ts)
    nan = {"exp1": {"gnn": {"throughput": {"q50": math.nan}}, "flat": {}}}
    assert targets(nan)[0]["met"] is False
    assert targets({}) == []
