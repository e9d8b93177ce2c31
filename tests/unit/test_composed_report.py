"""The composed benchmark's report from a synthetic JSON: the target's rule (met / missed / undecided where Spark
as it is already keeps its batches on target), warm-up counting, executor-seconds and a failed configuration."""

from __future__ import annotations

import json

import pytest

from adaptstream_bench.composed_report import counted, run_figures, write_report

T0 = 1_000.0


def _query(latencies: list[float], slide: float = 5.0) -> dict:
    """One dataset per second, one batch per dataset, MaxLat = the dataset's latency."""
    ds = [{"seq": i, "arrival": T0 + i, "latency": lat, "rows": 100} for i, lat in enumerate(latencies)]
    bs = [{"start": i, "end": i + 1, "rows": 100, "max_latency": lat, "completed_at": T0 + i + lat}
          for i, lat in enumerate(latencies)]  # fmt: skip
    return {"workload": "LR1S", "slide": slide, "unfinished": 0, "batches": bs, "datasets": ds}


def _run(config: str, lat_a: list[float], lat_b: list[float], executors: int) -> dict:
    intervals = [{"id": str(k), "added": T0 - 10, "removed": None} for k in range(executors)]
    return {"config": config, "started": T0, "ended": T0 + 100, "executors": intervals,
            "queries": {"a": _query(lat_a), "b": _query(lat_b, 10.0)}, "elasticity_log": []}  # fmt: skip


def _doc(spark_lat: float, tuned_lat: float, spark_exec: int = 4, tuned_exec: int = 2) -> dict:
    meta = {
        "command": "adaptstream bench composed", "argv": [], "git": "abc", "dirty": False, "started": T0,
        "finished": T0 + 60, "load_before": [0.1] * 3, "load_after": [0.2] * 3, "load_mean": 0.1, "load_max": 0.2,
        "loads": [], "machine": {"host": "h", "cpus": 2, "python": "3.11"},
        "config": {"queries": ["LR1S", "LR2S"], "rate": 10, "duration": 20, "warmup": 2, "latency_target": 5,
                   "workers": 4, "cpu_pct": 30, "mem_mb": 1024, "seed": 0},
        "configs": {"spark": "as it is", "tuned": "all three", "klink": "alone"},
    }  # fmt: skip
    runs = [
        _run("spark", [spark_lat] * 20, [1.0] * 20, spark_exec),
        _run("tuned", [tuned_lat] * 20, [1.0] * 20, tuned_exec),
        {"config": "klink", "error": "exit 1: boom"},
    ]
    return {"meta": meta, "runs": runs}


def test_warm_up_leaves_out_the_first_seconds_of_arrivals():
    bs, ds = counted(_query([1.0] * 10), warmup=3)
    assert [d["seq"] for d in ds] == list(range(3, 10)) and [b["end"] for b in bs] == list(range(4, 11))


def test_pooled_figures_and_executor_seconds():
    r = run_figures(_run("spark", [6.0] * 10, [1.0] * 10, 3), warmup=0)
    assert r["batches"] == 20 and r["on_target"] == pytest.approx(0.5)  # a's 6 s > 5 s slide, b's 1 s <= 10 s
    assert r["window_s"] == pytest.approx(9 + 6.0) and r["executor_seconds"] == pytest.approx(3 * 15.0)
    assert r["max_executors"] == 3 and r["per_query"]["a"]["on_target"] == 0.0


@pytest.mark.parametrize(
    ("spark_lat", "tuned_lat", "tuned_exec", "met"),
    [
        (6.0, 1.0, 2, True),  # Spark 50 %, tuned 100 % at 0.5x the executor-seconds
        (6.0, 1.0, 5, False),  # on target, but about as many executor-seconds (a shorter window, more executors)
        (6.0, 6.0, 2, False),  # tuned misses its batches too
        (1.0, 1.0, 2, None),  # Spark as it is keeps every batch on target: not the regime of the target
    ],
)
def test_the_target_rule(tmp_path, spark_lat, tuned_lat, tuned_exec, met):
    doc = write_report(_doc(spark_lat, tuned_lat, tuned_exec=tuned_exec), tmp_path)
    (t,) = doc["targets"]
    assert t["met"] is met, t
    md = (tmp_path / "composed.md").read_text()
    assert "| klink | failed: exit 1: boom" in md and (tmp_path / "composed.png").exists()
    assert json.loads((tmp_path / "composed.json").read_text())["targets"] == doc["targets"]


def test_a_rate_sweep_is_judged_once_per_rate(tmp_path):
    """--rate 250,500: every configuration once per rate; one verdict per rate (undecided where Spark as it is
    keeps its batches on target, judged where it does not)."""
    doc = _doc(6.0, 1.0)
    low = _doc(1.0, 1.0)
    doc["meta"]["config"] = {**{k: v for k, v in doc["meta"]["config"].items() if k != "rate"}, "rates": [250, 500]}
    doc["runs"] = [{"rate": 250, **r} for r in low["runs"]] + [{"rate": 500, **r} for r in doc["runs"]]
    out = write_report(doc, tmp_path)
    assert [(t["rate"], t["met"]) for t in out["targets"]] == [(250, None), (500, True)]
    md = (tmp_path / "composed.md").read_text()
    assert "| 250 | spark |" in md and "| 500 | tuned |" in md and "250 and 500 rows/s per query" in md
