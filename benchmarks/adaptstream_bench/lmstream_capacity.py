"""``adaptstream bench lmstream-capacity``: LMStream against Spark's default (asap) at rates around a query's
breaking point, repeated, in one invocation (issue #56 item 4).

Per run: the share of batches that keep MaxLat within the slide (judged as in ``bench lmstream-load``), latency,
Eq. 4 throughput, and executor time per input row from Spark's own task metrics (run time and CPU time of every
stage the run's batches ran; the status store keeps them, ``spark.ui.retainedStages`` is raised so none is
dropped). Repeats are the outer loop (each with its own seed, the same for every policy of that repeat) and the
policy order rotates, so a budget that ends early leaves every cell with its first repeats and no policy always
first. The JSON is rewritten after every run; the report module judges the targets from it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from adaptstream_bench.lmstream import ALL_WORKLOADS
from adaptstream_bench.lmstream_capacity_report import write_report
from adaptstream_bench.lmstream_load import TRIGGER, judge
from adaptstream_bench.meta import finish_meta, sample_load, start_meta

POLICIES = ("lmstream", "asap", "fixed")
console = Console()


def parse_rates(text: str) -> list[tuple[str, int]]:
    """'LR1S:4000,6000;CM2S:16000' -> [(LR1S, 4000), (LR1S, 6000), (CM2S, 16000)]."""
    from adaptstream.errors import ConfigError

    out = []
    for part in (x.strip() for x in text.split(";") if x.strip()):
        name, _, rates = part.partition(":")
        try:
            values = [int(r) for r in rates.split(",") if r.strip()]
        except ValueError:
            values = []
        if name not in ALL_WORKLOADS or not values or min(values) < 1:
            msg = (
                f"--rates takes QUERY:RATE,RATE;QUERY:RATE with queries from {', '.join(ALL_WORKLOADS)} and "
                f"positive rows/s, got {part!r}"
            )
            raise ConfigError(msg)
        out += [(name, r) for r in values]
    if not out:
        msg = "--rates names no query"
        raise ConfigError(msg)
    return out


def _one(spark, spec, run_dir: Path, slide: float, repeat: int) -> dict:
    from adaptstream.app.runner import run_workload
    from adaptstream.spark.taskmetrics import stage_totals

    before = stage_totals(spark.sparkContext)
    load0 = os.getloadavg()[0]
    res = run_workload(spark, spec, str(run_dir))
    after = stage_totals(spark.sparkContext, int(before["last_stage"]))
    row = judge(res, slide)
    rows = max(int(res.summary.rows), 1)
    row.update(
        repeat=repeat,
        seed=spec.seed,
        rows=int(res.summary.rows),
        executor_run_s=after["run_s"],
        executor_cpu_s=after["cpu_s"],
        tasks=after["tasks"],
        run_us_per_row=1e6 * after["run_s"] / rows,
        cpu_us_per_row=1e6 * after["cpu_s"] / rows,
        load=(load0 + os.getloadavg()[0]) / 2,
    )
    return row


def lmstream_capacity_command(
    rates: Annotated[
        str, typer.Option(help="QUERY:RATE,RATE;QUERY:RATE - the cells to run (rows/s)")
    ] = "LR1S:4000,6000,8000",
    policies: Annotated[str, typer.Option(help="comma-separated admission policies")] = "lmstream,asap",
    repeats: Annotated[int, typer.Option(min=1, help="runs per cell and policy, each with its own seed")] = 3,
    duration: Annotated[float, typer.Option(min=5.0, help="seconds of input per run")] = 60.0,
    warmup: Annotated[float, typer.Option(min=0.0, help="seconds of first arrivals not judged")] = 10.0,
    finish_timeout: Annotated[float, typer.Option(help="seconds to wait for the backlog after the input")] = 20.0,
    budget_minutes: Annotated[float, typer.Option(min=1.0, help="start no run after this much wall time")] = 45.0,
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="report directory [default: runs/bench-lmstream-capacity-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write docs/results/lmstream_capacity.*")] = False,
    master: str = "local[2]",
) -> None:
    """LMStream vs asap around a query's breaking point: share within the bound and executor time per row."""
    from adaptstream.app.runner import RunSpec, run_workload
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark
    from adaptstream.workloads import WORKLOADS

    plan = parse_rates(rates)
    pols = [p.strip() for p in policies.split(",") if p.strip()]
    if not pols or any(p not in POLICIES for p in pols) or duration <= warmup:
        msg = f"--policies takes a comma list of {', '.join(POLICIES)}, and --duration must exceed --warmup"
        raise ConfigError(msg)
    target = report_dir("bench-lmstream-capacity", out, update_docs, report="lmstream_capacity.json")
    runs_dir = Path("runs/bench-lmstream-capacity") if update_docs else target / "runs"
    spark = build_spark(master=master, conf={"spark.ui.retainedStages": "100000", "spark.ui.retainedJobs": "100000"})
    data: dict = {
        "meta": {
            **start_meta("bench", "lmstream-capacity"),
            "master": master,
            "spark": spark.version,
            "repeats": repeats,
            "policies": pols,
            "cells": [list(c) for c in plan],
            "sizing": f"{duration:g} s of constant-rate input per run ({warmup:g} s warm-up not judged), "
            f"{repeats} repeats per cell and policy (seed 10 + repeat, the same for every policy of a repeat, "
            f"policy order rotated), fixed's trigger {TRIGGER:g} s, finish timeout {finish_timeout:g} s, a "
            f"{budget_minutes:g} min budget on starting runs, Spark master {master}. One warm-up query (discarded) "
            "first: the first query of a JVM pays class loading and code generation.",
        },
        "runs": [],
        "skipped": [],
    }
    t0 = time.time()
    run_workload(spark, RunSpec(workload=plan[0][0], admission="asap", rate=1000, duration=8.0, seed=2),
                 str(runs_dir / "jvm-warmup"))  # fmt: skip
    for k in range(repeats):
        for i, (w, rate) in enumerate(plan):
            shift = (k + i) % len(pols)
            for p in pols[shift:] + pols[:shift]:
                elapsed = (time.time() - t0) / 60
                if elapsed + (duration + finish_timeout / 2 + 10) / 60 > budget_minutes:
                    data["skipped"].append(f"repeat {k + 1}: {w} {rate} rows/s {p}")
                    continue
                spec = RunSpec(
                    workload=w, admission=p, rate=rate, duration=duration, seed=10 + k, trigger=TRIGGER,
                    finish_timeout=finish_timeout, warmup=warmup,
                )  # fmt: skip
                console.print(f"[{elapsed:5.1f} min] repeat {k + 1}/{repeats} {w} {rate:,} rows/s {p} ...")
                row = _one(spark, spec, runs_dir / f"r{k}" / w / f"{p}-{rate}", WORKLOADS.get(w).lmstream_slide, k)
                data["runs"].append(row)
                sample_load(data["meta"])
                console.print(
                    f"    within {row['within']:.0%}, mean MaxLat {row['avg_max_latency']:.2f} s, executor CPU "
                    f"{row['cpu_us_per_row']:.2f} us/row, run {row['run_us_per_row']:.2f} us/row"
                )
                write_report(data, target)
    finish_meta(data["meta"])
    md = write_report(data, target)
    console.print(f"bench lmstream-capacity: report in {md}")
    found = json.loads((target / "lmstream_capacity.json").read_text())["targets"]
    words = ["undecided" if t["met"] is None else ("met" if t["met"] else "missed") for t in found]
    console.print(", ".join(f"{words.count(w)} {w}" for w in ("met", "missed", "undecided")))
