"""How much a classifier's held-out balanced accuracy on the REAL traces depends on the fold partition.

    python benchmarks/costmodel_fold_spread.py --traces docs/results/costmodel_real_traces.jsonl \
        --metric success --fold-seeds 0,1,2,3 --out runs/fold_spread.json \
        [--sim-models runs/costmodel_real/sim_models]

Why: success has few negatives (33 failed runs), so one partition of the queries into folds can move the score
by several points; a change to the model is judged by its mean over partitions, not by one. Trains the real-only
GNN ensemble per fold of each partition with eval-real's defaults (RealEvalConfig: members, epochs, seconds
per member, folds, success and backpressure rules; 20 % of the training queries for early stopping). To compare
two versions of the code, run this file with PYTHONPATH pointing at each version's src/ (it uses only functions
both have). With --sim-models (the pre-trained SIMULATED models `eval-real` caches) the fine-tuned GNN is fitted
per fold as well, and the JSON gives, besides the real-only majority vote ("ensemble"), other ways to combine the
members' probabilities: their mean (soft vote) for either GNN and for both together ("combined"). Prints
progress; writes one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from adaptstream.costmodel.ensemble import CostEnsembles, MetricEnsemble
from adaptstream.costmodel.train import GraphDataset, TrainConfig, canonical_metric, fine_tune, train_model
from adaptstream_bench.costmodel_real_eval import (
    class_scores,
    load_real,
    query_folds,
    with_bp_rule,
    with_success_rule,
)
from adaptstream_bench.costmodel_real_fit import RealEvalConfig, split_queries
from adaptstream_bench.meta import finish_meta, script_meta


def partition(
    ds: GraphDataset,
    qidx: np.ndarray,
    folds: np.ndarray,
    metric: str,
    cfg: RealEvalConfig,
    seed: int,
    sim: CostEnsembles | None = None,
    class_prior: str = "none",
    ft_prior: str | None = None,
) -> dict:
    """Out-of-fold balanced accuracy of the majority vote and of each member, for one fold partition; with `sim`,
    also of the fine-tuned GNN and of soft votes (`combined`)."""
    members = cfg.real_members
    n = len(ds)
    vote, per = np.full(n, np.nan), np.full((members, n), np.nan)
    tuned = None if sim is None else np.full((len(sim.ensembles[metric].members), n), np.nan)
    ft_vote = np.full(n, np.nan)
    for f in range(int(folds.max()) + 1):
        test, train = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
        fit_i, stop_i = split_queries(train, qidx, 1.0, f + 100 * seed)
        cfgs = [
            TrainConfig(
                metric=metric,
                epochs=cfg.real_epochs,
                batch_size=32,
                patience=20,
                seed=s + 10 * seed,
                max_seconds=cfg.real_seconds,
                **({"class_prior": class_prior} if class_prior != "none" else {}),  # runs on src/ older than it
            )
            for s in range(members)
        ]
        models = [train_model(ds.subset(fit_i), ds.subset(stop_i), c) for c in cfgs]
        held_out = ds.subset(test).graphs
        p = np.stack([m.predict(held_out) for m in models])
        per[:, test] = p
        vote[test] = MetricEnsemble(models).combine(p)
        if sim is not None and tuned is not None:
            tune = [
                fine_tune(
                    b,
                    ds.subset(train),
                    cfg.ft_epochs,
                    cfg.ft_lr,
                    seed=cfg.seed,
                    groups=qidx[train],
                    **({"class_prior": ft_prior} if ft_prior else {}),
                )
                for b in sim.ensembles[metric].members
            ]
            tuned[:, test] = tp = np.stack([m.predict(held_out) for m in tune])
            ft_vote[test] = MetricEnsemble(tune).combine(tp)
    use = ds.usable(metric)
    y = ds.column(metric)[use]
    out = {
        "ensemble": class_scores(y, vote[use])["balanced_acc"],
        "members": [class_scores(y, p[use])["balanced_acc"] for p in per],
    }
    if tuned is not None:
        soft = {
            "real_only_vote": vote,
            "real_only_mean": per.mean(axis=0),
            "fine_tuned_vote": ft_vote,
            "fine_tuned_mean": tuned.mean(axis=0),
            "both_mean": np.vstack([per, tuned]).mean(axis=0),  # every member alike, as costmodel_real_fit.pooled
        }
        out["combined"] = {k: class_scores(y, v[use])["balanced_acc"] for k, v in soft.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--metric", default="success")
    ap.add_argument("--fold-seeds", default="0,1,2,3")
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sim-models", type=Path, default=None, help="eval-real's cached SIMULATED models")
    ap.add_argument("--class-prior", default="none", help="the real-only GNN's class prior (TrainConfig)")
    ap.add_argument("--ft-prior", default=None, help="the class prior the fine-tuned GNN gets (fine_tune)")
    a = ap.parse_args()
    metric = canonical_metric(a.metric)
    corpus, _, reruns = load_real(a.traces)
    cfg = RealEvalConfig(traces=str(a.traces), real_members=a.members)
    traces = with_bp_rule(with_success_rule(corpus, reruns, cfg.success_rule)[0], cfg.bp_rule)
    ds = GraphDataset.from_traces(traces)
    qidx = np.array([int(t.meta["query_index"]) for t in traces])
    sim = CostEnsembles.load(a.sim_models) if a.sim_models else None
    out: dict = {"meta": script_meta(), "targets": [], "metric": metric, "traces": len(traces), "partitions": {}}
    out.update(class_prior=a.class_prior, ft_prior=a.ft_prior, load1_before=round(os.getloadavg()[0], 2))
    for s in (int(x) for x in a.fold_seeds.split(",")):
        t0 = time.perf_counter()
        folds = np.array(query_folds(traces, cfg.folds, s))
        out["partitions"][str(s)] = r = partition(ds, qidx, folds, metric, cfg, s, sim, a.class_prior, a.ft_prior)
        print(
            f"fold partition {s}: ensemble {r['ensemble']:.3f}, members",
            [round(x, 3) for x in r["members"]],
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        if "combined" in r:
            print("  combined:", {k: round(v, 3) for k, v in r["combined"].items()}, flush=True)
    ens = [r["ensemble"] for r in out["partitions"].values()]
    out["ensemble_mean"] = float(np.mean(ens))
    out["load1_after"] = round(os.getloadavg()[0], 2)
    combos = [r["combined"] for r in out["partitions"].values() if "combined" in r]
    if combos:
        out["combined_mean"] = {k: float(np.mean([c[k] for c in combos])) for k in combos[0]}
        print("mean over partitions:", {k: round(v, 3) for k, v in out["combined_mean"].items()})
    print(f"mean over {len(ens)} partitions: {out['ensemble_mean']:.3f} (range {min(ens):.3f}-{max(ens):.3f})")
    finish_meta(out["meta"])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
