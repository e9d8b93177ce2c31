"""``adaptstream bench prompt-elastic``: Prompt's latency-aware auto-scaler (Alg. 4) against static provisioning
at the peak and at the mean, and against Spark's own dynamic allocation, on a real standalone cluster (Fig. 12).

One invocation starts a standalone master and N one-core workers on 127.0.0.1 (``scripts/cluster.sh``, state and work
directories under a temporary directory) unless ``--master`` names a running one, and runs the same seeded input
through a pane-mode aggregation (``adaptstream run --reduce``) once per policy and rate pattern (``sinusoidal`` and
``step``, both with the same mean and a 4x swing by default). ``prompt`` (Alg. 4), ``prompt_fast`` (ours: Alg. 4 with
an onset rule), ``static_peak`` and ``static_mean`` share one Spark application (their executors are set through
Spark's executor requests before and during each run); ``dynamic_allocation`` needs
``spark.dynamicAllocation.enabled`` at start-up, so it gets an application of its own. Per batch: W, rows, keys, map
tasks, reduce buckets and the executors Spark had; per run: Spark's own executor add/remove times, integrated to
executor-seconds. The report module computes the figures and the targets from the recorded runs.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptstream_bench.cluster import LocalCluster, executor_conf, stop_on_sigterm
from adaptstream_bench.elastic_app import run_app, worked_workload
from adaptstream_bench.prompt_elastic_report import POLICIES, policy_notes, run_figures, write_report

PATTERNS = ("sinusoidal", "step")


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while the benchmark runs (a daemon thread)."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), os.getloadavg()[0]))
            self._stop.wait(self.every)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every + 1)

    def mean(self) -> float | None:
        return sum(x for _, x in self.samples) / len(self.samples) if self.samples else None


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def plans(workers: int, amplitude: float, peak: int | None = None, mean: int | None = None) -> dict[str, dict]:
    """Each policy's executors and buckets. Without sizes, by rule: the peak needs every worker (the cluster is
    sized so), the mean rate needs that share of them, rounded up. With ``peak``/``mean`` (from the sizing runs,
    :func:`smallest_on_time`) the static baselines take those. Alg. 4 starts at the mean's plan."""
    peak = workers if peak is None else peak
    mean = max(1, math.ceil(workers / (1 + amplitude) - 1e-9)) if mean is None else mean
    alg4 = {
        "executors": mean,
        "params": f"initial_map_tasks={mean};initial_reduce_buckets={mean};min_executors=1;"
        f"max_executors={workers};max_tasks={2 * workers};cores_per_executor=1",
    }
    return {
        "static_peak": {"executors": peak, "params": static_params(peak)},
        "static_mean": {"executors": mean, "params": static_params(mean)},
        "prompt": alg4,
        "prompt_fast": dict(alg4),  # ours: Alg. 4 plus the onset rule, same bounds and start
        "ds2": {
            "executors": mean,
            "params": f"initial_executors={mean};min_executors=1;max_executors={workers};cores_per_executor=1",
        },
        "dynamic_allocation": {"executors": 1, "params": ""},
    }


def static_params(k: int) -> str:
    return f"map_tasks={k};reduce_buckets={k};executors={k}"


def smallest_on_time(trials: dict[int, float | None], share: float = 1.0) -> int | None:
    """The sizing rule: the smallest executor count whose sizing run kept at least ``share`` of its counted batches
    on time (W <= 1); None when no count did (or none ran)."""
    ok = [k for k, s in trials.items() if s is not None and s >= share]
    return min(ok) if ok else None


def da_conf(workers: int, idle_s: float) -> dict[str, str]:
    """Spark's dynamic allocation with shuffle tracking (no external shuffle service on a standalone cluster)."""
    return {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.initialExecutors": "1",
        "spark.dynamicAllocation.maxExecutors": str(workers),
        "spark.dynamicAllocation.executorIdleTimeout": f"{idle_s:g}s",
        "spark.dynamicAllocation.cachedExecutorIdleTimeout": f"{2 * idle_s:g}s",
        "spark.dynamicAllocation.shuffleTracking.timeout": f"{2 * idle_s:g}s",
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout": "1s",
    }


def run_one(spark, policy: str, pattern: str, a: dict, work: Path, ctl, plan: dict) -> dict:
    """One policy on one rate pattern: the streaming run, then its batches, datasets and Spark's executor list."""
    from adaptstream.app.runner import RunSpec, run_workload
    from adaptstream.spark.executors import executor_intervals

    managed = policy != "dynamic_allocation"
    # the elasticity policy
    tuned = (policy if policy in ("prompt", "prompt_fast", "ds2") else "static") if managed else None
    app = a.get("route") == "app"
    spec = RunSpec(
        workload=worked_workload(a["row_work"]) if app else a["workload"],
        admission="fixed",
        traffic=pattern,
        rate=a["rate"],
        duration=a["duration"],
        seed=a["seed"],
        trigger=a["trigger"],
        num_blocks=a["num_blocks"],
        reduce=None if app else a["reduce"],
        reduce_buckets=a["workers"],
        elastic=None if app else tuned,  # the app route's policy runs in the tuner
        elastic_params="" if app else plan["params"],
        finish_timeout=a["finish_timeout"],
    )
    rewarm = 0.0
    if ctl is not None:  # every managed run starts from its own plan's executors, warm
        added = ctl.scale_to(plan["executors"])["requested"]
        ctl.wait_for(plan["executors"], timeout=180)
        if added and a.get("rewarm", 0) > 0:  # executors started for this run: warm them, unrecorded
            rewarm = warm_up(spark, {**a, "app_warmup": a["rewarm"]}, work, None)
    run_dir = work / f"{pattern}-{policy}"
    out: dict = {"policy": policy, "pattern": pattern, "spec": {"elastic": tuned, "params": plan["params"]}}
    if rewarm:
        out["rewarm_s"] = rewarm
    name = f"elastic_{pattern}_{policy}"
    app_run: dict = {}
    try:
        if app:
            app_run = run_app(spark, spec, run_dir, a, tuned, plan["params"], name)
            out["unfinished"] = app_run["unfinished"]
            out["elasticity_log"] = app_run["elasticity_log"]
        else:
            res = run_workload(
                spark,
                spec,
                str(run_dir),
                extra_options={"amplitude": str(a["amplitude"]), "period": str(a["period"])},
                query_name=name,
            )
            out["unfinished"] = res.unfinished
    except Exception as e:  # recorded, and the other runs go on
        out["error"] = f"{type(e).__name__}: {e}"
    metrics = run_dir / "metrics"
    ds = [d for d in _jsonl(metrics / "datasets.jsonl") if not d.get("sentinel")]
    datasets = [
        {"arrival": d["arrival"], "rows": d["rows"], "latency": max(0.0, d["completed_at"] - d["arrival"])}
        for d in sorted(ds, key=lambda d: d["arrival"])
    ]
    intervals = executor_intervals(spark.sparkContext)
    batches = app_run.get("batches", []) if app else _pane_batches(_jsonl(metrics / "panes.jsonl"), a["trigger"])
    t0 = datasets[0]["arrival"] if datasets else (batches[0]["started"] if batches else time.time())
    end = max((b["ended"] for b in batches), default=t0)
    for b in batches:  # the executors Spark had when the batch started
        b["executors"] = sum(
            1
            for iv in intervals
            if iv["added"] <= b["started"] and (iv["removed"] is None or b["started"] < iv["removed"])
        )
    out.update(t0=t0, window=[t0 + a["warmup"], max(end, t0 + a["warmup"])], datasets=datasets, batches=batches)
    out["executors"] = [
        iv for iv in intervals if iv["added"] <= out["window"][1] and (iv["removed"] is None or iv["removed"] >= t0)
    ]
    return out


def _pane_batches(panes: list[dict], trigger: float) -> list[dict]:
    """A pane-route run's batches from the pane executor's own records (W by its timing of the batch's jobs)."""
    out = []
    for b in panes:
        el = b.get("elastic") or {}
        out.append(
            {
                "batch": b["batch"],
                "started": b["started"],
                "ended": b["ended"],
                "w": b["batch_s"] / trigger,
                "rows": b["rows"],
                "keys": b["keys"],
                "map_tasks": b["map_tasks"],
                "reduce_buckets": b["reduce_buckets"],
                "planned_map_tasks": el.get("map_tasks"),
                "planned_reduce_buckets": el.get("reduce_buckets"),
                "planned_executors": el.get("executors"),
            }
        )
    return out


def sizing_text(pl: dict, workers: int, amplitude: float, sizing: dict | None) -> dict[str, Any]:
    """The static baselines' sizes and the rule that chose them, as the report states them."""
    out: dict[str, Any] = {
        "static_peak": pl["static_peak"]["executors"],
        "static_mean": pl["static_mean"]["executors"],
        "prompt_initial": f"{pl['prompt']['executors']} executors and reduce buckets (the mean's plan)",
    }
    if sizing is None:
        return {
            **out,
            "peak_rule": f"the cluster is sized so that the peak needs every worker: {workers}",
            "mean_rule": f"the mean rate needs 1 / (1 + amplitude) of the peak's executors, rounded up: "
            f"ceil({workers} / {1 + amplitude:g}) = {pl['static_mean']['executors']}",
        }
    rule = (
        "the smallest executor count whose constant-rate sizing run at the {} rate kept every counted batch on time, "
        "in a sweep down from the largest count that stops at the first late batch"
    )
    sz = sizing["sizes"]
    for label in ("peak", "mean"):
        got = sz.get(label)
        out[f"{label}_rule"] = rule.format(label) + (
            f": {got}" if got is not None else f": no count did, so every worker ({workers})"
        )
    return out


def size_statics(spark, a: dict, work: Path, ctl) -> dict:
    """The sizing runs behind the static baselines (the rule the report states): constant-rate runs of
    ``size_duration`` s, first at the peak rate from every worker's executor down, then at the mean rate from the
    peak's size down, each sweep stopping at the first count that let a counted batch run late (W > 1); a rate's
    size is the smallest count before that. Executors are only removed during the sweeps, so none starts cold in a
    sizing run (the mean's sweep may start above the count the peak's stopped at: the executors it adds are warmed
    first, unrecorded). A rate no count serves gets every worker, and the report says so."""
    sizes: dict[str, int | None] = {}
    trials: list[dict] = []
    start = a["workers"]
    for label, rate in (("peak", round(a["rate"] * (1 + a["amplitude"]))), ("mean", a["rate"])):
        shares: dict[int, float | None] = {}
        for k in range(start, 0, -1):
            # a sweep that starts above where the last one stopped adds executors: run_one warms them first
            b_cfg = {**a, "rate": rate, "duration": a["size_duration"], "warmup": a["size_warmup"]}
            plan = {"executors": k, "params": static_params(k)}
            run = run_one(spark, f"size_{label}_{k}", "constant", b_cfg, work, ctl, plan)
            f = run_figures(run)
            got: float | None = None if "error" in run else f["on_time_share"]
            shares[k] = got
            trial = {"rate_label": label, "rate": rate, "executors": k, "on_time_share": got}
            trial.update(batches=f["batches"], w_median=f["w_median"], w_max=f["w_max"])
            if "error" in run:
                trial["error"] = run["error"]
            trials.append(trial)
            share = "failed" if got is None else f"{got:.0%}"
            typer.echo(f"  sizing {label} ({rate:,} rows/s), {k} executor(s): on time {share}, W max {f['w_max']}")
            if got is None or got < 1.0:
                break
        sizes[label] = smallest_on_time(shares)
        start = sizes[label] or a["workers"]
    return {"sizes": sizes, "trials": trials}


def warm_up(spark, a: dict, work: Path, ctl) -> float:
    """An unrecorded constant-rate run on every worker's executor before an application's first measured run
    (``ctl`` given: it asks for every worker first) or on the executors a run starts with (``ctl`` None): its first
    batches start Python workers and compile Alg. 3 on each executor (seconds each, longer under a CPU cap), a cost
    that would otherwise land on whichever policy runs first. Returns its wall seconds."""
    from adaptstream.app.runner import RunSpec, run_workload

    t0 = time.time()
    if ctl is not None:
        ctl.scale_to(a["workers"])
        ctl.wait_for(a["workers"], timeout=120)
    app = a.get("route") == "app"
    spec = RunSpec(
        workload=worked_workload(a["row_work"]) if app else a["workload"],
        admission="fixed",
        traffic="constant",
        rate=a["rate"],
        duration=a["app_warmup"],
        seed=a["seed"] + 1,
        trigger=a["trigger"],
        num_blocks=a["num_blocks"],
        reduce=None if app else a["reduce"],
        reduce_buckets=a["workers"],
        finish_timeout=a["finish_timeout"],
    )
    run_workload(spark, spec, str(work / f"warm-up-{time.time_ns()}"), query_name="elastic_warm_up")
    return time.time() - t0


def prompt_elastic_command(
    out: Annotated[
        str | None,
        typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-prompt-elastic-<time>]"),
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    workload: Annotated[str, typer.Option(help="a pane-mode aggregation workload (LR2S, CM1S, CM1T, CM2S)")] = "LR2S",
    route: Annotated[
        str,
        typer.Option(
            help="'pane': `adaptstream run --reduce` with the policy in the pane executor; 'app': a user's "
            "application under adaptstream.tune (LR2S behind a per-row UDF, Spark's own aggregation)"
        ),
    ] = "pane",
    row_work: Annotated[
        int, typer.Option(min=0, help="app route: SHA-256 rounds per row in the UDF (synthetic per-row work)")
    ] = 200,
    patterns: Annotated[str, typer.Option(help="rate patterns")] = ",".join(PATTERNS),
    policies: Annotated[str, typer.Option(help="policies to compare")] = ",".join(POLICIES),
    rate: Annotated[int, typer.Option(min=1, help="mean input rows/s")] = 8000,
    amplitude: Annotated[float, typer.Option(min=0.0, max=0.95, help="0.6: a 4x swing (1.6 / 0.4)")] = 0.6,
    period: Annotated[float, typer.Option(min=1.0, help="seconds per rate period")] = 72.0,
    duration: Annotated[float, typer.Option(min=5.0, help="seconds of input per run")] = 72.0,
    trigger: Annotated[float, typer.Option(min=0.1, help="batch interval (fixed admission), seconds")] = 3.0,
    warmup: Annotated[float, typer.Option(min=0.0, help="seconds of input at the start not counted")] = 9.0,
    app_warmup: Annotated[
        float, typer.Option(min=0.0, help="seconds of unrecorded input per Spark application before its runs")
    ] = 12.0,
    workers: Annotated[int, typer.Option(min=2, help="standalone workers of 1 core each")] = 3,
    worker_memory: Annotated[str, typer.Option(help="memory per worker (uncapped workers)")] = "1g",
    cpu: Annotated[
        float | None, typer.Option(min=10.0, max=100.0, help="cap each worker at this % of one core (root, cgroup v1)")
    ] = None,
    mem: Annotated[int | None, typer.Option(min=1024, help="cap each worker's memory at this many MB")] = None,
    size_by: Annotated[
        str, typer.Option(help="static baselines' size: 'runs' (sizing runs at the mean and peak rates) or 'rule'")
    ] = "runs",
    size_duration: Annotated[float, typer.Option(min=5.0, help="seconds of input per sizing run")] = 24.0,
    executor_memory: Annotated[str, typer.Option(help="memory per executor")] = "512m",
    reduce: Annotated[str, typer.Option(help="reduce allocator (hash, prompt)")] = "prompt",
    idle_timeout: Annotated[float, typer.Option(min=1.0, help="dynamic allocation's executor idle timeout, s")] = 5.0,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    port: Annotated[int, typer.Option(help="master port of the cluster this command starts")] = 7179,
    master: Annotated[
        str | None, typer.Option(help="use this running spark:// master instead of starting a cluster")
    ] = None,
) -> None:
    """Alg. 4 vs static peak / static mean / Spark dynamic allocation: on-time share and executor-seconds."""
    from adaptstream.allocation import ALLOCATORS
    from adaptstream.connectors.traffic import TRAFFIC
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.executors import ExecutorControl, check_elastic_master
    from adaptstream.spark.pane import pane_spec
    from adaptstream.spark.session import build_spark
    from adaptstream.workloads import WORKLOADS
    from adaptstream_bench.meta import start_meta

    target = report_dir("bench-prompt-elastic", out, update_docs, report="prompt_elastic.json")
    stop_on_sigterm()
    pats = [p.strip().lower() for p in patterns.split(",") if p.strip()]
    pols = [p.strip().lower() for p in policies.split(",") if p.strip()]
    for p in pats:
        TRAFFIC.get(p)
    bad = [p for p in pols if p not in POLICIES]
    if bad or not pols or not pats:
        msg = f"--policies takes a comma list of {', '.join(POLICIES)} and --patterns at least one pattern"
        raise ConfigError(msg)
    if route not in ("pane", "app"):
        msg = f"--route must be 'pane' or 'app', got {route!r}"
        raise ConfigError(msg)
    if route == "app" and WORKLOADS.get(workload).name != "LR2S":
        msg = "--route app runs LR2S behind the per-row UDF; leave --workload at LR2S"
        raise ConfigError(msg)
    pane_spec(WORKLOADS.get(workload))
    ALLOCATORS.get(reduce)
    if master is not None:
        check_elastic_master(master)
    if size_by not in ("runs", "rule"):
        msg = f"--size-by must be 'runs' or 'rule', got {size_by!r}"
        raise ConfigError(msg)
    if warmup >= duration:
        msg = f"--warmup ({warmup:g} s) must be shorter than --duration ({duration:g} s)"
        raise ConfigError(msg)
    capped_mem = (mem or 2048) if (cpu is not None or mem is not None) else None  # cluster.sh's default cap
    a: dict[str, Any] = {
        "workload": WORKLOADS.get(workload).name,
        "route": route,
        "row_work": row_work if route == "app" else None,
        "rate": rate,
        "amplitude": amplitude,
        "period": period,
        "duration": duration,
        "trigger": trigger,
        "warmup": warmup,
        "workers": workers,
        "num_blocks": workers,
        "worker_memory": f"{capped_mem - 384}m" if capped_mem else worker_memory,
        "cpu_pct": cpu,
        "mem_mb": capped_mem,
        "size_by": size_by,
        "size_duration": size_duration,
        "size_warmup": min(warmup, size_duration / 3),
        "executor_memory": executor_memory,
        "reduce": reduce,
        "seed": seed,
        "finish_timeout": 120.0,
        "app_warmup": app_warmup,
        "rewarm": app_warmup,
        "load_sample_s": 5.0,
        "patterns": pats,
        "policies": pols,
    }
    pl = plans(workers, amplitude)
    a.update(sizing_text(pl, workers, amplitude, None))
    a.update(
        da_conf_note=f"idle timeout {idle_timeout:g} s, cached-executor and shuffle-tracking timeouts "
        f"{2 * idle_timeout:g} s, backlog timeouts 1 s",
        key_note="LR2S keys are (expressway, direction, segment); the generator adds an expressway per 400 rows/s "
        "of rate and never removes one, so the key space grows with the first rise to the peak (distinct keys per "
        "batch are in the JSON, `keys`)"
        if workload.upper().startswith("LR") and route == "pane"
        else "not measured in the app route (Spark's own aggregation)"
        if route == "app"
        else "this workload's key space does not grow with time (distinct keys per batch are in the JSON)",
    )
    meta: dict = {
        **start_meta("bench", "prompt-elastic"),
        "config": a,
        "notes": [
            f"Duration: {len(pats)} pattern(s) x {len(pols)} policies, {duration:g} s of input each, "
            f"{trigger:g}-s batches: about {len(pats) * len(pols) * (duration + 15) / 60:.0f} min of runs plus "
            "cluster and application start-up and the sizing runs.",
            (
                "Map tasks: every policy's planned map tasks are applied to the next batch (the pane executor writes "
                "them to the source's blocksFile; a batch of fewer one-second datasets than planned gets one task "
                "per dataset); executors follow the plan's max(map tasks, reduce buckets)."
                if route == "pane"
                else f"App route: each policy runs through `adaptstream.tune(spark, elastic=...)` (static plans as "
                f"the `static` policy), which asks Spark for the planned executors after every batch; the source "
                f"plans {workers} input blocks and Spark's aggregation has {workers} shuffle partitions throughout, "
                "so every executor count up to the workers' has tasks to run. The per-row UDF is synthetic work "
                f"({row_work} chained SHA-256 digests of each row's vehicle id and speed, real executor CPU); it "
                "returns the speed unchanged."
            ),
            (
                f"Each Spark application first runs {app_warmup:g} s of unrecorded constant-rate input on every "
                "worker's executor (Python workers started, Alg. 3 compiled); an executor added later during a run "
                "starts cold, which is part of what scaling out costs."
                if app_warmup > 0
                else "No unrecorded warm-up run per Spark application (--app-warmup 0): the first run of each "
                "application starts its Python workers and compiles Alg. 3 on every executor."
            ),
            "A run whose plan needs executors that are not alive (the sizing runs and other runs remove them) first "
            f"warms the new ones with an unrecorded {app_warmup:g}-s constant-rate run; executors a policy adds "
            "during a run start cold.",
            (
                "W counts the batch's own Spark jobs (pane executor: reference pass, map/reduce job, window emit); "
                "time between batches (the source's planning) is not in W. Dataset latency (arrival to the end of "
                "its batch) is reported beside it."
                if route == "pane"
                else "W = Spark's triggerExecution of the batch (its progress event) / the batch interval; the "
                "tuner's elasticity judges the same figure. Dataset latency (arrival to the batch's commit) is "
                "reported beside it."
            ),
        ],
    }
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-elastic-"))
    base_conf = executor_conf(executor_memory)
    runs: list[dict] = []
    t_start = time.time()
    try:
        with LoadSampler(a["load_sample_s"]) as sampler:
            cluster = (
                LocalCluster(workers, work / "cluster", port, cpu=cpu, mem=mem, worker_memory=worker_memory)
                if master is None
                else None
            )
            url = cluster.__enter__() if cluster is not None else str(master)
            try:
                managed = [x for x in pols if x != "dynamic_allocation"]
                groups = [managed, [x for x in pols if x == "dynamic_allocation"]]
                for group in groups:
                    if not group:
                        continue
                    da = group == ["dynamic_allocation"]
                    conf = {**base_conf, **(da_conf(workers, idle_timeout) if da else {})}
                    spark = build_spark(
                        master=url,
                        app_name=f"bench-prompt-elastic-{'da' if da else 'managed'}",
                        shuffle_partitions=workers,
                        conf=conf,
                        log_file=str(work / "spark.log"),
                    )
                    try:
                        ctl = None
                        if not da:
                            ctl = ExecutorControl(spark.sparkContext)
                            ctl.wait_for(workers, timeout=120)
                        if app_warmup > 0:
                            secs = warm_up(spark, a, work, ctl)
                            meta.setdefault("app_warmup_s", []).append(secs)
                            typer.echo(f"  warm-up of the {'da' if da else 'managed'} application: {secs:.0f} s")
                        if not da and size_by == "runs":
                            sizing = size_statics(spark, a, work, ctl)
                            meta["sizing"] = sizing
                            sz = sizing["sizes"]
                            pl = plans(workers, amplitude, sz["peak"] or workers, sz["mean"] or workers)
                            a.update(sizing_text(pl, workers, amplitude, sizing))
                        for pattern in pats:
                            for policy in group:
                                t0 = time.time()
                                run = run_one(spark, policy, pattern, a, work, ctl, pl[policy])
                                runs.append(run)
                                f = run_figures(run)
                                typer.echo(
                                    f"  {pattern:10s} {policy:18s} on time {f['on_time_share'] or 0:6.1%} "
                                    f"exec-s {f['executor_seconds']:6.0f} batches {f['batches']:3d} "
                                    f"({time.time() - t0:.0f} s){'  ' + run['error'] if 'error' in run else ''}"
                                )
                    finally:
                        spark.stop()
            finally:
                if cluster is not None:
                    cluster.__exit__()
        meta["load_mean"] = sampler.mean()
        meta["load_samples"] = sampler.samples
    except BaseException:
        typer.echo(f"bench prompt-elastic: failed; Spark's log and the cluster's logs are kept in {work}", err=True)
        raise
    if any("error" in r for r in runs):
        typer.echo(f"  some runs failed; Spark's log and the cluster's logs are kept in {work}", err=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    meta.update(load_after=os.getloadavg(), finished=time.time(), wall_s=time.time() - t_start)
    meta["policy_notes"] = {k: v for k, v in policy_notes(meta["config"]).items() if k in pols}
    doc = write_report({"meta": meta, "runs": runs}, target)
    for t in doc["targets"]:
        verdict = "undecided" if t["met"] is None else ("met" if t["met"] else "missed")
        typer.echo(f"  target {t['target']}: {verdict} ({t['measured']})")
    typer.echo(f"bench prompt-elastic: report in {target / 'prompt_elastic.md'}")
