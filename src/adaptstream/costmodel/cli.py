"""Command line of the cost model: `place` (also registered top-level), `train`, `eval`, `featurize`.

Errors we raise on purpose (AdaptstreamError) are printed as one red line with exit code 1, no traceback.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from adaptstream.costmodel.optimizer import TARGETS
from adaptstream.errors import AdaptstreamError, CostModelError

MODELS = Path("runs/costmodel_models")
CORPUS = Path("data/costmodel_corpus")
app = typer.Typer(help="Learned cost model (Costream) and cost-based operator placement.", no_args_is_help=True)
console = Console()
F = TypeVar("F", bound=Callable[..., Any])


def clean_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AdaptstreamError as exc:
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True, highlight=False)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _read_json(path: Path, what: str) -> Any:
    if not path.exists():
        msg = f"{what} file {path} does not exist"
        raise CostModelError(msg)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        msg = f"{what} file {path} is not valid JSON: {exc.msg} (line {exc.lineno})"
        raise CostModelError(msg) from exc


def load_query(path: Path) -> Any:
    """A QueryGraph from JSON: {"query_id", "operators": [{"id","kind","features"}], "edges": [[a,b],...]}."""
    from adaptstream.costmodel.model import QueryGraph

    data = _read_json(path, "query")
    try:
        return QueryGraph.from_dict(data.get("query", data))
    except (KeyError, TypeError, AttributeError) as exc:
        msg = f"query file {path}: expected query_id, operators and edges ({exc})"
        raise CostModelError(msg) from exc


def load_hosts(path: Path) -> tuple[Any, ...]:
    """Hosts from JSON: a list of {"id","cpu","ram_mb","bandwidth_mbits","latency_ms","category"} or
    {"hosts":[..]}."""
    from adaptstream.costmodel.model import Host

    data = _read_json(path, "hosts")
    items = data.get("hosts") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        msg = f"hosts file {path}: expected a non-empty list of hosts"
        raise CostModelError(msg)
    try:
        return tuple(Host.from_dict(h) for h in items)
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"hosts file {path}: each host needs id, cpu, ram_mb, bandwidth_mbits, latency_ms ({exc})"
        raise CostModelError(msg) from exc


def _check_target(value: str) -> str:
    from adaptstream.costmodel.optimizer import parse_target

    try:
        return parse_target(value)[0]
    except CostModelError as exc:
        raise typer.BadParameter(str(exc)) from None


def _no_models(models: Path) -> str:
    """A fresh checkout has no trained models: say exactly what to run (both steps are minutes on 2 cores)."""
    return (
        f"no trained cost models in {models}. Train them first, e.g. a small corpus and quick models:\n"
        f"  adaptstream costmodel corpus --n 2000 --out {CORPUS}\n"
        f"  adaptstream costmodel train --corpus {CORPUS} --out {models} --epochs 5 --members 1\n"
        "(the defaults, 40,000 traces and 3 models per metric, are what docs/results/costmodel.md used)"
    )


@clean_errors
def place(
    query: Annotated[Path, typer.Argument(help="query JSON file (see examples/costmodel/query.json)")],
    hosts: Annotated[Path, typer.Argument(help="hosts JSON file (see examples/costmodel/hosts.json)")],
    target: Annotated[
        str,
        typer.Option(
            metavar="[" + "|".join(TARGETS) + "]", callback=_check_target, help="what the placement optimises"
        ),
    ] = "proc-latency",
    models: Annotated[Path, typer.Option(help="directory written by `costmodel train`")] = MODELS,
    candidates: Annotated[int, typer.Option(help="how many Fig.-5 placements to enumerate")] = 200,
    top: Annotated[int, typer.Option(help="how many candidates to show")] = 5,
    seed: Annotated[int, typer.Option(help="seed of the candidate enumeration")] = 0,
    flat: Annotated[bool, typer.Option(help="use the flat-vector baseline instead of the GNN ensembles")] = False,
) -> None:
    """Choose a placement for QUERY on HOSTS with the trained cost models (Costream Sec. V)."""
    from adaptstream.costmodel.ensemble import CostEnsembles
    from adaptstream.costmodel.flat import FlatVectorModel
    from adaptstream.costmodel.optimizer import PlacementOptimizer

    q, hs = load_query(query), load_hosts(hosts)
    if not (models / ("flat/flat.json" if flat else "manifest.json")).exists():
        raise CostModelError(_no_models(models))
    predictor = FlatVectorModel.load(models / "flat") if flat else CostEnsembles.load(models)
    decision = PlacementOptimizer(predictor, target, max_candidates=candidates, seed=seed).optimize(q, hs)
    console.print(
        f"[bold]chosen placement[/bold] (target {decision.target}; {decision.n_feasible} of "
        f"{decision.n_candidates} candidates predicted successful without backpressure)"
    )
    for op in q.topological_order():
        console.print(f"  {op.id:>10} ({op.kind}) -> {decision.chosen.placement[op.id]}")
    if decision.fallback:
        console.print(f"[yellow]warning:[/yellow] {decision.fallback}")
    table = Table(title=f"top {min(top, len(decision.ranked))} candidates (predicted)")
    table.add_column("#")
    table.add_column("placement")
    for col in ("Lp ms", "Le ms", "T tuples/s", "backpressure", "success"):
        table.add_column(col, justify="right")
    order = [op.id for op in q.topological_order()]
    for i, c in enumerate(decision.ranked[:top], start=1):
        p = c.predictions
        table.add_row(
            str(i),
            " ".join(f"{o}@{c.placement[o]}" for o in order),
            _num(p.get("proc_latency_ms")),
            _num(p.get("e2e_latency_ms")),
            _num(p.get("throughput")),
            _flag(p.get("backpressure")),
            _flag(p.get("success")),
        )
    console.print(table)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _flag(v: float | None) -> str:
    return "-" if v is None else ("yes" if v >= 0.5 else "no")


app.command("place")(place)


@app.command("train")
@clean_errors
def train(
    corpus: Annotated[Path, typer.Option(help="corpus directory (traces/part-*.jsonl)")] = CORPUS,
    out: Annotated[Path, typer.Option(help="where to write the models")] = MODELS,
    metrics: Annotated[str, typer.Option(help="comma-separated metrics")] = "T,Le,Lp,RO,S",
    members: Annotated[int, typer.Option(help="models per metric (ensemble)")] = 3,
    n_train: Annotated[int, typer.Option(help="cap on training traces (seeded subsample)")] = 16000,
    hidden: Annotated[int, typer.Option()] = 64,
    epochs: Annotated[int, typer.Option()] = 30,
    batch_size: Annotated[int, typer.Option()] = 512,
    max_seconds: Annotated[float, typer.Option(help="time cap per model")] = 40.0,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[int, typer.Option(help="torch CPU threads")] = 1,
    flat_baseline: Annotated[bool, typer.Option(help="also train the flat-vector baseline")] = True,
) -> None:
    """Train GNN ensembles (and the flat baseline) on a corpus, with per-epoch progress."""
    import torch

    from adaptstream.costmodel.corpus import load_corpus
    from adaptstream.costmodel.ensemble import train_ensembles
    from adaptstream.costmodel.flat import FlatVectorModel
    from adaptstream.costmodel.train import (
        REGRESSION,
        SHORT,
        GraphDataset,
        TrainConfig,
        canonical_metric,
        subsample,
    )

    torch.set_num_threads(max(1, threads))
    wanted = [canonical_metric(m) for m in metrics.split(",") if m.strip()]
    with console.status("loading and featurising the corpus"):
        splits = load_corpus(corpus)
        tr = subsample(GraphDataset.from_traces(splits["train"]), n_train, seed)
        va = subsample(GraphDataset.from_traces(splits["val"]), 4000, seed)
    console.print(f"{len(tr)} train / {len(va)} validation traces; {members} model(s) per metric")

    def progress(rec: dict[str, Any]) -> None:
        kind = "median q-error" if rec["metric"] in REGRESSION else "balanced log-loss"
        console.print(
            f"  {SHORT[rec['metric']]:>3} seed {rec['seed']} epoch {rec['epoch']:>3}: "
            f"loss {rec['train_loss']:.4f}  val {kind} {rec['val_score']:.3f}  ({rec['seconds']:.0f}s)"
        )

    cfg = TrainConfig(hidden=hidden, epochs=epochs, batch_size=batch_size, max_seconds=max_seconds, seed=seed)
    ens = train_ensembles(tr, va, cfg, wanted, members, on_epoch=progress)
    ens.save(out)
    if flat_baseline:
        FlatVectorModel.fit(tr, va, metrics=wanted, seed=seed).save(out / "flat")
    console.print(f"[green]saved[/green] models to {out}")


@app.command("eval")
@clean_errors
def evaluate(
    corpus: Annotated[Path, typer.Option()] = CORPUS,
    out: Annotated[
        Path | None, typer.Option(metavar="DIR", help="report directory [default: runs/costmodel-eval-<time>]")
    ] = None,
    update_docs: Annotated[
        bool, typer.Option("--update-docs", help="write the committed report in docs/results/")
    ] = False,
    models: Annotated[Path, typer.Option(help="where the trained models are written")] = MODELS,
    experiments: Annotated[str, typer.Option(help="comma-separated")] = "exp1,exp2,exp3,exp4,exp5,exp7,real",
    n_train: Annotated[int, typer.Option()] = 16000,
    n_aux_train: Annotated[int, typer.Option()] = 4000,
    main_seconds: Annotated[float, typer.Option()] = 45.0,
    aux_seconds: Annotated[float, typer.Option()] = 15.0,
    exp2_queries: Annotated[int, typer.Option()] = 20,
    seed: Annotated[int, typer.Option()] = 0,
    reuse_models: Annotated[bool, typer.Option(help="load the main GNN ensembles from --models")] = False,
) -> None:
    """Run Costream's experiments (Exp. 1, 2, 3/4, 5, 7, real traces) and write costmodel.md."""
    from adaptstream.bench.costmodel_eval import EvalConfig, run_evaluation
    from adaptstream.outdirs import report_dir

    out = report_dir("costmodel-eval", out, update_docs, report="costmodel.json")

    cfg = EvalConfig(
        corpus_dir=str(corpus),
        out_dir=str(out),
        models_dir=str(models),
        n_train=n_train,
        n_aux_train=n_aux_train,
        main_seconds=main_seconds,
        aux_seconds=aux_seconds,
        exp2_queries=exp2_queries,
        experiments=tuple(e.strip() for e in experiments.split(",") if e.strip()),
        seed=seed,
        reuse_models=reuse_models,
    )
    run_evaluation(cfg, log=console.print)
    console.print(f"[green]report[/green] {out / 'costmodel.md'}")


@app.command("eval-real")
@clean_errors
def evaluate_real(
    traces: Annotated[Path, typer.Option(help="REAL testbed traces (`costmodel testbed-corpus`)")] = Path(
        "data/costmodel_real_testbed.jsonl"
    ),
    sim_corpus: Annotated[
        Path, typer.Option(help="SIMULATED corpus to pre-train on (`costmodel corpus`); skipped if absent")
    ] = CORPUS,
    out: Annotated[
        Path | None, typer.Option(metavar="DIR", help="report directory [default: runs/costmodel-real-<time>]")
    ] = None,
    update_docs: Annotated[
        bool, typer.Option("--update-docs", help="write the committed report in docs/results/")
    ] = False,
    models: Annotated[Path, typer.Option(help="where the models for `--chooser` are written")] = Path(
        "runs/costmodel_real/models"
    ),
    sim_models: Annotated[
        Path, typer.Option(help="cache of the SIMULATED pre-trained models (reused when trained the same way)")
    ] = Path("runs/costmodel_real/sim_models"),
    folds: Annotated[int, typer.Option(help="grouped k-fold over the queries")] = 5,
    sim_train: Annotated[int, typer.Option(help="simulated traces to pre-train on")] = 6000,
    real_members: Annotated[int, typer.Option(help="seeds in the real-only GNN's ensemble per metric")] = 3,
    partitions: Annotated[
        int,
        typer.Option(
            help="partitions of the queries into folds scored at the largest share, each with its own training "
            "seeds; the targets judge the mean (each partition after the first adds about a third of the run time)"
        ),
    ] = 3,
    success_rule: Annotated[
        str,
        typer.Option(
            help="success label: `rerun` (a failed run that succeeded when rerun longer, `testbed-corpus "
            "--rerun-failed`, counts as success) or `run` (the recorded run only)"
        ),
    ] = "rerun",
    stratify_failed: Annotated[
        bool,
        typer.Option(
            "--stratify-failed",
            help="draw the early-stopping and model-choice slices from queries with and without a failed run "
            "apart (20 % of each); off: one plain draw",
        ),
    ] = False,
    class_prior: Annotated[
        str,
        typer.Option(
            help="class metrics (comma-separated, or `none`) whose GNNs (real-only, fine-tuned) add a logistic "
            "regression on the busiest host's load, fitted on the training traces, to their logit"
        ),
    ] = "success",
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Held-out accuracy on REAL testbed traces (zero-shot, fine-tuned, real-only, selected, flat), Exp. 2 speed-ups."""
    import sys
    import time

    from adaptstream.bench import costmodel_real_eval as ev
    from adaptstream.bench import costmodel_real_report as rep
    from adaptstream.bench.meta import finish_meta, start_meta
    from adaptstream.costmodel.train import CLASSIFICATION
    from adaptstream.outdirs import report_dir

    if folds < 2:
        raise CostModelError(f"--folds must be >= 2, got {folds}")
    if real_members < 1:
        raise CostModelError(f"--real-members must be >= 1, got {real_members}")
    if partitions < 1:
        raise CostModelError(f"--partitions must be >= 1, got {partitions}")
    if success_rule not in ev.SUCCESS_RULES:
        raise CostModelError(f"--success-rule must be one of {', '.join(ev.SUCCESS_RULES)}, got {success_rule!r}")
    priors = () if class_prior.strip() == "none" else tuple(x.strip() for x in class_prior.split(",") if x.strip())
    bad = [m for m in priors if m not in CLASSIFICATION]
    if bad:
        raise CostModelError(f"--class-prior takes {', '.join(CLASSIFICATION)} or none, got {', '.join(bad)}")
    out = report_dir("costmodel-real", out, update_docs, report="costmodel_real.json")
    cfg = ev.RealEvalConfig(
        str(traces),
        str(sim_corpus),
        folds=folds,
        sim_train=sim_train,
        seed=seed,
        sim_cache=str(sim_models),
        real_members=real_members,
        success_rule=success_rule,
        partitions=partitions,
        stratify_failed=stratify_failed,
        class_prior=priors,
    )
    meta = start_meta("costmodel", "eval-real")
    res = ev.run(cfg, models, log=console.print)
    meta = finish_meta(meta) | {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta["started"]))}
    command = "adaptstream " + " ".join(sys.argv[1:])
    console.print(f"[green]report[/green] {rep.write(res, out, command, meta)}")


@app.command("repeatability")
@clean_errors
def repeatability(
    traces: Annotated[
        Path, typer.Option(help="REAL traces holding corpus runs (tb-*) and their repeats (tbr-*, `--repeat`)")
    ] = Path("data/costmodel_real_testbed.jsonl"),
    out: Annotated[
        Path | None, typer.Option(metavar="DIR", help="report directory [default: runs/costmodel-repeat-<time>]")
    ] = None,
    update_docs: Annotated[
        bool, typer.Option("--update-docs", help="write the committed report in docs/results/")
    ] = False,
) -> None:
    """How much a REAL label varies between two runs of the same trace: the floor for any model's q-error."""
    import sys
    import time

    from adaptstream.bench import costmodel_repeat as rep
    from adaptstream.bench.meta import finish_meta, start_meta
    from adaptstream.outdirs import report_dir

    if not traces.exists():
        raise CostModelError(f"no traces file {traces}; record repeats with `costmodel testbed-corpus --repeat`")
    res = rep.load(traces)
    out = report_dir("costmodel-repeat", out, update_docs, report="costmodel_repeat.json")
    meta = finish_meta(start_meta("costmodel", "repeatability"))
    meta["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta["started"]))
    path = rep.write(res, out, "adaptstream " + " ".join(sys.argv[1:]), meta)
    for k, d in res["regression"].items():
        console.print(
            f"{k}: run-to-run Q50 {d.get('q50')} over {d['n']} pairs (model floor {d.get('model_floor_q50')})"
        )
    for k in ("S", "S (rerun)"):
        if (c := res["classes"].get(k)) is not None:
            console.print(f"{k}: balanced agreement {c.get('balanced_agreement', '-')} over {c['n']} pairs")
    console.print(f"[green]report[/green] {path}")


@app.command("featurize")
@clean_errors
def featurize(
    corpus: Annotated[Path, typer.Argument(help="directory with *.jsonl trace files")],
    out: Annotated[Path, typer.Argument(help="directory for the npz shards")],
    master: Annotated[str | None, typer.Option(help="Spark master URL (default local[2])")] = None,
) -> None:
    """Featurise a trace corpus into npz shards with a PySpark job (one shard per partition)."""
    from adaptstream.costmodel.features import featurize_corpus

    paths = featurize_corpus(corpus, out, master)
    console.print(f"wrote {len(paths)} shards to {out}")
