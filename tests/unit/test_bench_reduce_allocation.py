"""The reduce-allocation report's verdicts follow the rules fixed in code (limit(), COST_LIMIT) from the recorded
figures alone, and the report is written from the JSON."""

from __future__ import annotations

import json

from adaptstream_bench.reduce_allocation_report import limit, targets, write_report


def _batch(mm: float, cost: float = 0.01) -> dict:
    return {
        "records_max_mean": mm,
        "bound_max_mean": 3.0,
        "largest_share": 0.2,
        "stage_span_ms": 40.0,
        "full_cost_s": cost,
        "job_s": 1.0,
    }


def _run(split_mm: dict[float, float], cost: float = 0.01) -> dict:
    cells = [
        {
            "z": z,
            "keys": 10_000,
            "buckets": 8,
            "spark": [_batch(1.1)],
            "hash": [_batch(2.5)],
            "prompt": [_batch(2.4, 0.5)],
            "split": [_batch(mm, cost), _batch(mm, cost)],
        }
        for z, mm in split_mm.items()
    ]
    meta = {
        "command": "adaptstream bench reduce-allocation",
        "git": "abc",
        "dirty": False,
        "started": 0.0,
        "load_before": [1.0],
        "load_after": [1.0],
        "machine": {"host": "h", "cpus": 2},
        "config": {"batch_interval_s": 1.0, "rows": 1000, "batches": 2, "map_tasks": 4, "master": "local[2]"},
    }
    return {"meta": meta, "results": cells}


def test_limits_are_the_issue_rule():
    assert [limit(z) for z in (0.5, 1.0, 1.5, 2.0)] == [1.2, 1.2, 1.2, 1.5]


def test_balance_met_only_when_every_configuration_is_within_its_limit():
    (balance, cost, cluster) = targets(_run({0.5: 1.1, 1.5: 1.19, 2.0: 1.45}))
    assert balance[3] is True and cost[3] is True and cluster[3] is None
    (balance, _, _) = targets(_run({0.5: 1.1, 1.5: 1.25, 2.0: 1.45}))
    assert balance[3] is False and "z=1.5 keys=10,000 R=8: 1.25" in balance[2]
    (_, cost, _) = targets(_run({1.0: 1.0}, cost=0.06))
    assert cost[3] is False and "6.00 %" in cost[2]


def test_report_written_from_the_json(tmp_path):
    write_report(_run({0.5: 1.1, 2.0: 1.6}), tmp_path)
    md = (tmp_path / "reduce_allocation.md").read_text()
    assert "**missed**" in md and "**undecided**" in md
    assert (tmp_path / "reduce_allocation.png").stat().st_size > 0
    doc = json.loads((tmp_path / "reduce_allocation.json").read_text())
    assert [t["met"] for t in doc["targets"]] == [False, True, None]
