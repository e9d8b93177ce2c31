"""A backlog of ten times the per-batch cap on every connector: peak memory while a query drains it, against the
same query draining one cap's worth (issue #57 item 6, the backlog part).

Per connector (``files``, ``generator``, ``redis``) and size (1x and 10x the cap) a driver process of its own
(Spark master ``local[2]``, a session of its own) drains Linear Road rows (``--backlog-rate`` rows per dataset
second, no jitter) through ``format("adaptstream")`` with ``maxRowsPerTrigger`` = the cap into Spark's Parquet
sink. Every input is there before the query starts: CSV files with modification times in the past; for the
generator, its datasets already written in its directory, as after a stop (with ``duration`` = those seconds its
writer owes nothing more, and the source drains what is on disk); a Redis stream written unpaced (datasets of at
most 10,000 entries). Every :data:`SAMPLE_EVERY` seconds the benchmark reads from /proc, per role (driver, JVM,
source runner, Python workers), the summed resident memory of the driver's session; the peak of each role is kept.
The output is checked row by row against the input read by plain PySpark batch (rows lost, rows extra).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from adaptstream_bench.procs import kill_session
from adaptstream_bench.soak import ROLES, sample

CONNECTORS = ("files", "generator", "redis")
SIZES = (1, 10)  # the input in caps
SAMPLE_EVERY = 0.25  # seconds between samples of the driver's processes: a drain takes 15-25 s

DRIVER = r"""
import sys
from adaptstream.spark.session import build_spark
from adaptstream.workloads.linear_road import SPARK_DDL
connector, where, out, ck, cap, seconds, rate = sys.argv[1:8]
spark = build_spark(master="local[2]", app_name="backlog-" + connector)
r = (spark.readStream.format("adaptstream").option("path", where).option("maxRowsPerTrigger", cap)
     .option("maxBytesPerTrigger", "0").option("statePath", ck + "-state"))
if connector == "generator":
    r = (r.option("connector", "generator").option("generator", "linear_road").option("rate", rate)
         .option("jitter", "0").option("duration", seconds))
elif connector == "redis":
    r = r.schema(SPARK_DDL).option("maxDatasetEntries", "10000")
else:
    r = r.schema(SPARK_DDL).option("fileStableSeconds", "0")
w = r.load().writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
q = w.trigger(availableNow=True).start()
q.awaitTermination()
print("batches", sum(1 for p in q.recentProgress if p["numInputRows"] > 0), flush=True)
spark.stop()
"""


def write_input(connector: str, d: Path, seconds: int, rate: int, redis_url: str | None) -> tuple[str, Path]:
    """The input of one drain (a directory or a stream URL), and the directory of the same rows as CSV that the
    oracle reads."""
    from adaptstream.workloads import GENERATORS
    from adaptstream.workloads.io import dataset_file_name, write_dataset

    gen = GENERATORS.get("linear_road")(seed=0).build()
    files = d / "in"
    files.mkdir(parents=True)
    base = time.time() - seconds - 600
    tables = [gen.generate(k, rate) for k in range(seconds)]
    for k, t in enumerate(tables):
        write_dataset(t, files / dataset_file_name(k), "csv", gen.csv_header(), mtime=base + k)
    if connector != "redis":
        return str(files), files
    from adaptstream.connectors.redis import parse_url
    from adaptstream.connectors.redis_produce import produce

    url = f"{redis_url}/backlog-{d.name}"
    produce(parse_url(url), seconds, lambda k: tables[k], pace=False)
    return url, files


def check(spark, src: Path, out: Path) -> dict:
    """Rows lost (in the input, not in the output) and extra (in the output beyond the input), as multisets."""
    from adaptstream.workloads.linear_road import SPARK_DDL

    want = spark.read.schema(SPARK_DDL).csv(str(src))
    got = spark.read.schema(SPARK_DDL).parquet(str(out)) if any(out.glob("*.parquet")) else want.limit(0)
    return {"expected": want.count(), "got": got.count(), "lost": want.exceptAll(got).count(),
            "extra": got.exceptAll(want).count()}  # fmt: skip


def drain(spark, connector: str, size: int, work: Path, cap: int, rate: int, redis_url: str | None) -> dict:
    seconds = cap * size // rate
    d = work / f"{connector}-{size}x"
    d.mkdir(parents=True)
    where, src = write_input(connector, d, seconds, rate, redis_url)
    (d / "driver.py").write_text(DRIVER)
    out, ck = d / "out", d / "ck"
    cmd = [sys.executable, str(d / "driver.py"), connector, where, str(out), str(ck), str(cap), str(seconds),
           str(rate)]  # fmt: skip
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    peak = {r: 0 for r in ROLES}
    t0 = time.time()
    with open(d / "driver.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=log)
        try:
            while proc.poll() is None and time.time() - t0 < 900:
                s = sample(proc.pid)
                for r in ROLES:
                    peak[r] = max(peak[r], s[r]["rss_mb"])
                time.sleep(SAMPLE_EVERY)
        finally:
            kill_session(proc.pid)
            proc.wait()
    text = (d / "driver.log").read_bytes().decode(errors="replace")
    batches = [int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("batches ")]
    row = {"connector": connector, "size": size, "rows_per_cap": cap, "dataset_seconds": seconds,
           "exit_status": proc.returncode, "seconds": time.time() - t0, "batches": batches[0] if batches else None,
           "peak_rss_mb": peak, "load": os.getloadavg()[0]}  # fmt: skip
    if proc.returncode != 0:
        row["error"] = text[-600:]
    row.update(check(spark, src, out))
    shutil.rmtree(d, ignore_errors=True)
    return row


def run_backlog(spark, part: dict, work: Path, connectors: list[str], cap: int, rate: int, redis_url: str | None,
                on_drain: Callable[[dict], None]) -> None:  # fmt: skip
    """Every connector at 1x then 10x the cap, into ``part["drains"]``; ``on_drain(row)`` after each."""
    part.setdefault("drains", [])
    for connector in connectors:
        for size in SIZES:
            row = drain(spark, connector, size, work, cap, rate, redis_url)
            part["drains"].append(row)
            on_drain(row)


def drain_line(row: dict) -> str:
    p = row["peak_rss_mb"]
    return (
        f"backlog {row['connector']} {row['size']}x: {row['expected']} rows in {row['seconds']:.0f} s, "
        f"{row['batches']} batches, exit {row['exit_status']}, lost {row['lost']} extra {row['extra']}; peak RSS MB "
        + ", ".join(f"{r} {p[r]}" for r in ROLES)
    )
