"""Run-to-run repeatability of REAL labels: pairing of tb-/tbr- traces, q-errors, the model floor, the report."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from adaptstream.costmodel.model import Labels, Trace, read_traces, write_traces
from adaptstream.errors import CostModelError
from adaptstream_bench import costmodel_real_eval as ev
from adaptstream_bench import costmodel_repeat as rep

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "train_sample.jsonl"


def _pair(i: int, first: Labels, again: Labels, load: tuple[float, float] = (3.0, 0.5)) -> list[Trace]:
    t = list(read_traces(FIX))[i]
    meta = {"query_index": i // 2, "placement_kind": "random"}
    return [
        Trace(f"tb-0-{i:05d}", t.query, t.hosts, t.placement, first, {**meta, "load1_before": load[0]}),
        Trace(f"tbr-0-{i:05d}", t.query, t.hosts, t.placement, again, {**meta, "load1_before": load[1]}),
    ]


def _lab(t: float, le: float | None, bp: bool = False, ok: bool = True) -> Labels:
    return Labels(t, le, None if le is None else le / 2, bp, ok, origin="real")


def test_pairs_q_errors_and_class_agreement() -> None:
    ts = _pair(0, _lab(10.0, 100.0), _lab(20.0, 100.0))  # T differs 2x
    ts += _pair(1, _lab(10.0, 100.0, bp=True), _lab(10.0, 400.0, bp=False))  # Le 4x, R_O flips
    ts += _pair(2, _lab(10.0, 100.0), _lab(0.0, None, ok=False))  # repeat failed: no regression pair
    ts.append(Trace("tbr-0-00009", ts[0].query, ts[0].hosts, ts[0].placement, _lab(1.0, 1.0), {}))  # no original
    res = rep.repeatability(ts)
    assert res["n_pairs"] == 3
    assert res["regression"]["T"]["n"] == 2
    assert res["regression"]["T"]["q50"] == pytest.approx(1.5)  # median of 2 and 1
    assert res["regression"]["Le"]["q50"] == pytest.approx(2.5)  # median of 1 and 4
    assert res["classes"]["R_O (end-backlog)"]["agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert res["classes"]["R_O (lag-growth)"] == {"n": 0, "positives_first": 0, "positives_repeat": 0}
    assert res["classes"]["S"]["agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert (res["load1_first"]["median"], res["load1_repeat"]["median"]) == (3.0, 0.5)


def _lag(t: Trace, bp: bool, end_backlog: bool) -> Trace:
    from dataclasses import replace

    meta = {**t.meta, "bp_rule": "lag-growth", "backpressure_end_backlog": end_backlog}
    return replace(t, labels=replace(t.labels, backpressure=bp), meta=meta)


def test_backpressure_agreement_per_rule_and_balanced() -> None:
    ts: list[Trace] = []
    # (first lag-growth, repeat lag-growth, first end-backlog, repeat end-backlog)
    verdicts = [
        (True, True, True, True),
        (True, False, True, True),
        (False, False, True, False),
        (False, False, False, False),
    ]
    for i, (a, b, ea, eb) in enumerate(verdicts):
        first, again = _pair(i, _lab(1.0, 1.0), _lab(1.0, 1.0))
        ts += [_lag(first, a, ea), _lag(again, b, eb)]
    old = _pair(4, _lab(1.0, 1.0, bp=True), _lab(1.0, 1.0, bp=True))  # recorded before lag-growth existed
    res = rep.repeatability(ts + old)["classes"]
    lag, end = res["R_O (lag-growth)"], res["R_O (end-backlog)"]
    assert (lag["n"], lag["agreement"], lag["positives_first"], lag["positives_repeat"]) == (4, 0.75, 2, 1)
    # first predicts repeat: recalls 1 and 2/3; repeat predicts first: recalls 1/2 and 1 -> mean 0.792
    assert lag["balanced_agreement"] == pytest.approx((5 / 6 + 3 / 4) / 2, abs=1e-3)
    assert (end["n"], end["agreement"], end["positives_first"]) == (5, 0.8, 4)
    assert "balanced_agreement" not in res["S"]  # every run succeeded: one class only


def test_model_floor_follows_the_written_rule() -> None:
    assert rep.floor_for_model(1.0) == 1.0
    assert rep.floor_for_model(2.0) == pytest.approx(math.exp(math.log(2.0) / math.sqrt(2)))
    assert 1.0 < rep.floor_for_model(1.5) < 1.5


def test_no_repeats_is_a_clear_error() -> None:
    with pytest.raises(CostModelError, match="--repeat"):
        rep.repeatability(_pair(0, _lab(1.0, 1.0), _lab(1.0, 1.0))[:1])


def test_repeats_stay_out_of_the_corpus_and_report_is_written(tmp_path: Path) -> None:
    ts = _pair(0, _lab(10.0, 100.0), _lab(20.0, 150.0)) + _pair(1, _lab(5.0, 50.0), _lab(5.0, 60.0))
    write_traces(tmp_path / "t.jsonl", ts)
    corpus, exp2, reruns = ev.load_real(tmp_path / "t.jsonl")
    assert [t.trace_id for t in corpus] == ["tb-0-00000", "tb-0-00001"] and not exp2 and not reruns
    md = rep.write(rep.load(tmp_path / "t.jsonl"), tmp_path / "out", "cmd", {"git": "abc"})
    text = md.read_text()
    assert "| T | 2 | 1.50 | 1.95 |" in text and "tb-0-00001" in text
    assert "| R_O (lag-growth) | 0 | - | - | 0 / 0 |" in text
    assert "Per query type (backpressure by the newest rule" in text
    assert (tmp_path / "out" / "costmodel_repeat.png").stat().st_size > 0


def test_load_correlation_sign() -> None:
    ts: list[Trace] = []
    for i in range(6):  # the first run's load is higher by i, its latency by 2**i: the repeat's ratio falls
        ts += _pair(i, _lab(10.0, 100.0 * 2**i), _lab(10.0, 100.0), load=(1.0 + i, 1.0))
    res = rep.repeatability(ts)
    assert res["regression"]["Le"]["load_spearman"] == pytest.approx(-1.0)
    assert res["regression"]["T"]["load_spearman"] is None  # T never changes: no correlation to speak of
    assert rep._spearman([1, 2, 3], [3, 2, 1]) is None  # too few points


def test_class_agreement_per_query_type_counts_each_type_apart() -> None:
    # fixture traces 2, 4, 5, 7 are linear queries, 0 and 6 2-way joins
    oks = {2: (True, True), 4: (False, False), 5: (False, True), 7: (True, True), 0: (True, False), 6: (True, True)}
    ts: list[Trace] = []
    for i, (a, b) in oks.items():
        ts += _pair(i, _lab(1.0, 1.0, ok=a), _lab(1.0, 1.0, ok=b))
    res = rep.repeatability(ts)
    per = res["classes_by_type"]
    assert set(per) == {"linear", "2-way-join"}
    lin = per["linear"]["S"]
    assert (lin["n"], lin["agreement"], lin["positives_first"], lin["positives_repeat"]) == (4, 0.75, 2, 3)
    # first predicts repeat: recalls 1 (failure) and 2/3 (success); repeat predicts first: 1/2 and 1
    assert lin["balanced_agreement"] == pytest.approx((5 / 6 + 3 / 4) / 2, abs=1e-3)
    two = per["2-way-join"]["S"]
    assert (two["n"], two["agreement"]) == (2, 0.5) and "balanced_agreement" not in two  # no failed first run
    assert set(per["linear"]) == {"R_O (lag-or-stuck)", "S"}  # the newest rule only
    assert sum(c["S"]["n"] for c in per.values()) == res["classes"]["S"]["n"] == 6


def _longer(t: Trace, ok: bool) -> Trace:
    """A longer run of failed run `t` (tb- -> tbl-, tbr- -> tbrl-), as `testbed-corpus --rerun-failed` writes it."""
    from dataclasses import replace

    stem, rest = t.trace_id.split("-", 1)
    return replace(t, trace_id=f"{'tbrl' if stem == 'tbr' else 'tbl'}-{rest}", labels=_lab(1.0, 1.0, ok=ok))


def test_success_by_the_rerun_rule_uses_each_runs_own_longer_run(tmp_path: Path) -> None:
    ts: list[Trace] = []
    # (first ok, repeat ok, first's longer run ok, repeat's longer run ok); None: no longer run recorded
    cases = [(True, True, None, None), (False, False, True, False), (False, True, False, None)]
    cases += [(True, False, None, True), (False, False, False, None)]  # the last: repeat failed, never rerun
    for i, (a, b, la, lb) in enumerate(cases):
        first, again = _pair(i, _lab(1.0, 1.0, ok=a), _lab(1.0, 1.0, ok=b))
        ts += [first, again]
        ts += [_longer(first, la)] if la is not None else []
        ts += [_longer(again, lb)] if lb is not None else []
    res = rep.repeatability(ts)
    by_rerun = res["classes"]["S (rerun)"]
    # pairs judged: (T,T), (T,F), (F,T), (T,T); the fifth is left out
    assert (by_rerun["n"], by_rerun["left_out"], by_rerun["agreement"]) == (4, 1, 0.5)
    assert (by_rerun["positives_first"], by_rerun["positives_repeat"]) == (3, 3)
    assert res["classes"]["S"]["n"] == 5  # the run's own verdict judges every pair
    corpus, _, reruns = ev.load_real(_write(tmp_path, ts))
    assert set(reruns) == {"tb-0-00001", "tb-0-00002", "tb-0-00004"}  # a repeat's longer run is no corpus rerun
    assert all(t.trace_id.startswith("tb-") for t in corpus)
    text = rep.markdown(res, "cmd", {})
    assert "| S (rerun) | 4 | 50% |" in text and "1 pairs with a failed run that has no longer run left out" in text


def _write(tmp_path: Path, ts: list[Trace]) -> Path:
    write_traces(tmp_path / "t.jsonl", ts)
    return tmp_path / "t.jsonl"
