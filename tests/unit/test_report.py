"""Summaries and the comparison report from hand-made metrics files (no Spark)."""

from __future__ import annotations

import json
import os

import pytest

from adaptstream.app.report import ratios, write_comparison
from adaptstream.app.runner import RunResult, RunSpec
from adaptstream.metrics.summary import summarize


def _metrics(path, batches: list[tuple[float, float, list[float]]]) -> str:
    """batches: (admitted_at, completed_at, arrival times of its 1000-row datasets)."""
    m = os.path.join(path, "metrics")
    os.makedirs(m)
    seq = 0
    with open(f"{m}/datasets.jsonl", "w") as fd, open(f"{m}/batches.jsonl", "w") as fb:
        for i, (adm, done, arrivals) in enumerate(batches):
            for a in arrivals:
                fd.write(
                    json.dumps(
                        {
                            "seq": seq,
                            "arrival": a,
                            "rows": 1000,
                            "sentinel": False,
                            "admitted_at": adm,
                            "completed_at": done,
                            "buffering": adm - a,
                            "latency": done - a,
                            "processing": done - adm,
                        }
                    )
                    + "\n"
                )
                seq += 1
            fb.write(
                json.dumps(
                    {
                        "batch": i,
                        "start": seq - len(arrivals),
                        "end": seq,
                        "rows": 1000 * len(arrivals),
                        "admitted_at": adm,
                        "completed_at": done,
                        "buffering_time": adm - min(arrivals),
                        "processing_time": done - adm,
                        "max_latency": done - min(arrivals),
                    }
                )
                + "\n"
            )
    return m


def test_summary_figures(tmp_path):
    m = _metrics(tmp_path, [(2.0, 3.0, [0.0, 1.0]), (4.0, 4.5, [3.0])])
    s = summarize(m, slide=2.0)
    assert s.datasets == 3 and s.batches == 2
    assert s.avg_latency == pytest.approx((3.0 + 2.0 + 1.5) / 3)
    assert s.max_latency == pytest.approx(3.0)
    assert s.within_slide == pytest.approx(0.5)  # MaxLat 3.0 and 1.5 against a 2 s slide
    assert s.throughput == pytest.approx(3000 / 1.5)  # Eq. 4
    assert summarize(m, slide=2.0, warmup=2.0).datasets == 1


def test_comparison_report_has_ratios_and_plots(tmp_path):
    results = []
    for pol, batches in (("lmstream", [(1.0, 1.5, [0.0]), (2.0, 2.5, [1.0])]), ("fixed", [(10.0, 11.0, [0.0, 1.0])])):
        m = _metrics(tmp_path / pol, batches)
        results.append(RunResult(RunSpec("LR1S", pol), str(tmp_path / pol), summarize(m, 5.0), 5.0))
    rat = ratios(results)["LR1S vs fixed"]
    assert rat["latency_reduction"] == pytest.approx(1 - 1.5 / 10.5)
    md = write_comparison(results, str(tmp_path / "out"), "t")
    with open(md) as f:
        text = f.read()
    assert "LR1S vs fixed" in text and "| LR1S | fixed |" in text
    assert os.path.getsize(tmp_path / "out" / "timeline-LR1S.png") > 1000


def test_bounded_rate_criterion(tmp_path):
    from adaptstream_bench.lmstream import bounded, latency_growth

    def result(name, max_lats):
        batches = [(10.0 * i + lat - 0.5, 10.0 * i + lat, [10.0 * i]) for i, lat in enumerate(max_lats)]
        m = _metrics(tmp_path / name, batches)
        return RunResult(RunSpec("LR1S", "fixed"), str(tmp_path / name), summarize(m), 5.0)

    steady = result("steady", [2.0, 4.0, 5.0, 5.2, 4.8, 5.1, 5.0, 4.9, 5.1])  # converges up to its target
    growing = result("growing", [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])  # Fig. 1: falls behind
    assert latency_growth(steady) == pytest.approx(1.0, abs=0.05) and bounded(steady)
    assert latency_growth(growing) == pytest.approx(9.0 / 6.0) and not bounded(growing)


def test_quarantine_counted_once_per_row_as_the_source_writes_it(tmp_path):
    """The summary counts what spark/accounting.py writes (no 'line' field): a row replayed after a restart once,
    a file event once per reason, a torn last record (the run was killed mid-write) left out."""
    from adaptstream.spark.accounting import Quarantine

    m = str(tmp_path / "m")
    os.makedirs(m)
    q = Quarantine(m)
    rows = [
        {"seq": 1, "path": "/in/a.csv", "row": k, "offset": 10 * k, "raw": "x", "reason": "1 fields"} for k in (1, 2)
    ]
    event = {"seq": None, "path": "/in/b.csv", "row": None, "offset": None, "raw": None, "reason": "file shrank"}
    assert q.add([*rows, event]) == 3
    with open(os.path.join(m, "quarantine.jsonl"), "a") as f:  # a replay from another process, then a torn write
        f.write(json.dumps(rows[0]) + "\n" + '{"seq": 1, "pa')
    assert summarize(m).quarantined == 3
