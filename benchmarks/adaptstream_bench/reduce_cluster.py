"""``adaptstream bench reduce-cluster``: the end-to-end batch time of the splitting allocator against hashing on the
capped-worker cluster (issue #53's third target: z = 1.5, 16 reduce buckets, <= 0.8x hashing's, 3 repeats).

One invocation: K capped workers (``scripts/cluster.sh start K --cpu PCT --mem MB``), one Spark application with
one single-core executor per worker. After one unrecorded batch per allocator (Python workers started, numba
compiled on every executor), ``--repeats`` rounds; each round runs ``--batches`` SynD batches (Zipf words) through
the pane execution mode (the executor of ``adaptstream.windowed_aggregate``) with ``hash`` and with ``split``, in
alternating order. Recorded per batch: the pane executor's whole batch time (map/reduce job, window emit,
bookkeeping), the map/reduce job's time, the reduce stage's span and max/mean reduce records. The verdict: per
round, median batch time of split / of hash; met when every round's ratio is <= 0.8, missed when none is, else
undecided (rule fixed here before the run). ``python -m adaptstream_bench.reduce_cluster DIR`` rebuilds the report
from its JSON.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptstream_bench.cluster import LocalCluster, executor_conf, stop_on_sigterm
from adaptstream_bench.meta import describe, finish_meta, sample_load, start_meta, targets_table

NAME = "reduce_cluster"
LIMIT = 0.8  # split's median batch time / hashing's, per round (issue #53)
ALLOCATORS = ("hash", "split")


def round_ratio(rnd: dict, key: str = "batch_s") -> float | None:
    """Median ``key`` of split's batches / of hash's in one round; None when either has no batch."""
    h = [b[key] for b in rnd["hash"] if b.get(key) is not None]
    s = [b[key] for b in rnd["split"] if b.get(key) is not None]
    return statistics.median(s) / statistics.median(h) if h and s and statistics.median(h) > 0 else None


def targets(r: dict) -> list[dict[str, Any]]:
    ratios = [round_ratio(x) for x in r["rounds"]]
    rule = (f"per round, median batch time (the pane executor's whole batch) of split / of hash; met when every "
            f"round's ratio is <= {LIMIT:g}, missed when none is, otherwise undecided")  # fmt: skip
    c = r["meta"]["config"]
    target = (
        f"end-to-end batch time at z = {c['z']:g}, {c['buckets']} buckets, capped-worker cluster <= {LIMIT:g}x "
        f"hashing's, {c['repeats']} repeats"
    )
    done = [x for x in ratios if x is not None]
    if len(done) < r["meta"]["config"]["repeats"]:
        met: bool | None = None
    else:
        met = True if all(x <= LIMIT for x in done) else False if all(x > LIMIT for x in done) else None
    measured = ", ".join("n/a" if x is None else f"{x:.2f}x" for x in ratios) or "no round completed"
    return [{"target": target, "rule": rule, "value": statistics.median(done) if done else None,
             "threshold": LIMIT, "measured": f"rounds: {measured}", "met": met}]  # fmt: skip


def _mean(bs: list[dict], key: str) -> float:
    xs = [b[key] for b in bs if b.get(key) is not None]
    return statistics.fmean(xs) if xs else float("nan")


def write_report(r: dict, target: Path) -> dict:
    target.mkdir(parents=True, exist_ok=True)
    doc = {**r, "targets": targets(r)}
    (target / f"{NAME}.json").write_text(json.dumps(doc, indent=1))
    c = doc["meta"]["config"]
    lines = [
        "# Reduce allocation end to end on the capped-worker cluster: split against hash (issue #53)",
        "",
        describe(doc["meta"]),
        f"Set-up: `scripts/cluster.sh start {c['workers']} --cpu {c['cpu_pct']:g} --mem {c['mem_mb']}`, one "
        f"single-core executor per worker; SynD word count (Zipf z = {c['z']:g}, {c['keys']:,} words), "
        f"{c['rows']:,} rows per one-second batch in {c['map_tasks']} map tasks, {c['buckets']} reduce buckets, "
        f"the pane execution mode of `adaptstream.windowed_aggregate`; {c['batches']} batches per allocator per "
        f"round after one unrecorded batch per allocator, {c['repeats']} rounds, the allocators' order alternating.",
        "",
        "## Target",
        "",
        *targets_table([(t["target"], t["rule"], t["measured"], t["met"]) for t in doc["targets"]], "undecided"),
        "",
        "## Per round (means over the round's batches)",
        "",
        "| round | allocator | batch s | map/reduce job s | reduce stage span ms | reduce records max/mean |",
        "|---|---|---|---|---|---|",
    ]
    for i, rnd in enumerate(doc["rounds"], 1):
        for a in ALLOCATORS:
            bs = rnd[a]
            lines.append(
                f"| {i} | {a} | {_mean(bs, 'batch_s'):.2f} | {_mean(bs, 'job_s'):.2f} | "
                f"{_mean(bs, 'stage_span_ms'):.0f} | {_mean(bs, 'records_max_mean'):.2f} |"
            )
    spans = [round_ratio(x, "stage_span_ms") for x in doc["rounds"]]
    lines += [
        "",
        "Reduce stage span, split / hash per round (context, not judged): "
        + ", ".join("n/a" if x is None else f"{x:.2f}x" for x in spans)
        + ".",
    ]
    (target / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    return doc


def reduce_cluster_command(
    out: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-reduce-cluster-<time>]"),
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    workers: Annotated[int, typer.Option(min=1, max=16, help="capped workers, one executor each")] = 4,
    cpu: Annotated[float, typer.Option(min=10.0, max=100.0, help="each worker's CPU quota, % of one core")] = 30.0,
    mem: Annotated[int, typer.Option(min=1024, help="each worker's memory limit, MB")] = 1024,
    z: Annotated[float, typer.Option(min=0.0, help="Zipf exponent of the words")] = 1.5,
    keys: Annotated[int, typer.Option(min=10, help="distinct words (Zipf support)")] = 10_000,
    buckets: Annotated[int, typer.Option(min=2, help="reduce buckets R")] = 16,
    rows: Annotated[int, typer.Option(min=1000, help="rows per one-second batch")] = 400_000,
    map_tasks: Annotated[int, typer.Option(min=1, help="map tasks per batch")] = 4,
    batches: Annotated[int, typer.Option(min=1, help="batches per allocator per round")] = 3,
    repeats: Annotated[int, typer.Option(min=1, help="rounds")] = 3,
    port: Annotated[int, typer.Option(help="master port of the cluster this command starts")] = 7185,
) -> None:
    """Split vs hash end to end (whole batch time) on the capped-worker cluster, with a verdict by rule."""
    from adaptstream.errors import EnvironmentProblem
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.executors import ExecutorControl
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.reduce_allocation import run_pane

    target = report_dir("bench-reduce-cluster", out, update_docs, report=f"{NAME}.json")
    stop_on_sigterm()
    c: dict[str, Any] = {"workers": workers, "cpu_pct": cpu, "mem_mb": mem, "z": z, "keys": keys,
                         "buckets": buckets, "rows": rows, "map_tasks": map_tasks, "batches": batches,
                         "repeats": repeats}  # fmt: skip
    meta = {**start_meta("bench", "reduce-cluster"), "config": c}
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-reduce-cluster-"))
    conf = {**executor_conf("512m"), "spark.sql.adaptive.enabled": "false"}  # R reduce tasks, as planned
    a = {"rows": rows, "batches": batches, "map_tasks": map_tasks, "seed": 7}
    rounds: list[dict] = []
    try:
        with LocalCluster(workers, work / "cluster", port, cpu=cpu, mem=mem) as url:
            meta["master"] = url
            spark = build_spark(master=url, app_name="bench-reduce-cluster", shuffle_partitions=buckets, conf=conf,
                                log_file=str(work / "spark.log"))  # fmt: skip
            try:
                if not ExecutorControl(spark.sparkContext).wait_for(workers, timeout=240):
                    msg = f"the application did not get {workers} executors within 240 s"
                    raise EnvironmentProblem(msg)
                for alloc in ALLOCATORS:  # warm-up: Python workers start, numba compiles on every executor
                    run_pane(spark, z, keys, buckets, alloc, {**a, "batches": 1}, work / f"warm-{alloc}")
                for i in range(repeats):
                    rnd: dict[str, Any] = {}
                    for alloc in ALLOCATORS if i % 2 == 0 else tuple(reversed(ALLOCATORS)):
                        rnd[alloc] = run_pane(spark, z, keys, buckets, alloc, a, work / f"r{i}-{alloc}")
                    rounds.append(rnd)
                    sample_load(meta)
                    ratio = round_ratio(rnd)
                    shown = "n/a" if ratio is None else f"{ratio:.2f}"
                    typer.echo(
                        f"  round {i + 1}: batch s hash {_mean(rnd['hash'], 'batch_s'):.2f}, split "
                        f"{_mean(rnd['split'], 'batch_s'):.2f}, ratio {shown}"
                    )
            finally:
                spark.stop()
    except BaseException:
        typer.echo(f"bench reduce-cluster: failed; Spark's and the cluster's logs are kept in {work}", err=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    doc = write_report({"meta": finish_meta(meta), "rounds": rounds}, target)
    for t in doc["targets"]:
        verdict = "undecided" if t["met"] is None else ("met" if t["met"] else "missed")
        typer.echo(f"  target: {verdict} ({t['measured']})")
    typer.echo(f"bench reduce-cluster: report in {target / f'{NAME}.md'}")


if __name__ == "__main__":
    d = Path(sys.argv[1])
    write_report(json.loads((d / f"{NAME}.json").read_text()), d)
