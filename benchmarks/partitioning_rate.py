"""Partitioning benchmark 'rate' (see adaptstream_bench.partitioning).
Same as `adaptstream partitioning bench rate`.

Run from the repository root: `python benchmarks/partitioning_rate.py [--help]`.
"""

import typer

from adaptstream_bench.partitioning_cli import rate_command

if __name__ == "__main__":
    typer.run(rate_command)
