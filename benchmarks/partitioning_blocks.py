"""Partitioning benchmark 'blocks' (see adaptstream.partitioning.bench).
Same as `adaptstream partitioning bench blocks`.

Run from the repository root: `python benchmarks/partitioning_blocks.py [--help]`.
"""

import typer

from adaptstream.partitioning.cli import blocks_command

if __name__ == "__main__":
    typer.run(blocks_command)
