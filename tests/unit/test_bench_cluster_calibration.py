"""The calibration report's verdicts follow its rule (speed-up >= 0.7 k where the quotas fit the cores after the
driver's share; undecided inside the repeats' spread or without a drain) from the recorded drains alone, and the
report is rebuilt from its JSON with the same verdicts."""

from __future__ import annotations

import json

from adaptstream_bench.cluster_calibration_report import judged, speedup, targets, write_report
from adaptstream_bench.meta import missing


def _run(rate: float) -> dict:
    return {"wall_s": 1e6 / rate, "rows": 1_000_000, "rows_per_s": rate, "batches": 1, "worker_cpu_s": 20.0,
            "throttled_s": 3.0, "load1_before": 1.0}  # fmt: skip


def _doc(rates: dict[int, list[float]], workers: int = 4, cpu: float = 30.0, gone: list | None = None) -> dict:
    meta = {
        "command": "adaptstream bench cluster-calibration",
        "argv": ["adaptstream"],
        "git": "abc",
        "dirty": False,
        "started": 0.0,
        "finished": 600.0,
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [1.5, 1.2, 1.1],
        "load_mean": 1.2,
        "load_max": 1.5,
        "machine": {"host": "vm", "cpus": 2, "python": "3.11"},
        "master": "spark://127.0.0.1:7181",
        "config": {"workers": workers, "cpu_pct": cpu, "mem_mb": 1024, "executor_memory": "512m",
                   "query": "window", "rows": 1_000_000, "files": 24, "repeats": 3, "budget_min": 40},
    }  # fmt: skip
    points = [{"executors": k, "runs": [_run(x) for x in xs]} for k, xs in rates.items()]
    return {"meta": meta, "points": points, "missing": gone or []}


def _verdicts(doc: dict) -> dict[str, bool | None]:
    return {t["target"].split(" at ")[1].split(" ")[0]: t["met"] for t in targets(doc)}


def test_only_counts_whose_quotas_fit_the_cores_after_the_driver_are_judged():
    assert not judged(1, 30, 2)  # the reference itself
    assert judged(5, 30, 2)  # 150 % <= 150 %
    assert not judged(6, 30, 2)
    assert judged(6, 25, 2) and not judged(7, 25, 2)


def test_clear_speed_ups_are_met_and_a_flat_curve_is_missed():
    grow = _doc({1: [100, 102, 98], 2: [190, 195, 185], 3: [260, 270, 255], 4: [330, 340, 320]})
    assert _verdicts(grow) == {"2": True, "3": True, "4": True}
    flat = _doc({1: [100, 102, 98], 2: [110, 112, 108], 3: [115, 118, 112], 4: [120, 121, 119]})
    assert _verdicts(flat) == {"2": False, "3": False, "4": False}


def test_a_threshold_inside_the_repeats_spread_is_undecided_not_met():
    # median speed-up at 2 is 1.40 exactly 0.7 x 2, but the spread runs from 1.2 to 1.6
    doc = _doc({1: [100, 110, 90], 2: [130, 140, 145], 3: [300, 310, 305], 4: [400, 410, 405]})
    s = speedup([100, 110, 90], [130, 140, 145])
    assert s is not None and s["low"] < 1.4 < s["high"]
    assert _verdicts(doc)["2"] is None
    assert _verdicts(doc)["3"] is True


def test_a_budget_cut_run_names_what_is_missing_and_leaves_those_counts_undecided(tmp_path):
    gone = [{"executors": 1, "repeats": 3, "why": "budget spent"}]
    doc = _doc({4: [330, 340], 3: [260, 270, 255], 2: [190]}, gone=gone)
    assert _verdicts(doc) == {"2": None, "3": None, "4": None}
    written = write_report(doc, tmp_path)
    md = (tmp_path / "cluster_calibration.md").read_text()
    assert "Not run: 3 drain(s) at 1 executor(s): budget spent." in md
    assert "**undecided**" in md and "**met**" not in md
    assert written["targets"] == targets(doc)


def test_the_report_is_rebuilt_from_its_json_with_complete_meta(tmp_path):
    doc = _doc({1: [100, 102, 98], 2: [190, 195, 185], 3: [260, 270, 255], 4: [330, 340, 320]})
    write_report(doc, tmp_path)
    saved = json.loads((tmp_path / "cluster_calibration.json").read_text())
    assert missing(saved["meta"]) == []
    assert [t["met"] for t in saved["targets"]] == [True, True, True]
    assert all({"target", "rule", "value", "threshold", "met"} <= t.keys() for t in saved["targets"])
    first = (tmp_path / "cluster_calibration.md").read_text()
    write_report(saved, tmp_path)  # what `python -m ...cluster_calibration_report DIR` does
    assert (tmp_path / "cluster_calibration.md").read_text() == first
    assert (tmp_path / "cluster_calibration.png").stat().st_size > 0
    assert "| 4 | 1.20 | 330 |" in first
