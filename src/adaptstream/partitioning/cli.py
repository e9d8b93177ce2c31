"""`adaptstream partitioning list`: the partitioners and their parameters. Their benchmarks (`partitioning bench
...`) belong to the benchmark harness (benchmarks/adaptstream_bench), which adds them when it is installed."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Skew-aware block partitioners (Prompt, holistic partitioning).")


@app.command("list")
def list_command() -> None:
    """Registered partitioners with their parameters and defaults."""
    import dataclasses
    import sys

    from adaptstream.partitioning import PARTITIONERS, make_config

    for name in PARTITIONERS.names():
        cfg = make_config(name)
        params = ", ".join(f"{f.name}={getattr(cfg, f.name)!r}" for f in dataclasses.fields(cfg))
        doc = (sys.modules[type(cfg).__module__].__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        typer.echo(f"{name:9s} {params or '-'}\n          {doc}")
