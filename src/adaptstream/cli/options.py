"""The CLI's shared option types: registry-backed choices (listed in --help, checked while parsing) and the
``Annotated`` aliases the commands share."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adaptstream.admission import ADMISSION
from adaptstream.allocation import ALLOCATORS
from adaptstream.connectors.traffic import TRAFFIC
from adaptstream.elasticity import ELASTICITY
from adaptstream.errors import AdaptstreamError
from adaptstream.partitioning import PARTITIONERS
from adaptstream.registry import Registry
from adaptstream.scheduling import SCHEDULERS
from adaptstream.workloads import WORKLOADS


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
