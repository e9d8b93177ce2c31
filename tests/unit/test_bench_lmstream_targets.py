"""bench lmstream's targets (the paper's claims), computed from the report's run records."""

from __future__ import annotations

from adaptstream_bench.lmstream import targets


def _rec(wl, policy, avg, thput, within=None, traffic="constant"):
    return {"spec": {"workload": wl, "admission": policy, "traffic": traffic}, "avg_latency": avg,
            "throughput": thput, "within_slide": within}  # fmt: skip


def test_bound_latency_and_throughput_verdicts_per_cell():
    runs = [
        _rec("LR1S", "lmstream", 2.0, 900.0, within=0.96),
        _rec("LR1S", "fixed", 6.0, 1500.0, within=0.0),
        _rec("LR1T", "lmstream", 3.0, 1200.0),  # tumbling: no bound target
        _rec("LR1T", "fixed", 2.5, 1000.0),
        _rec("CM2S", "lmstream", 1.0, 500.0, within=0.90),  # fixed not run: undecided
    ]
    got = {t["target"]: t["met"] for t in targets(runs)}
    assert got == {
        "LR1S, constant traffic: lmstream MaxLat <= slide in >= 95% of batches": True,
        "LR1S, constant traffic: lmstream average latency <= fixed's": True,
        "LR1S, constant traffic: lmstream Eq. 4 throughput >= fixed's": False,
        "LR1T, constant traffic: lmstream average latency <= fixed's": False,
        "LR1T, constant traffic: lmstream Eq. 4 throughput >= fixed's": True,
        "CM2S, constant traffic: lmstream MaxLat <= slide in >= 95% of batches": False,
        "CM2S, constant traffic: lmstream average latency <= fixed's": None,
        "CM2S, constant traffic: lmstream Eq. 4 throughput >= fixed's": None,
    }
