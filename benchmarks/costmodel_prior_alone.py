"""Out-of-fold balanced accuracy of the load prior ALONE (no GNN) on the REAL corpus traces.

    python benchmarks/costmodel_prior_alone.py --traces docs/results/costmodel_real_traces.jsonl \
        --fold-seeds 0,100,200 --out runs/prior_alone.json

Why: the class prior (`costmodel/loadprior.py`) is worth giving a GNN only where it carries signal on its own;
this scores it per class metric on the query folds eval-real draws (`query_folds`, labels by eval-real's default
success and backpressure rules), fitting it on the other folds each time. Seconds; writes one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from adaptstream.costmodel.loadprior import FEATURES, LoadPrior
from adaptstream.costmodel.train import GraphDataset
from adaptstream_bench.costmodel_real_eval import class_scores, load_real, query_folds, with_bp_rule, with_success_rule
from adaptstream_bench.costmodel_real_fit import RealEvalConfig
from adaptstream_bench.meta import finish_meta, script_meta


def out_of_fold(ds: GraphDataset, folds: np.ndarray, metric: str) -> dict:
    use = ds.usable(metric)
    y = ds.column(metric)
    prob = np.full(len(ds), np.nan)
    for f in np.unique(folds[use]):
        tr, te = use[folds[use] != f], use[folds[use] == f]
        prior = LoadPrior.fit([ds.graphs[i] for i in tr], y[tr])
        prob[te] = 1.0 / (1.0 + np.exp(-prior.logits([ds.graphs[i] for i in te])))
    return class_scores(y[use], prob[use])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--fold-seeds", default="0,100,200")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if not a.traces.exists():
        raise SystemExit(f"error: {a.traces} does not exist")
    cfg = RealEvalConfig(traces=str(a.traces))
    corpus, _, reruns = load_real(a.traces)
    traces = with_bp_rule(with_success_rule(corpus, reruns, cfg.success_rule)[0], cfg.bp_rule)
    ds = GraphDataset.from_traces(traces)
    out: dict = {"meta": script_meta(), "targets": [], "features": list(FEATURES), "traces": len(traces)}
    out["load1"] = round(os.getloadavg()[0], 2)
    for metric in ("success", "backpressure"):
        per = {}
        for s in (int(x) for x in a.fold_seeds.split(",")):
            per[str(s)] = out_of_fold(ds, np.array(query_folds(traces, cfg.folds, s)), metric)
        bal = [r["balanced_acc"] for r in per.values()]
        out[metric] = {"per_partition": per, "balanced_mean": float(np.mean(bal))}
        print(f"{metric}: balanced", [round(b, 3) for b in bal], f"mean {np.mean(bal):.3f}", flush=True)
    finish_meta(out["meta"])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
