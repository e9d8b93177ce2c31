"""Costream's experiments on our corpus (Sec. VII): Exp. 1, 2, 3/4, 5, 7 and q-errors on real local traces.

Labels of the corpus come from the SIMULATED edge-cloud testbed (``simulator.py``), not from a real cluster;
the report says so wherever a figure depends on them. Exp. 2 re-runs the chosen placements in the same
simulator. Only the "real traces" section uses measured (origin="real") labels.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.corpus import load_corpus, load_traces
from adaptstream.costmodel.ensemble import CostEnsembles, train_ensembles
from adaptstream.costmodel.features import FeatureStats
from adaptstream.costmodel.flat import FlatVectorModel
from adaptstream.costmodel.qerror import balanced_indices, q_summary
from adaptstream.costmodel.train import (
    CLASSIFICATION,
    METRICS,
    REGRESSION,
    SHORT,
    GraphDataset,
    TrainConfig,
    fine_tune,
    subsample,
    train_model,
)
from adaptstream.errors import CostModelError
from adaptstream_bench.meta import finish_meta, start_meta

Log = Callable[[str], None]

# Costream Table IV (A): hardware "within the training range but unseen" for Exp. 3
INTERPOLATION_VALUES: dict[str, tuple[float, ...]] = {
    "ram_mb": (1500, 3000, 6000, 12000, 20000, 28000),
    "cpu": (75, 150, 250, 350, 450, 550, 650, 750),
    "bandwidth_mbits": (35, 75, 150, 250, 550, 1200, 1900, 4800, 8000),
    "latency_ms": (3, 7, 15, 30, 60, 120),
}
# Costream Table V: per dimension, (training values, evaluation values) for extrapolation (Exp. 4)
EXTRAPOLATION: dict[str, dict[str, tuple[Callable[[float], bool], Callable[[float], bool]]]] = {
    "stronger": {
        "ram_mb": (lambda v: v <= 16000, lambda v: v >= 24000),
        "cpu": (lambda v: v <= 600, lambda v: v >= 700),
        "bandwidth_mbits": (lambda v: v <= 3200, lambda v: v >= 6400),
        "latency_ms": (lambda v: v >= 5, lambda v: v <= 2),
    },
    "weaker": {
        "ram_mb": (lambda v: v >= 4000, lambda v: v <= 2000),
        "cpu": (lambda v: v >= 200, lambda v: v <= 100),
        "bandwidth_mbits": (lambda v: v >= 100, lambda v: v <= 50),
        "latency_ms": (lambda v: v <= 40, lambda v: v >= 80),
    },
}
QUERY_TYPES = ("linear", "2-way-join", "3-way-join")


@dataclass(frozen=True)
class EvalConfig:
    """Sizes of every experiment; defaults fit ~25 min on 2 shared CPU cores (see the report)."""

    corpus_dir: str = "data/costmodel_corpus"
    out_dir: str = "docs/results"
    models_dir: str = "runs/costmodel_models"
    real_traces: str = "tests/fixtures/costmodel/real_traces.jsonl"
    n_train: int = 16000
    n_aux_train: int = 4000
    members: int = 3
    hidden: int = 64
    batch_size: int = 512
    epochs: int = 30
    patience: int = 5
    main_seconds: float = 45.0
    aux_seconds: float = 15.0
    exp2_queries: int = 20
    exp2_candidates: int = 30
    exp2_oracle: bool = True
    exp3_traces: int = 200
    exp5_per_chain: int = 60
    exp5_fewshot: int = 200
    exp4_dims: tuple[str, ...] = ("cpu", "ram_mb", "bandwidth_mbits", "latency_ms")
    exp7b_metrics: tuple[str, ...] = ("throughput", "e2e_latency_ms", "proc_latency_ms")
    experiments: tuple[str, ...] = ("exp1", "exp2", "exp3", "exp4", "exp5", "exp7", "real")
    seed: int = 0
    threads: int = 1
    reuse_models: bool = False  # load the main GNN ensembles from models_dir instead of training them

    def train_config(self, metric: str = "proc_latency_ms", seconds: float | None = None) -> TrainConfig:
        return TrainConfig(
            metric=metric,
            hidden=self.hidden,
            epochs=self.epochs,
            batch_size=self.batch_size,
            patience=self.patience,
            seed=self.seed,
            max_seconds=seconds if seconds is not None else self.main_seconds,
        )


# ----------------------------------------------------------------------------------------------------
# corpus access


def score(preds: dict[str, np.ndarray], ds: GraphDataset, seed: int = 0) -> dict[str, dict[str, float]]:
    """Q50/Q95 for regression metrics (successful traces); accuracy on a class-balanced subset for the
    others."""
    out: dict[str, dict[str, Any]] = {}
    for m, p in preds.items():
        idx = ds.usable(m)
        if m in REGRESSION:
            out[m] = q_summary(ds.column(m)[idx], np.asarray(p)[idx])
            continue
        y = ds.column(m)[idx].astype(bool)
        if y.all() or (~y).all():
            out[m] = {"acc": float("nan"), "n": int(idx.size), "note": "one class only"}
            continue
        keep = idx[balanced_indices(y, seed)]
        yk = ds.column(m)[keep].astype(bool)
        out[m] = {"acc": float((np.asarray(p)[keep].astype(bool) == yk).mean()), "n": int(keep.size)}
    return out


def _single_preds(model: Any, ds: GraphDataset) -> dict[str, np.ndarray]:
    p = model.predict(ds.graphs)
    return {model.metric: p if model.is_regression else p >= 0.5}


def _group_scores(preds, ds: GraphDataset, key: Callable[[dict], Any], seed: int) -> dict[str, Any]:
    groups: dict[Any, list[int]] = {}
    for i, m in enumerate(ds.meta):
        groups.setdefault(key(m), []).append(i)
    return {
        str(g): score({k: np.asarray(v)[idx] for k, v in preds.items()}, ds.subset(idx), seed)
        for g, idx in sorted(groups.items(), key=lambda kv: str(kv[0]))
    }


# ----------------------------------------------------------------------------------------------------
# experiments


@dataclass
class Context:
    cfg: EvalConfig
    log: Log
    train: GraphDataset | None = None
    val: GraphDataset | None = None
    test: GraphDataset | None = None
    train_traces: list[Any] = field(default_factory=list)
    test_traces: list[Any] = field(default_factory=list)
    gnn: CostEnsembles | None = None
    flat: FlatVectorModel | None = None
    results: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=lambda: start_meta("costmodel", "eval"))


def _progress(log: Log) -> Callable[[dict[str, Any]], None]:
    def cb(rec: dict[str, Any]) -> None:
        if rec["epoch"] == 1 or rec["epoch"] % 5 == 0:
            log(
                f"    {SHORT.get(rec['metric'], rec['metric'])} seed {rec['seed']} epoch {rec['epoch']}: "
                f"loss {rec['train_loss']:.4f} val {rec['val_score']:.3f} ({rec['seconds']:.0f}s)"
            )

    return cb


def exp1(ctx: Context) -> None:
    cfg = ctx.cfg
    assert ctx.train is not None and ctx.val is not None and ctx.test is not None
    models = Path(cfg.models_dir)
    if cfg.reuse_models and (models / "manifest.json").exists():
        ctx.gnn = CostEnsembles.load(models)
        ctx.log(f"[exp1] loaded the GNN ensembles from {models} (trained on {ctx.gnn.info.get('n_train')})")
        if ctx.gnn.info.get("n_train") != len(ctx.train):
            msg = f"{models} was trained on {ctx.gnn.info.get('n_train')} traces, not {len(ctx.train)}"
            raise CostModelError(msg)
    else:
        ctx.log(f"[exp1] training {cfg.members} GNNs per metric on {len(ctx.train)} traces")
        ctx.gnn = train_ensembles(
            ctx.train, ctx.val, cfg.train_config(), METRICS, cfg.members, on_epoch=_progress(ctx.log)
        )
        ctx.gnn.save(models)
    ctx.log("[exp1] training the flat-vector baseline (LightGBM)")
    ctx.flat = FlatVectorModel.fit(ctx.train, ctx.val, seed=cfg.seed, threads=max(1, cfg.threads))
    ctx.flat.save(Path(cfg.models_dir) / "flat")
    gp, fp = ctx.gnn.predict_graphs(ctx.test.graphs), ctx.flat.predict_graphs(ctx.test.graphs)
    ctx.results["exp1"] = {
        "gnn": score(gp, ctx.test, cfg.seed),
        "flat": score(fp, ctx.test, cfg.seed),
        "by_query_type": {
            "gnn": _group_scores(gp, ctx.test, lambda m: m["query_type"], cfg.seed),
            "flat": _group_scores(fp, ctx.test, lambda m: m["query_type"], cfg.seed),
        },
        "by_cpu": {
            "gnn": _group_scores(gp, ctx.test, lambda m: _bin(m["cpu"], (100, 200, 300, 400, 600)), cfg.seed),
        },
        "n_train": len(ctx.train),
        "n_val": len(ctx.val),
        "n_test": len(ctx.test),
        "train_seconds": ctx.gnn.info.get("seconds"),
        "gnn_reused_from": str(models) if cfg.reuse_models else None,
        "epochs_run": {m: [len(x.history) for x in e.members] for m, e in ctx.gnn.ensembles.items()},
    }


def _bin(v: float, edges: Sequence[float]) -> str:
    lo = 0.0
    for e in edges:
        if v < e:
            return f"[{lo:g},{e:g})"
        lo = e
    return f">={lo:g}"


def _simulate(trace: Any, seed: int):
    from adaptstream_bench.costmodel.simulator import simulate_labels

    return simulate_labels(trace, seed=seed)


def exp2(ctx: Context) -> None:
    """Placement speed-up over the initial heuristic placement, Lp re-measured in the simulated testbed."""
    from adaptstream.costmodel.generate import HardwareGenerator, QueryGenerator, initial_placement
    from adaptstream.costmodel.model import Trace
    from adaptstream.costmodel.optimizer import PlacementOptimizer

    cfg = ctx.cfg
    assert ctx.gnn is not None and ctx.flat is not None
    out: dict[str, Any] = {}
    for qi, qtype in enumerate(QUERY_TYPES):
        rng = np.random.default_rng(10_000 + 1000 * qi + cfg.seed)
        rows = []
        for n in range(cfg.exp2_queries):
            query = QueryGenerator(shape=qtype).sample(rng, query_id=f"exp2-{qtype}-{n}")
            hosts = HardwareGenerator().sample(rng)
            sim_seed = int(rng.integers(1 << 30))
            init = initial_placement(query, hosts)

            def lp(p, query=query, hosts=hosts, sim_seed=sim_seed, n=n):
                lab = _simulate(Trace(f"exp2-{n}", query, hosts, p), sim_seed)
                return lab.proc_latency_ms if lab.success else None, lab

            base_lp, base_lab = lp(init)
            row: dict[str, Any] = {"initial_lp": base_lp, "initial_backpressure": base_lab.backpressure}
            for name, pred in (("gnn", ctx.gnn), ("flat", ctx.flat)):
                opt = PlacementOptimizer(pred, "proc-latency", max_candidates=cfg.exp2_candidates, seed=n)
                d = opt.optimize(query, hosts)
                got, lab = lp(d.chosen.placement)
                row[f"{name}_lp"] = got
                row[f"{name}_pred_lp"] = d.chosen.predictions["proc_latency_ms"]
                row[f"{name}_fallback"] = d.fallback
                row[f"{name}_backpressure"] = lab.backpressure
                row[f"{name}_same_as_initial"] = d.chosen.placement == init
                row["n_candidates"] = d.n_candidates
                if name == "gnn" and cfg.exp2_oracle:
                    # context: the best Lp any candidate really reaches (simulated); same candidate set
                    sims = [lp(c.placement)[0] for c in d.ranked]
                    row["oracle_lp"] = min((x for x in sims if x), default=None)
            rows.append(row)
        out[qtype] = {"rows": rows, **_speedups(rows)}
        ctx.log(
            f"[exp2] {qtype}: median speed-up GNN {out[qtype]['gnn_median']:.2f}x, "
            f"flat {out[qtype]['flat_median']:.2f}x over {out[qtype]['n_valid']} queries"
        )
    ctx.results["exp2"] = out


def _speedups(rows: list[dict[str, Any]]) -> dict[str, Any]:
    res: dict[str, Any] = {}
    valid = [r for r in rows if r["initial_lp"]]
    res["n_valid"] = len(valid)
    res["n_initial_failed"] = len(rows) - len(valid)
    for name in ("gnn", "flat", "oracle"):
        if not all(f"{name}_lp" in r for r in valid):
            continue
        sp = [r["initial_lp"] / r[f"{name}_lp"] for r in valid if r[f"{name}_lp"]]
        res[f"{name}_chosen_failed"] = sum(1 for r in valid if not r[f"{name}_lp"])
        res[f"{name}_speedups"] = sp
        res[f"{name}_median"] = float(np.median(sp)) if sp else float("nan")
        res[f"{name}_backpressure"] = sum(bool(r.get(f"{name}_backpressure")) for r in valid)
    return res


def _label_traces(traces: list[Any], seed0: int) -> list[Any]:
    return [t.with_labels(_simulate(t, seed0 + i)) for i, t in enumerate(traces)]


def exp3(ctx: Context) -> None:
    """Unseen hardware values inside the training range (Costream Table IV A), simulated labels."""
    from adaptstream.costmodel.generate import HardwareGenerator, sample_trace

    cfg = ctx.cfg
    assert ctx.gnn is not None and ctx.flat is not None
    ranges: dict[str, dict[str, tuple[float, ...]]] = {"small": {}, "medium": {}, "large": {}}
    for dim, vals in INTERPOLATION_VALUES.items():
        v = sorted(vals, reverse=(dim == "latency_ms"))  # weakest first (a high latency is weak)
        k = len(v)
        # three overlapping bins, as the generator's categories overlap (Costream Sec. V rule 2)
        ranges["small"][dim] = tuple(v[: math.ceil(k / 2)])
        ranges["medium"][dim] = tuple(v[k // 4 : k - k // 4])
        ranges["large"][dim] = tuple(v[k // 2 :])
    hw = HardwareGenerator(ranges=ranges)
    rng = np.random.default_rng(20_000 + cfg.seed)
    traces = [sample_trace(rng, f"exp3-{i}", hw_gen=hw) for i in range(cfg.exp3_traces)]
    traces = _label_traces(traces, 20_000)
    ds = GraphDataset.from_traces(traces)
    ctx.results["exp3"] = {
        "n": len(ds),
        "ranges": {c: {d: list(v) for d, v in r.items()} for c, r in ranges.items()},
        "gnn": score(ctx.gnn.predict_graphs(ds.graphs), ds, cfg.seed),
        "flat": score(ctx.flat.predict_graphs(ds.graphs), ds, cfg.seed),
    }


def _host_values(meta: dict[str, Any], dim: str) -> list[float]:
    return meta["host_values"][dim]


def exp4(ctx: Context) -> None:
    """Extrapolation: retrain on a restricted hardware range, test on traces using hosts outside it (Table
    V)."""
    cfg = ctx.cfg
    assert ctx.train is not None and ctx.val is not None and ctx.test is not None
    out: dict[str, Any] = {}
    metric = "proc_latency_ms"
    for direction, dims in EXTRAPOLATION.items():
        for dim in cfg.exp4_dims:
            in_train, in_eval = dims[dim]

            def only_train(ds: GraphDataset, f=in_train, dim=dim) -> GraphDataset:
                return ds.subset([i for i, m in enumerate(ds.meta) if all(f(v) for v in _host_values(m, dim))])

            tr = subsample(only_train(ctx.train), cfg.n_aux_train, cfg.seed)
            va = subsample(only_train(ctx.val), 2000, cfg.seed)
            te = ctx.test.subset(
                [i for i, m in enumerate(ctx.test.meta) if any(in_eval(v) for v in _host_values(m, dim))]
            )
            key = f"{direction}/{dim}"
            if len(tr) < 200 or len(te) < 20:
                out[key] = {"skipped": f"too few traces (train {len(tr)}, test {len(te)})"}
                continue
            ctx.log(f"[exp4] {key}: train {len(tr)}, test {len(te)}")
            model = train_model(tr, va, cfg.train_config(metric, cfg.aux_seconds))
            flat = FlatVectorModel.fit(tr, va, metrics=[metric], seed=cfg.seed, threads=max(1, cfg.threads))
            out[key] = {
                "n_train": len(tr),
                "n_test": len(te),
                "gnn": score(_single_preds(model, te), te, cfg.seed),
                "flat": score(flat.predict_graphs(te.graphs), te, cfg.seed),
            }
    ctx.results["exp4"] = out


def exp5(ctx: Context) -> None:
    """Longer filter chains than seen in training (Costream Exp. 5a), then few-shot fine-tuning (Exp. 5b)."""
    from adaptstream.costmodel.generate import QueryGenerator, sample_trace

    cfg = ctx.cfg
    assert ctx.train is not None and ctx.val is not None
    metric = "throughput"

    def short(ds: GraphDataset) -> GraphDataset:
        return ds.subset([i for i, m in enumerate(ds.meta) if m["max_filter_chain"] <= 1])

    tr, va = subsample(short(ctx.train), cfg.n_aux_train, cfg.seed), subsample(short(ctx.val), 2000, cfg.seed)
    rng = np.random.default_rng(30_000 + cfg.seed)
    qgen = QueryGenerator(shape="linear")
    wanted = {k: cfg.exp5_per_chain for k in (2, 3, 4)}
    tests: dict[int, list[Any]] = {k: [] for k in wanted}
    fewshot: list[Any] = []
    attempts = 0
    while (any(len(tests[k]) < n for k, n in wanted.items()) or len(fewshot) < cfg.exp5_fewshot) and attempts < 50_000:
        attempts += 1
        t = sample_trace(rng, f"exp5-{attempts}", query_gen=qgen)
        k = t.query.n_filters
        if k not in wanted:
            continue
        if len(tests[k]) < wanted[k]:
            tests[k].append(t)
        elif len(fewshot) < cfg.exp5_fewshot:
            fewshot.append(t)
    ctx.log(
        f"[exp5] train {len(tr)} traces without filter chains; simulating {sum(map(len, tests.values()))} "
        f"test and {len(fewshot)} few-shot traces"
    )
    test_ds = {k: GraphDataset.from_traces(_label_traces(v, 31_000 + 1000 * k)) for k, v in tests.items()}
    few_ds = GraphDataset.from_traces(_label_traces(fewshot, 40_000))
    base = train_model(tr, va, cfg.train_config(metric, cfg.aux_seconds))
    tuned = fine_tune(base, few_ds, epochs=15, seed=cfg.seed)
    flat = FlatVectorModel.fit(tr, va, metrics=[metric], seed=cfg.seed, threads=max(1, cfg.threads))
    out: dict[str, Any] = {"n_train": len(tr), "n_fewshot": len(few_ds), "metric": metric}
    for k, ds in test_ds.items():
        out[f"{k}-filter-chain"] = {
            "n": len(ds),
            "gnn": score(_single_preds(base, ds), ds, cfg.seed),
            "gnn_finetuned": score(_single_preds(tuned, ds), ds, cfg.seed),
            "flat": score(flat.predict_graphs(ds.graphs), ds, cfg.seed),
        }
    ctx.results["exp5"] = out


def exp7(ctx: Context) -> None:
    """Ablations: hardware featurisation (7a, Le) and traditional vs ordered message passing (7b)."""
    cfg = ctx.cfg
    assert ctx.train is not None and ctx.val is not None and ctx.test is not None
    tr, va = subsample(ctx.train, cfg.n_aux_train, cfg.seed), subsample(ctx.val, 2000, cfg.seed)
    te = ctx.test
    out: dict[str, Any] = {"n_train": len(tr), "7a": {}, "7b": {}}
    cache: dict[tuple[str, str, str], dict[str, Any]] = {}

    def run(metric: str, mp: str, hw: str) -> dict[str, Any]:
        key = (metric, mp, hw)
        if key not in cache:
            ctx.log(f"[exp7] {SHORT[metric]} message passing={mp} hardware={hw}")
            tc = replace(cfg.train_config(metric, cfg.aux_seconds), message_passing=mp, hardware=hw)
            cache[key] = score(_single_preds(train_model(tr, va, tc), te), te, cfg.seed)[metric]
        return cache[key]

    for hw in ("no_hosts", "no_hw_features", "full"):
        out["7a"][hw] = run("e2e_latency_ms", "ordered", hw)
    for metric in cfg.exp7b_metrics:
        out["7b"][metric] = {mp: run(metric, mp, "full") for mp in ("traditional", "ordered")}
    ctx.results["exp7"] = out


def real(ctx: Context) -> None:
    """q-errors of the simulated-trained models on traces MEASURED on this machine (origin="real")."""
    cfg = ctx.cfg
    path = Path(cfg.real_traces)
    if not path.exists():
        ctx.results["real"] = {"skipped": f"{path} not found"}
        return
    assert ctx.gnn is not None and ctx.flat is not None
    ds = GraphDataset.from_traces(load_traces([path]))
    origins = sorted({str(m.get("origin")) for m in ds.meta})
    ctx.results["real"] = {
        "n": len(ds),
        "origins": origins,
        "gnn": score(ctx.gnn.predict_graphs(ds.graphs), ds, cfg.seed),
        "flat": score(ctx.flat.predict_graphs(ds.graphs), ds, cfg.seed),
    }


EXPERIMENTS: dict[str, Callable[[Context], None]] = {
    "exp1": exp1,
    "exp2": exp2,
    "exp3": exp3,
    "exp4": exp4,
    "exp5": exp5,
    "exp7": exp7,
    "real": real,
}


def machine_info() -> dict[str, Any]:
    import torch

    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "processor": platform.processor() or platform.machine(),
    }


def run_evaluation(cfg: EvalConfig, log: Log = print) -> dict[str, Any]:
    """Run the selected experiments, write docs/results/costmodel.{md,json} + PNGs, return the results."""
    import torch

    torch.set_num_threads(max(1, cfg.threads))
    unknown = [e for e in cfg.experiments if e not in EXPERIMENTS]
    if unknown:
        msg = f"unknown experiments {unknown}; valid choices: {', '.join(EXPERIMENTS)}"
        raise CostModelError(msg)
    ctx = Context(cfg, log)
    t0 = time.perf_counter()
    log(f"loading the corpus from {cfg.corpus_dir}")
    splits = load_corpus(cfg.corpus_dir)
    train_traces, val_traces, test_traces = splits["train"], splits["val"], splits["test"]
    del splits
    full_train = GraphDataset.from_traces(train_traces)
    ctx.train = subsample(full_train, cfg.n_train, cfg.seed)
    ctx.val = subsample(GraphDataset.from_traces(val_traces), 4000, cfg.seed)
    ctx.test = GraphDataset.from_traces(test_traces)
    ctx.results["corpus"] = {
        "train_available": len(full_train),
        "val_available": len(val_traces),
        "test": len(test_traces),
        "train_used": len(ctx.train),
        "val_used": len(ctx.val),
        "origins": sorted({str(m.get("origin")) for m in ctx.test.meta}),
        "manifest": _manifest_note(cfg.corpus_dir, len(full_train) + len(val_traces) + len(test_traces)),
        "success_rate_test": float(np.nanmean(ctx.test.column("success"))),
        "backpressure_rate_test": float(np.nanmean(ctx.test.column("backpressure"))),
    }
    del train_traces, val_traces, test_traces
    ctx.timings["load"] = time.perf_counter() - t0
    needs_main = {"exp2", "exp3", "real"}
    todo = list(cfg.experiments)
    if needs_main & set(todo) and "exp1" not in todo:
        todo.insert(0, "exp1")
    from adaptstream_bench.costmodel_report import write_report

    for name in todo:
        t1 = time.perf_counter()
        try:
            EXPERIMENTS[name](ctx)
        except Exception as exc:  # keep the other experiments' figures; the report names the failure
            if name == "exp1":
                raise
            ctx.results.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
            log(f"[{name}] FAILED: {exc}")
        ctx.timings[name] = time.perf_counter() - t1
        ctx.timings["total"] = time.perf_counter() - t0
        log(f"[{name}] done in {ctx.timings[name]:.0f}s")
        _write_json(ctx)
        write_report(ctx.results, ctx.timings, asdict(cfg), machine_info(), Path(cfg.out_dir))
    return ctx.results


def _manifest_note(corpus_dir: str, n_loaded: int) -> str:
    path = Path(corpus_dir) / "manifest.json"
    if not path.exists():
        return f"no manifest.json: the corpus build was still running; used the {n_loaded} traces complete then"
    try:
        planned = json.loads(path.read_text()).get("n_traces")
    except (OSError, ValueError):
        planned = None
    return f"manifest plans {planned} traces; {n_loaded} loaded"


def _write_json(ctx: Context) -> None:
    out = Path(ctx.cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from adaptstream_bench.costmodel_report import targets

    payload = {
        "meta": finish_meta(ctx.meta),
        "targets": targets(ctx.results),
        "results": ctx.results,
        "timings": ctx.timings,
        "config": asdict(ctx.cfg),
        "machine": machine_info(),
    }
    (out / "costmodel.json").write_text(json.dumps(payload, indent=1, default=_json_default))


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)


__all__ = ["CLASSIFICATION", "EXPERIMENTS", "EvalConfig", "FeatureStats", "run_evaluation", "score"]
