"""The ``adaptstream`` command line: run, demo, bench, and the policy families' own sub-commands."""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from adaptstream.errors import AdaptstreamError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Self-tuning micro-batch stream processing on Apache Spark.")
console = Console()


def _spark(master: str, shuffle_partitions: int = 2):
    from adaptstream.spark.session import build_spark

    with console.status(f"starting Spark ({master})..."):
        return build_spark(master=master, shuffle_partitions=shuffle_partitions)


def _run_with_progress(spark, spec, run_dir: str):
    from adaptstream.runner import run_workload

    total = None if spec.input_dir else round(spec.duration)
    with Progress(TextColumn("[bold]{task.fields[label]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console) as prog:
        task = prog.add_task("run", total=total, label=spec.label(), info="")

        def show(snap: dict) -> None:
            lat = snap["last_max_latency"]
            info = f"batches {snap['batches']}" + (f", last MaxLat {lat:.2f}s" if lat is not None else "")
            prog.update(task, completed=snap["completed"], info=info,
                        total=total if total is not None else max(snap["arrived"], 1))

        return run_workload(spark, spec, run_dir, on_progress=show)


def _print_table(results) -> None:
    """One column per run and one row per figure: fits a narrow terminal however many figures we report."""
    from adaptstream.report import COLUMNS, LEGEND, comparison_rows

    table = Table(title="adaptstream results")
    table.add_column("figure")
    rows = comparison_rows(results)
    for row in rows:
        table.add_column(f"{row[0]}\n{row[1]}", justify="right")
    for k, (header, _, _) in enumerate([*COLUMNS, ("unfinished", None, None)]):
        table.add_row(header, *(row[k + 2] for row in rows))
    console.print(table)
    console.print(LEGEND, style="dim")


def _check_names(workload: str, admission: str, traffic: str) -> None:
    """Resolve names before Spark starts, so a typo costs no start-up time."""
    from adaptstream.admission import ADMISSION
    from adaptstream.connectors.traffic import TRAFFIC
    from adaptstream.workloads import WORKLOADS

    WORKLOADS.get(workload)
    ADMISSION.get(admission)
    TRAFFIC.get(traffic)


@app.command()
def run(
    workload: Annotated[str, typer.Option(help="LR1S, LR1T, LR2S, CM1S, CM1T or CM2S")] = "LR1S",
    admission: Annotated[str, typer.Option(help="lmstream, fixed or asap")] = "lmstream",
    traffic: Annotated[str, typer.Option(help="constant, random or sinusoidal")] = "constant",
    rate: Annotated[int, typer.Option(help="mean rows per one-second dataset")] = 1000,
    duration: Annotated[float, typer.Option(help="seconds of generated input")] = 60.0,
    trigger: Annotated[float, typer.Option(help="interval of the fixed policy (s)")] = 10.0,
    seed: int = 0,
    input: Annotated[str | None, typer.Option(help="read standard CSV files from DIR instead of the generator")] = None,
    drain: Annotated[bool, typer.Option(help="emit every window once the input is over, then stop")] = False,
    run_dir: Annotated[str | None, typer.Option(help="where metrics, results and plots go")] = None,
    master: Annotated[str, typer.Option(help="Spark master URL")] = "local[2]",
    partitioner: Annotated[str, typer.Option(help="how rows are split into Spark input partitions")] = "time",
    num_blocks: Annotated[int, typer.Option(help="Spark input partitions per micro-batch")] = 2,
) -> None:
    """Run one workload under one admission policy and summarise it."""
    from adaptstream.metrics.plots import plot_timelines
    from adaptstream.runner import RunSpec

    _check_names(workload, admission, traffic)
    if input and not drain:
        drain = True
        console.print("[yellow]--input implies --drain: the run stops once the input is exhausted[/]")
    spec = RunSpec(workload=workload, admission=admission, traffic=traffic, rate=rate, duration=duration,
                   trigger=trigger, seed=seed, input_dir=input, drain=drain, partitioner=partitioner,
                   num_blocks=num_blocks)
    run_dir = run_dir or os.path.join("runs", f"{spec.label()}-{time.strftime('%Y%m%d-%H%M%S')}")
    spark = _spark(master)
    result = _run_with_progress(spark, spec, run_dir)
    plot_timelines({admission: result.metrics_dir}, os.path.join(run_dir, "timeline.png"),
                   f"{workload} under {admission}", result.slide or None)
    _print_table([result])
    console.print(f"run directory: [bold]{run_dir}[/] (metrics/, results/, timeline.png, summary.json)")


@app.command()
def demo(
    workload: str = "LR1S",
    duration: Annotated[float, typer.Option(help="seconds of input per policy")] = 30.0,
    rate: int = 1000,
    traffic: str = "random",
    run_dir: Annotated[str | None, typer.Option()] = None,
    master: str = "local[2]",
) -> None:
    """About a minute of one Linear Road query under lmstream and the fixed 10 s trigger, compared."""
    from adaptstream.report import write_comparison
    from adaptstream.runner import RunSpec

    _check_names(workload, "lmstream", traffic)
    run_dir = run_dir or os.path.join("runs", f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    spark = _spark(master)
    results = []
    for admission in ("lmstream", "fixed"):
        spec = RunSpec(workload=workload, admission=admission, traffic=traffic, rate=rate, duration=duration,
                       warmup=5.0)
        results.append(_run_with_progress(spark, spec, os.path.join(run_dir, admission)))
    md = write_comparison(results, run_dir, f"adaptstream demo: {workload}, {traffic} traffic at {rate} rows/s")
    _print_table(results)
    console.print(f"comparison: [bold]{md}[/] and plots in {run_dir}")


def _register_subapps() -> None:
    """The policy families' own typer apps; `place` is also a top-level command, as the issue names it."""
    from adaptstream.bench import app as bench_app
    from adaptstream.costmodel import cli as costmodel_cli
    from adaptstream.costmodel import cli_data as costmodel_data
    from adaptstream.partitioning import cli as partitioning_cli

    app.add_typer(bench_app, name="bench", help="Benchmarks: our policies and Spark's behaviour side by side.")
    app.add_typer(partitioning_cli.app, name="partitioning", help="Skew-aware partitioners (Prompt, holistic).")
    for command in costmodel_data.app.registered_commands:
        costmodel_cli.app.registered_commands.append(command)
    app.add_typer(costmodel_cli.app, name="costmodel", help="Costream cost model and operator placement.")
    app.command("place", help="Choose an operator placement with the Costream cost model.")(costmodel_cli.place)


_register_subapps()


def main() -> None:
    try:
        app(standalone_mode=False)
    except AdaptstreamError as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except Exception as e:  # click usage errors carry their own exit codes
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
