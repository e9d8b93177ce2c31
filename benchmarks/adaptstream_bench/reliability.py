"""``adaptstream bench reliability``: chaos, a 10x backlog on every connector and a soak in one invocation, one
report (issue #57 item 6).

In order: the chaos trials (``adaptstream_bench.chaos``: kill -9 of the driver, a Python worker, the Redis server
and a tuned application's controller, over files, Redis and the pane mode, each trial checked row by row against
batch SQL); the backlog drains (``adaptstream_bench.backlog``); the soak (``adaptstream_bench.soak``, by default
the pane mode, so that executors' Python workers run all along). Writes reliability.md, .json and .png to ``--out``
(``--update-docs``: docs/results/), after every trial, drain and soak minute, so a cut run leaves its figures.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from adaptstream_bench import backlog, soak
from adaptstream_bench.backlog import CONNECTORS, SAMPLE_EVERY, drain_line, run_backlog
from adaptstream_bench.chaos import KINDS, RedisServer, check_kinds, run_chaos, sizing, trial_line
from adaptstream_bench.meta import finish_meta, sample_load, start_meta
from adaptstream_bench.soak import minute_line, run_command, run_soak, soak_sizing


def _connectors(text: str) -> list[str]:
    from adaptstream.errors import ConfigError

    cs = [x.strip() for x in text.split(",") if x.strip()]
    if not cs or any(c not in CONNECTORS for c in cs):
        msg = f"--connectors takes a comma list of {', '.join(CONNECTORS)}"
        raise ConfigError(msg)
    return cs


def reliability_command(
    trials: Annotated[int, typer.Option(min=1, help="chaos trials per kind")] = 4,
    kinds: Annotated[str, typer.Option(help=f"chaos kinds, a comma list of {', '.join(KINDS)}")] = ",".join(KINDS),
    files: Annotated[int, typer.Option(min=2, help="chaos input files per trial (one micro-batch each)")] = 24,
    kill_from: Annotated[float, typer.Option(min=0.0, help="earliest kill moment, s after the driver started")] = 3.0,
    kill_to: Annotated[float, typer.Option(min=0.0, help="latest kill moment")] = 20.0,
    seed: Annotated[int, typer.Option(help="seed of the kill moments and the chaos input")] = 0,
    chaos_budget_minutes: Annotated[float, typer.Option(min=1.0, help="start no chaos trial after this")] = 30.0,
    connectors: Annotated[str, typer.Option(help=f"backlog connectors, of {', '.join(CONNECTORS)}")] = ",".join(
        CONNECTORS
    ),
    backlog_cap: Annotated[int, typer.Option(min=1000, help="backlog: rows per batch at most (maxRowsPerTrigger)")] = (
        50_000
    ),
    backlog_rate: Annotated[int, typer.Option(min=100, help="backlog: rows per dataset second")] = 10_000,
    soak_minutes: Annotated[float, typer.Option(min=1.0, help="soak: minutes of input")] = 30.0,
    soak_workload: Annotated[str, typer.Option(help="soak: built-in query")] = "CM1S",
    soak_reduce: Annotated[str, typer.Option(help="soak: pane-mode allocator ('' for none)")] = "prompt",
    soak_admission: Annotated[str, typer.Option(help="soak: admission policy")] = "lmstream",
    soak_rate: Annotated[int, typer.Option(min=1, help="soak: rows/s, steady")] = 2000,
    warmup_minutes: Annotated[float, typer.Option(min=0.0, help="soak: minutes before the reference samples")] = 3.0,
    sample_every: Annotated[float, typer.Option(min=0.1, help="soak: seconds between samples")] = 10.0,
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="report directory [default: runs/bench-reliability-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write docs/results/reliability.*")] = False,
) -> None:
    """Chaos (kill -9 at random moments), a 10x backlog on every connector and a long soak: one report."""
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.reliability_report import targets, write_report

    ks, cs = check_kinds(kinds, kill_from, kill_to), _connectors(connectors)
    if warmup_minutes + 1 >= soak_minutes:
        msg = "--warmup-minutes must leave at least two minutes of the soak (a reference minute and a last one)"
        raise ConfigError(msg)
    target = report_dir("bench-reliability", out, update_docs, report="reliability.json")
    work = Path(tempfile.mkdtemp(prefix="adaptstream-reliability-"))
    soak_cmd = run_command(soak_workload, soak_admission, soak_rate, soak_minutes, work / "soak", soak_reduce or None)

    data: dict = {
        "meta": {
            **start_meta("bench", "reliability"),
            "kinds_available": list(KINDS),
            "sizing": {
                "chaos": sizing(ks, trials, files, kill_from, kill_to, seed, chaos_budget_minutes),
                "backlog": f"cap {backlog_cap} rows per batch (maxRowsPerTrigger), {backlog_rate} rows per dataset "
                f"second, inputs of 1x and 10x the cap; connectors {', '.join(cs)}; the Python side sampled every "
                f"{SAMPLE_EVERY:g} s. " + " ".join((backlog.__doc__ or "").split("\n\n", 1)[1].split()),
                "soak": soak_sizing(soak_cmd, sample_every, warmup_minutes),
            },
            "sampled": " ".join((soak.__doc__ or "").split("\n\n", 1)[1].split()),
        },
        "chaos": {"trials": [], "skipped": []},
        "backlog": {"drains": []},
        "soak": {
            "meta": {"minutes": soak_minutes, "warmup_minutes": warmup_minutes, "processes_by": "session"},
            "samples": [],
        },
    }
    t0 = time.time()

    def note(line: str) -> None:
        sample_load(data["meta"])
        typer.echo(f"[{(time.time() - t0) / 60:5.1f} min] {line}")
        write_report(data, target)

    spark = build_spark(master="local[1]", app_name="reliability-oracle")
    data["meta"]["spark"] = spark.version
    try:
        run_chaos(spark, data["chaos"], ks, trials, files, kill_from, kill_to, seed, chaos_budget_minutes,
                  lambda row, _minutes: note(trial_line(row, trials)))  # fmt: skip
        server = RedisServer() if "redis" in cs else None
        try:
            url = f"redis://127.0.0.1:{server.port}" if server else None
            run_backlog(
                spark, data["backlog"], work, cs, backlog_cap, backlog_rate, url, lambda row: note(drain_line(row))
            )
        finally:
            if server is not None:
                server.stop()
    finally:
        spark.stop()
    try:
        typer.echo(f"soak: {soak_minutes:g} min of `{' '.join(soak_cmd[3:])}`")
        run_soak(data["soak"], soak_cmd, work, sample_every, lambda s: note("soak " + minute_line(s)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish_meta(data["meta"])
    md = write_report(data, target)
    met = [t["met"] for t in targets(data)]
    typer.echo(
        f"bench reliability: {met.count(True)} met, {met.count(False)} missed, {met.count(None)} undecided; "
        f"report in {md}"
    )
