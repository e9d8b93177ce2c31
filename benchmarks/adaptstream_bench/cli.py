"""The harness's commands, added to the core CLI's groups when the harness is installed (entry point group
``adaptstream.commands``; the core imports nothing of the harness)."""

from __future__ import annotations

import typer

from adaptstream_bench.capacity import capacity_command
from adaptstream_bench.chaos import chaos_command
from adaptstream_bench.cluster_calibration import cluster_calibration_command
from adaptstream_bench.composed import composed_command
from adaptstream_bench.klink import klink_command
from adaptstream_bench.lmstream import lmstream_command
from adaptstream_bench.lmstream_capacity import lmstream_capacity_command
from adaptstream_bench.lmstream_load import lmstream_load_command
from adaptstream_bench.mapdevice import mapdevice_command
from adaptstream_bench.prompt_elastic import prompt_elastic_command
from adaptstream_bench.prompt_processing import prompt_processing_command
from adaptstream_bench.redis import redis_command
from adaptstream_bench.reduce_allocation import reduce_allocation_command
from adaptstream_bench.reduce_cluster import reduce_cluster_command
from adaptstream_bench.reliability import reliability_command
from adaptstream_bench.soak import soak_command
from adaptstream_bench.source import source_command

app = typer.Typer(no_args_is_help=True, help="Benchmarks that compare our policies with Spark's own behaviour.")
app.command("lmstream")(lmstream_command)
app.command("lmstream-load")(lmstream_load_command)
app.command("lmstream-capacity")(lmstream_capacity_command)
app.command("source")(source_command)
app.command("redis")(redis_command)
app.command("klink")(klink_command)
app.command("prompt-processing")(prompt_processing_command)
app.command("reduce-allocation")(reduce_allocation_command)
app.command("prompt-elastic")(prompt_elastic_command)
app.command("mapdevice")(mapdevice_command)
app.command("cluster-calibration")(cluster_calibration_command)
app.command("reduce-cluster")(reduce_cluster_command)
app.command("chaos")(chaos_command)
app.command("soak")(soak_command)
app.command("reliability")(reliability_command)
app.command("composed")(composed_command)
app.command("capacity")(capacity_command)


def register(root: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    """Add `bench`, `partitioning bench` and the cost model's evaluations to the core CLI."""
    from adaptstream_bench import costmodel_cli, partitioning_cli
    from adaptstream_bench.costmodel import data_cli

    root.add_typer(app, name="bench", help="Benchmarks: our policies and Spark's behaviour side by side.")
    groups["partitioning"].add_typer(partitioning_cli.bench_app, name="bench")
    for name, fn in costmodel_cli.COMMANDS:
        groups["costmodel"].command(name)(fn)
    groups["costmodel"].registered_commands.extend(data_cli.app.registered_commands)
