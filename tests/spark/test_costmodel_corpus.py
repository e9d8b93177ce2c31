"""The PySpark corpus job: partitions, manifest, resumability and determinism on a tiny corpus."""

from __future__ import annotations

import json

import pytest

from adaptstream.costmodel.corpus import iter_corpus
from adaptstream_bench.costmodel.simcorpus import build_corpus, trace_for

pytestmark = pytest.mark.spark


def test_tiny_corpus_is_complete_resumable_and_deterministic(spark, tmp_path) -> None:
    out = tmp_path / "corpus"
    seen = []
    m = build_corpus(out, 24, seed=7, partitions=3, spark=spark, progress=lambda s, d, t: seen.append((d, t)))
    assert m["complete"] and m["traces_written"] == 24 and m["partitions"] == 3
    assert sorted(seen) == [(1, 3), (2, 3), (3, 3)]
    assert sum(m["by_query_type"].values()) == 24
    traces = list(iter_corpus(out))
    assert [t.meta["index"] for t in traces] == list(range(24))
    assert all(t.labels is not None and t.labels.origin == "simulated" for t in traces)
    # trace i is a pure function of (seed, i): regenerating it on the driver gives the same JSON
    assert trace_for(7, 5).to_json() == traces[5].to_json()
    # resumable: delete one partition, re-run: only that one is generated again, bytes identical
    part1 = out / "traces" / "part-00001.jsonl"
    before = part1.read_bytes()
    part1.unlink()
    m2 = build_corpus(out, 24, seed=7, partitions=3, spark=spark)
    assert part1.read_bytes() == before
    assert m2["runs"][-1]["generated_partitions"] == 1
    assert json.loads((out / "manifest.json").read_text())["traces_written"] == 24


def test_settings_mismatch_is_refused(spark, tmp_path) -> None:
    from adaptstream.errors import CostModelError

    build_corpus(tmp_path, 4, seed=1, partitions=1, spark=spark)
    with pytest.raises(CostModelError, match="different settings"):
        build_corpus(tmp_path, 4, seed=2, partitions=1, spark=spark)
