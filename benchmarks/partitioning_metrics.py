"""Partitioning benchmark 'metrics' (see adaptstream_bench.partitioning).
Same as `adaptstream partitioning bench metrics`.

Run from the repository root: `python benchmarks/partitioning_metrics.py [--help]`.
"""

import typer

from adaptstream_bench.partitioning_cli import metrics_command

if __name__ == "__main__":
    typer.run(metrics_command)
