"""``adaptstream bench soak``: one query at a steady rate for a long time, sampling what its processes hold (issue
#57 item 6, the soak part).

The query is ``adaptstream run`` in a session of its own (the CLI's Python driver, its JVM, the Python data
source's processes and the executors' Python workers, all on this machine under ``local[2]``). Every
``--sample-every`` seconds the benchmark reads from /proc, per role, the summed resident memory (VmRSS), open file
descriptors and threads of the session's processes. Roles: ``driver`` (the CLI's Python process), ``jvm``,
``source`` (the Python streaming source runner, where the source's policies and connectors live) and ``workers``
(every ``pyspark.daemon`` process: executor workers and the data source's planning workers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from adaptstream_bench.meta import finish_meta, sample_load, start_meta
from adaptstream_bench.procs import kill_session, session_processes

ROLES = ("driver", "jvm", "source", "workers")


def role_of(pid: int, leader: int, cmd: bytes) -> str | None:
    if pid == leader:
        return "driver"
    if b"java" in cmd.split(b" ", 1)[0]:
        return "jvm"
    if b"python_streaming_source_runner" in cmd:
        return "source"
    if b"pyspark.daemon" in cmd:
        return "workers"
    return None


def _status(pid: int) -> tuple[int, int]:
    """(VmRSS in kB, threads) of a process."""
    rss = threads = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


def sample(leader: int) -> dict[str, dict[str, int]]:
    """Per role: processes, RSS (MB), open descriptors and threads summed over the session of ``leader``."""
    out = {r: {"procs": 0, "rss_mb": 0, "fds": 0, "threads": 0} for r in ROLES}
    for pid, cmd in session_processes(leader):
        role = role_of(pid, leader, cmd)
        if role is None:
            continue
        try:
            rss, threads = _status(pid)
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, ValueError):
            continue  # the process ended while it was read
        o = out[role]
        o["procs"] += 1
        o["rss_mb"] += rss // 1024
        o["fds"] += fds
        o["threads"] += threads
    return out


def run_command(
    workload: str, admission: str, rate: int, minutes: float, run_dir: Path, reduce: str | None
) -> list[str]:
    """The ``adaptstream run`` command line of the soak."""
    cmd = [sys.executable, "-c", "from adaptstream.cli import main; main()", "run", "--workload", workload,
           "--admission", admission, "--rate", str(rate), "--duration", str(60 * minutes), "--run-dir",
           str(run_dir)]  # fmt: skip
    return cmd + (["--reduce", reduce] if reduce else [])


def soak_sizing(cmd: list[str], sample_every: float, warmup_minutes: float) -> str:
    words = cmd[3:]
    i = words.index("--run-dir")
    shown = " ".join(words[:i] + words[i + 2 :])  # the run directory is a temporary one
    return (
        f"`adaptstream {shown}` (Spark master local[2]) in a session of its own; a sample every {sample_every:g} s; "
        f"reference: the samples of the minute after a {warmup_minutes:g} min warm-up; end: the samples of the "
        "last minute of input."
    )


def run_soak(part: dict, cmd: list[str], work: Path, sample_every: float,
             on_minute: Callable[[dict], None]) -> None:  # fmt: skip
    """Run ``cmd`` to its end, sampling into ``part["samples"]``; ``on_minute(sample)`` about once a minute. The
    exit status and the log's tail go into ``part["meta"]``."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    part.setdefault("samples", [])
    t0 = time.time()
    with open(work / "run.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=log)
        try:
            while proc.poll() is None:
                part["samples"].append({"t": time.time() - t0, **sample(proc.pid)})
                if len(part["samples"]) % max(int(60 / sample_every), 1) == 0:
                    on_minute(part["samples"][-1])
                time.sleep(sample_every)
        finally:
            kill_session(proc.pid)  # the driver if it still runs, and Python workers it left behind
            proc.wait()
    part["meta"]["exit_status"] = proc.returncode
    part["meta"]["run_tail"] = (work / "run.log").read_bytes().decode(errors="replace")[-1500:]


def minute_line(s: dict) -> str:
    parts = [f"{r} {s[r]['rss_mb']} MB / {s[r]['fds']} fds / {s[r]['threads']} thr" for r in ROLES]
    return f"[{s['t'] / 60:5.1f} min] " + ", ".join(parts)


def soak_command(
    minutes: Annotated[float, typer.Option(min=1.0, help="minutes of input")] = 30.0,
    workload: Annotated[str, typer.Option(help="built-in query")] = "LR1S",
    admission: Annotated[str, typer.Option(help="admission policy")] = "lmstream",
    rate: Annotated[int, typer.Option(min=1, help="rows/s, steady")] = 2000,
    reduce: Annotated[
        str | None, typer.Option(help="pane mode with this allocator (hash, prompt, split): runs Python workers")
    ] = None,
    sample_every: Annotated[float, typer.Option(min=1.0, help="seconds between samples")] = 10.0,
    warmup_minutes: Annotated[float, typer.Option(min=0.0, help="minutes before the reference samples")] = 3.0,
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="report directory [default: runs/bench-soak-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write docs/results/soak.*")] = False,
) -> None:
    """A long steady run: RSS, open descriptors and threads of the driver, JVM, source and Python workers."""
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream_bench.soak_report import write_report

    if warmup_minutes >= minutes:
        msg = "--warmup-minutes must be shorter than --minutes"
        raise ConfigError(msg)
    target = report_dir("bench-soak", out, update_docs, report="soak.json")
    work = Path(tempfile.mkdtemp(prefix="adaptstream-soak-"))
    cmd = run_command(workload, admission, rate, minutes, work / "run", reduce)
    data: dict = {
        "meta": {
            **start_meta("bench", "soak"),
            "sizing": soak_sizing(cmd, sample_every, warmup_minutes),
            "minutes": minutes,
            "warmup_minutes": warmup_minutes,
            "processes_by": "session",
            "sampled": " ".join((__doc__ or "").split("\n\n", 1)[1].split()),
        },
    }

    def on_minute(s: dict) -> None:
        sample_load(data["meta"])
        typer.echo(minute_line(s))
        write_report(data, target)

    try:
        run_soak(data, cmd, work, sample_every, on_minute)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish_meta(data["meta"])
    md = write_report(data, target)
    typer.echo(f"bench soak: report in {md} (the run's exit status {data['meta']['exit_status']})")
