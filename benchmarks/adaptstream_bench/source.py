"""``adaptstream bench source``: adaptstream's input path against Spark's built-in CSV file source.

One invocation, one CSV directory of Linear Road rows, the same two queries (a pass-through filter; a 30 s / 10 s
sliding average) drained with ``Trigger.AvailableNow`` and 10 files per micro-batch into a noop sink through:
Spark's CSV source, adaptstream reading on the executors (the default), and adaptstream parsing beside the driver
(``readOn=driver``, the path every row took before). Every path is warmed once, then runs alternate in order.
Then: peak Python worker memory while adaptstream drains a backlog of ten times its per-batch byte cap, and the
filter on a standalone cluster with 1 and 2 workers. Writes source.md, source.png and source.json to ``--out``
(default runs/bench-source-<time>/; ``--update-docs`` writes docs/results/). The CSV files and checkpoints go to a
temporary directory, removed at the end unless ``--keep-data``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from adaptstream_bench.cluster import LocalCluster
from adaptstream_bench.meta import start_meta

QUERIES = ("filter", "window")
PATHS = ("spark-csv", "adaptstream", "adaptstream-driver")


# -- data -----------------------------------------------------------------------------------------------------
def make_data(directory: Path, rows: int, files: int, seed: int = 7) -> int:
    """Linear Road rows as CSV files with modification times in the past (a ready backlog). Returns the bytes."""
    from adaptstream.workloads import GENERATORS
    from adaptstream.workloads.io import dataset_file_name, write_dataset

    directory.mkdir(parents=True, exist_ok=True)
    gen = GENERATORS.get("linear_road")(seed=seed).build()
    base = time.time() - files - 600
    for k in range(files):
        write_dataset(gen.generate(k, rows // files), directory / dataset_file_name(k), "csv", mtime=base + k)
    return sum(p.stat().st_size for p in directory.iterdir())


# -- one drain ------------------------------------------------------------------------------------------------
def _frame(spark, path: str, data: str, state: Path, extra: dict[str, str] | None = None):
    from adaptstream.workloads.linear_road import SPARK_DDL

    if path == "spark-csv":
        return spark.readStream.schema(SPARK_DDL).option("maxFilesPerTrigger", "10").csv(data)
    r = (
        spark.readStream.format("adaptstream")
        .schema(SPARK_DDL)
        .option("path", data)
        .option("maxFilesPerTrigger", "10")
        .option("maxBytesPerTrigger", "0")
        .option("metricsPath", str(state))
        .option("fileStableSeconds", "0")
        .option("readOn", "driver" if path == "adaptstream-driver" else "executors")
    )
    for k, v in (extra or {}).items():
        r = r.option(k, v)
    return r.load()


def _query(df, query: str):
    from pyspark.sql import functions as F

    if query == "filter":
        return df.filter(F.col("Spd") >= 0)
    ts = F.timestamp_seconds("Time")
    return (
        df.withColumn("ts", ts)
        .withWatermark("ts", "10 seconds")
        .groupBy(F.window("ts", "30 seconds", "10 seconds"), "XWay")
        .agg(F.avg("Spd").alias("avg_spd"))
    )


def drain(spark, path: str, query: str, data: str, work: Path, extra: dict[str, str] | None = None) -> dict:
    """Run one query over the whole directory; wall seconds, rows and (adaptstream) source CPU per row."""
    work.mkdir(parents=True, exist_ok=True)
    df = _query(_frame(spark, path, data, work / "metrics", extra), query)
    w = df.writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", str(work / "ck"))
    if query == "window":
        w = w.outputMode("append")
    t0, e0 = time.perf_counter(), time.time()
    q = w.start()
    q.awaitTermination()
    wall = time.perf_counter() - t0
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    out = {"wall_s": wall, "rows": rows, "rows_per_s": rows / wall, "batches": len(q.recentProgress)}
    out.update(_phases(q.recentProgress, e0))
    out.update(_source_cpu(work / "metrics" / "batches.jsonl"))
    return out


def _phases(progress: list[dict], started: float) -> dict:
    """Where a drain's wall time went: from ``start()`` to the first batch (the source's start-up: for a Python
    data source, its process and imports) and the batches' own time (Spark's triggerExecution, summed)."""
    from datetime import datetime

    if not progress:
        return {}
    first = datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    batch_s = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return {"to_first_batch_s": first - started, "batch_s": batch_s}


def _source_cpu(batches: Path) -> dict:
    if not batches.exists():
        return {}
    recs = [json.loads(line) for line in batches.read_text().splitlines() if line.strip()]
    if len(recs) < 2:
        return {}
    cpu = recs[-1]["extra"]["source_cpu_s"] - recs[0]["extra"]["source_cpu_s"]
    rows = sum(r["rows"] for r in recs[1:])
    return {
        "source_cpu_s": cpu,
        "source_cpu_us_per_row": 1e6 * cpu / max(rows, 1),
        "max_batch_bytes": max(r["bytes"] for r in recs),
    }


# -- memory -----------------------------------------------------------------------------------------------------
def _parent(pid: str) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]


class WorkerRss:
    """Samples the resident memory of the Python processes under this application's JVM (workers, their daemon,
    the source process) every 50 ms; other applications on the machine are not counted."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm = str(jvm_pid)
        self.peak_one = 0
        self.peak_sum = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> list[int]:
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"python" not in cmd.split(b"\0")[0] or not self._under_jvm(pid):
                    continue
                rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
            out.append(rss)
        return out

    def _under_jvm(self, pid: str) -> bool:
        for _ in range(8):
            pid = _parent(pid)
            if pid == self.jvm:
                return True
            if pid in ("0", "1"):
                return False
        return False

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            s = self._sample()
            if s:
                self.peak_one, self.peak_sum = max(self.peak_one, max(s)), max(self.peak_sum, sum(s))

    def __enter__(self) -> WorkerRss:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def backlog_memory(spark, data: str, data_bytes: int, expected_rows: int, work: Path) -> dict:
    cap = max(data_bytes // 10, 1)  # the directory holds ten times the per-batch cap
    res = {}
    for path in ("adaptstream", "adaptstream-driver"):
        with WorkerRss(spark._jvm.java.lang.ProcessHandle.current().pid()) as rss:
            r = drain(
                spark, path, "filter", data, work / path, {"maxBytesPerTrigger": str(cap), "maxFilesPerTrigger": "0"}
            )
        res[path] = {
            **r,
            "cap_bytes": cap,
            "peak_worker_rss_mb": rss.peak_one / 2**20,
            "peak_all_workers_rss_mb": rss.peak_sum / 2**20,
            "lost_rows": expected_rows - r["rows"],
        }
    return res


# -- cluster ----------------------------------------------------------------------------------------------------
def _jvm_cpu(spark) -> float:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_runs(data: str, workers: list[int], reps: int, work: Path, echo) -> dict:
    from adaptstream.spark.session import build_spark

    out: dict = {}
    for n in workers:
        with LocalCluster(n, work / f"cluster-{n}", 7178, timeout=180) as url:
            spark = build_spark(master=url, conf={"spark.executor.memory": "1g"})
            try:
                runs: dict = {p: [] for p in ("spark-csv", "adaptstream")}
                for rep in range(reps + 1):
                    for p in ("spark-csv", "adaptstream") if rep % 2 else ("adaptstream", "spark-csv"):
                        cpu0 = _jvm_cpu(spark)
                        r = drain(spark, p, "filter", data, work / f"c{n}-{p}-{rep}")
                        r["driver_jvm_cpu_s"] = _jvm_cpu(spark) - cpu0
                        if rep:  # rep 0 warms both paths
                            runs[p].append(r)
                        echo(f"  cluster {n} worker(s) {p}: {r['rows_per_s']:,.0f} rows/s")
                out[str(n)] = runs
            finally:
                spark.stop()
    return out


# -- the command ----------------------------------------------------------------------------------------------
def source_command(
    out: Annotated[
        str | None,
        typer.Option(
            metavar="DIR", help="where source.md, source.json and source.png go [default: runs/bench-source-<time>]"
        ),
    ] = None,
    update_docs: Annotated[
        bool, typer.Option("--update-docs", help="write the committed report in docs/results")
    ] = False,
    keep_data: Annotated[bool, typer.Option(help="keep the generated CSV files and checkpoints (OUT/work)")] = False,
    rows: Annotated[int, typer.Option(min=10_000, help="rows in the CSV directory")] = 2_400_000,
    files: Annotated[int, typer.Option(min=10, help="files the rows are spread over")] = 240,
    reps: Annotated[int, typer.Option(min=1, help="timed runs per path and query (after one warm-up)")] = 3,
    workers: Annotated[str, typer.Option(help="standalone cluster sizes to run, e.g. '1,2'; '' to skip")] = "1,2",
    cluster_reps: Annotated[int, typer.Option(min=1, help="timed runs per path on each cluster size")] = 2,
) -> None:
    """Throughput of adaptstream's source vs Spark's CSV source, driver CPU per row, backlog memory, cluster."""
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark

    target = report_dir("bench-source", out, update_docs, report="source.json")
    work = target / "work" if keep_data else Path(tempfile.mkdtemp(prefix="adaptstream-bench-source-"))
    data = work / "data"
    meta = {
        **start_meta("bench", "source"),
    }
    typer.echo(f"bench source: writing {rows:,} Linear Road rows in {files} files under {data}")
    data_bytes = make_data(data, rows, files)
    spark = build_spark(app_name="bench-source")
    local: dict = {q: {p: [] for p in PATHS} for q in QUERIES}
    try:
        for q in QUERIES:
            for rep in range(reps + 1):
                order = PATHS if rep % 2 == 0 else tuple(reversed(PATHS))
                for p in order:
                    r = drain(spark, p, q, str(data), work / f"{q}-{p}-{rep}")
                    typer.echo(
                        f"  {q:6s} {p:18s} {'warm-up' if rep == 0 else f'run {rep}':8s} "
                        f"{r['rows_per_s']:>12,.0f} rows/s"
                    )
                    if rep:
                        local[q][p].append(r)
        typer.echo("bench source: backlog of 10x the byte cap")
        backlog = backlog_memory(spark, str(data), data_bytes, rows // files * files, work / "backlog")
    finally:
        spark.stop()
    sizes = [int(x) for x in workers.split(",") if x.strip()]
    cluster = cluster_runs(str(data), sizes, cluster_reps, work, typer.echo) if sizes else {}
    meta.update(
        load_after=os.getloadavg(),
        finished=time.time(),
        rows=rows // files * files,
        files=files,
        data_bytes=data_bytes,
        reps=reps,
    )
    result = {"meta": meta, "local": local, "backlog": backlog, "cluster": cluster}
    from adaptstream_bench.source_report import write_report

    write_report(result, target)
    if not keep_data:
        shutil.rmtree(work, ignore_errors=True)
    typer.echo(f"bench source: report in {target / 'source.md'}")


def median(runs: list[dict], key: str) -> float:
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else float("nan")
