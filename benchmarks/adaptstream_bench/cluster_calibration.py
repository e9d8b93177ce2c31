"""``adaptstream bench cluster-calibration``: does capacity grow with the executor count on the capped-worker
cluster (issue #56 item 1)? Every later benchmark that scales executors rests on this curve.

One invocation: a directory of Linear Road CSV rows (a ready backlog), K capped workers (``scripts/cluster.sh start
K --cpu PCT --mem MB``: each worker and its executors in a cgroup with PCT % of one core), one Spark application
with one single-core executor per worker. After one unrecorded drain on all K executors (Python workers started,
JIT warm), the executor count goes down from K to 1 (``killExecutor``: no executor starts cold mid-curve) and at
each count the same query drains the whole directory ``--repeats`` times through ``format("adaptstream")``
(executors read and parse) with ``Trigger.AvailableNow`` into a noop sink, in one micro-batch of one task per file.
Recorded per drain: wall seconds, rows, and the CPU-seconds and throttled seconds the workers' cgroups accounted
(executor work, from the kernel). The report module computes the curve and the verdicts from the JSON.

``--budget`` (minutes) stops starting drains once spent: the completed repeats are reported, the missing ones are
named and the counts they would decide are "undecided".
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptstream_bench.cluster import LocalCluster, WorkerUsage, executor_conf, stop_on_sigterm

QUERIES = ("filter", "window")


def _usage_delta(before: dict[str, WorkerUsage], after: dict[str, WorkerUsage]) -> dict[str, float]:
    cpu = sum(after[n].cpu_s - before[n].cpu_s for n in after if n in before)
    thr = sum(after[n].throttled_s - before[n].throttled_s for n in after if n in before)
    return {"worker_cpu_s": cpu, "throttled_s": thr}


def one_drain(spark, cluster: LocalCluster, a: dict, data: Path, work: Path) -> dict:
    """Drain the directory once at the current executor count; wall, rows and what the cgroups accounted."""
    from adaptstream_bench.source import drain

    before, load = cluster.usage(), os.getloadavg()[0]
    one_batch = {"maxFilesPerTrigger": str(a["files"]), "numBlocks": str(a["files"])}  # a task per file
    r = drain(spark, "adaptstream", a["query"], str(data), work, one_batch)
    out = {"wall_s": r["wall_s"], "rows": r["rows"], "rows_per_s": r["rows_per_s"], "batches": r["batches"]}
    out.update(_usage_delta(before, cluster.usage()), load1_before=load)
    shutil.rmtree(work, ignore_errors=True)  # checkpoints and metrics of a drain are not needed after it
    return out


def sweep(spark, cluster: LocalCluster, a: dict, data: Path, work: Path, deadline: float) -> tuple[list, list]:
    """Drains at K, K-1, ..., 1 executors; (points, missing) where missing names the drains the budget left out."""
    from adaptstream.spark.executors import ExecutorControl

    ctl, points, missing = ExecutorControl(spark.sparkContext), [], []
    for k in range(a["workers"], 0, -1):
        ctl.scale_to(k)
        if not ctl.wait_for(k, timeout=180):
            missing.append({"executors": k, "repeats": a["repeats"], "why": "the executor count was not reached"})
            continue
        point: dict[str, Any] = {"executors": k, "runs": []}
        for rep in range(a["repeats"]):
            if time.time() > deadline:
                missing.append({"executors": k, "repeats": a["repeats"] - rep, "why": "budget spent"})
                break
            run = one_drain(spark, cluster, a, data, work / f"k{k}-r{rep}")
            point["runs"].append(run)
            typer.echo(
                f"  {k} executor(s) run {rep + 1}: {run['rows_per_s']:>9,.0f} rows/s, {run['wall_s']:5.1f} s, "
                f"worker CPU {run['worker_cpu_s']:5.1f} s, load {run['load1_before']:.2f}"
            )
        points.append(point)
    return points, missing


def cluster_calibration_command(
    out: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-cluster-calibration-<time>]"),
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    workers: Annotated[int, typer.Option(min=1, max=16, help="capped workers (K): the largest executor count")] = 4,
    cpu: Annotated[float, typer.Option(min=10.0, max=100.0, help="each worker's CPU quota, % of one core")] = 30.0,
    mem: Annotated[int, typer.Option(min=1024, help="each worker's memory limit, MB")] = 1024,
    executor_memory: Annotated[str, typer.Option(help="memory per executor (at most MEM - 384 MB)")] = "512m",
    query: Annotated[str, typer.Option(help="filter (pass-through) or window (30 s / 10 s average)")] = "window",
    rows: Annotated[int, typer.Option(min=10_000, help="Linear Road rows in the input directory")] = 1_200_000,
    files: Annotated[int, typer.Option(min=1, help="files (= tasks of the one micro-batch) the rows span")] = 24,
    repeats: Annotated[int, typer.Option(min=1, help="timed drains per executor count")] = 3,
    budget: Annotated[float, typer.Option(min=1.0, help="minutes after which no new drain starts")] = 40.0,
    port: Annotated[int, typer.Option(help="master port of the cluster this command starts")] = 7183,
) -> None:
    """Throughput of one fixed query against the number of capped executors (1..K), with verdicts by rule."""
    from adaptstream.errors import ConfigError, EnvironmentProblem
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.cluster_calibration_report import write_report
    from adaptstream_bench.meta import finish_meta, sample_load, start_meta
    from adaptstream_bench.source import make_data

    if query not in QUERIES:
        msg = f"--query must be one of {', '.join(QUERIES)}, got {query!r}"
        raise ConfigError(msg)
    if files < workers:
        msg = f"--files ({files}) must be at least --workers ({workers}): one task per file, every executor busy"
        raise ConfigError(msg)
    target = report_dir("bench-cluster-calibration", out, update_docs, report="cluster_calibration.json")
    stop_on_sigterm()
    a: dict[str, Any] = {
        "workers": workers,
        "cpu_pct": cpu,
        "mem_mb": mem,
        "executor_memory": executor_memory,
        "query": query,
        "rows": rows // files * files,
        "files": files,
        "repeats": repeats,
        "budget_min": budget,
    }
    meta = {**start_meta("bench", "cluster-calibration"), "config": a}
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-calibration-"))
    deadline = time.time() + 60 * budget
    typer.echo(f"bench cluster-calibration: {a['rows']:,} Linear Road rows in {files} files; {workers} workers at "
               f"{cpu:g} % of a core")  # fmt: skip
    make_data(work / "data", rows, files)
    conf = executor_conf(executor_memory)
    try:
        cluster = LocalCluster(workers, work / "cluster", port, cpu=cpu, mem=mem)
        with cluster as url:
            meta["master"] = url
            spark = build_spark(master=url, app_name="bench-cluster-calibration", shuffle_partitions=workers,
                                conf=conf, log_file=str(work / "spark.log"))  # fmt: skip
            try:
                from adaptstream.spark.executors import ExecutorControl

                if not ExecutorControl(spark.sparkContext).wait_for(workers, timeout=240):
                    msg = f"the application did not get {workers} executors within 240 s"
                    raise EnvironmentProblem(msg)
                t0 = time.time()
                warm = one_drain(spark, cluster, a, work / "data", work / "warm")
                meta["warm_up"] = {**warm, "seconds": time.time() - t0}
                typer.echo(f"  warm-up on {workers} executors: {warm['rows_per_s']:,.0f} rows/s")
                sample_load(meta)
                points, missing = sweep(spark, cluster, a, work / "data", work / "runs", deadline)
                sample_load(meta)
            finally:
                spark.stop()
    except BaseException:
        typer.echo(f"bench cluster-calibration: failed; Spark's and the cluster's logs are kept in {work}", err=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    doc = write_report({"meta": finish_meta(meta), "points": points, "missing": missing}, target)
    for t in doc["targets"]:
        verdict = "undecided" if t["met"] is None else ("met" if t["met"] else "missed")
        typer.echo(f"  target {t['target']}: {verdict} ({t['measured']})")
    typer.echo(f"bench cluster-calibration: report in {target / 'cluster_calibration.md'}")
