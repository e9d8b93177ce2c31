"""The verdicts of ``adaptstream bench lmstream-load`` computed from recorded run rows (no Spark)."""

from __future__ import annotations

import numpy as np

from adaptstream_bench.lmstream_load import backlog_grows, summarize_queries, targets


def _run(w: str, p: str, rate: int, holds: bool, thput: float = 1000.0, avg: float = 2.0, own: bool = True) -> dict:
    return {
        "workload": w,
        "policy": p,
        "traffic": "constant",
        "rate": rate,
        "holds": holds,
        "holds_own": own,
        "thput": thput,
        "wall_thput": rate,
        "avg_latency": avg,
        "p99_latency": avg * 2,
        "within": 1.0,
    }


def _data(runs: list[dict]) -> dict:
    return {"runs": runs, "queries": summarize_queries(runs, "constant")}


def test_max_rate_is_the_highest_rate_that_held():
    runs = [_run("LR1S", "asap", 1000, True), _run("LR1S", "asap", 2000, True), _run("LR1S", "asap", 4000, False)]
    q = summarize_queries(runs, "constant")["LR1S"]["asap"]
    assert (q["max_rate"], q["broke_at"], q["rates_run"]) == (2000, 4000, [1000, 2000, 4000])


def test_targets_met_and_missed():
    queries = ("LR1S", "LR1T", "LR2S", "CM1S", "CM1T", "CM2S")
    good = []
    for w in queries:
        good += [
            _run(w, "asap", 1000, True),
            _run(w, "asap", 2000, False),
            _run(w, "lmstream", 1000, True, thput=3000, avg=1.0),
            _run(w, "lmstream", 2000, True, thput=3000),
            _run(w, "lmstream", 4000, False),
            _run(w, "fixed", 1000, False, thput=2000, avg=5.0),
        ]
    verdicts = [t["met"] for t in targets(_data(good))]
    assert verdicts == [True, True, True, True]
    bad = [r for r in good if not (r["workload"] == "CM1S" and r["policy"] == "lmstream" and r["rate"] == 1000)]
    bad.append(_run("CM1S", "lmstream", 1000, False, thput=1000, avg=4.9))
    verdicts = [t["met"] for t in targets(_data(bad))]
    assert verdicts == [False, True, False, True]  # CM1S is not among the 1000 rows/s latency queries


def test_backlog_is_queueing_growth_not_slower_batches():
    """Recorded asap run, LR1S 1000 rows/s: the filling window doubled the processing time in the last third (MaxLat
    1.1 -> 2.6 s) while the queueing delay rose by 0.7 s: no backlog. A queue that keeps growing is one."""
    proc = np.array([0.8] * 6 + [1.8] * 3)
    assert not backlog_grows(proc + np.array([0.3] * 6 + [1.0] * 3), proc)
    assert backlog_grows(proc + np.array([0.3, 0.4, 0.5, 0.8, 1.0, 1.3, 2.0, 2.6, 3.2]), proc)
    assert not backlog_grows(np.array([1.0, 2.0]), np.array([0.5, 0.5]))  # too few batches to tell


def test_a_rate_lmstream_never_ran_is_not_a_miss():
    """The time budget can stop a ladder after asap ran a rate and before lmstream did: not compared, not missed."""
    runs = [_run("CM1S", "asap", 16000, True), _run("CM1S", "lmstream", 8000, True)]
    first = targets(_data(runs))[0]
    assert (
        "does not: none" in first["figure"] and "not compared (lmstream not run there): CM1S 16000" in first["figure"]
    )
    runs.append(_run("CM1S", "lmstream", 16000, False))
    assert "does not: CM1S 16000" in targets(_data(runs))[0]["figure"]
