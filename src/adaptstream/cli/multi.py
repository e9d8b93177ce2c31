"""``adaptstream run`` with several ``--workload``: the CLI side of :mod:`adaptstream.app.multiquery`."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from adaptstream.errors import AdaptstreamError, ConfigError


def run_several(
    workloads: list[str],
    scheduler: str,
    start_spread: float,
    scheduler_params: str,
    run_dir: str | None,
    master: str,
    spark_factory,
    elastic: tuple[str | None, str] = (None, ""),
    **spec_fields,
) -> None:
    """Check everything, start one SparkSession, run the workloads concurrently, summarise each. With ``--elastic``
    the application runs under :func:`adaptstream.tune` (the scheduler and the elasticity policy in one loop over
    the application's executors; a pane-mode query keeps its ``--reduce-buckets``)."""
    from adaptstream.app.multiquery import MultiSpec, check_multi, spark_conf
    from adaptstream.app.runner import RunSpec, input_files
    from adaptstream.console import console
    from adaptstream.console import fresh_dir as _fresh_dir
    from adaptstream.policy import parse_params
    from adaptstream.spark.session import build_spark

    if spec_fields.get("input") and not spec_fields.get("drain"):
        spec_fields["drain"] = True
        console.print("--input implies --drain: the run stops once the input is exhausted", style="yellow")
    input_dir = spec_fields.pop("input")
    specs = tuple(RunSpec(workload=w, input_dir=input_dir, **spec_fields) for w in workloads)
    params = parse_params(scheduler_params, "--scheduler-params")
    ms = MultiSpec(
        specs, scheduler=scheduler, scheduler_params=params, start_spread=start_spread, seed=spec_fields.get("seed", 0)
    )
    run_dir = run_dir or os.path.join("runs", f"multi-{scheduler}-{time.strftime('%Y%m%d-%H%M%S')}")
    names = check_multi(ms, run_dir)
    tuned = _tuner_config(scheduler, scheduler_params, elastic, run_dir) if elastic[0] is not None else None
    if tuned is not None:
        tuned.check(master)  # everything tune() would refuse, before Spark starts
    if input_dir and not input_files(input_dir):
        msg = f"--input {input_dir!r} holds no data files (names starting with '.' or '_' are skipped): nothing to run"
        raise ConfigError(msg)
    log_file = os.path.join(_fresh_dir(run_dir), "spark.log")
    if spark_conf(scheduler):  # FAIR pools need the scheduler mode before the SparkContext starts
        with console.status(f"starting Spark ({master})..."):
            spark = build_spark(master=master, log_file=log_file, conf=spark_conf(scheduler))
    else:
        spark = spark_factory(master, log_file)
    total = len(input_files(input_dir)) if input_dir else round(spec_fields.get("duration", 60.0))
    if not input_dir and len(names) > 1:
        console.print(f"starting {len(names)} queries one after another; their generated input begins once all are up")
    tuner = _tune(spark, tuned) if tuned is not None else None
    try:
        result = _run_with_progress(spark, replace(ms, scheduler="default", scheduler_params=()) if tuner else ms,
                                    run_dir, names, total)  # fmt: skip
    except AdaptstreamError as exc:
        raise type(exc)(f"{exc} (Spark's log: {log_file})") from exc
    finally:
        status = tuner.status() if tuner is not None else None
        if tuner is not None:
            tuner.close()
    _summarise(result, names, scheduler, run_dir)
    if status is not None:
        _summarise_tuner(status, run_dir)


def _tuner_config(scheduler: str, scheduler_params: str, elastic: tuple[str | None, str], run_dir: str):
    """The application's tuner for this run: its scheduler and the elasticity policy, one decision loop."""
    from adaptstream.tuner import TunerConfig

    return TunerConfig(
        scheduler=scheduler,
        scheduler_params=scheduler_params,
        elastic=elastic[0],
        elastic_params=elastic[1],
        metrics_path=os.path.join(run_dir, "tuner"),
    )


def _tune(spark, c):
    import adaptstream

    return adaptstream.tune(
        spark,
        scheduler=c.scheduler,
        scheduler_params=c.scheduler_params,
        elastic=c.elastic,
        elastic_params=c.elastic_params,
        metrics_path=c.metrics_path,
    )


def _summarise_tuner(status: dict, run_dir: str) -> None:
    from adaptstream.app.submit import executor_seconds
    from adaptstream.console import console

    timeline = status["executors"]
    console.print(
        f"elasticity {status['elastic']}: executors {' -> '.join(str(n) for _, n in timeline) or '-'} "
        f"({len(status['elasticity_log'])} scale decisions, {executor_seconds(timeline, time.time()):.0f} "
        f"executor-seconds); the tuner's report: {os.path.join(run_dir, 'tuner', 'tuner.json')}"
    )


def _run_with_progress(spark, ms, run_dir: str, names: list[str], total: int):
    """:func:`run_multi` with one progress bar per query (datasets completed of ``total``)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from adaptstream.app.multiquery import run_multi
    from adaptstream.console import console

    with Progress(
        TextColumn("[bold]{task.fields[label]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as prog:
        tasks = {n: prog.add_task(n, total=total, label=n) for n in names}

        def show(name: str, snap: dict) -> None:
            prog.update(tasks[name], completed=min(snap["completed"], total))

        return run_multi(spark, ms, run_dir, show)


def _summarise(result, names: list[str], scheduler: str, run_dir: str) -> None:
    """Each query's timeline plot, the summary table, output latencies and where the run's files are."""
    from adaptstream.console import console
    from adaptstream.console import print_table as _print_table
    from adaptstream.metrics.output_latency import output_latency
    from adaptstream.metrics.plots import plot_timelines

    for name in names:
        r = result.results[name]
        plot_timelines(
            {r.spec.admission: r.metrics_dir},
            os.path.join(r.run_dir, "timeline.png"),
            f"{name} under {r.spec.admission}, scheduler {scheduler}",
            r.slide or None,
        )
    _print_table([result.results[n] for n in names])
    for name in names:
        lat = output_latency(result.results[name].run_dir)
        if lat["windows"]:
            console.print(
                f"{name}: output latency mean {lat['mean_s']:.2f} s, p99 {lat['p99_s']:.2f} s over "
                f"{lat['windows']} window results ({lat['clock']} clock, docs/klink.md)"
            )
    console.print(
        f"run directory: [bold]{run_dir}[/] (one folder per workload: {', '.join(names)}; multi.json, spark.log"
        + ("; start-gates: when each one's input began" if os.path.isdir(os.path.join(run_dir, "start-gates")) else "")
        + ")"
    )
