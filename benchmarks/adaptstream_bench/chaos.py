"""``adaptstream bench chaos``: kill -9 at random moments, then restart, and count every row lost or duplicated
(issue #57 item 6, the chaos part).

Each trial starts a driver process (its own JVM, Spark master ``local[2,4]``: up to 4 attempts per task, as an
executor would retry) that drains a directory of input through ``format("adaptstream")`` with one file per
micro-batch, and kills something with SIGKILL at a moment drawn uniformly from ``[--kill-from, --kill-to]`` seconds
after the driver started (so start-up, reading, writing and committing are all hit):

* ``driver-files``: every process of the driver's session (the driver, its JVM, every Python process Spark
  started), CSV files into Spark's Parquet sink;
* ``worker-files``: one of the application's Python processes, drawn at random: executor workers (``worker``),
  the Python data source's planning workers (``plan_data_source_read`` and the like) and the streaming source's
  runner; same query; Spark retries a task, or the query fails and is restarted;
* ``executor-worker``: one of the executors' Python workers (``pyspark.worker``: the processes that read the
  source's input partitions and run its Python code inside Spark tasks), the first present at or after the kill
  moment; same query;
* ``driver-pane``: the driver of ``adaptstream.windowed_aggregate`` (split reduce, a function sink that overwrites
  its batch's folder), event-time windows;
* ``driver-redis``: the driver's session, reading a Redis stream (one dataset per 0.1 s of entries) into
  the Parquet sink;
* ``redis-server``: the Redis server under that query (``scripts/redis.sh``, append-only file fsynced at every
  write), restarted at once on its port and files; the source waits for it (``redisTimeout``);
* ``controller``: the driver's session of an application tuned by ``adaptstream.tune(scheduler="klink",
  state_path=...)`` with two queries over their own directories: its scheduling controller is a thread of that
  driver and dies with it; the restart resumes the scheduler's saved state (recorded per trial).

Then the same driver runs again on the same checkpoint until the input is drained, and the output is compared with
plain PySpark batch SQL over the same input: rows (or windows) missing, present more than once, or with other
values. A trial whose driver finished before its kill moment is reported as not killed (its output still checked).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from adaptstream_bench.chaos_drivers import SCRIPTS
from adaptstream_bench.meta import finish_meta, sample_load, start_meta
from adaptstream_bench.procs import kill_session, session_processes

KINDS = ("driver-files", "worker-files", "executor-worker", "driver-pane", "driver-redis", "redis-server", "controller")
WORKER_KINDS = ("worker-files", "executor-worker")
REDIS_KINDS = ("driver-redis", "redis-server")
ROOT = Path(__file__).resolve().parents[2]
MASTER = "local[2,4]"

PANE_ORACLE = """SELECT window.start, window.end, k, sum(v), count(v), max(v) FROM chaos_in WHERE ts IS NOT NULL
GROUP BY window(ts, '20 seconds', '10 seconds'), k"""


class RedisServer:
    """The benchmark's Redis server, started and restarted by ``scripts/redis.sh`` on one port and folder."""

    def __init__(self) -> None:
        self.port: str | None = None
        self.dir: str | None = None
        self.pid: str | None = None
        self.start()

    def start(self) -> None:
        args = [str(self.port), str(self.dir)] if self.port else []
        env = {**os.environ, "REDIS_APPENDFSYNC": "always"}
        out = subprocess.run(["bash", str(ROOT / "scripts" / "redis.sh"), "start", *args], env=env,
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        fields = dict(kv.split("=", 1) for kv in out.split())
        self.port, self.pid, self.dir = fields["port"], fields["pid"], fields["dir"]

    def kill(self) -> None:
        os.kill(int(self.pid or 0), signal.SIGKILL)

    def stop(self) -> None:
        subprocess.run(["bash", str(ROOT / "scripts" / "redis.sh"), "stop", str(self.pid)], check=False)
        shutil.rmtree(self.dir or "", ignore_errors=True)

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=int(self.port or 0))


def write_stream(server: RedisServer, stream: str, groups: int) -> None:
    """``groups`` datasets of 50 entries, each in its own 0.1 s of the server's clock; returns once the server's
    clock has passed the last one (it is then a closed dataset)."""
    r = server.client()

    def now_tenths() -> int:
        sec, us = r.time()
        return (int(sec) * 1000 + int(us) // 1000) // 100

    for i in range(groups):
        tenth = now_tenths()
        pipe = r.pipeline()
        for j in range(50):
            pipe.xadd(stream, {"row": f"k{i},{j}"})
        pipe.execute()
        while now_tenths() <= tenth:
            pass  # the next group starts in the next tenth of a second of the server's clock
    last = now_tenths()
    while now_tenths() <= last + 1:
        pass


def write_input(kind: str, src: Path, files: int, rnd: random.Random) -> None:
    """Files written whole before the driver starts (atomic rename), one micro-batch each."""
    src.mkdir(parents=True)
    for i in range(files):
        name = f"{i:03d}.csv"
        if kind == "controller":  # two queries, each its own directory and keys
            name = f"{'ab'[i % 2]}/{i:03d}.csv"
            (src / name).parent.mkdir(exist_ok=True)
            text = "".join(f"{'ab'[i % 2]}{i},{j}\n" for j in range(50))
        elif kind == "driver-pane":
            rows = [(f"k{rnd.randrange(8)}", 60 * i + rnd.randrange(60), rnd.randrange(1000)) for _ in range(150)]
            text = "".join(f"{k},2024-01-01 {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d},{v}\n" for k, t, v in rows)
        else:
            text = "".join(f"k{i},{j}\n" for j in range(50))
        tmp = src / f".{i:03d}.tmp"
        tmp.write_text(text)
        os.replace(tmp, src / name)


def python_workers(sid: int) -> list[tuple[int, str]]:
    """(PID, role) of the session's PySpark Python workers: every process started as ``pyspark.daemon``
    (and the workers it forked), whose last argument names its role (``pyspark.worker`` runs tasks on the
    executor; ``pyspark.sql.worker.*`` plan the Python data source), and the streaming source's runner."""
    return [
        (pid, cmd.split()[-1].decode(errors="replace").rsplit(".", 1)[-1])
        for pid, cmd in session_processes(sid)
        if b"pyspark.daemon" in cmd or b"python_streaming_source_runner" in cmd
    ]


def _kill(kind: str, proc: subprocess.Popen, at: float, t0: float, rnd: random.Random,
          server: RedisServer | None = None) -> str:  # fmt: skip
    """Wait for the kill moment and kill; what was killed, or why nothing was."""
    while time.time() - t0 < at:
        if proc.poll() is not None:
            return "not killed: the driver finished first"
        time.sleep(0.05)
    if kind == "redis-server" and server is not None:
        server.kill()
        server.start()  # at once, on its port and files: the source waits for it
        return "redis server (restarted at once)"
    if kind not in WORKER_KINDS:
        n = kill_session(proc.pid)
        proc.wait()
        return f"driver session ({n} processes)"
    deadline = time.time() + 15
    while time.time() < deadline and proc.poll() is None:
        workers = [w for w in python_workers(proc.pid) if kind == "worker-files" or w[1] == "worker"]
        if workers:
            victim, role = rnd.choice(workers)
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                continue
            return f"python {role} (1 of {len(workers)})"
        time.sleep(0.05)
    none = "no executor Python worker ran" if kind == "executor-worker" else "no Python worker ran"
    return f"not killed: {none}" if proc.poll() is None else "not killed: the driver finished first"


def error_lines(text: str, keep: int = 3) -> str:
    """The lines of a failed driver's output that name an error (Spark's log and a Python traceback are long)."""
    found = [ln.strip()[:300] for ln in text.splitlines() if re.search(r"(Error|Exception)\b", ln)
             and not ln.lstrip().startswith("at ")]  # fmt: skip
    return " | ".join(found[-keep:]) if found else text[-300:]


def _has_output(out: Path) -> bool:
    return any(out.rglob("*.parquet"))


def check(spark, kind: str, src: Path, out: Path, groups: int = 0) -> dict:
    """Output against batch SQL over the same input: lost, duplicated and wrong rows (windows for the pane). An
    output folder without data files (the query committed nothing) holds no rows."""
    if kind == "driver-pane":
        spark.read.schema("k STRING, ts TIMESTAMP, v INT").csv(str(src)).createOrReplaceTempView("chaos_in")
        want = {tuple(r[:3]): tuple(r[3:]) for r in spark.sql(PANE_ORACLE).collect()}
        got_rows = (
            [tuple(r) for r in spark.read.parquet(str(out)).drop("batch_id").collect()] if _has_output(out) else []
        )
        got = Counter(tuple(r[:3]) for r in got_rows)
        values = {tuple(r[:3]): tuple(r[3:]) for r in got_rows}
        lost = sum(1 for w in want if w not in got)
        dup = sum(n - 1 for n in got.values() if n > 1)
        wrong = sum(1 for w, v in values.items() if w not in want or want[w] != v)
        return {"unit": "windows", "expected": len(want), "got": len(got_rows), "lost": lost, "duplicated": dup,
                "wrong": wrong}  # fmt: skip
    if kind in REDIS_KINDS:  # what was written to the stream
        expected = Counter((f"k{i}", j) for i in range(groups) for j in range(50))
    else:
        dirs = [str(src / q) for q in "ab"] if kind == "controller" else [str(src)]
        expected = Counter(tuple(r) for r in spark.read.schema("k STRING, v INT").csv(dirs).collect())
    seen: Counter = Counter()
    for o in [out / q for q in "ab"] if kind == "controller" else [out]:
        if _has_output(o):
            seen.update(tuple(r) for r in spark.read.parquet(str(o)).collect())
    return {"unit": "rows", "expected": sum(expected.values()), "got": sum(seen.values()),
            "lost": sum((expected - seen).values()), "duplicated": sum((seen - expected).values()),
            "wrong": 0}  # fmt: skip


def trial(spark, kind: str, k: int, work: Path, files: int, kill_from: float, kill_to: float, seed: int,
          server: RedisServer | None = None) -> dict:  # fmt: skip
    rnd = random.Random(seed)
    at = rnd.uniform(kill_from, kill_to)
    d = work / f"{kind}-{k}"
    src, out, ck = d / "in", d / "out", d / "ck"
    script = d / "driver.py"
    d.mkdir(parents=True)
    if kind in REDIS_KINDS and server is not None:
        stream = f"chaos-{kind}-{k}"
        write_stream(server, stream, files)
        where, text = f"redis://127.0.0.1:{server.port}/{stream}", SCRIPTS[kind]
    else:
        write_input(kind, src, files, rnd)
        where, text = str(src), SCRIPTS[kind]
    script.write_text(text)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [sys.executable, str(script), where, str(out), str(ck), MASTER]
    t0 = time.time()
    with open(d / "first.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=log)
        killed = _kill(kind, proc, at, t0, rnd, server)
        first_rc = proc.wait(timeout=600)
    # a batch's commit file (Spark also writes a hidden .N.crc beside it, not counted)
    committed = sum(1 for c in [ck / "commits", *ck.glob("*/commits")] if c.is_dir() for n in os.listdir(c)
                    if not n.startswith("."))  # fmt: skip
    saved = (d / "ck-tuner" / "tuner-policies.json").exists()
    t1 = time.time()
    rerun = subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False)
    row = {
        "kind": kind, "trial": k, "seed": seed, "kill_at_s": at, "killed": killed, "first_rc": first_rc,
        "batches_committed_before_restart": committed, "restart_rc": rerun.returncode, "restart_s": time.time() - t1,
        "restart_error": "" if rerun.returncode == 0 else error_lines(rerun.stderr.decode(errors="replace")),
    }  # fmt: skip
    if kind == "controller":  # did the restart resume the scheduler's state the first run saved?
        row["scheduler_state"] = {"saved_before_restart": saved,
                                  "restored_offset": (d / "ck-restored").read_text() if (d / "ck-restored").exists()
                                  else "not written"}  # fmt: skip
    if first_rc not in (0, -9):  # the first run failed on its own (a killed worker the retries did not cover)
        row["first_error"] = error_lines((d / "first.log").read_bytes().decode(errors="replace"))
    row.update(check(spark, kind, src, out, files))
    row["load"] = os.getloadavg()[0]
    shutil.rmtree(d, ignore_errors=True)
    return row


def sizing(ks: list[str], trials: int, files: int, kill_from: float, kill_to: float, seed: int,
           budget_minutes: float) -> str:  # fmt: skip
    return (
        f"{trials} trials per kind ({', '.join(ks)}), {files} input files per trial (one micro-batch each; "
        f"driver-files / worker-files: 50 rows per file; controller: the files alternate between its two queries; "
        f"driver-pane: 150 rows over 60 s of event time per file; Redis kinds: {files} datasets of 50 entries, a "
        f"stream per trial), kill moment uniform in [{kill_from:g}, {kill_to:g}] s after the driver started, seed "
        f"{seed}, drivers on Spark master {MASTER}, the oracle's batch SQL on local[1] in the benchmark's process, a "
        f"{budget_minutes:g} min budget on starting trials."
    )


def check_kinds(kinds: str, kill_from: float, kill_to: float) -> list[str]:
    from adaptstream.errors import ConfigError

    ks = [x.strip() for x in kinds.split(",") if x.strip()]
    if not ks or any(x not in KINDS for x in ks) or kill_to < kill_from:
        msg = f"--kinds takes a comma list of {', '.join(KINDS)}, and --kill-to must be >= --kill-from"
        raise ConfigError(msg)
    return ks


def run_chaos(spark, part: dict, ks: list[str], trials: int, files: int, kill_from: float, kill_to: float,
              seed: int, budget_minutes: float, on_trial: Callable[[dict, float], None]) -> None:  # fmt: skip
    """The trials, kind after kind in each round, into ``part["trials"]`` (and ``part["skipped"]`` past the
    budget); ``on_trial(row, minutes)`` after each."""
    work = Path(tempfile.mkdtemp(prefix="adaptstream-chaos-"))
    server = RedisServer() if any(k in REDIS_KINDS for k in ks) else None
    part.setdefault("trials", [])
    part.setdefault("skipped", [])
    t_start = time.time()
    try:
        for k in range(trials):
            for kind in ks:
                if (time.time() - t_start) / 60 > budget_minutes:
                    part["skipped"].append(f"{kind} trial {k + 1}")
                    continue
                row = trial(spark, kind, k, work, files, kill_from, kill_to, seed * 1000 + 10 * k + KINDS.index(kind),
                            server)  # fmt: skip
                part["trials"].append(row)
                on_trial(row, (time.time() - t_start) / 60)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def trial_line(row: dict, trials: int) -> str:
    return (
        f"{row['kind']} {row['trial'] + 1}/{trials}: kill at {row['kill_at_s']:.1f} s "
        f"({row['killed']}), restart rc {row['restart_rc']}, {row['unit']} lost {row['lost']} duplicated "
        f"{row['duplicated']} wrong {row['wrong']}"
    )


def chaos_command(
    trials: Annotated[int, typer.Option(min=1, help="trials per kind")] = 8,
    kinds: Annotated[str, typer.Option(help=f"comma list of {', '.join(KINDS)}")] = ",".join(KINDS),
    files: Annotated[int, typer.Option(min=2, help="input files per trial (one micro-batch each)")] = 24,
    kill_from: Annotated[float, typer.Option(min=0.0, help="earliest kill moment, s after the driver started")] = 3.0,
    kill_to: Annotated[float, typer.Option(min=0.0, help="latest kill moment (24 files drain in about 22 s)")] = 20.0,
    seed: Annotated[int, typer.Option(help="seed of the kill moments and the input")] = 0,
    budget_minutes: Annotated[float, typer.Option(min=1.0, help="start no trial after this much wall time")] = 40.0,
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="report directory [default: runs/bench-chaos-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write docs/results/chaos.*")] = False,
) -> None:
    """kill -9 of the driver, a Python worker, the Redis server or a tuned application's controller at random
    moments; rows lost or duplicated after the restart."""
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.chaos_report import write_report

    ks = check_kinds(kinds, kill_from, kill_to)
    target = report_dir("bench-chaos", out, update_docs, report="chaos.json")
    target.mkdir(parents=True, exist_ok=True)
    spark = build_spark(master="local[1]", app_name="chaos-oracle")
    data: dict = {
        "meta": {
            **start_meta("bench", "chaos"),
            "spark": spark.version,
            "kinds_available": list(KINDS),
            "sizing": sizing(ks, trials, files, kill_from, kill_to, seed, budget_minutes),
        },
    }

    def on_trial(row: dict, minutes: float) -> None:
        sample_load(data["meta"])
        typer.echo(f"[{minutes:5.1f} min] {trial_line(row, trials)}")
        write_report(data, target)

    try:
        run_chaos(spark, data, ks, trials, files, kill_from, kill_to, seed, budget_minutes, on_trial)
    finally:
        spark.stop()
    finish_meta(data["meta"])
    md = write_report(data, target)
    typer.echo(f"bench chaos: report in {md}")
