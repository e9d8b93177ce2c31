"""The REAL corpus report: counts, random-vs-initial pairs and 'not measured' verdicts come from the traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from adaptstream.costmodel.generate import initial_placement, sample_placement
from adaptstream.costmodel.model import Host, Labels, Trace, write_traces
from adaptstream_bench.costmodel.testbed.corpus import query_for
from adaptstream_bench.costmodel.testbed.placement import realise
from adaptstream_bench.costmodel_real_corpus import main, summarise

HOSTS = [Host("h0", 25, 1280, 4, 0.03, "small"), Host("h1", 150, 2560, 200, 0.03, "large")]


def _trace(i: int, le: float, ok: bool = True) -> Trace:
    q, _ = realise(query_for(0, i // 2))
    pl = sample_placement(q, HOSTS, np.random.default_rng(i)) if i % 2 == 0 else initial_placement(q, HOSTS)
    lab = Labels(10.0 if ok else 0.0, le if ok else None, le / 2 if ok else None, False, ok, origin="real")
    meta = {"query_index": i // 2, "placement_kind": "random" if i % 2 == 0 else "initial", "load1_before": 3.0}
    return Trace(f"tb-0-{i:05d}", q, HOSTS, pl, lab, meta)


def test_summary_pairs_random_with_initial(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    # query 0: random 1000 ms, initial 3000 ms -> Le speed-up 3; query 1: random run failed -> no ratio
    write_traces(path, [_trace(0, 1000.0), _trace(1, 3000.0), _trace(2, 0.0, ok=False), _trace(3, 500.0)])
    r = summarise(path, {"load_before": "1 1 1"})
    assert r["n_traces"] == 4
    bt0 = query_for(0, 0).query_type.replace("+agg", "")
    assert r["random_vs_initial"][bt0]["pairs"][0]["Le_speedup"] == 3.0
    assert sum(s["n"] for s in r["by_type"].values()) == 4
    assert [f["trace"] for f in r["failures"]] == ["tb-0-00002"]
    assert {t["verdict"] for t in r["targets"]} == {"not measured"}
    assert main([str(path), "--out", str(tmp_path / "rep")]) == 0
    assert json.loads((tmp_path / "rep" / "costmodel_real_corpus.json").read_text())["n_traces"] == 4
    assert "REAL testbed" in (tmp_path / "rep" / "costmodel_real_corpus.md").read_text()
    assert main([str(tmp_path / "missing.jsonl")]) == 2


def test_committed_sample_holds_real_traces_with_run_conditions() -> None:
    from adaptstream.costmodel.model import read_traces

    path = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "real_testbed_sample.jsonl"
    traces = list(read_traces(path))
    assert traces and all(t.labels is not None and t.labels.origin == "real" for t in traces)
    for t in traces:
        assert {"pieces", "load1_before", "load1_after", "cpu_throttled_s", "duration_s"} <= set(t.meta)
        assert {h.category for h in t.hosts} == {"small", "medium", "large"}
    assert summarise(path, None)["n_traces"] == len(traces)
