"""``adaptstream bench soak``: one query at a steady rate for a long time, sampling what its processes hold (issue
#57 item 6, the soak part).

The query is ``adaptstream run`` in a process group of its own (the CLI's Python driver, its JVM, the Python data
source's processes and the executors' Python workers, all on this machine under ``local[2]``). Every
``--sample-every`` seconds the benchmark reads from /proc, per role, the summed resident memory (VmRSS), open file
descriptors and threads of the group's processes. Roles: ``driver`` (the CLI's Python process), ``jvm``,
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
from pathlib import Path
from typing import Annotated

import typer

from adaptstream_bench.meta import finish_meta, sample_load, start_meta
from adaptstream_bench.procs import group_processes

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
    """Per role: processes, RSS (MB), open descriptors and threads summed over the process group ``leader``."""
    out = {r: {"procs": 0, "rss_mb": 0, "fds": 0, "threads": 0} for r in ROLES}
    for pid, cmd in group_processes(leader):
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


def soak_command(
    minutes: Annotated[float, typer.Option(min=1.0, help="minutes of input")] = 30.0,
    workload: Annotated[str, typer.Option(help="built-in query")] = "LR1S",
    admission: Annotated[str, typer.Option(help="admission policy")] = "lmstream",
    rate: Annotated[int, typer.Option(min=1, help="rows/s, steady")] = 2000,
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
    cmd = [sys.executable, "-c", "from adaptstream.cli import main; main()", "run", "--workload", workload,
           "--admission", admission, "--rate", str(rate), "--duration", str(60 * minutes), "--run-dir",
           str(work / "run")]  # fmt: skip
    data: dict = {
        "meta": {
            **start_meta("bench", "soak"),
            "sizing": f"`adaptstream run --workload {workload} --admission {admission} --rate {rate} --duration "
            f"{60 * minutes:g}` (Spark master local[2]) in a process group of its own; a sample every "
            f"{sample_every:g} s; reference: the samples of the minute after a {warmup_minutes:g} min warm-up; "
            "end: the samples of the last minute of input.",
            "minutes": minutes,
            "warmup_minutes": warmup_minutes,
            "sampled": " ".join((__doc__ or "").split("\n\n", 1)[1].split()),
        },
        "samples": [],
    }
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    t0 = time.time()
    with open(work / "run.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=log)
        try:
            while proc.poll() is None:
                data["samples"].append({"t": time.time() - t0, **sample(proc.pid)})
                sample_load(data["meta"])
                if len(data["samples"]) % max(int(60 / sample_every), 1) == 0:
                    s = data["samples"][-1]
                    parts = [f"{r} {s[r]['rss_mb']} MB / {s[r]['fds']} fds / {s[r]['threads']} thr" for r in ROLES]
                    typer.echo(f"[{s['t'] / 60:5.1f} min] " + ", ".join(parts))
                    write_report(data, target)
                time.sleep(sample_every)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            proc.wait()
    data["meta"]["exit_status"] = proc.returncode
    data["meta"]["run_tail"] = (work / "run.log").read_bytes().decode(errors="replace")[-1500:]
    finish_meta(data["meta"])
    md = write_report(data, target)
    typer.echo(f"bench soak: report in {md} (the run's exit status {proc.returncode})")
    shutil.rmtree(work, ignore_errors=True)
