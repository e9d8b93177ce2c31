"""`adaptstream costmodel eval | eval-real | repeatability`: Costream's experiments and their reports, added to the
core's `costmodel` group by the benchmark harness."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adaptstream.costmodel.cli import CORPUS, MODELS, clean_errors, console
from adaptstream.errors import CostModelError

COMMANDS: list = []


def app_command(name: str):
    def add(fn):
        COMMANDS.append((name, fn))
        return fn

    return add


@app_command("eval")
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
    from adaptstream.outdirs import report_dir
    from adaptstream_bench.costmodel_eval import EvalConfig, run_evaluation

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


@app_command("eval-real")
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
    models_only: Annotated[
        bool,
        typer.Option(
            "--models-only",
            help="only train and write the models for `testbed-corpus --chooser` to --models (no cross-validation, "
            "no report): minutes instead of about 1.5 hours",
        ),
    ] = False,
) -> None:
    """Held-out accuracy on REAL testbed traces (zero-shot, fine-tuned, real-only, selected, flat), Exp. 2 speed-ups."""
    import sys
    import time

    from adaptstream.costmodel.train import CLASSIFICATION
    from adaptstream.outdirs import report_dir
    from adaptstream_bench import costmodel_real_eval as ev
    from adaptstream_bench import costmodel_real_report as rep
    from adaptstream_bench.meta import finish_meta, start_meta

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
    if models_only and (out is not None or update_docs):
        raise CostModelError("--models-only writes no report: leave out --out and --update-docs")
    if not traces.exists():
        raise CostModelError(f"no traces file {traces}; record real traces with `costmodel testbed-corpus`")
    if not models_only:
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
    if models_only:
        ev.train_choosers(cfg, models, log=console.print)
        return
    assert out is not None
    meta = start_meta("costmodel", "eval-real")
    res = ev.run(cfg, models, log=console.print)
    meta = finish_meta(meta) | {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta["started"]))}
    command = "adaptstream " + " ".join(sys.argv[1:])
    console.print(f"[green]report[/green] {rep.write(res, out, command, meta)}")


@app_command("repeatability")
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

    from adaptstream.outdirs import report_dir
    from adaptstream_bench import costmodel_repeat as rep
    from adaptstream_bench.meta import finish_meta, start_meta

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
