"""Deterministic hash splits and extrapolation hold-outs of the corpus (pure Python, no Spark)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from adaptstream.costmodel.corpus import extrapolation_split, filters_longer_than, hardware_outside, split_of
from adaptstream.costmodel.model import read_traces

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "corpus_sample.jsonl"


def test_split_is_deterministic_and_80_10_10() -> None:
    ids = [f"s0-{i:07d}" for i in range(20_000)]
    c = Counter(split_of(i) for i in ids)
    assert abs(c["train"] / 20_000 - 0.8) < 0.01
    assert abs(c["val"] / 20_000 - 0.1) < 0.01
    assert [split_of(i) for i in ids[:50]] == [split_of(i) for i in ids[:50]]


def test_extrapolation_holdouts_on_sample() -> None:
    traces = list(read_traces(SAMPLE))
    inside, held = extrapolation_split(traces, lambda t: hardware_outside(t, cpu=(100, 600)))
    assert inside and held and len(inside) + len(held) == len(traces)
    assert all(100 <= h.cpu <= 600 for t in inside for h in t.hosts)
    assert all(any(h.cpu < 100 or h.cpu > 600 for h in t.hosts) for t in held)
    _, long_chains = extrapolation_split(traces, lambda t: filters_longer_than(t, 2))
    assert long_chains and all(t.query.n_filters > 2 and t.query.sources().__len__() == 1 for t in long_chains)


def test_sample_label_balance_is_mixed() -> None:
    traces = list(read_traces(SAMPLE))
    assert len(traces) == 500
    bp = sum(bool(t.labels.backpressure) for t in traces) / len(traces)
    failed = sum(not t.labels.success for t in traces) / len(traces)
    assert 0.05 < bp < 0.5 and 0.01 < failed < 0.3
    assert all(t.labels.origin == "simulated" for t in traces)
