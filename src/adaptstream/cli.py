"""The ``adaptstream`` command line: run, demo, bench, and the policy families' own sub-commands.

Error contract (tested in tests/unit/test_cli.py): a usage error (unknown option, command or choice, a value out
of range) prints click's usage message and exits 2; any other failure prints one ``error:`` line and exits 1 (a bad
option value found by our own checks exits 2 as well); ``--debug`` or ``ADAPTSTREAM_DEBUG=1`` adds the full
traceback. Everything that can be checked without Spark is checked before Spark starts.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from adaptstream.admission import ADMISSION
from adaptstream.allocation import ALLOCATORS
from adaptstream.connectors.traffic import TRAFFIC
from adaptstream.console import console, err_console
from adaptstream.console import fresh_dir as _fresh_dir
from adaptstream.console import print_table as _print_table
from adaptstream.elasticity import ELASTICITY
from adaptstream.errors import AdaptstreamError, ConfigError, EnvironmentProblem
from adaptstream.partitioning import PARTITIONERS
from adaptstream.registry import Registry
from adaptstream.scheduling import SCHEDULERS
from adaptstream.workloads import WORKLOADS

if TYPE_CHECKING:  # pragma: no cover
    from adaptstream.runner import RunSpec

DEBUG_ENV = "ADAPTSTREAM_DEBUG"
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Self-tuning micro-batch stream processing on Apache Spark.",
)


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def choice(registry: Registry[Any], help: str) -> Any:
    """A typer option whose choices come from a registry: listed in --help, checked case-insensitively while
    parsing (a usage error that lists the valid choices), and passed on as the registered spelling."""
    canonical = {name.lower(): name for name in registry.names()}

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            registry.get(value)
        except AdaptstreamError as exc:
            raise typer.BadParameter(str(exc)) from None
        return canonical[value.strip().lower()]

    return typer.Option(help=help, metavar="[" + "|".join(registry.names()) + "]", callback=check)


def choices(registry: Registry[Any], help: str) -> Any:
    """Like :func:`choice` for an option given several times (a list)."""
    single = choice(registry, help)

    def check(values: list[str] | None) -> list[str] | None:
        return None if values is None else [single.callback(v) for v in values]

    return typer.Option(help=help, metavar=single.metavar, callback=check)


def _device(value: str) -> str:
    from adaptstream.spark.windowed import check_device

    try:
        check_device(value)
    except AdaptstreamError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


WorkloadOpt = Annotated[str, choice(WORKLOADS, "LMStream Table III query")]
DeviceOpt = Annotated[
    str,
    typer.Option(
        metavar="[cpu|auto|gpu]",
        callback=_device,
        help="with --reduce: where the pane operators run; inside Spark tasks only the CPU (auto maps every "
        "operator there, gpu is refused)",
    ),
]
WorkloadsOpt = Annotated[
    list[str] | None,
    choices(
        WORKLOADS,
        "workload to run; give it several times to run "
        "several queries concurrently in one Spark application "
        "[default: LR1S]",
    ),
]
SchedulerOpt = Annotated[str, choice(SCHEDULERS, "multi-query scheduler (with several --workload; a no-op with one)")]
AdmissionOpt = Annotated[str, choice(ADMISSION, "when a micro-batch is cut")]
TrafficOpt = Annotated[str, choice(TRAFFIC, "input rate pattern of the generator")]
PartitionerOpt = Annotated[str, choice(PARTITIONERS, "how rows are split into Spark input partitions")]
RateOpt = Annotated[int, typer.Option(min=1, metavar="ROWS", help="mean rows per one-second dataset")]
MasterOpt = Annotated[str, typer.Option(metavar="URL", help="Spark master URL")]
ReduceOpt = Annotated[
    str | None,
    choice(
        ALLOCATORS,
        "pane execution mode: each micro-batch one map/reduce job "
        "whose reduce buckets this allocator fills (aggregations)",
    ),
]


DurationOpt = Annotated[float, typer.Option(min=0.001, metavar="SECONDS", help="seconds of generated input")]
TriggerOpt = Annotated[float, typer.Option(min=0.001, metavar="SECONDS", help="interval of the fixed policy")]
SeedOpt = Annotated[int, typer.Option(min=0, metavar="N", help="seed of the generated input")]
InputOpt = Annotated[
    str | None,
    typer.Option(
        metavar="DIR|URL",
        help="read standard CSV files from DIR, or the entries of a Redis "
        "stream redis[s]://[USER[:PASSWORD]@]HOST:PORT[/DB]/STREAM[,STREAM2], instead of the "
        "generator (implies --drain)",
    ),
]
DrainOpt = Annotated[bool, typer.Option(help="emit every window once the input is over, then stop")]
RunDirOpt = Annotated[
    str | None,
    typer.Option(
        metavar="DIR",
        help="where metrics, results, plots and spark.log go [default: runs/<workload>-<admission>-<time>]",
    ),
]
BlocksOpt = Annotated[int, typer.Option(min=1, metavar="N", help="Spark input partitions per micro-batch")]
AdmissionParamsOpt = Annotated[
    str, typer.Option(metavar="K=V;K=V", help="fields of the --admission policy, e.g. 'history=8;margin_z=2'")
]
PartitionerParamsOpt = Annotated[
    str, typer.Option(metavar="K=V;K=V", help="fields of the --partitioner, e.g. 'choices=3;cardinality=hll'")
]
SchedulerParamsOpt = Annotated[
    str,
    typer.Option(
        metavar="K=V;K=V",
        help="parameters of the --scheduler policy, e.g. 'hold=inf' (work-conserving klink) or 'slots=2'",
    ),
]
SpreadOpt = Annotated[
    float,
    typer.Option(min=0.0, metavar="SECONDS", help="several workloads: each starts at a random time in [0, SECONDS]"),
]
BucketsOpt = Annotated[int, typer.Option(min=1, metavar="N", help="reduce tasks per micro-batch (with --reduce)")]
ElasticOpt = Annotated[
    str | None,
    choice(
        ELASTICITY,
        "with --reduce on a cluster master: reduce buckets and executors per batch (batch interval: --trigger)",
    ),
]
ElasticParamsOpt = Annotated[
    str,
    typer.Option(
        metavar="K=V;K=V",
        help="parameters of the --elastic policy, e.g. 'max_executors=3' or 'reduce_buckets=3;executors=3'",
    ),
]
SqlOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="QUERY",
        help="your own query over --input, read as the table 'input' (repeat: several run concurrently "
        "under --scheduler); instead of --workload",
    ),
]
SchemaOpt = Annotated[
    str | None, typer.Option(metavar="DDL", help="with --sql: the columns of the input files, 'a INT, b STRING'")
]
FormatOpt = Annotated[
    str, typer.Option("--format", metavar="csv|json|parquet", help="with --sql: the input files' format")
]
HeaderOpt = Annotated[bool, typer.Option(help="with --sql: CSV files start with a header line")]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from adaptstream import __version__

        try:
            installed = version("adaptstream")
        except PackageNotFoundError:
            installed = __version__
        typer.echo(f"adaptstream {installed}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_version, help="Show the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help=f"Show full tracebacks (or set {DEBUG_ENV}=1).")] = False,
) -> None:
    """Self-tuning micro-batch stream processing on Apache Spark."""
    if debug:
        os.environ[DEBUG_ENV] = "1"


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
    from adaptstream.runner import input_files, is_redis_url, run_workload

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
    from adaptstream.runner import RunSpec

    if device != "cpu":
        if reduce is None:
            msg = f"--device {device} needs --reduce: it places the pane mode's operators"
            raise ConfigError(msg)
        console.print("--device auto: every pane operator runs on the CPU (no GPU backend inside Spark tasks yet)")
    if sql:
        _sql_route(ctx, sql, workload, input, schema, file_format, header, scheduler, scheduler_params, admission,
                   admission_params, run_dir, master)  # fmt: skip
        return
    workloads = workload or ["LR1S"]
    if len(workloads) > 1 and elastic is not None:
        msg = (
            "--elastic scales one pane-mode workload's executors; several workloads share the application's "
            "executors: give a single --workload, or tune the application with adaptstream.tune(elastic=...) "
            "(one policy for every query, docs/tuning.md)"
        )
        raise ConfigError(msg)
    shared: dict[str, Any] = {
        "admission": admission, "traffic": traffic, "rate": rate, "duration": duration, "trigger": trigger,
        "seed": seed, "input": input, "drain": drain, "partitioner": partitioner, "num_blocks": num_blocks,
        "admission_params": admission_params, "partitioner_params": partitioner_params, "reduce": reduce,
        "reduce_buckets": reduce_buckets,
    }  # fmt: skip
    if len(workloads) > 1:
        from adaptstream.multiquery_cli import run_several

        run_several(workloads, scheduler, start_spread, scheduler_params, run_dir, master, spark_factory=_spark,
                    **shared)  # fmt: skip
        return
    name = workloads[0]
    if scheduler != "default":
        console.print(f"one workload: --scheduler {scheduler} has nothing to arbitrate (no-op)", style="yellow")
    if input and not drain:
        shared["drain"] = True
        console.print("--input implies --drain: the run stops once the input is exhausted", style="yellow")
    shared["input_dir"] = shared.pop("input")
    spec = RunSpec(workload=name, elastic=elastic, elastic_params=elastic_params, **shared)
    _run_single(spec, run_dir, master)


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
    from adaptstream.sqlrun import SqlSpec

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
    from adaptstream.metrics.plots import plot_timelines
    from adaptstream.runner import check_spec, input_files, is_redis_url

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
    from adaptstream.report import write_comparison
    from adaptstream.runner import RunSpec, check_spec

    specs = [
        RunSpec(workload=workload, admission=admission, traffic=traffic, rate=rate, duration=duration, warmup=5.0)
        for admission in ("lmstream", "fixed")
    ]
    run_dir = run_dir or os.path.join("runs", f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    for spec in specs:
        check_spec(spec, os.path.join(run_dir, spec.admission))
    log_file = os.path.join(_fresh_dir(run_dir), "spark.log")
    spark = _spark(master, log_file)
    results = [_run_with_progress(spark, spec, os.path.join(run_dir, spec.admission), log_file) for spec in specs]
    md = write_comparison(results, run_dir, f"adaptstream demo: {workload}, {traffic} traffic at {rate} rows/s")
    _print_table(results)
    console.print(f"comparison: [bold]{md}[/] and plots in {run_dir} (Spark's log: {run_dir}/spark.log)")


def _given(ctx: typer.Context, name: str) -> bool:
    """True when the option was on the command line (not its default). By the enum's name: typer vendors its own
    click, so ``click`` itself need not be installed."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _run_sql(spec, run_dir: str | None, master: str) -> None:
    from rich.table import Table

    from adaptstream.sqlrun import run_sql

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
        float, typer.Option(min=0.001, metavar="SECONDS", help="how long a batch may take (elasticity, summary)")
    ] = 10.0,
    metrics: Annotated[str | None, typer.Option(metavar="DIR", help="write DIR/tuner.json and DIR/spark.log")] = None,
    state: Annotated[
        str | None, typer.Option(metavar="DIR", help="save the scheduler's and elasticity's state here (restarts)")
    ] = None,
) -> None:
    """Run a PySpark application under the tuner; arguments the tuner does not know go to the script (put them
    after -- when they look like the tuner's). Exits with the script's own status."""
    from rich.table import Table

    from adaptstream.submit import submit as run_submit
    from adaptstream.submit import summary_rows

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
    )
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
        f"mean s, p99 s: batch processing time; on time: batches within {latency_target:g} s; decisions: the "
        f"scheduler's grants and holds. Executor-seconds {status['executor_seconds']:.1f}; exit status {code}",
        style="dim",
    )
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


def _register_subapps() -> None:
    """The policy families' own typer apps; `place` is also a top-level command, as the issue names it."""
    from adaptstream.costmodel import cli as costmodel_cli
    from adaptstream.partitioning import cli as partitioning_cli

    app.add_typer(partitioning_cli.app, name="partitioning", help="Skew-aware partitioners (Prompt, holistic).")
    groups = {"partitioning": partitioning_cli.app, "costmodel": costmodel_cli.app}
    if not _load_plugins(groups):
        app.command(
            "bench",
            help=f"Benchmarks (not installed: {HARNESS_HINT}).",
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        )(_no_harness)
    app.add_typer(costmodel_cli.app, name="costmodel", help="Costream cost model and operator placement.")
    app.command("place", help="Choose an operator placement with the Costream cost model.")(costmodel_cli.place)


HARNESS_HINT = "pip install -e benchmarks from a checkout of adaptstream, or scripts/setup.sh --dev"
PLUGINS = "adaptstream.commands"


def _load_plugins(groups: dict) -> bool:
    """Commands of installed add-ons (the benchmark harness): each entry point of group ``adaptstream.commands``
    is called with the root app and the command groups. True when one was loaded."""
    from importlib.metadata import entry_points

    loaded = False
    for ep in entry_points(group=PLUGINS):
        try:
            ep.load()(app, groups)
        except Exception as e:  # a broken add-on must not take the core commands down with it
            err_console.print(
                f"warning: add-on commands {ep.name!r} not loaded: {type(e).__name__}: {e}",
                markup=False,
                soft_wrap=True,
            )
            continue
        loaded = True
    return loaded


def _no_harness() -> None:
    """The benchmarks are a separate package: say how to install it."""
    raise EnvironmentProblem(f"the benchmark harness is not installed: {HARNESS_HINT}")


_register_subapps()


def _fail(message: str, code: int, hint: bool = True) -> None:
    if debug_enabled():
        traceback.print_exc()
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False, markup=True)
    if hint and not debug_enabled():
        err_console.print(f"(run with --debug or {DEBUG_ENV}=1 for the full traceback)", style="dim")
    sys.exit(code)


def main(argv: Sequence[str] | None = None, prog_name: str = "adaptstream") -> None:
    """Entry point: typer in standalone mode handles usage errors (exit 2), --help and Exit codes itself;
    our own errors become one line (exit 2 for bad options, 1 otherwise), anything else one line too."""
    saved_debug = os.environ.get(DEBUG_ENV)  # --debug sets it for this invocation only (main may be called again)
    try:
        _main(argv, prog_name)
    finally:
        if saved_debug is None:
            os.environ.pop(DEBUG_ENV, None)
        else:
            os.environ[DEBUG_ENV] = saved_debug


def _main(argv: Sequence[str] | None, prog_name: str) -> None:
    try:
        app(args=list(argv) if argv is not None else None, prog_name=prog_name, standalone_mode=True)
    except ConfigError as exc:
        _fail(str(exc), 2, hint=False)
    except AdaptstreamError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        err_console.print("interrupted", style="yellow")
        sys.exit(130)
    except ModuleNotFoundError as exc:  # an optional dependency (the cost model's torch, lightgbm)
        _fail(
            f"this command needs the Python package {exc.name!r}, which is not installed "
            "(`scripts/setup.sh --dev` installs the optional ones)",
            1,
        )
    except Exception as exc:  # a bug or an environment problem we did not foresee: still one line by default
        _fail(f"{type(exc).__name__}: {exc}", 1)


if __name__ == "__main__":
    main()
