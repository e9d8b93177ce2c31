"""Placement on the REAL testbed, the parts without Spark: pieces, realisation, labels, host categories."""

from __future__ import annotations

import numpy as np
import pytest

from adaptstream.costmodel.generate import initial_placement, sample_placement
from adaptstream.costmodel.model import Host
from adaptstream.errors import ConfigError
from adaptstream_bench.costmodel.testbed.corpus import labels_from, query_for
from adaptstream_bench.costmodel.testbed.hosts import CATEGORIES, parse_hosts
from adaptstream_bench.costmodel.testbed.placement import FILTER_MOD, MAX_RATE, pieces, realise

HOSTS = [
    Host(h.name, h.cpu_pct, h.ram_mb, h.bandwidth_mbits, 0.0, h.category) for h in parse_hosts("small,medium,large")
]


@pytest.mark.parametrize("j", range(12))
def test_pieces_partition_the_query_by_host(j: int) -> None:
    q, _ = realise(query_for(0, j))
    for pl in (sample_placement(q, HOSTS, np.random.default_rng(j)), initial_placement(q, HOSTS)):
        ps = pieces(q, pl)
        ops = [o for p in ps for o in p["ops"]]
        assert sorted(ops) == sorted(op.id for op in q.operators)
        assert sum(p["sink"] for p in ps) == 1
        for p in ps:
            assert {pl[o] for o in p["ops"]} == {p["host"]}
            # the tail is the only member whose output leaves the piece (or the sink)
            leaving = [o for o in p["ops"] if any(d not in p["ops"] for d in q.downstream(o)) or o == q.sink().id]
            assert leaving == [p["tail"]]
        # every cross-host edge starts at a piece's tail
        tails = {p["tail"] for p in ps}
        assert all(a in tails for a, b in q.edges if pl[a] != pl[b])


@pytest.mark.parametrize("j", range(30))
def test_realise_describes_what_runs(j: int) -> None:
    q, params = realise(query_for(1, j))
    for op in q.operators:
        p = params[op.id]
        if op.kind == "source":
            assert op.feature("event_rate") == p["rate"] <= MAX_RATE
        if op.kind == "filter":
            assert op.feature("filter_function") == "<"
            assert abs(p["threshold"] / FILTER_MOD - op.feature("selectivity")) < 1e-3
        if op.kind in ("window_agg", "window_join"):
            assert op.feature("window_policy") == "time"
            assert 0 < p["slide_s"] <= p["window_s"] == op.feature("window_size")


def _reply(sink: list[dict], batch_ms: float, backlog_s: float = 0.0, lags: list | None = None) -> dict:
    batches = [{"ts": f"2026-01-01T00:00:{s:02d}.000Z", "ms": batch_ms, "rows": 10} for s in range(30)]
    return {
        "sink": sink,
        "pieces": {"h0/p0": {"exception": None, "batches": batches}},
        "errors": [],
        "backlog_s": {"src0": backlog_s},
        "lag_samples": {"src0": lags or []},
    }


def test_labels_from_agent_replies() -> None:
    from datetime import datetime, timezone

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
    sink = [{"t": t0 + s, "n": 10, "le": 1.0 + s / 100, "lp": 0.5} for s in range(30)]
    lb, _ = labels_from(_reply(sink, 400.0), t0, t0 + 30, warmup_s=10)
    assert lb.origin == "real" and lb.success and not lb.backpressure
    assert lb.throughput == pytest.approx(200 / 20)  # batches at t0+10..t0+29 after warm-up
    assert 1190 <= lb.e2e_latency_ms <= 1200 and lb.proc_latency_ms == 500
    assert labels_from(_reply(sink, 1500.0), t0, t0 + 30, 10)[0].backpressure
    # the edge's lag: a sawtooth of one trigger keeps up; a lag gaining 0.3 s per s does not
    saw = [(t0 + k / 2, (k % 2) * 1.5) for k in range(60)]
    grows = [(t0 + k / 2, 0.3 * k / 2) for k in range(60)]
    stop_artifact, detail = labels_from(_reply(sink, 400.0, backlog_s=3.0, lags=saw), t0, t0 + 30, 10)
    assert not stop_artifact.backpressure and detail["backpressure_end_backlog"]
    lb, detail = labels_from(_reply(sink, 400.0, lags=grows), t0, t0 + 30, 10)
    assert lb.backpressure and detail["lagging_edges"] == ["src0"] and detail["bp_rule"] == "lag-or-stuck"
    assert detail["lag_growth"]["src0"]["slope"] == pytest.approx(0.3)
    # a piece that reads a source and finished no batch in the second half is stuck: backpressure
    early = _reply(sink, 400.0)
    early["pieces"]["h0/p0"]["batches"] = early["pieces"]["h0/p0"]["batches"][:10]
    piece = [{"piece": "p0", "host": "h0", "ops": ["src0", "sink1"], "sink": True}]
    lb, detail = labels_from(early, t0, t0 + 30, 10, piece, ["src0"])
    assert lb.backpressure and detail["stuck_pieces"] == ["h0/p0"] and not detail["backpressure_lag_growth"]
    assert detail["bp_rule"] == "lag-or-stuck"
    assert not labels_from(early, t0, t0 + 30, 10, piece, ["src9"])[0].backpressure  # reads no source
    failed = labels_from(_reply([], 400.0), t0, t0 + 30, 10)[0]
    assert not failed.success and failed.throughput == 0 and failed.e2e_latency_ms is None


def test_lag_growth_and_edge_lag() -> None:
    from adaptstream_bench.costmodel.testbed.corpus import lag_growth
    from adaptstream_bench.costmodel.testbed.redisedge import edge_lag_s, next_id

    assert lag_growth([(0.0, 1.0), (1.0, 2.0)], 0.0) == (0.0, 0.0)  # too few samples
    slope, end = lag_growth([(float(t), 5.0 + 0.5 * t) for t in range(20)], t_from=10.0)
    assert slope == pytest.approx(0.5) and end == pytest.approx(5.0 + 0.5 * 18)  # samples at 17, 18, 19 s

    class FakeRedis:
        def __init__(self, entries: list) -> None:
            self.entries = entries

        def xrange(self, key: str, count: int) -> list:
            return self.entries[:count]

    assert edge_lag_s(FakeRedis([]), "k", 100.0) == 0.0
    assert edge_lag_s(FakeRedis([(b"97500-3", {})]), "k", 100.0) == pytest.approx(2.5)
    assert next_id("97500-3") == "97500-4" and next_id("0-0") == "0-1"


def test_parse_hosts() -> None:
    hs = parse_hosts("small,large:cpu=120:bw=50")
    assert [h.name for h in hs] == ["h0", "h1"]
    assert hs[0].cpu_pct == CATEGORIES["small"]["cpu_pct"] and hs[1].cpu_pct == 120 and hs[1].bandwidth_mbits == 50
    for bad in ("tiny", "small:cpu=x", "small:gpu=1", "small:cpu=0", ""):
        with pytest.raises(ConfigError):
            parse_hosts(bad)


def test_testbed_refuses_clearly_without_root_or_cgroups(monkeypatch, tmp_path) -> None:
    from adaptstream.errors import EnvironmentProblem
    from adaptstream_bench.costmodel.testbed import system

    monkeypatch.setattr(system.os, "geteuid", lambda: 1000)
    with pytest.raises(EnvironmentProblem, match="needs root"):
        system.check_support()
    monkeypatch.setattr(system.os, "geteuid", lambda: 0)
    monkeypatch.setattr(system, "CGROUP_ROOT", tmp_path)
    with pytest.raises(EnvironmentProblem, match="cgroup v1 controller 'cpu' is not mounted"):
        system.check_support()


def test_redescribe_keeps_what_ran_and_rewrites_agg_selectivity() -> None:
    """A trace recorded before aggregations carried Def. 8's selectivity gets it; nothing else of its query
    changes; a query that does not match its generator is refused."""
    from dataclasses import replace

    from adaptstream.costmodel.model import Operator, QueryGraph, Trace
    from adaptstream.errors import CostModelError
    from adaptstream_bench.costmodel.testbed.corpus import redescribe

    def old_style(q: QueryGraph) -> QueryGraph:
        ops = []
        for op in q.operators:
            f = dict(op.features)
            if "selectivity_generated" in f:
                f["selectivity"] = f.pop("selectivity_generated")
            ops.append(Operator(op.id, op.kind, f))
        return QueryGraph(q.query_id, tuple(ops), q.edges)

    changed = 0
    for j in range(40):
        q, _ = realise(query_for(0, j))
        meta = {"seed": 0, "query_index": j}
        t = Trace(f"tb-0-{j}", old_style(q), tuple(HOSTS), initial_placement(q, HOSTS), None, meta)
        new = redescribe(t)
        assert new.query == q and redescribe(new) == new
        changed += new.query != t.query
    assert changed > 5
    wrong = replace(t, meta={"seed": 0, "query_index": 41})
    with pytest.raises(CostModelError, match="does not match"):
        redescribe(wrong)


def test_agg_selectivity_follows_def_8() -> None:
    """Without a join every value is distinct, so the groups fill as drawn; after a join they fill less."""
    from adaptstream_bench.costmodel.testbed.placement import agg_selectivity

    seen = {"plain": 0, "joined": 0}
    for j in range(200):
        q, params = realise(query_for(0, j))
        sel = agg_selectivity(q, params)
        for op in q.operators:
            if op.kind != "window_agg":
                continue
            assert 0.0 <= op.feature("selectivity") <= 1.0
            assert op.feature("selectivity") == pytest.approx(sel[op.id], rel=1e-3, abs=1e-12)
            joined = any(o.kind == "window_join" for o in q.operators)
            gen = float(op.feature("selectivity_generated"))
            if not joined and params[op.id]["groups"] > 1:
                seen["plain"] += 1
                assert op.feature("selectivity") <= gen * 1.5 + 1e-3
            if joined:
                seen["joined"] += 1
    assert seen["plain"] > 5 and seen["joined"] > 5


def test_committed_real_traces_describe_what_ran() -> None:
    """Every committed real trace's query is the one its generator query realises to now (Def. 8 aggregation
    selectivity included), so models train on features of what ran."""
    from pathlib import Path

    from adaptstream.costmodel.model import read_traces
    from adaptstream_bench.costmodel.testbed.corpus import redescribe

    path = Path(__file__).resolve().parents[3] / "docs" / "results" / "costmodel_real_traces.jsonl"
    traces = list(read_traces(path))
    assert len(traces) > 1000
    stale = [t.trace_id for t in traces if redescribe(t).query != t.query]
    assert stale == []
