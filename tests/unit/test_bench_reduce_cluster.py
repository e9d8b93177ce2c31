"""The end-to-end split-vs-hash report judges by its rule (every round <= 0.8x met, none missed, else undecided)
from the recorded batches alone, and rebuilds from its JSON."""

from __future__ import annotations

import json

from adaptstream_bench.meta import missing
from adaptstream_bench.reduce_cluster import round_ratio, targets, write_report


def _round(hash_s: float, split_s: float) -> dict:
    def batches(s: float) -> list[dict]:
        return [{"batch_s": s + d, "job_s": s / 2, "stage_span_ms": 1000 * s / 3, "records_max_mean": 2.0}
                for d in (-0.1, 0.0, 0.1)]  # fmt: skip

    return {"hash": batches(hash_s), "split": batches(split_s)}


def _doc(rounds: list[tuple[float, float]], repeats: int = 3) -> dict:
    meta = {
        "command": "adaptstream bench reduce-cluster", "argv": ["adaptstream"], "git": "abc", "dirty": False,
        "started": 0.0, "finished": 60.0, "load_before": [1.0, 1.0, 1.0], "load_after": [1.0, 1.0, 1.0],
        "load_mean": 1.0, "load_max": 1.0, "machine": {"host": "vm", "cpus": 2, "python": "3.11"},
        "config": {"workers": 4, "cpu_pct": 30.0, "mem_mb": 1024, "z": 1.5, "keys": 10000, "buckets": 16,
                   "rows": 400000, "map_tasks": 4, "batches": 3, "repeats": repeats},
    }  # fmt: skip
    return {"meta": meta, "rounds": [_round(h, s) for h, s in rounds]}


def test_every_round_within_the_limit_is_met_none_is_missed_mixed_is_undecided():
    assert round_ratio(_round(2.0, 1.5)) == 1.5 / 2.0
    assert targets(_doc([(2.0, 1.5), (2.0, 1.4), (2.1, 1.6)]))[0]["met"] is True
    assert targets(_doc([(2.0, 1.9), (2.0, 1.8), (2.1, 2.0)]))[0]["met"] is False
    assert targets(_doc([(2.0, 1.5), (2.0, 1.9), (2.1, 1.6)]))[0]["met"] is None


def test_fewer_rounds_than_asked_are_undecided():
    assert targets(_doc([(2.0, 1.0)], repeats=3))[0]["met"] is None


def test_the_report_rebuilds_from_its_json(tmp_path):
    write_report(_doc([(2.0, 1.5), (2.0, 1.4), (2.1, 1.6)]), tmp_path)
    saved = json.loads((tmp_path / "reduce_cluster.json").read_text())
    assert missing(saved["meta"]) == [] and saved["targets"][0]["met"] is True
    first = (tmp_path / "reduce_cluster.md").read_text()
    write_report(saved, tmp_path)
    assert (tmp_path / "reduce_cluster.md").read_text() == first
    assert "| 1 | hash | 2.00 |" in first and "**met**" in first
