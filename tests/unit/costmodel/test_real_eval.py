"""Evaluation on REAL testbed traces: grouped folds, Exp. 2 pairing, and the whole pipeline on a tiny corpus.

The tiny corpus reuses the SIMULATED fixture's queries with labels re-tagged real: it checks the plumbing
(folds, out-of-fold scoring, saved chooser models, report verdicts), not accuracy.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptstream.costmodel.ensemble import CostEnsembles
from adaptstream.costmodel.generate import BASE_TYPES, initial_placement, placement_violations
from adaptstream.costmodel.model import Host, Labels, Trace, query_key, read_traces, write_traces
from adaptstream.costmodel.train import GraphDataset
from adaptstream.errors import CostModelError
from adaptstream_bench import costmodel_real_eval as ev
from adaptstream_bench import costmodel_real_fit as fit
from adaptstream_bench import costmodel_real_report as rep
from adaptstream_bench.costmodel.data_cli import _load_chooser
from adaptstream_bench.costmodel.testbed.corpus import chosen_placer, compare_placer, query_for
from adaptstream_bench.costmodel.testbed.placement import realise

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "train_sample.jsonl"
HOSTS = [Host("h0", 25, 1280, 4, 0.03, "small"), Host("h1", 150, 2560, 200, 0.03, "large")]


def _as_real(n: int, prefix: str = "tb") -> list[Trace]:
    out = []
    for i, t in enumerate(list(read_traces(FIX))[:n]):
        assert t.labels is not None
        lab = Labels(**{**t.labels.to_dict(), "origin": "real"})
        meta = {"query_index": i // 2, "placement_kind": ("random", "initial")[i % 2], "load1_before": 2.0}
        out.append(Trace(f"{prefix}-0-{i:05d}", t.query, t.hosts, t.placement, lab, meta))
    return out


def test_folds_keep_a_query_in_one_fold() -> None:
    traces = _as_real(40)
    folds = ev.query_folds(traces, 4, seed=1)
    by_q: dict[int, set[int]] = {}
    for t, f in zip(traces, folds, strict=True):
        by_q.setdefault(int(t.meta["query_index"]), set()).add(f)
    assert all(len(s) == 1 for s in by_q.values())
    assert sorted(set(folds)) == [0, 1, 2, 3]
    with pytest.raises(CostModelError, match="cannot fill"):
        ev.query_folds(traces[:4], 5, seed=0)


def test_folds_tell_corpus_seeds_apart() -> None:
    """Query j of a corpus grown with --seed 1 is another draw than query j of seed 0: its own group."""
    traces = _as_real(40)
    other = [replace(t, trace_id=t.trace_id.replace("tb-0-", "tb-1-"), meta={**t.meta, "seed": 1}) for t in traces]
    both = traces + other
    assert len({query_key(t) for t in both}) == 40
    assert [query_key(t) for t in traces] == [int(t.meta["query_index"]) for t in traces]  # seed 0: the index
    folds = ev.query_folds(both, 4, seed=1)
    by_key: dict[int, set[int]] = {}
    for t, f in zip(both, folds, strict=True):
        by_key.setdefault(query_key(t), set()).add(f)
    assert len(by_key) == 40 and all(len(s) == 1 for s in by_key.values())
    # the same index under the two seeds is free to land in two folds: it did for some of the 20 indices
    assert any(folds[i] != folds[40 + i] for i in range(40))


def test_split_draws_failed_queries_apart_and_keeps_whole_queries() -> None:
    qidx = np.repeat(np.arange(50), 2)  # 50 queries, two runs each; queries 0-9 have a failed run
    idx = np.arange(qidx.size)
    failed = frozenset(range(10))
    for seed in range(20):
        tr, va = fit.split_queries(idx, qidx, 1.0, seed, failed)
        tr_q, va_q = set(qidx[tr].tolist()), set(qidx[va].tolist())
        assert not tr_q & va_q and tr_q | va_q == set(range(50))  # whole queries, none lost
        assert len(va_q & failed) == 2 and len(va_q - failed) == 8  # 20 % of each stratum
    plain = [len(set(qidx[fit.split_queries(idx, qidx, 1.0, s)[1]].tolist()) & failed) for s in range(20)]
    assert min(plain) != max(plain)  # the plain draw's share of failed queries varies with the seed
    a = fit.split_queries(idx, qidx, 1.0, 3)
    b = fit.split_queries(idx, qidx, 1.0, 3, frozenset())
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    half_tr, half_va = fit.split_queries(idx, qidx, 0.5, 1, failed)
    assert len(set(qidx[np.concatenate([half_tr, half_va])].tolist()) & failed) == 5


def test_failed_queries_are_those_with_a_failed_run() -> None:
    traces = _as_real(6)
    traces[2], traces[4] = _failed(traces[2]), _failed(traces[4])
    qidx = np.array([int(t.meta["query_index"]) for t in traces])
    assert fit.failed_queries(GraphDataset.from_traces(traces), qidx) == {int(qidx[2]), int(qidx[4])}


def test_eval_real_draws_by_stratum_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    traces = _as_real(8)
    traces[2] = _failed(traces[2])
    ds = GraphDataset.from_traces(traces)
    qidx = np.array([int(t.meta["query_index"]) for t in traces])
    seen: list[frozenset[int]] = []

    class Stop(Exception):
        pass

    def spy(idx: np.ndarray, q: np.ndarray, frac: float, seed: int, failed: frozenset[int] = frozenset()) -> Any:
        seen.append(failed)
        raise Stop

    monkeypatch.setattr(ev, "split_queries", spy)
    for flag in (False, True):
        cfg = ev.RealEvalConfig("unused", None, stratify_failed=flag)
        with pytest.raises(Stop):
            ev._fit_fold(ds, np.arange(8), qidx, None, cfg, 1.0, 0)
    assert seen == [frozenset(), frozenset({1})]


def _exp2_trace(j: int, kind: str, lp: float | None, hosts: list[Host] = HOSTS, chooser: str = "gnn") -> Trace:
    q, _ = realise(query_for(0, 1000 + j))
    ok = lp is not None
    lab = Labels(5.0, (lp or 0) * 2 if ok else None, lp, False, ok, origin="real")
    meta = {"query_index": 1000 + j, "placement_kind": kind, "chooser": chooser, "same_as_initial": False}
    tid = f"tbx{chooser}-0-{2 * j + (kind != 'initial'):05d}"
    return Trace(tid, q, hosts, initial_placement(q, hosts), lab, meta)


def test_exp2_speedup_is_initial_over_chosen_lp_and_skips_failed_runs() -> None:
    ts = [_exp2_trace(0, "initial", 900.0), _exp2_trace(0, "gnn", 300.0)]
    ts += [_exp2_trace(1, "initial", 100.0), _exp2_trace(1, "gnn", None)]
    ts += [_exp2_trace(2, "initial", None), _exp2_trace(2, "gnn", 50.0)]
    ts += [_exp2_trace(3, "initial", None), _exp2_trace(3, "gnn", 70.0)]
    res = ev.exp2_speedups(ts)["gnn"]
    rows = [r for per in res.values() for r in per["rows"]]
    got = sorted((r["query_index"], r["speedup"]) for r in rows)
    assert got == [(1000, 3.0), (1001, None), (1002, None), (1003, None)]
    assert sum(per["n_valid"] for per in res.values()) == 1
    assert sum(per["n_only_initial_ok"] for per in res.values()) == 1
    assert sum(per["n_only_chosen_ok"] for per in res.values()) == 2


def _cmp(j: int, name: str, lp: float | None) -> Trace:
    """A run of `testbed-corpus --chooser gnn,random --label cmp`: the group's initial run or a chooser's."""
    kind = "initial" if name == "initial" else f"cmp-{name}"
    t = _exp2_trace(j, kind, lp, chooser="cmp" if name == "initial" else kind)
    extra = {"exp2_group": "cmp"} | ({} if name == "initial" else {"chooser_model": name})
    return replace(t, meta=t.meta | extra)


def test_a_chooser_is_compared_with_random_on_the_queries_both_ran() -> None:
    ts = [_cmp(0, "gnn", 300.0), _cmp(0, "random", 900.0), _cmp(0, "flat", 450.0)]
    ts += [_cmp(1, "gnn", 100.0), _cmp(1, "random", None)]
    ts += [_cmp(2, "gnn", 50.0), _cmp(2, "initial", 80.0)]  # random never ran query 2
    ts += [_cmp(0, "initial", 1000.0)]  # initial runs are not a chooser's placement
    # a random chooser run alone in another invocation is not this group's baseline
    ts += [_exp2_trace(2, "random", 900.0, chooser="random"), _exp2_trace(2, "gnn", 90.0)]
    per = ev.versus_baseline(ts, "random")
    assert set(per) == {"cmp-gnn", "cmp-flat"}
    rows = list(per["cmp-gnn"].values())
    assert sum(r["n"] for r in rows) == 2 and sum(r["n_valid"] for r in rows) == 1
    assert [x for r in rows for x in r["ratios"]] == [3.0]
    assert sum(r.get("only_chooser_ok", 0) for r in rows) == 1 and sum(r.get("only_baseline_ok", 0) for r in rows) == 0
    assert [x for r in per["cmp-flat"].values() for x in r["ratios"]] == [2.0]
    assert ev.versus_baseline([_exp2_trace(0, "gnn", 300.0)], "random") == {}  # no random runs: nothing to compare
    # the speed-up over initial: every chooser of the group against the group's one initial run
    sp = ev.exp2_speedups(ts)

    def speedups(c: str) -> list[tuple[int, float | None]]:
        return sorted((r["query_index"], r["speedup"]) for per_t in sp[c].values() for r in per_t["rows"])

    assert speedups("cmp-gnn") == [(1000, 3.333), (1002, 1.6)]  # query 1001 has no initial run in the group
    assert speedups("cmp-random") == [(1000, 1.111)]
    assert "random" not in sp  # its invocation ran no initial placement of query 2


def test_exp2_is_grouped_by_host_set_with_its_heterogeneity() -> None:
    homo = [Host("h0", 60, 1792, 32, 0.03, "medium"), Host("h1", 60, 1792, 32, 0.03, "medium")]
    ts = [_exp2_trace(0, "initial", 900.0), _exp2_trace(0, "gnn", 300.0)]
    ts += [_exp2_trace(0, "initial", 500.0, homo), _exp2_trace(0, "gnn", 400.0, homo)]
    sets = ev.hostset_speedups(ts)
    assert set(sets) == {"small,large", "medium,medium"}
    assert (sets["small,large"]["cpu_ratio"], sets["small,large"]["bandwidth_ratio"]) == (6.0, 50.0)
    assert sets["small,large"]["median_all"] == 3.0
    assert (sets["medium,medium"]["cpu_ratio"], sets["medium,medium"]["median_all"]) == (1.0, 1.25)
    ts += [_exp2_trace(1, "initial", 800.0), _exp2_trace(1, "gnn", 100.0)]  # on one host set only
    sets = ev.hostset_speedups(ts)
    assert (sets["small,large"]["median_all"], sets["small,large"]["median_common"]) == (5.5, 3.0)
    assert sets["medium,medium"]["n_common"] == 1


def test_host_tag_names_the_set_and_marks_overrides() -> None:
    from adaptstream_bench.costmodel.testbed.hosts import host_tag, parse_hosts

    assert host_tag(parse_hosts("medium,medium,medium")) == "mmm"
    tagged = host_tag(parse_hosts("small:cpu=30,large"))
    assert tagged.startswith("sl~") and tagged != host_tag(parse_hosts("small:cpu=40,large"))


def test_scores_count_unpredicted_traces() -> None:
    ds = ev.GraphDataset.from_traces(_as_real(10))
    lp = ds.column("proc_latency_ms").copy()
    pred = {"proc_latency_ms": lp * 2.0}
    pred["proc_latency_ms"][ds.usable("proc_latency_ms")[0]] = np.nan
    s = ev.scores(pred, ds)
    assert math.isclose(s["Lp"]["q50"], 2.0)
    assert s["Lp"]["unpredicted"] == 1
    assert s["T"]["n"] == 0 and "no model" in s["T"]["note"]


def test_pick_takes_the_lower_score_per_metric_and_the_fine_tuned_gnn_on_ties() -> None:
    inf = math.inf
    scored = {
        "sim_fine_tuned": {"throughput": 1.6, "e2e_latency_ms": 1.2, "proc_latency_ms": inf, "backpressure": 0.1},
        "real_only": {"throughput": 1.3, "e2e_latency_ms": 1.2, "proc_latency_ms": 1.4, "backpressure": 0.2},
    }
    got = fit.pick(scored)
    assert got["throughput"] == "real_only" and got["proc_latency_ms"] == "real_only"
    assert got["e2e_latency_ms"] == "sim_fine_tuned" and got["backpressure"] == "sim_fine_tuned"
    assert got["success"] == "sim_fine_tuned"  # no score for either: the first candidate
    assert fit.pick({"real_only": scored["real_only"]})["throughput"] == "real_only"  # no simulated corpus


def test_a_choice_without_a_model_moves_to_the_candidate_that_has_one() -> None:
    fitted = {"sim_fine_tuned": {"throughput": 1}, "real_only": {"throughput": 1, "success": 1}}
    got = fit.available({"throughput": "real_only", "success": "sim_fine_tuned", "backpressure": "real_only"}, fitted)
    assert got == {"throughput": "real_only", "success": "real_only", "backpressure": "real_only"}
    assert fit.available({"success": "sim_fine_tuned"}, {"real_only": {}}) == {"success": "sim_fine_tuned"}


def test_pooled_metrics_take_both_gnns_whatever_the_choice() -> None:
    class Member:  # stand-in with a metric only: pooling concatenates members, it does not call them
        def __init__(self, metric: str) -> None:
            self.metric = metric

    def ens(metric: str, k: int) -> fit.MetricEnsemble:
        return fit.MetricEnsemble([Member(metric) for _ in range(k)])  # type: ignore[misc]

    fitted: dict[str, dict[str, Any]] = {
        "sim_fine_tuned": {"success": ens("success", 3), "throughput": ens("throughput", 3)},
        "real_only": {s: ens(s, 2) for s in ("success", "throughput", "backpressure")},
    }
    both = fit.pooled(fitted)
    assert set(both) == {"success", "throughput"}  # backpressure: the fine-tuned GNN has none
    assert len(both["success"].members) == 5 and both["success"].combine_rule == "mean"
    pick = {"success": "real_only", "throughput": "real_only", "backpressure": "sim_fine_tuned"}
    unpooled = fit.available(pick, {k: v for k, v in fitted.items() if k != fit.BOTH})  # as without a sim corpus
    assert unpooled == {**pick, "backpressure": "real_only"}  # the fine-tuned GNN has no backpressure model
    fitted[fit.BOTH] = both
    got = fit.available(pick, fitted)
    assert got["success"] == fit.BOTH
    assert got["throughput"] == "real_only"  # pooled models exist for it, but T is chosen, not pooled
    assert got["backpressure"] == "real_only"


def test_validation_score_of_missing_or_unlabelled_predictions_is_infinite() -> None:
    ds = ev.GraphDataset.from_traces(_as_real(10))
    lp = ds.column("proc_latency_ms")
    assert fit._score("proc_latency_ms", ds, None) == math.inf
    assert fit._score("proc_latency_ms", ds, np.full(len(ds), np.nan)) == math.inf
    assert math.isclose(fit._score("proc_latency_ms", ds, lp * 3.0), 3.0)
    assert fit._score("success", ds, ds.column("success").astype(float)) == 0.0  # every class recalled
    assert fit._score("success", ds, 1.0 - ds.column("success").astype(float)) == 1.0  # none recalled


@pytest.mark.slow
def test_real_only_gnn_is_an_ensemble_of_differently_seeded_members() -> None:
    ds = GraphDataset.from_traces(_as_real(24))
    cfg = fit.RealEvalConfig("unused", real_epochs=2, real_seconds=1.0, real_members=3, seed=5)
    models = fit.fit_real(ds.subset(np.arange(18)), ds.subset(np.arange(18, 24)), cfg)
    assert set(models) == set(ev.METRICS)
    for ens in models.values():
        assert [m.config.seed for m in ens.members] == [5, 6, 7]
    probs = models["success"].member_predictions(ds.graphs)
    assert probs.shape == (3, 24)  # the vote is taken over all three
    assert np.array_equal(models["success"].predict(ds.graphs), (probs >= 0.5).sum(axis=0) >= 2)


def _failed(t: Trace) -> Trace:
    assert t.labels is not None
    lab = replace(t.labels, success=False, throughput=None, e2e_latency_ms=None, proc_latency_ms=None)
    return replace(t, labels=lab, meta={**t.meta, "duration_s": 35.0})


def _rerun(t: Trace, ok: bool) -> Trace:
    assert t.labels is not None
    lab = replace(t.labels, success=ok, throughput=5.0 if ok else None, proc_latency_ms=4e4 if ok else None)
    return replace(t, trace_id="tbl" + t.trace_id[2:], labels=lab, meta={**t.meta, "duration_s": 70.0})


def test_success_rule_rerun_turns_late_successes_into_successes_only(tmp_path: Path) -> None:
    corpus = _as_real(6)
    corpus[1], corpus[2], corpus[3] = _failed(corpus[1]), _failed(corpus[2]), _failed(corpus[3])
    write_traces(tmp_path / "t.jsonl", [*corpus, _rerun(corpus[1], True), _rerun(corpus[2], False)])
    loaded, exp2, reruns = ev.load_real(tmp_path / "t.jsonl")
    assert [t.trace_id for t in loaded] == [t.trace_id for t in corpus] and not exp2
    assert sorted(reruns) == ["tb-0-00001", "tb-0-00002"]  # keyed by the corpus trace they rerun
    same, counts = ev.with_success_rule(loaded, reruns, "run")
    assert [t.labels.success for t in same if t.labels] == [t.labels.success for t in corpus if t.labels]
    judged, counts = ev.with_success_rule(loaded, reruns, "rerun")
    assert counts == {
        "rule": "rerun",
        "failed_in_run": 3,
        "rerun": 2,
        "succeeded_on_rerun": 1,
        "not_rerun": 1,
        "rerun_seconds": [70.0],
    }
    want = [t.labels.success for t in corpus if t.labels]
    want[1] = True  # succeeded when run for 70 s; 2 failed again, 3 was not rerun
    assert [t.labels.success for t in judged if t.labels] == want
    assert judged[1].labels is not None and judged[1].labels.proc_latency_ms is None  # the 35-s run had none
    assert (
        GraphDataset.from_traces(judged).usable("proc_latency_ms").tolist()
        == GraphDataset.from_traces(loaded).usable("proc_latency_ms").tolist()
    )  # regression labels come from the recorded run under both rules
    with pytest.raises(CostModelError, match="valid: rerun, run"):
        ev.with_success_rule(loaded, reruns, "longest")


def test_success_under_the_other_rule_scores_the_same_predictions() -> None:
    pred = np.array([0.9, 0.2, 0.8, np.nan])
    other = np.array([1.0, 0.0, 0.0, 1.0])
    sc = ev.success_under(pred, other)
    assert sc["n"] == 3 and sc["positives"] == 1 and sc["acc"] == pytest.approx(2 / 3)
    assert sc["balanced_acc"] == pytest.approx(0.75)  # recall 1 on the success, 1/2 on the failures


@pytest.mark.slow
def test_pipeline_on_a_tiny_corpus_writes_models_report_and_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = tmp_path / "sim"
    sim.mkdir()
    simt = list(read_traces(FIX))[60:]
    write_traces(sim / "train.jsonl", simt[:200])
    write_traces(sim / "val.jsonl", simt[200:260])
    write_traces(sim / "test.jsonl", simt[260:280])
    traces = tmp_path / "real.jsonl"
    # the first 20 traces' backpressure was measured by the lag-growth rule, the others by the oldest one; the
    # first 5 have a piece that reads a source and finished no batch in the second half (stuck: lag-or-stuck)
    corpus = _as_real(40)
    both = {"bp_rule": "lag-growth", "backpressure_end_backlog": True}  # the oldest rule said yes on every run

    def lag_growth_meta(i: int, t: Trace) -> dict:
        ops = [op.id for op in t.query.operators]
        pieces = {"pieces": [{"piece": "p0", "host": "h0", "ops": ops, "sink": True}]}
        return {**t.meta, **both, **pieces, "median_batch_ms_2nd_half": {"h0/p0": None if i < 5 else 500.0}}

    corpus = [replace(t, meta=lag_growth_meta(i, t)) if i < 20 else t for i, t in enumerate(corpus)]
    mode = statistics.multimode(ev.host_set(t) for t in corpus)[0]
    on = next(list(t.hosts) for t in corpus if ev.host_set(t) == mode)  # targets judge the corpus' host set
    corpus[10], corpus[11] = _failed(corpus[10]), _failed(corpus[11])  # 11 succeeds when run for 70 s
    exp2 = [_exp2_trace(0, "initial", 900.0, on), _exp2_trace(0, "gnn", 300.0, on)]
    write_traces(traces, [*corpus, _rerun(corpus[11], True), *exp2])
    cfg = ev.RealEvalConfig(
        str(traces),
        str(sim),
        folds=2,
        fractions=(1.0,),
        sim_train=200,
        sim_members=1,
        sim_seconds=1.0,
        real_epochs=3,
        real_seconds=1.0,
        real_members=2,
        sim_cache=str(tmp_path / "simc"),
    )
    chosen: list[dict[str, str]] = []
    seen: list[set[int]] = []  # the queries each choice was made on

    def fixed_choice(*a: Any, **k: Any) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
        pick, scored = fit.choose_gnns(*a, **k)
        chosen.append(pick)
        seen.append({int(q) for q in a[3][a[2]]})
        assert set(scored) == set(fit.CANDIDATES) and set(pick) == set(ev.METRICS)
        # a choice that differs between metrics, so the test sees which model's predictions `selected` holds;
        # success is pooled (fit.POOLED) whatever the choice says
        return {m: "real_only" if m == "throughput" else "sim_fine_tuned" for m in pick}, scored

    monkeypatch.setattr(ev, "choose_gnns", fixed_choice)
    res = ev.run(cfg, tmp_path / "models", log=lambda s: None)
    assert len(chosen) == 3  # one per fold and one for the saved models
    folds = ev.query_folds(corpus, 2, 0)
    for f in range(2):  # a fold's choice never sees the queries it is tested on
        tested = {int(t.meta["query_index"]) for t, g in zip(corpus, folds, strict=True) if g == f}
        assert seen[f] and not seen[f] & tested
    assert seen[2] == {int(t.meta["query_index"]) for t in corpus}  # the saved models' choice: every query
    top = {name: per["1.0"] for name, per in res["cv"].items()}
    assert top["selected"]["T"] == top["real_only"]["T"]
    assert top["selected"]["Lp"] == top["sim_fine_tuned"]["Lp"]
    assert [row["choice"]["T"] for row in res["selection"]["per_fold"]] == ["real_only", "real_only"]
    assert res["selection"]["final_models"]["Lp"] == "sim_fine_tuned"
    assert top["selected"]["S"] == top["both_gnns"]["S"] and res["selection"]["final_models"]["S"] == fit.BOTH
    saved = CostEnsembles.load(tmp_path / "models" / "gnn").ensembles["success"]
    assert saved.combine_rule == "mean" and len(saved.members) == 3  # one fine-tuned + two real-only members
    json.dumps(res["selection"], allow_nan=False)  # scores with nothing to score are None, not infinity
    assert res["n_traces"] == 40 and res["n_queries"] == 20  # the rerun is no corpus trace
    assert res["partitions"]["n"] == 1 and res["partitions"]["per_partition"][0]["seed"] == 0
    assert res["partitions"]["mean"]["selected"]["T"]["mean"] == pytest.approx(top["selected"]["T"]["q50"], abs=1e-4)
    assert res["success_rule"]["succeeded_on_rerun"] == 1 and res["success_rule"]["rerun"] == 1
    assert top["selected"]["S_other_rule"]["n"] == 40  # the same predictions against the 35-s labels
    assert set(res["cv"]) == set(ev.MODELS)
    assert res["cv"]["sim_fine_tuned"]["1.0"]["Lp"]["n"] > 0
    prior = res["cv"]["prior_alone"]["1.0"]  # the load prior alone: a class-metric baseline beside the GNNs (#55)
    assert prior["S"]["n"] == 40 and prior["R_O"]["n"] == 20 and prior["S"]["unpredicted"] == 0
    assert prior["T"]["n"] == 0 and "no model" in prior["T"]["note"]
    assert res["bp_rules"] == {"end-backlog": 20, "lag-growth": 20} and res["n_bp_labelled"] == 20
    assert res["bp_left_out"] == {"end-backlog": 20}
    lag = [bool(t.labels and t.labels.backpressure) for t in corpus[:20]]
    stuck = [lb or i < 5 for i, lb in enumerate(lag)]
    assert res["bp_rule_comparison"] == {
        "n": 20,
        "backpressure": {"lag-or-stuck": sum(stuck), "lag-growth": sum(lag), "end-backlog": 20},
        "differs_from_newest": {"lag-growth": sum(stuck) - sum(lag), "end-backlog": 20 - sum(stuck)},
    }
    assert res["backpressure_share"] == round(sum(stuck) / 20, 3)
    zero = res["cv"]["sim_zero_shot"]["1.0"]
    assert zero["R_O"]["n"] == 20 and zero["S"]["n"] == 40  # R_O scored on the current rule's labels only
    said: list[str] = []
    assert ev.train_sim(cfg, said.append) is not None
    assert said == [f"pre-trained SIMULATED models reused from {tmp_path / 'simc'}"]
    out = rep.write(res, tmp_path / "rep", "adaptstream costmodel eval-real", {"git": "x", "when": "now"})
    js = json.loads((tmp_path / "rep" / "costmodel_real.json").read_text())
    assert set(js["placement_speedup_median"]) == {"linear", "2-way-join", "3-way-join"}
    assert js["placement_speedup_chooser"] == "cmp-gnn"  # not run in this test
    assert set(js["placement_speedup_median_by_chooser"]) == {"gnn"}
    assert [d["median_all"] for d in js["placement_speedup_by_host_set"].values()] == [3.0]
    rows = rep.targets(res)
    q50 = js["qerror_median"]
    assert rows[0]["met"] == all(v <= rep.Q_TARGET for v in q50.values())  # one partition: no spread
    assert js["targets"] == json.loads(json.dumps(rows))
    # the selected GNN's two rows; the judged group's gnn (vs initial, vs random) not run here: undecided;
    # references: the fine-tuned GNN's two rows, the group's flat (2) and random (1), the earlier `gnn` chooser
    assert [r["judged"] for r in rows] == [True] * 4 + [False] * 6
    assert rows[2]["met"] is None and rows[2]["value"] == dict.fromkeys(BASE_TYPES)
    assert rows[-1]["met"] is None and "`gnn`, an earlier invocation" in rows[-1]["target"]  # one type only
    assert "### Per-metric choice of `selected`" in out.read_text()
    assert js["model"] == "selected" and set(js["by_model"]) == set(ev.MODELS)
    assert js["fold_partitions"] == 1 and js["qerror_median"]["T"] == top["selected"]["T"]["q50"]
    json.dumps(js, allow_nan=False)  # no NaN or infinity anywhere in the report's JSON
    assert sum(row["n"] for row in res["exp2"]["gnn"].values()) == 1
    assert "REAL testbed" in out.read_text()
    assert "1 were run again for 70 s (`testbed-corpus --rerun-failed`) and 1 succeeded then" in out.read_text()
    assert js["success_rule"] == "rerun" and js["success_balanced_under_run_rule"] is not None
    assert "real training folds only (2 seeds, majority vote / mean)" in out.read_text()
    assert len(res["real_only_seeds"]["1.0"]) == 2 and "real_only_seeds" not in res["cv"]
    assert "the 2 members of `real_only`, each scored alone" in out.read_text()
    assert "20 traces recorded under `end-backlog` left out of R_O" in out.read_text()
    per = res["cv_by_type"]["sim_fine_tuned"]  # the largest fraction, split by query type
    assert sum(sc["n"] for sc in per.values()) == 40
    assert sum(sc["S"]["n"] for sc in per.values()) == zero["S"]["n"]
    assert set(per) == {t.query.query_type for t in corpus}
    assert "### Per query type" in out.read_text()
    gnn = _load_chooser("gnn", tmp_path / "models")
    q, _ = realise(query_for(0, 1003))
    place = chosen_placer(0, 1003, gnn, "gnn")
    _, _, placement, kind, extra = place(1, HOSTS)
    assert kind == "gnn" and extra["query_index"] == 1003
    assert placement_violations(q, HOSTS, placement) == []
    # several choosers side by side: per query the initial placement, then each chooser's, in the order given
    preds = {"gnn": gnn, "flat": _load_chooser("flat", tmp_path / "models"), "random": None}
    cmp = compare_placer(0, 1003, preds, "cmp")
    runs = [cmp(i, HOSTS) for i in range(8)]
    assert [r[3] for r in runs] == ["initial", "cmp-gnn", "cmp-flat", "cmp-random"] * 2
    assert [r[4]["query_index"] for r in runs] == [1003] * 4 + [1004] * 4
    assert {r[4]["exp2_group"] for r in runs} == {"cmp"} and runs[0][4]["chooser"] == "cmp"
    assert [r[4].get("chooser_model") for r in runs[:4]] == [None, "gnn", "flat", "random"]
    assert runs[1][2] == placement  # the same choice as the gnn chooser run alone
    assert runs[3][2] == chosen_placer(0, 1003, None, "random")(1, HOSTS)[2]
    assert all(placement_violations(q, HOSTS, r[2]) == [] for r in runs[:4])
    with pytest.raises(Exception, match="valid choices: gnn, flat, random"):
        _load_chooser("best", tmp_path / "models")


def _fake_cv(t: float, s: float) -> dict[str, dict[str, Any]]:
    q = {k: {"q50": t} for k in ("T", "Le", "Lp")}
    return {"selected": {"1.0": {**q, "R_O": {"balanced_acc": 0.95}, "S": {"balanced_acc": s}}}}


def test_targets_judge_the_mean_over_fold_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    # one partition alone meets both targets (S 0.92, T 1.4), the mean over three misses them (S 0.88, T 1.6)
    by_seed = {5: _fake_cv(1.4, 0.92), 105: _fake_cv(1.9, 0.86), 205: _fake_cv(1.5, 0.86)}
    calls: list[tuple[int, tuple[float, ...], int]] = []

    def fake(traces: Any, sim: Any, cfg: fit.RealEvalConfig, *a: Any) -> tuple[Any, Any, Any, Any]:
        calls.append((cfg.seed, cfg.fractions, cfg.partitions))
        return by_seed[cfg.seed], {}, [], {}

    monkeypatch.setattr(ev, "cross_validate", fake)
    cfg = fit.RealEvalConfig("unused", seed=5, partitions=3)
    spread = ev.partition_spread([], None, cfg, lambda s: None, by_seed[5])
    assert calls == [(105, (1.0,), 1), (205, (1.0,), 1)]  # the first partition is not refitted
    mean = spread["mean"]["selected"]
    assert mean["S"] == {"mean": pytest.approx(0.88), "min": 0.86, "max": 0.92, "n": 3}
    assert mean["T"]["mean"] == pytest.approx(1.6) and mean["S_other_rule"]["n"] == 0
    res = {"cv": by_seed[5], "exp2": {}, "partitions": spread, "config": {"folds": 5}}
    rows = rep.targets(res)
    # the means miss, but one partition meets each threshold: within the figure's spread, so undecided
    assert rows[0]["met"] is None and rows[1]["met"] is None and rows[0]["judged"]
    assert rows[1]["value"]["S"] == pytest.approx(0.88) and rows[1]["threshold"] == rep.ACC_TARGET
    assert "mean over 3 partitions" in rows[1]["rule"] and "S 0.880 (0.86-0.92)" in rows[1]["measured"]
    assert "| **undecided** |" in rep.targets_markdown(rows)[2]
    one = {**res, "partitions": ev.partition_spread([], None, replace(cfg, partitions=1), print, by_seed[5])}
    assert [r["met"] for r in rep.targets(one)[:2]] == [True, True]
    worse = {5: _fake_cv(1.6, 0.89), 105: _fake_cv(1.9, 0.86), 205: _fake_cv(1.7, 0.86)}
    monkeypatch.setattr(ev, "cross_validate", lambda traces, sim, c, *a: (worse[c.seed], {}, [], {}))
    every = {**res, "partitions": ev.partition_spread([], None, cfg, print, worse[5])}
    assert [r["met"] for r in rep.targets(every)[:2]] == [False, False]  # every partition misses
    figs, _, n = rep.judged(res, "selected")  # what the report's JSON gives as the targets' figures
    assert n == 3 and figs["S"] == pytest.approx(0.88)
    text = rep._partitions(res)
    assert text[0] == "### Over 3 fold partitions (largest training share)" and "0.92, 0.86, 0.86" in text[-2]


def _member(scores: list[float], seconds_per_epoch: float) -> Any:
    from types import SimpleNamespace

    hist = [{"epoch": i + 1, "val_score": v, "seconds": (i + 1) * seconds_per_epoch} for i, v in enumerate(scores)]
    return SimpleNamespace(history=hist)


def test_fit_diagnostics_tell_a_time_limited_member_and_the_failures_it_stopped_on() -> None:
    from types import SimpleNamespace

    from adaptstream.costmodel.features import LABEL_FIELDS

    labels = np.full((5, len(LABEL_FIELDS)), np.nan)
    labels[:, LABEL_FIELDS.index("success")] = [1, 0, 1, 1, np.nan]  # one failed run, one unlabelled
    val = GraphDataset([None] * 5, labels)  # type: ignore[list-item]
    early = _member([0.9, 0.5, 0.6, 0.7], seconds_per_epoch=0.5)  # stopped by patience at 2 s
    timed = _member([0.9, 0.8, 0.4], seconds_per_epoch=3.0)  # past 8 s after epoch 3
    models = {"success": SimpleNamespace(members=[early, timed])}
    diag = fit.fit_diagnostics(models, val, max_seconds=8.0)  # type: ignore[arg-type]
    assert set(diag) == {"success"}  # regression metrics and absent class metrics are left out
    assert diag["success"]["val_by_class"] == {"0": 1, "1": 3}
    assert diag["success"]["members"] == [
        {"epochs": 4, "best_epoch": 2, "time_limited": False},
        {"epochs": 3, "best_epoch": 3, "time_limited": True},
    ]
    part = {"seed": 100, "real_only_fit": [diag, {}]}
    line = rep._fit_line(part)
    assert "3-4 epochs (best epoch 2-3), 1 of 2 stopped by the time limit" in line
    assert line.endswith("early-stopping slice: 1")


def test_exp2_type_filter_keeps_whole_pairs_of_the_named_types() -> None:
    from adaptstream.errors import ConfigError
    from adaptstream_bench.costmodel.data_cli import _pairs_of_types

    idx = _pairs_of_types(0, 1000, 20, "2-way-join,3-way-join")
    assert idx and all(idx[k] % 2 == 0 and idx[k + 1] == idx[k] + 1 for k in range(0, len(idx), 2))
    for i in idx[::2]:
        q, _ = realise(query_for(0, 1000 + i // 2))
        assert q.query_type.split("+")[0] in ("2-way-join", "3-way-join")
    linear = _pairs_of_types(0, 1000, 20, "linear")
    assert sorted(idx + linear) == list(range(20))
    with pytest.raises(ConfigError, match=r"linear, 2-way-join, 3-way-join, linear\+agg"):
        _pairs_of_types(0, 1000, 20, "4-way-join")


def test_scores_by_type_scores_each_type_on_its_own_traces() -> None:
    ds = GraphDataset.from_traces(_as_real(8))
    t = ds.column("throughput")
    pred = {"throughput": np.where(np.arange(8) < 4, t, t * 4.0)}  # exact on the first four, 4x off after
    per = ev.scores_by_type(pred, ds, ["a"] * 4 + ["b"] * 4)
    assert per["a"]["n"] == per["b"]["n"] == 4
    ok = ds.usable("throughput")
    assert (ok < 4).any() and (ok >= 4).any()  # the fixture has successful traces on both sides
    assert per["a"]["T"]["q50"] == pytest.approx(1.0)
    assert per["b"]["T"]["q50"] == pytest.approx(4.0)
    assert per["a"]["S"]["n"] == 0 and "note" in per["a"]["S"]  # no S prediction given: none scored


def test_corpus_type_filter_picks_the_pairs_the_corpus_runs_for_that_type() -> None:
    from adaptstream_bench.costmodel.data_cli import _pairs_of_types

    idx = _pairs_of_types(0, 0, 40, "3-way-join")
    assert idx and len(idx) < 40
    for i in range(40):  # corpus trace i runs query i // 2 (pair_placer)
        q, _ = realise(query_for(0, i // 2))
        assert (i in idx) == (q.query_type.split("+")[0] == "3-way-join")
    agg = _pairs_of_types(0, 0, 40, "3-way-join+agg")
    assert agg and set(agg) < set(idx)
    for i in idx:
        q, _ = realise(query_for(0, i // 2))
        assert (i in agg) == (q.query_type == "3-way-join+agg")


def test_hostset_medians_are_one_choosers() -> None:
    ts = [_exp2_trace(0, "initial", 900.0), _exp2_trace(0, "gnn", 300.0)]
    other = []
    for t in (_exp2_trace(1, "initial", 900.0), _exp2_trace(1, "gnn", 100.0)):  # recorded under another label
        kind = "gnnrate" if t.meta["placement_kind"] == "gnn" else "initial"
        meta = {**t.meta, "chooser": "gnnrate", "placement_kind": kind}
        other.append(Trace(t.trace_id.replace("tbxgnn", "tbxgnnrate"), t.query, t.hosts, t.placement, t.labels, meta))
    sets = ev.hostset_speedups(ts + other)
    assert sets["small,large"]["median_all"] == 3.0 and sets["small,large"]["n_valid"] == 1
    assert ev.hostset_speedups(ts + other, chooser="gnnrate")["small,large"]["median_all"] == 9.0


def test_the_random_chooser_draws_a_valid_placement_per_query_the_same_on_every_call():
    """The baseline chooser of Exp. 2 (#55): no model, one random placement obeying Fig. 5, fixed by the query."""
    assert _load_chooser("random", Path("no-models-needed")) is None
    place = chosen_placer(0, 1000, None, "random")
    drawn = []
    for i in range(1, 40, 2):
        q, _, placement, kind, extra = place(i, HOSTS)
        assert kind == "random" and extra["chooser"] == "random" and "same_as_initial" in extra
        assert placement_violations(q, HOSTS, placement) == []
        assert place(i, HOSTS)[2] == placement  # a rerun of the pair places the query the same way
        drawn.append(extra["same_as_initial"])
    assert not all(drawn)  # not the initial placement under another name
    assert place(0, HOSTS)[3] == "initial"


def test_the_prior_alone_baseline_predicts_from_the_busiest_hosts_load() -> None:
    """eval-real's `prior_alone` row: fitted on training and early-stopping traces, it predicts only the classes,
    and a busier placement gets a lower success probability when the labels say so."""
    from types import SimpleNamespace

    from adaptstream.costmodel.features import HOST, NUMERIC
    from adaptstream.costmodel.loadprior import FEATURES

    col = NUMERIC[HOST].index(FEATURES[0])

    def graph(load: float) -> Any:
        x = np.zeros((2, len(NUMERIC[HOST])))
        x[0, col] = load  # the busiest of two hosts
        return SimpleNamespace(numeric={HOST: x})

    class Fake:
        def __init__(self, loads: list[float]) -> None:
            self.graphs = [graph(v) for v in loads]
            self.y = np.array([1.0 if v < 2.0 else 0.0 for v in loads])  # success below a load of 2

        def usable(self, metric: str) -> np.ndarray:
            return np.arange(len(self.graphs))

        def column(self, metric: str) -> np.ndarray:
            return self.y

    rng = np.random.default_rng(0)
    models = fit.fit_prior_alone(Fake(list(rng.uniform(0, 4, 60))), Fake([0.5, 3.5]))  # type: ignore[arg-type]
    assert set(models) == {"success", "backpressure"}
    p = models["success"].predict_graphs([graph(0.5), graph(1.5), graph(2.5), graph(3.5)])["success"]
    assert list(p >= 0.5) == [True, True, False, False] and np.all(np.diff(p) < 0)


def test_a_placement_figure_within_the_run_to_run_spread_of_its_threshold_is_undecided() -> None:
    spread = rep.RUN_TO_RUN_LP
    assert rep._band({"a": 2.3, "b": 2.5}, 2.0, spread) is True
    assert rep._band({"a": 2.3, "b": 2.1}, 2.0, spread) is None  # 2.1 is within x1.116 of 2
    assert rep._band({"a": 2.3, "b": 1.7}, 2.0, spread) is False  # 1.7 < 2 / 1.116 = 1.79
    assert rep._band({"a": 2.3, "b": None}, 2.0, spread) is None  # a type not measured decides nothing
    assert rep._band({"a": 0.85, "b": None}, 1.0, spread) is False  # but one clear miss does
    assert rep._band({}, 1.0, spread) is None


def test_a_figure_not_scored_decides_nothing_but_a_clear_miss_does() -> None:
    one = {"mean": 0.85, "min": 0.84, "max": 0.86}
    none = {"mean": None, "min": None, "max": None}
    assert rep._range_rule({"R_O": none, "S": one}, 0.9, higher=True) is False
    assert rep._range_rule({"R_O": none, "S": {"mean": 0.95, "min": 0.93, "max": 0.96}}, 0.9, higher=True) is None
    assert rep._range_rule({"T": {"mean": 1.2, "min": 1.1, "max": 1.3}}, 1.5, higher=False) is True
    assert rep._range_rule({"T": {"mean": 1.45, "min": 1.3, "max": 1.6}}, 1.5, higher=False) is None
