"""Command line of the cost model: `place` (also registered top-level), `train`, `featurize`, `import-dot`. Its
evaluations and data commands (`eval`, `eval-real`, `repeatability`, `corpus`, `testbed`, ...) are the benchmark
harness's (benchmarks/adaptstream_bench), added to this group when it is installed.

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
from rich.markup import escape
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
            console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True, highlight=False)
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


@app.command("import-dot")
@clean_errors
def import_dot(
    files: Annotated[list[Path], typer.Argument(help="Costream-style .query DOT files")],
    out: Annotated[Path, typer.Option(help="JSON-lines output")] = Path("data/imported_traces.jsonl"),
) -> None:
    """Convert DOT `.query` files (format reconstructed from the Costream paper) into trace JSON lines."""
    from adaptstream.costmodel.dot import read_dot
    from adaptstream.costmodel.model import write_traces

    n = write_traces(out, [read_dot(f) for f in files])
    console.print(f"wrote {n} traces to {out}")


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
