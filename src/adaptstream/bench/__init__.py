"""Benchmarks: each runs our policy and the baselines in one invocation and writes a report under docs/results."""

from __future__ import annotations

import typer

from adaptstream.bench.klink import klink_command
from adaptstream.bench.lmstream import lmstream_command
from adaptstream.bench.lmstream_load import lmstream_load_command
from adaptstream.bench.mapdevice import mapdevice_command
from adaptstream.bench.prompt_elastic import prompt_elastic_command
from adaptstream.bench.prompt_processing import prompt_processing_command
from adaptstream.bench.redis import redis_command
from adaptstream.bench.source import source_command

app = typer.Typer(no_args_is_help=True, help="Benchmarks that compare our policies with Spark's own behaviour.")
app.command("lmstream")(lmstream_command)
app.command("lmstream-load")(lmstream_load_command)
app.command("source")(source_command)
app.command("redis")(redis_command)
app.command("klink")(klink_command)
app.command("prompt-processing")(prompt_processing_command)
app.command("prompt-elastic")(prompt_elastic_command)
app.command("mapdevice")(mapdevice_command)
