"""Partitioning benchmark 'cost' (see adaptstream_bench.partitioning).
Same as `adaptstream partitioning bench cost`.

Run from the repository root: `python benchmarks/partitioning_cost.py [--help]`.
"""

import typer

from adaptstream_bench.partitioning_cli import cost_command

if __name__ == "__main__":
    typer.run(cost_command)
