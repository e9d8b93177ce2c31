"""The other user commands: ``produce`` (a workload into Redis), ``demo``, ``submit`` (an unmodified PySpark
application under the tuner) and ``options`` (every source option, from the code)."""

from __future__ import annotations

import os
import time
from typing import Annotated

import typer

from adaptstream.admission import ADMISSION
from adaptstream.cli import run as run_command  # its _spark: the one place the CLI starts Spark
from adaptstream.cli.options import MasterOpt, RateOpt, TrafficOpt, WorkloadOpt, choice
from adaptstream.cli.root import app
from adaptstream.console import console
from adaptstream.console import fresh_dir as _fresh_dir
from adaptstream.console import print_table as _print_table
from adaptstream.elasticity import ELASTICITY
from adaptstream.errors import ConfigError
from adaptstream.scheduling import SCHEDULERS
from adaptstream.workloads import WORKLOADS


@app.command()
def produce(
    to: Annotated[
        str,
        typer.Option(
            metavar="URL", help="redis[s]://[USER[:PASSWORD]@]HOST:PORT[/DB]/STREAM[,STREAM2] (rows alternate)"
        ),
    ],
    workload: WorkloadOpt = "LR1S",
    rate: RateOpt = 1000,
    duration: Annotated[int, typer.Option(min=1, metavar="SECONDS", help="seconds of input to write")] = 60,
    traffic: TrafficOpt = "constant",
    seed: Annotated[int, typer.Option(min=0, metavar="N", help="seed of the generated input")] = 0,
    entry_format: Annotated[
        str,
        typer.Option(
            metavar="[row|fields]",
            help="row: one field 'row' holding a CSV line in the workload's column order; fields: one field per column",
        ),
    ] = "row",
    pace: Annotated[
        bool,
        typer.Option(help="spread each second's rows over that second (--no-pace: as fast as the server takes them)"),
    ] = True,
) -> None:
    """Write a generator workload into a Redis stream at a rate, with the generator's traffic shapes."""
    from adaptstream.connectors.redis import ENTRY_FORMATS, parse_url
    from adaptstream.connectors.redis_produce import produce as produce_entries
    from adaptstream.connectors.traffic import build_traffic
    from adaptstream.workloads import GENERATORS

    if entry_format not in ENTRY_FORMATS:
        msg = f"unknown --entry-format {entry_format!r}; valid choices: {', '.join(ENTRY_FORMATS)}"
        raise ConfigError(msg)
    addr = parse_url(to)
    gen = GENERATORS.get(WORKLOADS.get(workload).generator)(seed=seed).build()
    shape = build_traffic(traffic, rate, seed=seed)
    with console.status(f"writing {duration} s of {workload} rows to {to} ..."):
        stats = produce_entries(
            addr, duration, lambda k: gen.generate(k, shape.rows_at(k)), entry_format=entry_format, pace=pace
        )
    console.print(
        f"wrote {stats.entries} entries to {', '.join(stats.streams)} at {addr.where} in "
        f"{stats.seconds:.1f} s ({stats.rate:,.0f} entries/s; the XADD round trips alone "
        f"{stats.write_rate:,.0f} entries/s)"
    )


@app.command()
def demo(
    workload: WorkloadOpt = "LR1S",
    duration: Annotated[float, typer.Option(min=0.001, metavar="SECONDS", help="seconds of input per policy")] = 30.0,
    rate: RateOpt = 1000,
    traffic: TrafficOpt = "random",
    run_dir: Annotated[str | None, typer.Option(metavar="DIR", help="[default: runs/demo-<time>]")] = None,
    master: MasterOpt = "local[2]",
) -> None:
    """One Linear Road query under lmstream and under Spark's fixed 10 s trigger, compared (about 100 s)."""
    from adaptstream.app.report import write_comparison
    from adaptstream.app.runner import RunSpec, check_spec

    specs = [
        RunSpec(workload=workload, admission=admission, traffic=traffic, rate=rate, duration=duration, warmup=5.0)
        for admission in ("lmstream", "fixed")
    ]
    run_dir = run_dir or os.path.join("runs", f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    for spec in specs:
        check_spec(spec, os.path.join(run_dir, spec.admission))
    log_file = os.path.join(_fresh_dir(run_dir), "spark.log")
    spark = run_command._spark(master, log_file)
    results = [
        run_command._run_with_progress(spark, spec, os.path.join(run_dir, spec.admission), log_file) for spec in specs
    ]
    md = write_comparison(results, run_dir, f"adaptstream demo: {workload}, {traffic} traffic at {rate} rows/s")
    _print_table(results)
    console.print(f"comparison: [bold]{md}[/] and plots in {run_dir} (Spark's log: {run_dir}/spark.log)")


def _print_submit_summary(
    script: str, scheduler: str, elastic: str | None, latency_target: str, status: dict, code: int
) -> None:
    """One table row per query the tuner saw, then what the columns mean."""
    from rich.table import Table

    from adaptstream.app.submit import summary_rows
    from adaptstream.tuner import target_text

    table = Table(
        title=f"{os.path.basename(script)} under scheduler {scheduler}" + (f", elastic {elastic}" if elastic else "")
    )
    cols = ("query", "batches", "rows", "mean s", "p99 s", "on time %", "decisions", "state")
    for col in cols:
        table.add_column(col, justify="left" if col in ("query", "state") else "right")
    for row in summary_rows(status):
        table.add_row(*row)
    console.print(table)
    console.print(
        f"mean s, p99 s: batch processing time; on time: batches within {target_text(latency_target)}; decisions: the "
        f"scheduler's grants and holds. Executor-seconds {status['executor_seconds']:.1f}; exit status {code}",
        style="dim",
    )


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def submit(
    ctx: typer.Context,
    script: Annotated[str, typer.Argument(metavar="APP.py", help="an unmodified PySpark application script")],
    master: MasterOpt = "local[2]",
    scheduler: Annotated[str, choice(SCHEDULERS, "which query's micro-batch runs next")] = "default",
    scheduler_params: Annotated[str, typer.Option(metavar="K=V;K=V", help="fields of the --scheduler")] = "",
    elastic: Annotated[
        str | None, choice(ELASTICITY, "executors from every query's batch times (needs a cluster master)")
    ] = None,
    elastic_params: Annotated[str, typer.Option(metavar="K=V;K=V", help="fields of the --elastic policy")] = "",
    admission: Annotated[
        str | None, choice(ADMISSION, "the default admission policy of every adaptstream source")
    ] = None,
    admission_params: Annotated[str, typer.Option(metavar="K=V;K=V", help="fields of the --admission")] = "",
    latency_target: Annotated[
        str,
        typer.Option(
            metavar="SECONDS|auto",
            help="how long a batch may take (elasticity, summary); auto: half each query's window slide (its "
            "bound is MaxLat <= slide), else its processing-time trigger interval, else 10 s",
        ),
    ] = "auto",
    metrics: Annotated[str | None, typer.Option(metavar="DIR", help="write DIR/tuner.json and DIR/spark.log")] = None,
    state: Annotated[
        str | None, typer.Option(metavar="DIR", help="save the scheduler's and elasticity's state here (restarts)")
    ] = None,
    joint: Annotated[
        bool, typer.Option(help="with --scheduler and --elastic: slots follow executors, slot waits count as late")
    ] = True,
) -> None:
    """Run a PySpark application under the tuner; arguments the tuner does not know go to the script (put them
    after -- when they look like the tuner's). Exits with the script's own status."""
    from adaptstream.app.submit import submit as run_submit

    code, status = run_submit(
        script,
        list(ctx.args),
        master=master,
        metrics=metrics,
        scheduler=scheduler,
        scheduler_params=scheduler_params,
        elastic=elastic,
        elastic_params=elastic_params,
        admission=admission,
        admission_params=admission_params,
        latency_target=latency_target,
        state_path=state,
        joint=joint,
    )
    _print_submit_summary(script, scheduler, elastic, latency_target, status, code)
    raise typer.Exit(code)


@app.command()
def options(
    connector: Annotated[
        str | None, typer.Option(metavar="NAME", help="only the options of this connector (and the common ones)")
    ] = None,
) -> None:
    """List every option of format("adaptstream"): Spark name, kind, default and meaning (from the code)."""
    from rich.table import Table

    from adaptstream.spark.options import option_table

    table = Table(title='spark.readStream.format("adaptstream") options')
    for col in ("option", "applies to", "kind", "default", "meaning"):
        table.add_column(col)
    for row in option_table(connector):
        table.add_row(*row)
    console.print(table)
    console.print(
        "Policy parameters: admissionParams / partitionerParams 'name=value;name=value'; "
        "`adaptstream partitioning list` and docs/ name each policy's fields.",
        style="dim",
    )
