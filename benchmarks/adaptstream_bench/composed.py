"""``adaptstream bench composed``: the composed system against Spark as it is (issue #56 item 5).

One application of N mixed windowed queries (Table III's sliding ones by default), each with a latency target
(its window slide: a batch is on target when the oldest row it holds waited at most one slide, LMStream's MaxLat),
on the capped-worker cluster (``scripts/cluster.sh start K --cpu PCT --mem MB``, so executors add capacity). The
same generated input (seeded) runs under each configuration, each a Spark application of its own, one after
another in this invocation, once per rate of ``--rate`` (a sweep: the target speaks of the rates where Spark as it
is misses):

* ``spark``: Spark as it is: every batch admitted at once (``asap``), FIFO between queries, Spark's dynamic
  allocation (shuffle tracking, 1..K executors);
* ``lmstream``, ``klink``, ``prompt``: each policy alone (LMStream admission; Klink scheduling through
  ``adaptstream.tune``; Prompt's Alg. 4 through ``adaptstream.tune``), the rest as Spark as it is except that
  the executors are static (all K) where no elasticity policy runs;
* ``tuned``: ``adaptstream.tune(scheduler="klink", elastic="prompt")`` with LMStream admission: the three together.

Per configuration the application runs in a subprocess (:func:`app_main`) and reports each query's batches and
datasets (the source's own metrics), and the executors Spark listed (status store: add and remove times), from
which executor-seconds are integrated over the measurement window. The report module judges from the JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptstream_bench.cluster import LocalCluster, executor_conf, stop_on_sigterm

#: configuration -> (admission, scheduler or None, elasticity policy or None, Spark's dynamic allocation)
CONFIGS: dict[str, tuple[str, str | None, str | None, bool]] = {
    "spark": ("asap", None, None, True),
    "lmstream": ("lmstream", None, None, False),
    "klink": ("asap", "klink", None, False),
    "prompt": ("asap", None, "prompt", False),  # Alg. 4 manages the executors: Spark's own allocation is off
    "tuned": ("lmstream", "klink", "prompt", False),
}
DEFAULT_QUERIES = "LR1S,CM2S,LR2S,CM1S"
RATE_HELP = "rows/s of generated input per query; every configuration runs once at each rate"
TARGET_HELP = "the elasticity policy's batch-time target (tune's); auto: half each query's own window slide"


def config_text(name: str) -> str:
    admission, scheduler, elastic, da = CONFIGS[name]
    executors = "Spark's dynamic allocation" if da else (f"Alg. 4 ({elastic})" if elastic else "static, all workers")
    return f"admission {admission}, scheduling {scheduler or 'FIFO (Spark)'}, executors {executors}"


def elastic_params(workers: int) -> str:
    return f"min_executors=1;max_executors={workers};initial_map_tasks=2;initial_reduce_buckets=2"


def app_main() -> None:
    """One configuration's application (run in a subprocess): ``python -m adaptstream_bench.composed ARGS OUT``."""
    import adaptstream
    from adaptstream.app.multiquery import MultiSpec, run_multi
    from adaptstream.app.runner import RunSpec
    from adaptstream.spark.executors import executor_intervals
    from adaptstream.spark.session import build_spark
    from adaptstream_bench.prompt_elastic import da_conf

    a, out = json.loads(sys.argv[1]), Path(sys.argv[2])
    admission, scheduler, elastic, da = CONFIGS[a["config"]]
    conf = {**executor_conf(a["executor_memory"]), **(da_conf(a["workers"], 5.0) if da else {})}
    spark = build_spark(master=a["master"], app_name=f"bench-composed-{a['config']}",
                        shuffle_partitions=a["workers"], conf=conf, log_file=str(out.parent / "spark.log"))  # fmt: skip
    tuner = None
    if scheduler or elastic:
        tuner = adaptstream.tune(
            spark,
            scheduler=scheduler or "default",
            elastic=elastic,
            elastic_params=elastic_params(a["workers"]) if elastic else "",
            latency_target=a["latency_target"],
            metrics_path=str(out.parent / "tuner"),
        )
    specs = tuple(
        RunSpec(
            workload=q,
            admission=admission,
            rate=a["rate"],
            duration=a["duration"],
            seed=a["seed"] + k,
            warmup=a["warmup"],
            num_blocks=a["workers"],
        )
        for k, q in enumerate(a["queries"])
    )
    t0 = time.time()
    try:
        res = run_multi(spark, MultiSpec(specs, scheduler="default", seed=a["seed"]), str(out.parent / "runs"))
    finally:
        status = tuner.status() if tuner is not None else {}
        if tuner is not None:
            tuner.close()
    doc = {
        "config": a["config"],
        "started": t0,
        "ended": time.time(),
        "queries": {n: query_record(r) for n, r in res.results.items()},
        "executors": executor_intervals(spark.sparkContext),
        "plans": status.get("plans", []),
        "elasticity_log": status.get("elasticity_log", []),
        "controller": status.get("controller_stats", {}),
    }
    out.write_text(json.dumps(doc, indent=1, default=float))
    spark.stop()


def query_record(r: Any) -> dict[str, Any]:
    """One query's batches and datasets as its source recorded them (metrics/batches.jsonl, datasets.jsonl)."""
    from adaptstream.metrics.summary import load_batches, load_datasets

    ds, bs = load_datasets(r.metrics_dir), load_batches(r.metrics_dir)
    cols_b = [c for c in ("start", "end", "rows", "max_latency", "completed_at") if c in bs]
    cols_d = [c for c in ("seq", "arrival", "latency", "rows") if c in ds]
    return {
        "workload": r.spec.workload,
        "slide": r.slide,
        "unfinished": r.unfinished,
        "batches": bs[cols_b].to_dict("records") if len(bs) else [],
        "datasets": ds[cols_d].to_dict("records") if len(ds) else [],
    }


def parse_rates(text: str) -> list[int]:
    """``--rate 250,500``: rows/s per query, each >= 1."""
    from adaptstream.errors import ConfigError

    try:
        rates = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        rates = []
    if not rates or min(rates) < 1:
        msg = f"--rate must list whole numbers of rows/s >= 1, got {text!r}"
        raise ConfigError(msg)
    return rates


def run_config(name: str, a: dict, work: Path) -> dict:
    """One configuration's application in a subprocess; its record, or the error it ended with."""
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    out = d / "result.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (*sys.path, os.environ.get("PYTHONPATH")) if p)}
    args = json.dumps({**a, "config": name})
    cmd = [sys.executable, "-m", "adaptstream_bench.composed", args, str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a["timeout"], check=False)
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"config": name, "error": f"exit {proc.returncode}: {tail}"}
    return json.loads(out.read_text())


def composed_command(
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-composed-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    configs: Annotated[str, typer.Option(help=f"comma-separated, of: {', '.join(CONFIGS)}")] = ",".join(CONFIGS),
    queries: Annotated[str, typer.Option(help="comma-separated workloads, run concurrently")] = DEFAULT_QUERIES,
    rate: Annotated[str, typer.Option(metavar="R[,R...]", help=RATE_HELP)] = "250,500",
    duration: Annotated[float, typer.Option(min=5.0, help="seconds of input per query")] = 90.0,
    warmup: Annotated[float, typer.Option(min=0.0, help="seconds of first arrivals not counted")] = 15.0,
    latency_target: Annotated[str, typer.Option(metavar="SECONDS|auto", help=TARGET_HELP)] = "auto",
    workers: Annotated[int, typer.Option(min=1, max=16, help="capped workers: the most executors")] = 4,
    cpu: Annotated[float, typer.Option(min=10.0, max=100.0, help="each worker's CPU quota, % of one core")] = 30.0,
    mem: Annotated[int, typer.Option(min=1024, help="each worker's memory limit, MB")] = 1024,
    seed: Annotated[int, typer.Option(help="input seed (query k uses seed + k)")] = 0,
    port: Annotated[int, typer.Option(help="master port of the cluster this command starts")] = 7185,
) -> None:
    """Spark as it is, each policy alone and the three together on one application of mixed queries."""
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.workloads import WORKLOADS
    from adaptstream_bench.composed_report import write_report
    from adaptstream_bench.meta import finish_meta, sample_load, start_meta

    names = [c.strip() for c in configs.split(",") if c.strip()]
    bad = [c for c in names if c not in CONFIGS]
    if bad or not names:
        msg = f"--configs: unknown {bad}; valid: {', '.join(CONFIGS)}" if bad else "--configs names none"
        raise ConfigError(msg)
    qs = [WORKLOADS.get(q.strip()).name for q in queries.split(",") if q.strip()]  # unknown names list the valid
    if len(qs) < 2 or any(not WORKLOADS.get(q).lmstream_slide for q in qs):
        msg = "--queries needs at least two sliding-window workloads (each query's target is its slide)"
        raise ConfigError(msg)
    rates = parse_rates(rate)
    from adaptstream.tuner import SLIDE_BATCH_SHARE, latency_target_value

    latency_target_value(latency_target)
    target = report_dir("bench-composed", out, update_docs, report="composed.json")
    stop_on_sigterm()
    a: dict[str, Any] = {
        "queries": qs, "rates": rates, "duration": duration, "warmup": warmup, "latency_target": latency_target,
        "slide_batch_share": SLIDE_BATCH_SHARE,
        "workers": workers, "cpu_pct": cpu, "mem_mb": mem, "executor_memory": "512m", "seed": seed,
        "timeout": duration * 4 + 600,
    }  # fmt: skip
    meta = {**start_meta("bench", "composed"), "config": {k: v for k, v in a.items() if k != "timeout"}}
    meta["configs"] = {n: config_text(n) for n in names}
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-composed-"))
    typer.echo(f"bench composed: {len(qs)} queries ({', '.join(qs)}) at {rate} rows/s each, {duration:g} s; "
               f"{workers} workers at {cpu:g} % of a core; configurations {', '.join(names)}")  # fmt: skip
    runs = []
    with LocalCluster(workers, work / "cluster", port, cpu=cpu, mem=mem) as url:
        meta["master"] = a["master"] = url
        for r in rates:
            for name in names:
                sample_load(meta)
                t = time.time()
                run = {"rate": r, **run_config(name, {**a, "rate": r}, work / f"rate-{r}")}
                runs.append(run)
                state = run.get("error", "done")[:200]
                typer.echo(f"  {r:6d} rows/s  {name:9s} {time.time() - t:5.0f} s  {state}")
    sample_load(meta)
    doc = write_report({"meta": finish_meta(meta), "runs": runs}, target)
    for t in doc["targets"]:
        verdict = "undecided" if t["met"] is None else ("met" if t["met"] else "missed")
        typer.echo(f"  target {t['target']}: {verdict} ({t['measured']})")
    typer.echo(f"bench composed: report in {target / 'composed.md'} (work files in {work})")


if __name__ == "__main__":
    app_main()
