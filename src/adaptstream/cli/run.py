"""``adaptstream run`` (built-in workloads, several at once, or the user's own --sql) and its progress display."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from adaptstream.cli.options import (
    AdmissionOpt,
    AdmissionParamsOpt,
    BlocksOpt,
    BucketsOpt,
    DeviceOpt,
    DrainOpt,
    DurationOpt,
    ElasticOpt,
    ElasticParamsOpt,
    FormatOpt,
    HeaderOpt,
    InputOpt,
    MasterOpt,
    PartitionerOpt,
    PartitionerParamsOpt,
    RateOpt,
    ReduceOpt,
    RunDirOpt,
    SchedulerOpt,
    SchedulerParamsOpt,
    SchemaOpt,
    SeedOpt,
    SpreadOpt,
    SqlOpt,
    TrafficOpt,
    TriggerOpt,
    WorkloadsOpt,
)  # fmt: skip
from adaptstream.cli.root import app
from adaptstream.console import console
from adaptstream.console import fresh_dir as _fresh_dir
from adaptstream.console import print_table as _print_table
from adaptstream.errors import AdaptstreamError, ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from adaptstream.app.runner import RunSpec


def _spark(master: str, log_file: str | None, shuffle_partitions: int = 2):
    from adaptstream.spark.session import build_spark

    with console.status(f"starting Spark ({master})..."):
        return build_spark(master=master, shuffle_partitions=shuffle_partitions, log_file=log_file)


def _progress_info(snap: dict) -> str:
    if snap["warming_up"]:
        return f"warm-up ({snap['warmup']:g} s, not counted)"
    lat = snap["last_max_latency"]
    return f"batches {snap['batches']}" + (f", last MaxLat {lat:.2f}s" if lat is not None else "")


def _run_with_progress(spark, spec, run_dir: str, log_file: str):
    from adaptstream.app.runner import input_files, is_redis_url, run_workload

    if is_redis_url(spec.input_dir):
        total = None  # a stream: how many datasets it holds is known once they are discovered
    else:
        total = len(input_files(spec.input_dir)) if spec.input_dir else round(spec.duration)
    with Progress(
        TextColumn("[bold]{task.fields[label]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=console,
    ) as prog:
        task = prog.add_task("run", total=total, label=spec.label(), info="")

        def show(snap: dict) -> None:
            done = snap["completed"] if total is None else min(snap["completed"], total)
            prog.update(task, completed=done, info=_progress_info(snap))

        try:
            return run_workload(spark, spec, run_dir, on_progress=show, fresh=False)
        except AdaptstreamError as exc:
            raise type(exc)(f"{exc} (Spark's log: {log_file})") from exc


@app.command()
def run(
    ctx: typer.Context,
    workload: WorkloadsOpt = None,
    admission: AdmissionOpt = "lmstream",
    traffic: TrafficOpt = "constant",
    rate: RateOpt = 1000,
    duration: DurationOpt = 60.0,
    trigger: TriggerOpt = 10.0,
    seed: SeedOpt = 0,
    input: InputOpt = None,
    drain: DrainOpt = False,
    run_dir: RunDirOpt = None,
    master: MasterOpt = "local[2]",
    partitioner: PartitionerOpt = "time",
    num_blocks: BlocksOpt = 2,
    admission_params: AdmissionParamsOpt = "",
    partitioner_params: PartitionerParamsOpt = "",
    scheduler: SchedulerOpt = "default",
    scheduler_params: SchedulerParamsOpt = "",
    start_spread: SpreadOpt = 0.0,
    reduce: ReduceOpt = None,
    reduce_buckets: BucketsOpt = 4,
    device: DeviceOpt = "cpu",
    elastic: ElasticOpt = None,
    elastic_params: ElasticParamsOpt = "",
    sql: SqlOpt = None,
    schema: SchemaOpt = None,
    file_format: FormatOpt = "csv",
    header: HeaderOpt = False,
) -> None:
    """Run one workload (or several, concurrently, under a multi-query scheduler), or your own --sql queries over
    --input, and summarise it."""
    _check_device(device, reduce)
    if sql:
        _sql_route(ctx, sql, workload, input, schema, file_format, header, scheduler, scheduler_params, admission,
                   admission_params, run_dir, master)  # fmt: skip
        return
    workloads = workload or ["LR1S"]
    shared: dict[str, Any] = {
        "admission": admission, "traffic": traffic, "rate": rate, "duration": duration, "trigger": trigger,
        "seed": seed, "input": input, "drain": drain, "partitioner": partitioner, "num_blocks": num_blocks,
        "admission_params": admission_params, "partitioner_params": partitioner_params, "reduce": reduce,
        "reduce_buckets": reduce_buckets,
    }  # fmt: skip
    if len(workloads) > 1:
        from adaptstream.cli.multi import run_several

        run_several(workloads, scheduler, start_spread, scheduler_params, run_dir, master, spark_factory=_spark,
                    elastic=(elastic, elastic_params), **shared)  # fmt: skip
        return
    if scheduler != "default":
        console.print(f"one workload: --scheduler {scheduler} has nothing to arbitrate (no-op)", style="yellow")
    _run_one(workloads[0], shared, (elastic, elastic_params), run_dir, master)


def _run_one(
    name: str, shared: dict[str, Any], elastic: tuple[str | None, str], run_dir: str | None, master: str
) -> None:
    """One workload: --input means a finite run, so it drains."""
    from adaptstream.app.runner import RunSpec

    if shared["input"] and not shared["drain"]:
        shared["drain"] = True
        console.print("--input implies --drain: the run stops once the input is exhausted", style="yellow")
    shared["input_dir"] = shared.pop("input")
    spec = RunSpec(workload=name, elastic=elastic[0], elastic_params=elastic[1], **shared)
    _run_single(spec, run_dir, master)


def _check_device(device: str, reduce: str | None) -> None:
    if device != "cpu":
        if reduce is None:
            msg = f"--device {device} needs --reduce: it places the pane mode's operators"
            raise ConfigError(msg)
        console.print("--device auto: every pane operator runs on the CPU (no GPU backend inside Spark tasks yet)")


def _sql_route(ctx: typer.Context, sql: list[str], workload: list[str] | None, input: str | None,
               schema: str | None, file_format: str, header: bool, scheduler: str, scheduler_params: str,
               admission: str, admission_params: str, run_dir: str | None, master: str) -> None:  # fmt: skip
    """``run --sql``: the user's own queries over --input."""
    if workload:
        msg = "give either --workload (built-in queries) or --sql (your own), not both"
        raise ConfigError(msg)
    if not input:
        msg = "--sql needs --input DIR: the directory of files the query reads as the table 'input'"
        raise ConfigError(msg)
    from adaptstream.app.sqlrun import SqlSpec

    spec = SqlSpec(
        tuple(sql),
        schema,
        input,
        file_format.lower(),
        header,
        scheduler,
        scheduler_params,
        admission if _given(ctx, "admission") else None,  # --sql: Spark's default (asap) unless asked
        admission_params,
    )
    _run_sql(spec, run_dir, master)


def _run_single(spec: RunSpec, run_dir: str | None, master: str) -> None:
    """One built-in workload: check, start Spark, run with a progress bar, plot, print the summary."""
    from adaptstream.app.runner import check_spec, input_files, is_redis_url
    from adaptstream.metrics.plots import plot_timelines

    if spec.elastic is not None:
        from adaptstream.spark.executors import check_elastic_master

        check_elastic_master(master)
    run_dir = run_dir or os.path.join("runs", f"{spec.label()}-{time.strftime('%Y%m%d-%H%M%S')}")
    check_spec(spec, run_dir)
    if spec.input_dir and not is_redis_url(spec.input_dir) and not input_files(spec.input_dir):
        msg = (
            f"--input {spec.input_dir!r} holds no data files (names starting with '.' or '_' are skipped): "
            "nothing to run"
        )
        raise ConfigError(msg)
    log_file = os.path.join(_fresh_dir(run_dir), "spark.log")
    spark = _spark(master, log_file)
    result = _run_with_progress(spark, spec, run_dir, log_file)
    plot_timelines(
        {spec.admission: result.metrics_dir},
        os.path.join(run_dir, "timeline.png"),
        f"{spec.workload} under {spec.admission}",
        result.slide or None,
    )
    _print_table([result])
    console.print(f"run directory: [bold]{run_dir}[/] (metrics/, results/, timeline.png, summary.json, spark.log)")


def _given(ctx: typer.Context, name: str) -> bool:
    """True when the option was on the command line (not its default). By the enum's name: typer vendors its own
    click, so ``click`` itself need not be installed."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _run_sql(spec, run_dir: str | None, master: str) -> None:
    from rich.table import Table

    from adaptstream.app.sqlrun import run_sql

    spec.check()
    run_dir = run_dir or os.path.join("runs", f"sql-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = os.path.join(_fresh_dir(run_dir), "spark.log")
    spark = _spark(master, log_file)
    with console.status(f"running {len(spec.sqls)} quer{'y' if len(spec.sqls) == 1 else 'ies'} over {spec.input_dir}"):
        report = run_sql(spark, spec, run_dir)
    table = Table(title=f"--sql under scheduler {spec.scheduler}")
    for col in ("query", "mode", "batches", "input rows", "output rows", "decisions", "state"):
        table.add_column(col, justify="left" if col in ("query", "mode", "state") else "right")
    for name, q in report["queries"].items():
        row = (name, q["mode"], q.get("batches", 0), q.get("rows", 0), q["output_rows"], q.get("decisions", 0))
        table.add_row(*map(str, row), q.get("state", "-"))
    console.print(table)
    console.print(f"outputs: {run_dir}/q*/output (Parquet); {run_dir}/sql.json, {run_dir}/tuner.json", style="dim")
