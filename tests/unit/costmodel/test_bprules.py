"""Backpressure rules: a stuck source piece is falling behind; older traces judged by newer rules from meta."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adaptstream.costmodel.model import Host, Labels, Trace
from adaptstream_bench.costmodel.testbed.bprules import RULES, stuck_pieces, verdict
from adaptstream_bench.costmodel.testbed.corpus import query_for

PIECES = [
    {"piece": "p0", "host": "h2", "ops": ["sink"], "sink": True},
    {"piece": "p1", "host": "h0", "ops": ["src0", "flt1"], "sink": False},
]


def test_only_a_piece_that_reads_a_source_and_finished_no_batch_is_stuck() -> None:
    # the sink piece reads an edge: no batch there can mean no input, so it is never called stuck
    assert stuck_pieces(PIECES, {"h2/p0": None, "h0/p1": None}, ["src0"]) == ["h0/p1"]
    assert stuck_pieces(PIECES, {"h2/p0": None, "h0/p1": 900.0}, ["src0"]) == []
    assert stuck_pieces(PIECES, {}, ["src0"]) == ["h0/p1"]  # no reply for the piece: no batch recorded


def _trace(meta: dict, bp: bool | None) -> Trace:
    q = query_for(0, 3)
    lab = Labels(0.0, None, None, backpressure=bp, success=False, origin="real")
    host = Host("h0", 25, 1280, 4, 0.03, "small")
    return Trace("tb-0-00006", q, (host,), {op.id: "h0" for op in q.operators}, lab, meta)


def test_verdicts_per_rule() -> None:
    src = next(op.id for op in query_for(0, 3).operators if op.kind == "source")
    pieces = [{"piece": "p1", "host": "h0", "ops": [src], "sink": False}]
    stuck = {"pieces": pieces, "median_batch_ms_2nd_half": {"h0/p1": None}}
    lag = _trace({"bp_rule": "lag-growth", "backpressure_end_backlog": True, **stuck}, bp=False)
    assert [verdict(lag, r) for r in RULES] == [True, False, True]
    moving = replace(lag, meta={**lag.meta, "median_batch_ms_2nd_half": {"h0/p1": 400.0}})
    assert verdict(moving, "lag-or-stuck") is False
    oldest = _trace({}, bp=True)  # recorded before any rule was named: end-backlog only
    assert [verdict(oldest, r) for r in RULES] == [None, None, True]
    new = _trace({"bp_rule": "lag-or-stuck", "backpressure_lag_growth": False}, bp=True)
    assert [verdict(new, r) for r in RULES] == [True, False, None]
    assert verdict(_trace({"bp_rule": "lag-growth"}, bp=None), "lag-or-stuck") is None
    with pytest.raises(ValueError, match="valid: lag-or-stuck, lag-growth, end-backlog"):
        verdict(new, "median")
