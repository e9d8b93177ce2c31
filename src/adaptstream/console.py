"""The console every CLI module prints to, and the helpers they share (run directories, the results table)."""

from __future__ import annotations

import os
import shutil

from rich.console import Console
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def fresh_dir(path: str) -> str:
    """Empty the run directory before Spark starts, so Spark's log file there survives the run."""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def print_table(results) -> None:
    """One column per run and one row per figure: fits a narrow terminal however many figures we report."""
    from adaptstream.app.report import COLUMNS, LEGEND, comparison_rows
    from adaptstream.connectors.redis import redact

    table = Table(title="adaptstream results")
    table.add_column("figure")
    rows = comparison_rows(results)
    for row in rows:
        table.add_column(f"{row[0]}\n{row[1]}", justify="right")
    for k, (header, _, _) in enumerate([*COLUMNS, ("unfinished", None, None)]):
        table.add_row(header, *(row[k + 2] for row in rows))
    console.print(table)
    console.print(LEGEND, style="dim")
    for r in results:
        if r.summary.datasets == 0:
            where = f"--input {redact(r.spec.input_dir)}" if r.spec.input_dir else "the generator"
            console.print(
                f"[bold yellow]no input:[/] {r.spec.label()} processed no datasets from {where} "
                f"({r.summary.quarantined} malformed rows quarantined); the figures are n/a."
            )
    warm = sorted({r.spec.warmup for r in results if r.spec.warmup > 0})
    if warm:
        console.print(
            f"The first {warm[0]:g} s of arrivals of each run are a warm-up (query code generation) and "
            "are not counted above; the raw metrics keep them.",
            style="dim",
        )
