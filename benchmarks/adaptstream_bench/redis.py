"""``adaptstream bench redis``: a pass-through query fed from Redis Streams vs from files, on the same machine, with
the producer's own ceiling measured beside it.

One invocation, one set of Linear Road rows:
1. producer ceiling: ``adaptstream produce --no-pace`` writes the rows into a stream (``reps`` times; wall rate,
   generation included, and the XADD round trips alone);
2. drain rate (the maximum sustainable rate estimate): the same rows drained with ``Trigger.AvailableNow`` and the
   same row cap per micro-batch through ``format("adaptstream")`` from the stream and from CSV files of those rows,
   a pass-through filter into a noop sink; rows per second of processing time (Spark's triggerExecution of the
   batches that held data), one warm-up per path, then ``reps`` runs alternating order;
3. generator ceiling: the generator connector's own work (generate a second's rows, write its CSV file), unpaced,
   ``reps`` times: the files path's live feeder cannot go faster;
4. live check: both sources fed live at ``live_share`` of the lowest measured ceiling for ``live_seconds`` (Redis:
   the paced producer; files: the generator connector writing one file per second), dataset latency recorded.
Writes redis.md, redis.json and redis.png to ``--out`` (default runs/bench-redis-<time>/; ``--update-docs`` writes
docs/results/). Starts its own redis-server with scripts/redis.sh unless ``--url`` names one.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated

import typer

from adaptstream_bench.meta import start_meta

ROOT = Path(__file__).resolve().parents[2]  # the repository: benchmarks/adaptstream_bench/<file>
PATHS = ("redis", "files")
SECONDS = 20  # the rows are generated as this many one-second datasets


class _Server:
    """A redis-server from scripts/redis.sh (stopped by PID at the end), or an existing one."""

    def __init__(self, url: str | None) -> None:
        self.url: str | None = url
        self.pid: str | None = None
        self.dir: str | None = None

    def __enter__(self) -> _Server:
        if self.url is None:
            script = ROOT / "scripts" / "redis.sh"
            if not script.exists():
                msg = "no scripts/redis.sh beside this package: pass --url redis://HOST:PORT"
                raise typer.BadParameter(msg)
            done = subprocess.run([str(script), "start"], capture_output=True, text=True, check=True)
            info = dict(kv.split("=", 1) for kv in done.stdout.split())
            self.url, self.pid, self.dir = f"redis://127.0.0.1:{info['port']}", info["pid"], info["dir"]
        return self

    def __exit__(self, *exc) -> None:
        if self.pid:
            subprocess.run([str(ROOT / "scripts" / "redis.sh"), "stop", self.pid], check=False)
            shutil.rmtree(str(self.dir), ignore_errors=True)


def _tables(rows: int, seed: int = 7):
    from adaptstream.workloads import GENERATORS

    gen = GENERATORS.get("linear_road")(seed=seed).build()
    return [gen.generate(k, rows // SECONDS) for k in range(SECONDS)]


def _frame(spark, path: str, source: str, work: Path, batch_rows: int, extra: dict[str, str] | None = None):
    from adaptstream.workloads.linear_road import SPARK_DDL

    r = (
        spark.readStream.format("adaptstream")
        .schema(SPARK_DDL)
        .option("path", source)
        .option("metricsPath", str(work / "metrics"))
        .option("maxRowsPerTrigger", str(batch_rows))
        .option("maxBytesPerTrigger", "0")
    )
    if path == "files" and (extra or {}).get("connector", "files") == "files":  # a files-connector option only
        r = r.option("fileStableSeconds", "0")
    for k, v in (extra or {}).items():
        r = r.option(k, v)
    return r.load()


def drain(spark, path: str, source: str, work: Path, batch_rows: int) -> dict:
    from pyspark.sql import functions as F

    work.mkdir(parents=True, exist_ok=True)
    df = _frame(spark, path, source, work, batch_rows).filter(F.col("Spd") >= 0)
    w = df.writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", str(work / "ck"))
    t0 = time.perf_counter()
    q = w.start()
    q.awaitTermination()
    wall = time.perf_counter() - t0
    data = [p for p in q.recentProgress if p["numInputRows"] > 0]
    rows = sum(p["numInputRows"] for p in data)
    proc = sum(p["durationMs"]["triggerExecution"] for p in data) / 1000
    return {
        "wall_s": wall,
        "rows": rows,
        "processing_s": proc,
        "rows_per_s": rows / proc if proc else 0.0,
        "batches": len(data),
    }


def _wait(cond, timeout: float) -> bool:
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def live(spark, path: str, url: str, rate: int, seconds: int, work: Path, batch_rows: int) -> dict:
    """Feed the source live at ``rate`` rows/s for ``seconds``; dataset latency once every dataset completed."""
    from adaptstream.connectors.redis import parse_url
    from adaptstream.connectors.redis_produce import produce

    work.mkdir(parents=True, exist_ok=True)
    metrics = work / "metrics"
    producer: threading.Thread | None = None
    produced: dict = {}
    if path == "redis":
        stream = f"bench-live-{uuid.uuid4().hex[:6]}"
        df = _frame(spark, path, f"{url}/{stream}", work, batch_rows)
    else:
        extra = {"connector": "generator", "generator": "linear_road", "rate": str(rate), "duration": str(seconds)}
        df = _frame(spark, path, str(work / "input"), work, batch_rows, extra)
    q = df.filter("Spd >= 0").writeStream.format("noop").option("checkpointLocation", str(work / "ck")).start()
    try:
        _wait(lambda: q.lastProgress is not None or not q.isActive, 120)  # start-up batch done (or failed)
        if path == "redis":
            from adaptstream.workloads import GENERATORS

            gen = GENERATORS.get("linear_road")(seed=3).build()

            def run() -> None:
                s = produce(parse_url(f"{url}/{stream}"), seconds, lambda k: gen.generate(k, rate))
                produced.update(entries=s.entries, seconds=s.seconds)

            producer = threading.Thread(target=run, daemon=True)
            producer.start()
            producer.join()
            expected = produced["entries"]
        else:
            expected = rate * seconds

        def done() -> bool:
            if not q.isActive:  # failed: nothing more will come
                return True
            ds = [d for d in _lines(metrics / "datasets.jsonl") if not d.get("sentinel")]
            return sum(d["rows"] for d in ds) >= expected

        finished = _wait(done, seconds + 120)
    finally:
        error = q.exception()
        q.stop()
    ds = [d for d in _lines(metrics / "datasets.jsonl") if not d.get("sentinel")]
    warm = min((d["arrival"] for d in ds), default=0.0) + 5.0  # the first 5 s of arrivals: warm-up
    lat = sorted(d["completed_at"] - d["arrival"] for d in ds if d["arrival"] >= warm)
    batches = _lines(metrics / "batches.jsonl")
    return {
        "rate": rate,
        "seconds": seconds,
        "rows_expected": expected,
        "rows": sum(d["rows"] for d in ds),
        "finished": finished,
        "datasets": len(ds),
        "batches": len(batches),
        "latency_p50_s": statistics.median(lat) if lat else None,
        "latency_p95_s": lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else None,
        "latency_max_s": lat[-1] if lat else None,
        "producer": produced,
        **({"error": str(error).splitlines()[0][:500]} if error is not None else {}),
    }


def generator_ceiling(rows: int, reps: int, work: Path) -> list[dict]:
    """The files path's live feeder unpaced: the generator connector's own work per one-second dataset (generate
    the Linear Road rows, write the CSV file), as it does it in one Python thread, ``reps`` times; rows per
    second of wall time. A live files rate above it cannot be fed, whatever the source does."""
    from adaptstream.workloads import GENERATORS
    from adaptstream.workloads.io import dataset_file_name, write_dataset

    per = max(1, rows // SECONDS)
    out = []
    for rep in range(reps):
        gen = GENERATORS.get("linear_road")(seed=11 + rep).build()
        folder = work / f"generator-{rep}"
        folder.mkdir(parents=True)
        t0 = time.perf_counter()
        for k in range(SECONDS):
            write_dataset(gen.generate(k, per), str(folder / dataset_file_name(k)), "csv", gen.csv_header())
        seconds = time.perf_counter() - t0
        out.append({"rows": per * SECONDS, "seconds": seconds, "rate": per * SECONDS / seconds})
        shutil.rmtree(folder, ignore_errors=True)
    return out


def redis_command(
    out: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="where redis.md, .json and .png go [default: runs/bench-redis-<time>]"),
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    url: Annotated[
        str | None, typer.Option(metavar="URL", help="an existing redis://HOST:PORT [default: start one]")
    ] = None,
    rows: Annotated[int, typer.Option(min=20_000, help="Linear Road rows written and drained")] = 300_000,
    batch_rows: Annotated[int, typer.Option(min=1000, help="maxRowsPerTrigger of every drain")] = 50_000,
    reps: Annotated[int, typer.Option(min=1, help="timed runs per path (after one warm-up) and producer runs")] = 3,
    live_seconds: Annotated[int, typer.Option(min=5, help="seconds of live input per source")] = 30,
    live_share: Annotated[float, typer.Option(min=0.05, max=1.0, help="live rate / the lower measured ceiling")] = 0.7,
) -> None:
    """Maximum sustainable rate of a pass-through query from Redis vs from files, and the producer's ceiling."""
    from adaptstream.connectors.redis import client, parse_url
    from adaptstream.connectors.redis_produce import produce
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark
    from adaptstream.workloads.io import dataset_file_name, write_dataset

    target = report_dir("bench-redis", out, update_docs, report="redis.json")
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-redis-"))
    meta = {
        **start_meta("bench", "redis"),
    }
    tables = _tables(rows)
    rows = sum(t.num_rows for t in tables)
    data = work / "files"
    data.mkdir()
    base = time.time() - SECONDS - 600
    for k, t in enumerate(tables):
        write_dataset(t, data / dataset_file_name(k), "csv", mtime=base + k)
    with _Server(url) as server:
        assert server.url is not None
        server_version = client(parse_url(f"{server.url}/x")).info("server")["redis_version"]
        typer.echo(f"bench redis: {rows:,} Linear Road rows; server {server.url} (redis {server_version})")
        producer = []
        stream = ""
        for rep in range(reps):
            s = f"bench-{uuid.uuid4().hex[:6]}"
            st = produce(parse_url(f"{server.url}/{s}"), SECONDS, lambda k: tables[k], pace=False)
            producer.append(
                {
                    "entries": st.entries,
                    "seconds": st.seconds,
                    "rate": st.rate,
                    "write_seconds": st.write_seconds,
                    "write_rate": st.write_rate,
                }
            )
            typer.echo(f"  producer run {rep + 1}: {st.rate:>10,.0f} entries/s ({st.write_rate:,.0f} XADD only)")
            if rep == 0:
                stream = s
            else:
                client(parse_url(f"{server.url}/{s}")).delete(s)
        generator = generator_ceiling(rows, reps, work)
        for rep, g in enumerate(generator):
            typer.echo(f"  generator run {rep + 1}: {g['rate']:>10,.0f} rows/s (generate + write CSV, unpaced)")
        sources = {"redis": f"{server.url}/{stream}", "files": str(data)}
        spark = build_spark(app_name="bench-redis")
        drains: dict = {p: [] for p in PATHS}
        try:
            for rep in range(reps + 1):
                for p in PATHS if rep % 2 == 0 else tuple(reversed(PATHS)):
                    r = drain(spark, p, sources[p], work / f"drain-{p}-{rep}", batch_rows)
                    typer.echo(
                        f"  drain {p:6s} {'warm-up' if rep == 0 else f'run {rep}':8s} "
                        f"{r['rows_per_s']:>10,.0f} rows/s ({r['rows']:,} rows, {r['batches']} batches)"
                    )
                    if rep:
                        drains[p].append(r)
            ceiling = min(
                median(producer, "rate"),
                median(generator, "rate"),
                *(median(drains[p], "rows_per_s") for p in PATHS),
            )
            rate = max(100, int(live_share * ceiling))
            lives = {}
            for p in PATHS:
                typer.echo(f"  live {p}: {rate:,} rows/s for {live_seconds} s")
                lives[p] = live(spark, p, server.url, rate, live_seconds, work / f"live-{p}", batch_rows)
                typer.echo(f"    p95 dataset latency {lives[p]['latency_p95_s']} s, rows {lives[p]['rows']:,}")
        finally:
            spark.stop()
    meta.update(
        load_after=os.getloadavg(),
        finished=time.time(),
        rows=rows,
        batch_rows=batch_rows,
        reps=reps,
        live_share=live_share,
        redis_version=server_version,
    )
    result = {"meta": meta, "producer": producer, "generator": generator, "drain": drains, "live": lives}
    from adaptstream_bench.redis_report import write_report

    write_report(result, target)
    shutil.rmtree(work, ignore_errors=True)
    typer.echo(f"bench redis: report in {target / 'redis.md'}")


def median(runs: list[dict], key: str) -> float:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")
