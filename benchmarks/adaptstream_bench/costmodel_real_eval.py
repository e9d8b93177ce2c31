"""Costream on REAL testbed traces (`adaptstream costmodel eval-real`): held-out accuracy and Exp. 2 speed-ups.

Every figure here comes from traces recorded on the real testbed (`costmodel testbed-corpus`, docs/testbed.md):

* accuracy: grouped k-fold over the corpus' queries (a query's random- and initial-placement traces are always in
  the same fold, so no held-out query was seen in training); each trace is predicted by models that never saw its
  query. Models: the GNN trained on SIMULATED traces only (zero-shot), the same model fine-tuned on the real
  training folds (Costream Exp. 5b), a GNN trained on the real folds only, and the flat-vector LightGBM baseline
  on the real folds. A learning curve repeats this with a fraction of the training queries (Costream Fig. 9's
  question: how much real data until the q-errors settle).
* Exp. 2: traces written by `testbed-corpus --chooser NAME` (ids `tbx<NAME>-...`): per unseen query, its real run
  under the heuristic initial placement and under the placement the model chose; speed-up = initial Lp / chosen
  Lp, median per query type.

The models fine-tuned / trained on every corpus trace are saved under `<out>/models/{gnn,flat}` for the chooser.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.ensemble import CostEnsembles
from adaptstream.costmodel.generate import BASE_TYPES, base_type
from adaptstream.costmodel.model import Labels, Trace, query_key, read_traces
from adaptstream.costmodel.qerror import balanced_accuracy, q_summary
from adaptstream.costmodel.train import CLASSIFICATION, METRICS, REGRESSION, SHORT, GraphDataset, TrainConfig
from adaptstream.errors import CostModelError
from adaptstream_bench.costmodel.testbed.bprules import LATEST, RULES, recorded_rule, verdict
from adaptstream_bench.costmodel_real_fit import (
    BOTH,
    CANDIDATES,
    PARTITION_STRIDE,
    POOLED,
    RealEvalConfig,
    available,
    choose_gnns,
    fine_tune_sim,
    fit_diagnostics,
    fit_flat,
    fit_prior_alone,
    fit_real,
    pooled,
    predict,
    slice_strata,
    split_queries,
)
from adaptstream_bench.meta import load_range

Log = Callable[[str], None]
MODELS = ("sim_zero_shot", "sim_fine_tuned", "real_only", "both_gnns", "selected", "flat_real", "prior_alone")
#: models that predict only some metrics (the others are reported as "no model", not as unpredicted traces)
MODEL_METRICS: dict[str, tuple[str, ...]] = {"prior_alone": CLASSIFICATION}
DIAG = "_fit_diagnostics"  # _fit_fold's entry with the real-only members' training record, not a model
SUCCESS_RULES = ("rerun", "run")  # how a corpus trace's success label is judged (with_success_rule)


def feature_signature() -> str:
    """Changes whenever the node features change, so a cached model of other features is never reused."""
    import hashlib

    from adaptstream.costmodel.features import CATEGORICAL, NUMERIC
    from adaptstream.costmodel.rates import VERSION

    sig = [NUMERIC, CATEGORICAL, {"rates": VERSION}]
    return hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:12]


def load_real(path: str | Path) -> tuple[list[Trace], list[Trace], dict[str, Trace]]:
    """(corpus traces `tb-*`, Exp. 2 traces `tbx*`, longer reruns `tbl*` of failed corpus traces keyed by the id
    of the trace they rerun), all labelled real; repeat runs (`tbr*`) are left out."""
    corpus: list[Trace] = []
    exp2: list[Trace] = []
    reruns: dict[str, Trace] = {}
    for t in read_traces(path):
        if t.labels is None or t.labels.origin != "real" or t.trace_id.startswith("tbr"):
            continue
        if t.trace_id.startswith("tbl"):
            reruns["tb" + t.trace_id[3:]] = t
        else:
            (exp2 if t.trace_id.startswith("tbx") else corpus).append(t)
    return corpus, exp2, reruns


def with_success_rule(
    traces: Sequence[Trace], reruns: dict[str, Trace], rule: str
) -> tuple[list[Trace], dict[str, Any]]:
    """The traces with the success label as `rule` judges it, and counts of what changed.

    `run`: the recorded run (sink rows after the warm-up within its --duration, 35 s in the corpus). `rerun`: a run
    that failed but succeeded when run again for longer (`testbed-corpus --rerun-failed`) counts as a success: its
    first rows came late, not never (docs/testbed.md, "success label"). A failure with no rerun keeps its run's
    label (counted). Only S changes: T, Le and Lp stay those of the recorded run (a failed run has none)."""
    from dataclasses import replace

    if rule not in SUCCESS_RULES:
        msg = f"unknown success rule {rule!r}; valid: {', '.join(SUCCESS_RULES)}"
        raise CostModelError(msg)
    failed = [t for t in traces if t.labels is not None and t.labels.success is False]
    again = {t.trace_id: reruns[t.trace_id] for t in failed if t.trace_id in reruns}
    late = {k for k, r in again.items() if r.labels is not None and r.labels.success}
    counts = {
        "rule": rule,
        "failed_in_run": len(failed),
        "rerun": len(again),
        "succeeded_on_rerun": len(late),
        "not_rerun": len(failed) - len(again),
        "rerun_seconds": sorted({float(r.meta.get("duration_s", 0.0)) for r in again.values()}),
    }
    if rule == "run":
        return list(traces), counts
    out = [replace(t, labels=replace(t.labels, success=True)) if t.trace_id in late and t.labels else t for t in traces]
    return out, counts


def bp_rule(t: Trace) -> str:
    """The rule a trace's backpressure label was measured by (testbed/bprules.py)."""
    return recorded_rule(t.meta)


def with_bp_rule(traces: Sequence[Trace], rule: str) -> list[Trace]:
    """The traces with the backpressure label as `rule` judges the run (bprules.verdict): None (not scored, not
    trained on) where the run did not record what the rule needs; every other label is kept."""
    from dataclasses import replace

    out = []
    for t in traces:
        out.append(t if t.labels is None else replace(t, labels=replace(t.labels, backpressure=verdict(t, rule))))
    return out


def rule_comparison(traces: Sequence[Trace]) -> dict[str, Any]:
    """On the runs that every rule can judge: how often each rule says backpressure, and how often each older rule
    disagrees with the newest."""
    both = [{r: verdict(t, r) for r in RULES} for t in traces]
    full = [v for v in both if all(x is not None for x in v.values())]
    return {
        "n": len(full),
        "backpressure": {r: sum(bool(v[r]) for v in full) for r in RULES},
        "differs_from_newest": {r: sum(v[r] != v[LATEST] for v in full) for r in RULES[1:]},
    }


def query_folds(traces: Sequence[Trace], k: int, seed: int) -> list[int]:
    """Fold of every trace, grouped by the generator query it runs (`query_key`)."""
    qs = sorted({query_key(t) for t in traces})
    if len(qs) < k:
        msg = f"{len(qs)} queries cannot fill {k} folds; record more traces or lower --folds"
        raise CostModelError(msg)
    order = np.random.default_rng(seed).permutation(len(qs))
    fold_of = {qs[j]: n % k for n, j in enumerate(order)}
    return [fold_of[query_key(t)] for t in traces]


def scores(pred: dict[str, np.ndarray], ds: GraphDataset) -> dict[str, Any]:
    """Q50/Q95 over successful traces with a label; accuracy and balanced accuracy for the classes. Traces a
    model could not predict (NaN) are counted, not dropped silently."""
    out: dict[str, Any] = {}
    for m in METRICS:
        idx = ds.usable(m)
        p = pred.get(m)
        if p is None:
            out[SHORT[m]] = {"n": 0, "note": "no model (too few labelled traces, or the model predicts no such metric)"}
            continue
        p = np.asarray(p, dtype=float)[idx]
        have = np.isfinite(p)
        yt = ds.column(m)[idx][have]
        if m in REGRESSION:
            out[SHORT[m]] = {**q_summary(yt, p[have]), "unpredicted": int((~have).sum())}
        else:
            out[SHORT[m]] = {**class_scores(yt, p[have]), "unpredicted": int((~have).sum())}
    return out


def class_scores(y: np.ndarray, p: np.ndarray) -> dict[str, Any]:
    """Accuracy and balanced accuracy of probabilities `p` (cut at 0.5) against labels `y`."""
    yb, pb = np.asarray(y).astype(bool), np.asarray(p, dtype=float) >= 0.5
    return {
        "acc": float((yb == pb).mean()) if yb.size else float("nan"),
        "balanced_acc": balanced_accuracy(yb, pb),
        "n": int(yb.size),
        "positives": int(yb.sum()),
    }


def success_under(pred: np.ndarray, other: np.ndarray) -> dict[str, Any]:
    """Out-of-fold success predictions scored against another rule's labels (`other`, one per trace)."""
    p, y = np.asarray(pred, dtype=float), np.asarray(other, dtype=float)
    have = np.isfinite(p) & np.isfinite(y)
    return class_scores(y[have], p[have])


def train_sim(cfg: RealEvalConfig, log: Log) -> CostEnsembles | None:
    """The GNN pre-trained on SIMULATED traces (subsampled corpus), or None when no corpus is there."""
    from adaptstream.costmodel.corpus import load_corpus
    from adaptstream.costmodel.ensemble import train_ensembles
    from adaptstream.costmodel.train import subsample

    if not cfg.sim_corpus or not Path(cfg.sim_corpus).exists():
        log(f"no simulated corpus at {cfg.sim_corpus}: zero-shot and fine-tuned models left out")
        return None
    key = {"sim_corpus": str(Path(cfg.sim_corpus).resolve()), "sim_train": cfg.sim_train, "seed": cfg.seed}
    key |= {"members": cfg.sim_members, "seconds": cfg.sim_seconds}
    key |= {"features": feature_signature(), "prior": TrainConfig().prior}
    manifest = Path(cfg.sim_cache) / "manifest.json" if cfg.sim_cache else None
    # compare the key before loading: models of other features cannot even be loaded
    if (
        manifest is not None
        and manifest.exists()
        and json.loads(manifest.read_text()).get("info", {}).get("cache_key") == key
    ):
        log(f"pre-trained SIMULATED models reused from {cfg.sim_cache}")
        return CostEnsembles.load(str(cfg.sim_cache))
    sp = load_corpus(cfg.sim_corpus)
    tr = subsample(GraphDataset.from_traces(sp["train"]), cfg.sim_train, cfg.seed)
    va = subsample(GraphDataset.from_traces(sp["val"]), max(200, cfg.sim_train // 8), cfg.seed)
    log(f"pre-training on {len(tr)} SIMULATED traces ({cfg.sim_members} per metric, <= {cfg.sim_seconds:.0f} s each)")
    base = TrainConfig(max_seconds=cfg.sim_seconds, seed=cfg.seed, epochs=40)
    ens = train_ensembles(tr, va, base, METRICS, members=cfg.sim_members)
    ens.info["cache_key"] = key
    if cfg.sim_cache:
        ens.save(cfg.sim_cache)
    return ens


def scores_by_type(pred: dict[str, np.ndarray], ds: GraphDataset, qtypes: Sequence[str]) -> dict[str, Any]:
    """`scores` per query type (e.g. 3-way-join+agg): which kind of query a missed target comes from."""
    kinds = np.asarray(qtypes)
    out = {}
    for qt in sorted(set(qtypes)):
        idx = np.flatnonzero(kinds == qt)
        out[qt] = {"n": int(idx.size), **scores({m: p[idx] for m, p in pred.items()}, ds.subset(idx))}
    return out


def _fit_fold(
    ds: GraphDataset,
    train_idx: np.ndarray,
    qidx: np.ndarray,
    sim: CostEnsembles | None,
    cfg: RealEvalConfig,
    frac: float,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """Every model fitted on a fraction of the queries in `train_idx` (20 % of those for early stopping)."""
    tr_i, va_i = split_queries(train_idx, qidx, frac, seed, slice_strata(ds, qidx, cfg))
    train, val = ds.subset(tr_i), ds.subset(va_i)
    fitted: dict[str, dict[str, Any]] = {"real_only": fit_real(train, val, cfg), "flat_real": fit_flat(train, val)}
    fitted["prior_alone"] = fit_prior_alone(train, val)
    fitted[DIAG] = fit_diagnostics(fitted["real_only"], val, cfg.real_seconds)
    if sim is not None:
        both = np.concatenate([tr_i, va_i])
        fitted["sim_fine_tuned"] = fine_tune_sim(sim, ds.subset(both), cfg, qidx[both])
        fitted[BOTH] = pooled({k: v for k, v in fitted.items() if k != DIAG})
    return fitted


def cross_validate(
    traces: list[Trace],
    sim: CostEnsembles | None,
    cfg: RealEvalConfig,
    log: Log,
    other_success: np.ndarray | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Out-of-fold predictions for every model and training fraction, scored; per query type for the largest
    fraction; and, per fold, which GNN the per-metric choice (`selected`, largest fraction only) took and why.
    Last, each member of the real-only ensemble scored alone (largest fraction): how much one seed's figure is
    luck. With `other_success` (the labels under the other success rule) the largest fraction's S predictions are
    also scored against those, as `S_other_rule`."""
    ds = GraphDataset.from_traces(traces)
    folds = np.array(query_folds(traces, cfg.folds, cfg.seed))
    qidx = np.array([query_key(t) for t in traces])
    n = len(traces)
    results: dict[str, dict[str, Any]] = {}
    by_type: dict[str, dict[str, Any]] = {}
    choices: list[dict[str, Any]] = []
    seeds: dict[int, dict[str, np.ndarray]] = {}  # the real-only ensemble's members one by one (largest fraction)
    qtypes, top = [t.query.query_type for t in traces], max(cfg.fractions)
    if sim is not None:
        results["sim_zero_shot"] = {"1.0": scores(sim.predict_graphs(ds.graphs), ds)}
    for frac in cfg.fractions:
        oof: dict[str, dict[str, np.ndarray]] = {
            k: {m: np.full(n, np.nan) for m in MODEL_METRICS.get(k, METRICS)} for k in MODELS[1:]
        }
        for f in range(cfg.folds):
            test, train_idx = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
            fitted = _fit_fold(ds, train_idx, qidx, sim, cfg, frac, cfg.seed + f)
            diag = fitted.pop(DIAG)
            held_out = ds.subset(test)
            for name, models in fitted.items():
                for m, p in predict(models, held_out).items():
                    oof[name][m][test] = p
            if frac == top:
                for m, ens in fitted["real_only"].items():
                    for k, p in enumerate(ens.member_predictions(held_out.graphs)):
                        seeds.setdefault(k, {}).setdefault(m, np.full(n, np.nan))[test] = p
                pick, val_scores = choose_gnns(sim, ds, train_idx, qidx, cfg, cfg.seed + 1000 + f)
                pick = available(pick, fitted)
                choices.append(
                    {"fold": f, "choice": _short(pick), "scores": _finite(val_scores), "real_only_fit": diag}
                )
                for m, c in pick.items():
                    oof["selected"][m][test] = oof[c][m][test]
            log(f"  fraction {frac:.2f} fold {f + 1}/{cfg.folds}: {len(test)} held-out traces")
        for name, preds in oof.items():
            if (name in ("sim_fine_tuned", BOTH) and sim is None) or (name == "selected" and frac != top):
                continue
            results.setdefault(name, {})[f"{frac}"] = scores(preds, ds)
            if frac == top:
                by_type[name] = scores_by_type(preds, ds, qtypes)
                if other_success is not None:
                    results[name][f"{frac}"]["S_other_rule"] = success_under(preds["success"], other_success)
    return results, by_type, choices, {f"{top}": [scores(seeds[k], ds) for k in sorted(seeds)]}


HEADLINE = {"T": "q50", "Le": "q50", "Lp": "q50", "R_O": "balanced_acc", "S": "balanced_acc"}


def partition_spread(
    traces: list[Trace],
    sim: CostEnsembles | None,
    cfg: RealEvalConfig,
    log: Log,
    first: dict[str, dict[str, Any]],
    other_success: np.ndarray | None = None,
    first_choices: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The largest share's out-of-fold figures on `cfg.partitions` partitions of the queries into folds, each with
    its own models (partition p > 0: seed + PARTITION_STRIDE * p for folds and training), per partition and as
    mean / range per model. The first partition is `cross_validate`'s own result (`first`), not refitted."""
    top = max(cfg.fractions)
    per = [{"seed": cfg.seed, "models": _headline(first, f"{top}"), "real_only_fit": _fits(first_choices)}]
    for p in range(1, cfg.partitions):
        sub = replace(cfg, seed=cfg.seed + PARTITION_STRIDE * p, fractions=(top,), partitions=1)
        log(f"fold partition {p + 1}/{cfg.partitions} (seed {sub.seed}), largest share only")
        cv, _, choices, _ = cross_validate(traces, sim, sub, log, other_success)
        per.append({"seed": sub.seed, "models": _headline(cv, f"{top}"), "real_only_fit": _fits(choices)})
    return {"n": len(per), "per_partition": per, "mean": _mean_headline(per)}


def _fits(choices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fold, the real-only members' training record (`fit_diagnostics`)."""
    return [c.get("real_only_fit", {}) for c in choices]


def _headline(cv: dict[str, dict[str, Any]], frac: str) -> dict[str, dict[str, float | None]]:
    """Per model, the figures the targets judge (Q50 of T, Le, Lp; balanced accuracy of R_O, S and of S under the
    other success rule); None where a model scored nothing."""
    out: dict[str, dict[str, float | None]] = {}
    for name, per in cv.items():
        sc = per.get(frac)
        if sc is None:
            continue
        row = {k: sc.get(k, {}).get(field) for k, field in HEADLINE.items()}
        row["S_other_rule"] = (sc.get("S_other_rule") or {}).get("balanced_acc")
        out[name] = {k: v if v is not None and math.isfinite(v) else None for k, v in row.items()}
    return out


def _mean_headline(per: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model and figure: mean, min and max over the partitions that scored it, and how many did."""
    out: dict[str, dict[str, Any]] = {}
    for name in per[0]["models"]:
        fig: dict[str, Any] = {}
        for k in per[0]["models"][name]:
            vals = [p["models"].get(name, {}).get(k) for p in per]
            have = [float(v) for v in vals if v is not None]
            fig[k] = (
                {"mean": round(statistics.fmean(have), 4), "min": min(have), "max": max(have), "n": len(have)}
                if have
                else {"mean": None, "min": None, "max": None, "n": 0}
            )
        out[name] = fig
    return out


def _short(per_metric: dict[str, Any]) -> dict[str, Any]:
    return {SHORT[m]: v for m, v in per_metric.items()}


def _finite(scored: dict[str, dict[str, float]]) -> dict[str, dict[str, float | None]]:
    """Validation scores by short metric name, None where there was nothing to score (JSON has no infinity)."""
    return {
        c: _short({m: round(v, 4) if math.isfinite(v) else None for m, v in per.items()}) for c, per in scored.items()
    }


def final_models(
    traces: list[Trace], sim: CostEnsembles | None, cfg: RealEvalConfig, out: Path
) -> tuple[list[str], dict[str, str]]:
    """Models on every corpus trace for `testbed-corpus --chooser`: gnn = per metric the GNN (fine-tuned or
    real-only) chosen on held-back queries as in `cross_validate`, or both pooled for the POOLED metrics, flat =
    LightGBM. Returns the metrics and the choice."""
    from adaptstream.costmodel.flat import FlatVectorModel

    ds = GraphDataset.from_traces(traces)
    qidx = np.array([query_key(t) for t in traces])
    everything = np.arange(len(ds))
    pick, _ = choose_gnns(sim, ds, everything, qidx, cfg, cfg.seed + 1000)
    fitted = _fit_fold(ds, everything, qidx, sim, cfg, 1.0, cfg.seed)
    pick = available(pick, fitted)
    ens = {m: fitted[c][m] for m, c in pick.items() if m in fitted.get(c, {})}
    info = {
        "trained_on": f"{len(ds)} real testbed traces",
        "chosen_per_metric": _short(pick),
    }
    CostEnsembles(ens, info).save(out / "gnn")
    flat = fitted["flat_real"]
    FlatVectorModel({m: f.boosters[m] for m, f in flat.items()}, {"n_estimators": 200}).save(out / "flat")
    return sorted(ens), _short(pick)


def lp_ratio(slow: Labels | None, fast: Labels | None) -> float | None:
    """`slow`'s Lp over `fast`'s when both runs succeeded with a latency; None otherwise (a failed side is counted
    by the caller, never turned into a speed-up)."""
    if slow and fast and slow.success and fast.success and slow.proc_latency_ms and fast.proc_latency_ms:
        return round(slow.proc_latency_ms / fast.proc_latency_ms, 3)
    return None


def exp2_group(t: Trace) -> str:
    """The Exp. 2 invocation a run belongs to: `exp2_group` where several choosers ran side by side
    (`testbed-corpus --chooser gnn,flat,random --label L`), else its one chooser's name (initial runs included)."""
    return str(t.meta.get("exp2_group") or t.meta.get("chooser", ""))


def _by_group_and_query(traces: Sequence[Trace]) -> dict[tuple[str, int], dict[str, Trace]]:
    """Runs per (Exp. 2 group, query), keyed by placement kind: `initial` and each chooser's name."""
    runs: dict[tuple[str, int], dict[str, Trace]] = {}
    for t in traces:
        runs.setdefault((exp2_group(t), query_key(t)), {})[str(t.meta["placement_kind"])] = t
    return runs


def exp2_speedups(traces: Sequence[Trace]) -> dict[str, Any]:
    """Per chooser and query type: median of initial Lp / chosen Lp over queries where both runs succeeded; the
    initial run is the one of the chooser's own invocation."""
    out: dict[str, Any] = {}
    for (_, qi), d in sorted(_by_group_and_query(traces).items()):
        init = d.get("initial")
        for chooser, chosen in sorted(d.items()):
            if init is None or chooser == "initial":
                continue
            _speedup_row(out, chooser, qi, init, chosen)
    for per_type in out.values():
        for row in per_type.values():
            sp = [r["speedup"] for r in row["rows"] if r["speedup"] is not None]
            row["n"] = len(row["rows"])
            row["n_valid"] = len(sp)
            # pairs left out of the median because one run wrote no row: which side failed
            row["n_only_chosen_ok"] = sum(r["chosen_lp"] is not None and r["initial_lp"] is None for r in row["rows"])
            row["n_only_initial_ok"] = sum(r["initial_lp"] is not None and r["chosen_lp"] is None for r in row["rows"])
            row["median"] = round(statistics.median(sp), 3) if sp else None
    return out


def _speedup_row(out: dict[str, Any], chooser: str, qi: int, init: Trace, chosen: Trace) -> None:
    row = out.setdefault(chooser, {}).setdefault(base_type(init.query.query_type), {"rows": []})
    li, lc = init.labels, chosen.labels
    assert li is not None and lc is not None
    row["rows"].append(
        {
            "query_index": qi,
            "initial_lp": li.proc_latency_ms if li.success else None,
            "chosen_lp": lc.proc_latency_ms if lc.success else None,
            "initial_bp": li.backpressure,
            "chosen_bp": lc.backpressure,
            "same_as_initial": chosen.meta.get("same_as_initial"),
            "speedup": lp_ratio(li, lc),
        }
    )


def versus_baseline(traces: Sequence[Trace], baseline: str = "random") -> dict[str, Any]:
    """Per chooser and query type, on the queries both it and the `baseline` chooser of the same Exp. 2 group ran
    (`chooser_model`, or the chooser's name for single-chooser runs): median of the baseline's Lp over the chooser's
    (above 1: the chooser's placement was faster). Why beside initial / chosen: the initial placement puts sources
    and their operators on the weakest hosts, so a speed-up over it says little about the model; a random valid
    placement is the floor a learned chooser has to clear."""
    out: dict[str, Any] = {}
    for _, d in sorted(_by_group_and_query(traces).items()):
        chosen = {k: t for k, t in d.items() if k != "initial"}
        base = [t for k, t in chosen.items() if str(t.meta.get("chooser_model", k)) == baseline]
        if not base:
            continue
        for c, t in sorted(chosen.items()):
            if t is base[0]:
                continue
            row = out.setdefault(c, {}).setdefault(base_type(t.query.query_type), {"n": 0, "ratios": []})
            row["n"] += 1
            lb, lc = base[0].labels, t.labels
            ratio = lp_ratio(lb, lc)
            if ratio is not None:
                row["ratios"].append(ratio)
            else:  # which side wrote no row: a failed run is counted, never dropped silently
                row["only_chooser_ok"] = row.get("only_chooser_ok", 0) + int(bool(lc and lc.success))
                row["only_baseline_ok"] = row.get("only_baseline_ok", 0) + int(bool(lb and lb.success))
    for per_type in out.values():
        for row in per_type.values():
            row["n_valid"], row["median"] = len(row["ratios"]), _median(row["ratios"])
    return out


def host_set(t: Trace) -> str:
    """A trace's host set as its categories in host order, e.g. "small,medium,large"."""
    return ",".join(h.category or h.id for h in t.hosts)


def hostset_speedups(traces: Sequence[Trace], chooser: str = "gnn") -> dict[str, Any]:
    """Exp. 2 of one chooser per host set, with how heterogeneous it is (largest / smallest host CPU and
    bandwidth); other choosers' runs are left out so that a set's medians are one model's."""
    traces = [t for t in traces if str(t.meta.get("chooser", "")) == chooser]
    out: dict[str, Any] = {}
    valid: dict[str, list[tuple[int, float]]] = {}  # (query, speed-up) of the pairs where both runs succeeded
    for hs in sorted({host_set(t) for t in traces}):
        sub = [t for t in traces if host_set(t) == hs]
        cpus = [h.cpu for h in sub[0].hosts]
        bws = [h.bandwidth_mbits for h in sub[0].hosts]
        per = exp2_speedups(sub)
        rows = [r for c in per.values() for row in c.values() for r in row["rows"]]
        valid[hs] = [(r["query_index"], r["speedup"]) for r in rows if r["speedup"] is not None]
        out[hs] = {
            "cpu_ratio": round(max(cpus) / min(cpus), 2),
            "bandwidth_ratio": round(max(bws) / min(bws), 2),
            "speedups": per,
            "median_all": _median([x for _, x in valid[hs]]),
            "n_valid": len(valid[hs]),
            "load1": load_range(sub),
        }
    # the same queries on every host set: the fair comparison across sets
    common = set.intersection(*({q for q, _ in v} for v in valid.values())) if valid else set()
    for hs, d in out.items():
        sp = [x for q, x in valid[hs] if q in common]
        d["median_common"], d["n_common"] = _median(sp), len(sp)
    return out


def _success(t: Trace) -> float:
    return float("nan") if t.labels is None or t.labels.success is None else float(t.labels.success)


def _median(xs: Sequence[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


@dataclass
class Prepared:
    """The corpus with its success and backpressure labels judged by the configured rules, and what they changed."""

    corpus: list[Trace]
    exp2: list[Trace]
    recorded: np.ndarray
    success_counts: dict[str, Any]
    rules: dict[str, int]
    comparison: dict[str, Any]
    labelled_bp: list[Trace]
    left_out: dict[str, int]


def prepare(cfg: RealEvalConfig, log: Log = print) -> Prepared:
    corpus, exp2, reruns = load_real(cfg.traces)
    if not corpus:
        msg = f"no real corpus traces (ids tb-*) in {cfg.traces}; record them with `costmodel testbed-corpus`"
        raise CostModelError(msg)
    log(f"{len(corpus)} real corpus traces, {len(exp2)} Exp. 2 traces, {len(reruns)} reruns from {cfg.traces}")
    recorded = np.array([_success(t) for t in corpus])
    corpus, success_counts = with_success_rule(corpus, reruns, cfg.success_rule)
    log(f"success judged by rule {cfg.success_rule}: {success_counts}")
    if cfg.success_rule == "rerun" and success_counts["not_rerun"]:
        log(
            f"{success_counts['not_rerun']} failed runs were not rerun and keep their label; rerun them with "
            "`costmodel testbed-corpus --rerun-failed --duration 70`"
        )
    rules = dict(sorted(Counter(bp_rule(t) for t in corpus).items()))
    comparison = rule_comparison(corpus)
    corpus = with_bp_rule(corpus, cfg.bp_rule)
    labelled_bp = [t for t in corpus if t.labels is not None and t.labels.backpressure is not None]
    left_out = dict(sorted(Counter(bp_rule(t) for t in corpus if t.labels and t.labels.backpressure is None).items()))
    log(f"backpressure labels recorded by rule: {rules}; judged by {cfg.bp_rule}: {len(labelled_bp)} traces")
    return Prepared(corpus, exp2, recorded, success_counts, rules, comparison, labelled_bp, left_out)


def train_choosers(cfg: RealEvalConfig, models_dir: Path, log: Log = print) -> dict[str, Any]:
    """Only the models `testbed-corpus --chooser` loads (the same `final_models` as a full `run`, on every corpus
    trace), without the cross-validation: minutes instead of an hour and a half, for an Exp. 2 run that must use
    models trained by the current code."""
    t0 = time.monotonic()
    p = prepare(cfg, log)
    models, pick = final_models(p.corpus, train_sim(cfg, log), cfg, models_dir)
    info = {
        "trained_on": f"{len(p.corpus)} real corpus traces from {cfg.traces}",
        "metrics": [SHORT[m] for m in models],
        "chosen_per_metric": pick,
        "config": asdict(cfg),
        "seconds": round(time.monotonic() - t0, 1),
    }
    (models_dir / "chooser_models.json").write_text(json.dumps(info, indent=1) + "\n")
    log(f"models for --chooser written to {models_dir} in {info['seconds']:.0f} s (GNN per metric: {pick})")
    return info


def run(cfg: RealEvalConfig, models_dir: Path, log: Log = print) -> dict[str, Any]:
    t0 = time.monotonic()
    p = prepare(cfg, log)
    corpus, exp2, recorded, success_counts = p.corpus, p.exp2, p.recorded, p.success_counts
    rules, comparison, labelled_bp, left_out = p.rules, p.comparison, p.labelled_bp, p.left_out
    other = recorded if cfg.success_rule != "run" else None
    sets = statistics.multimode(host_set(t) for t in corpus)
    main_exp2 = [t for t in exp2 if host_set(t) == sets[0]]  # the targets judge the corpus' own host set
    choosers = sorted({str(t.meta.get("chooser", "")) for t in main_exp2})
    sim = train_sim(cfg, log)
    if cfg.partitions > 1:
        log(f"fold partition 1/{cfg.partitions} (seed {cfg.seed}): every training share")
    cv, cv_by_type, choices, seed_scores = cross_validate(corpus, sim, cfg, log, other)
    spread = partition_spread(corpus, sim, cfg, log, cv, other, choices)
    models, final_pick = final_models(corpus, sim, cfg, models_dir)
    log(f"models for --chooser written to {models_dir} (metrics {', '.join(SHORT[m] for m in models)})")
    res = {
        "config": asdict(cfg),
        "n_traces": len(corpus),
        "n_queries": len({query_key(t) for t in corpus}),
        "by_type": {bt: sum(base_type(t.query.query_type) == bt for t in corpus) for bt in BASE_TYPES},
        "success_share": round(sum(bool(t.labels and t.labels.success) for t in corpus) / len(corpus), 3),
        "success_rule": success_counts,
        "backpressure_share": (
            round(sum(bool(t.labels and t.labels.backpressure) for t in labelled_bp) / len(labelled_bp), 3)
            if labelled_bp
            else None
        ),
        "bp_rules": rules,
        "bp_rule_comparison": comparison,
        "bp_left_out": left_out,
        "n_bp_labelled": len(labelled_bp),
        "load1": load_range(corpus),
        "cv": cv,
        "cv_by_type": cv_by_type,
        "real_only_seeds": seed_scores,
        "partitions": spread,
        "selection": {
            "candidates": list(CANDIDATES),
            "pooled": [SHORT[m] for m in POOLED],
            "per_fold": choices,
            "final_models": final_pick,
        },
        "corpus_hosts": sets[0],
        "exp2": exp2_speedups(main_exp2),
        "exp2_vs_random": versus_baseline(main_exp2, "random"),
        "exp2_load1": {c: load_range([t for t in main_exp2 if t.meta.get("chooser") == c]) for c in choosers},
        "exp2_hostsets": hostset_speedups(exp2),
        "seconds": round(time.monotonic() - t0, 1),
        "load1_now": round(os.getloadavg()[0], 2),
    }
    return res


def write_json(res: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(res, indent=1, default=lambda o: None if isinstance(o, float) else str(o)) + "\n")
