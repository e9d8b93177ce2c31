"""Partitioning benchmark 'blocks' (see adaptstream_bench.partitioning).
Same as `adaptstream partitioning bench blocks`.

Run from the repository root: `python benchmarks/partitioning_blocks.py [--help]`.
"""

import typer

from adaptstream_bench.partitioning_cli import blocks_command

if __name__ == "__main__":
    typer.run(blocks_command)
