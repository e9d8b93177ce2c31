"""``adaptstream bench klink``: Klink and the baselines of its Sec. 6.1.3 on N concurrent windowed queries.

One invocation, one SparkSession (``spark.scheduler.mode=FAIR``: queries without a pool share the default pool,
FIFO within it, i.e. Spark's default; ``fair`` gives each query its own pool). For every N in ``--queries`` and
every policy: N queries, query i running the (i mod k)-th of ``--workloads`` (default YSB with uniform and YSBZ
with Zipf network delays; DEBS 2015 taxi windows and the Table III queries can be mixed in), at ``--rate`` rows/s
each for ``--duration`` s, each starting at a random time in ``[0, --start-spread]`` s, drained to the end,
through :func:`adaptstream.app.multiquery.run_multi`, the path ``adaptstream run --workload ... --scheduler`` takes.
Policies run in a rotated order per N so none always runs first. Figures: output latency per window (Klink Sec.
6.1.2, metrics/output_latency.py), mean and p99 per policy and N (Fig. 6a), per workload, and its CDF at the
largest N (Fig. 6b); the controller's CPU per scheduling decision and the throughput at the smallest N (Fig. 9d's
overhead); SWM estimate accuracy (Fig. 9c) from the controller during the runs and from a pure-Python replay of
the delay generators' progress indicators over ``--replay-seconds`` of event time (labelled as a replay). Writes
klink.md, klink.json, klink-latency.png, klink-cdf.png to ``--out`` (default runs/bench-klink-<time>/;
``--update-docs``: docs/results/).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

POLICIES = ("default", "fair", "rr", "fcfs", "hr", "sbox", "klink")


def parse_policy(label: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """``NAME`` or ``NAME:PARAM=VALUE[;PARAM=VALUE]`` (e.g. ``klink:hold=inf``, the work-conserving Klink) into
    the scheduler's name and parameters, as ``adaptstream run --scheduler-params`` takes them."""
    from adaptstream.policy import parse_params

    name, _, rest = label.partition(":")
    return name, parse_params(rest, "a policy's K=V;K=V")


DEFAULT_WORKLOADS = ("YSB", "YSBZ")


def one_run(
    spark,
    policy: str,
    n: int,
    duration: float,
    rate: int,
    spread: float,
    seed: int,
    work: Path,
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS,
    together: bool = True,
) -> dict:
    """N queries, query i running ``workloads[i % len(workloads)]``, under one policy; latencies pooled.

    ``together``: every query starts first and their input together (start gates); else one query after another."""
    from adaptstream.app.multiquery import MultiSpec, run_multi
    from adaptstream.app.runner import RunSpec
    from adaptstream.metrics.output_latency import (
        latency_breakdown,
        summarize,
        summarize_breakdown,
        window_latencies,
        written_windows,
    )

    specs = tuple(
        RunSpec(
            workload=workloads[i % len(workloads)],
            admission="asap",
            rate=rate,
            duration=duration,
            seed=seed + i,
            drain=True,
            finish_timeout=300,
        )
        for i in range(n)
    )
    scheduler, params = parse_policy(policy)
    run_dir = work / f"{policy.replace(':', '_').replace('=', '-')}-{n}"
    load_before = os.getloadavg()
    ms = MultiSpec(
        specs, scheduler=scheduler, scheduler_params=params, start_spread=spread, seed=seed, together=together
    )
    res = run_multi(spark, ms, str(run_dir))
    lat: list[float] = []
    parts: list[dict[str, float]] = []
    per_workload: dict[str, list[float]] = {}
    rows = batches = 0
    first, last = float("inf"), 0.0
    for name in res.names:
        r = res.results[name]
        qdir = os.path.join(res.run_dir, name)
        wins = written_windows(qdir)  # read each query's results once for both
        mine = window_latencies(qdir, windows=wins)
        lat += mine
        parts += latency_breakdown(qdir, windows=wins)
        per_workload.setdefault(r.spec.workload, []).extend(mine)
        rows += r.summary.rows
        b = _batches(r.metrics_dir)
        batches += len(b)
        if b:
            first = min(first, min(x["admitted_at"] for x in b))
            last = max(last, max(x["completed_at"] for x in b))
    ctl = res.controller or {}
    out = {
        "policy": policy,
        "queries": n,
        **summarize(lat),
        "latencies": sorted(lat),
        "workloads": {w: summarize(v) for w, v in sorted(per_workload.items())},
        "breakdown": summarize_breakdown(parts),  # where the latency of windows closed mid-run goes
        "workload_latencies": {w: sorted(v) for w, v in sorted(per_workload.items())},
        "unfinished": sum(r.unfinished for r in res.results.values()),
        "wall_s": res.wall_seconds,
        "rows": rows,
        "rows_per_s": rows / (last - first) if last > first else None,
        "batches": batches,  # data micro-batches over all queries (no-data batches are not the source's)
        "controller": ctl,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }
    decisions = ctl.get("decisions") or 0
    out["cpu_ms_per_decision"] = 1000 * ctl["cpu_seconds"] / decisions if decisions else None
    out["cpu_ms_per_request"] = 1000 * ctl["cpu_seconds"] / ctl["requests"] if ctl.get("requests") else None
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


def _batches(metrics_dir: str) -> list[dict]:
    path = os.path.join(metrics_dir, "batches.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def klink_defaults() -> dict[str, str]:
    """The settings a plain ``klink`` ran with, kept in the report: the defaults change between versions."""
    from adaptstream.scheduling.klink import KlinkConfig

    c = KlinkConfig()
    return {"hold": f"{c.hold:g}", "overdue": c.overdue, "burst": str(c.burst), "burst_queue": str(c.burst_queue)}


COUNTERS = (
    "requests",
    "grants",
    "refusals",
    "decisions",
    "holds",
    "memory_decisions",
    "cpu_seconds",
    "swm_hits",
    "swm_checked",
)


def rep_fits(elapsed: float, last_rep: float | None, budget: float) -> bool:
    """Whether to start another repetition at this N: only a whole one, as long as the last one took, so every
    policy ends with the same number of runs. A partial repetition adds a run for the first policies of the order
    only, and a run late in the application's life is slower than early ones (in the git ba9ef40 recording
    ``default``'s three runs had means of 10.2, 12.1 and 13.8 s, and only the first five policies of the order had
    a third run), which biases the pooled comparison. The first repetition always starts (its runs are checked one
    by one)."""
    if elapsed > budget:
        return False
    return last_rep is None or elapsed + last_rep <= budget


def merge_repeats(reps: list[dict]) -> dict:
    """One record for a policy at one N from its repeated runs: window latencies pooled (mean, p99 and the CDF
    over every window of every repeat), counters summed, and each repeat's own mean and p99 kept so the report
    can show the spread between runs. Failed repeats are left out of the pool and named."""
    from adaptstream.metrics.output_latency import BREAKDOWN, summarize

    ok = [r for r in reps if not r.get("error")]
    out = dict(reps[-1]) if not ok else dict(ok[0])
    lat = sorted(x for r in ok for x in r["latencies"])
    per: dict[str, list[float]] = {}
    for r in ok:
        for w, v in (r.get("workload_latencies") or {}).items():
            per.setdefault(w, []).extend(v)
    ctl: dict[str, Any] = {k: sum((r.get("controller") or {}).get(k, 0) for r in ok) for k in COUNTERS}
    if ok and ok[-1].get("controller"):
        ctl = {**ok[-1]["controller"], **ctl}
    rates = [r["rows_per_s"] for r in ok if r.get("rows_per_s")]
    bds = [r["breakdown"] for r in ok if (r.get("breakdown") or {}).get("windows")]
    nw = sum(b["windows"] for b in bds)
    breakdown = {"windows": nw, **{k: sum(b[k] * b["windows"] for b in bds) / nw if nw else None for k in BREAKDOWN}}
    out.update(
        summarize(lat),
        latencies=lat,
        workloads={w: summarize(v) for w, v in sorted(per.items())},
        workload_latencies={w: sorted(v) for w, v in sorted(per.items())},
        unfinished=sum(r["unfinished"] or 0 for r in ok) if ok else None,
        wall_s=sum(r["wall_s"] for r in reps),
        rows=sum(r["rows"] for r in ok),
        rows_per_s=sum(rates) / len(rates) if rates else None,
        batches=sum(r.get("batches") or 0 for r in ok),
        breakdown=breakdown,
        controller=ctl if ok and any(r.get("controller") for r in ok) else {},
        cpu_ms_per_decision=1000 * ctl["cpu_seconds"] / ctl["decisions"] if ctl["decisions"] else None,
        cpu_ms_per_request=1000 * ctl["cpu_seconds"] / ctl["requests"] if ctl["requests"] else None,
        load_before=reps[0].get("load_before"),
        load_after=reps[-1].get("load_after"),
        repeats=[{"mean_s": r["mean_s"], "p99_s": r["p99_s"], "windows": r["windows"]} for r in ok],
        runs=len(reps),  # failed ones included; fewer than --repeats when the budget ran out
    )
    errors = [r["error"] for r in reps if r.get("error")]
    if errors:
        out["error"] = f"{len(errors)} of {len(reps)} repeats failed; first: {errors[0]}"
    else:
        out.pop("error", None)
    return out


def swm_replay(seconds: int, seed: int = 0, generators: tuple[str, ...] = ("ysb", "ysb_zipf")) -> dict:
    """SWM estimate accuracy on the generators' progress indicators (no Spark: a replay of what the source
    reports; each dataset arrives at the end of its second)."""
    from adaptstream.scheduling.swm import SwmEstimator
    from adaptstream.workloads import build_generator

    out: dict = {}
    for gen_name in generators:
        for label, conf, var in (
            ("klink-95", 0.95, "delay"),
            ("klink-90", 0.90, "delay"),
            ("eq6-literal-95", 0.95, "mean"),
        ):
            gen = build_generator(gen_name, seed=seed)
            est = SwmEstimator(period=10.0, lateness=2.0, history=400, confidence=conf, variance=var)
            rng = np.random.default_rng(seed)
            for k in range(seconds):
                gen.generate(k, 200)
                newest = gen.event_stats(k)[0]  # type: ignore[attr-defined]
                arrival = k + 1 + float(rng.uniform(0.0, 0.05))  # the writer's own lateness
                est.observe(k, arrival, newest, 0.0)
            out[f"{gen_name}/{label}"] = {
                "hits": est.hits,
                "checked": est.checked,
                "accuracy": est.hits / est.checked if est.checked else None,
            }
    return out


def klink_command(
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="where klink.md/json/png go [default: runs/bench-klink-<time>]")
    ] = None,
    update_docs: Annotated[
        bool, typer.Option("--update-docs", help="write the committed report in docs/results")
    ] = False,
    queries: Annotated[str, typer.Option(help="numbers of concurrent queries, e.g. '2,4'")] = "2,4",
    policies: Annotated[
        str,
        typer.Option(help="comma-separated policies; NAME:K=V;K=V sets parameters, e.g. 'klink:hold=inf'"),
    ] = ",".join(POLICIES),
    duration: Annotated[float, typer.Option(min=5.0, help="seconds of generated input per query")] = 40.0,
    rate: Annotated[int, typer.Option(min=1, help="rows per second per query")] = 400,
    start_spread: Annotated[float, typer.Option(min=0.0, help="random start in [0, S] s (the paper's 20)")] = 20.0,
    replay_seconds: Annotated[int, typer.Option(min=100, help="event seconds in the SWM accuracy replay")] = 4000,
    workloads: Annotated[
        str,
        typer.Option(
            help="comma-separated workloads, cycled over the N queries (query i runs the (i mod k)-th), e.g. "
            "'YSB,YSBZ,DEBS,DEBSP,CM1S,LR2S'"
        ),
    ] = ",".join(DEFAULT_WORKLOADS),
    seed: Annotated[int, typer.Option(min=0)] = 0,
    budget_minutes: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="skip the runs left once this much time passed "
            "(largest N first, so the comparison at saturation comes first)",
        ),
    ] = 25.0,
    repeats: Annotated[
        int,
        typer.Option(
            min=1,
            help="runs per policy and N (new seeds each; windows pooled, each run's mean kept for the spread)",
        ),
    ] = 1,
    together: Annotated[
        bool,
        typer.Option(
            "--together/--one-by-one",
            help="start every query first and their input together at the start spread (default), or each query "
            "once the previous one ran its first micro-batch (the recordings up to git cc5e61a: fewer than N at once)",
        ),
    ] = True,
    report_only: Annotated[bool, typer.Option(help="rebuild the report from klink.json, run nothing")] = False,
) -> None:
    """Output latency of N concurrent windowed queries (YSB by default; --workloads mixes in DEBS 2015 and the
    Table III queries) under every scheduler (Klink Fig. 6a/6b, 9c/9d shapes)."""
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.scheduling import build_scheduler
    from adaptstream.spark.session import build_spark
    from adaptstream.workloads import GENERATORS, WORKLOADS
    from adaptstream_bench.klink_report import write_report
    from adaptstream_bench.meta import start_meta

    if report_only:
        if out is None and not update_docs:
            msg = "--report-only rebuilds an existing report: pass its --out DIR, or --update-docs"
            raise ConfigError(msg)
        src = report_dir("bench-klink", out, update_docs)
        if not (src / "klink.json").exists():
            msg = f"--report-only: no klink.json in {src}"
            raise ConfigError(msg)
        typer.echo(f"report: {write_report(json.loads((src / 'klink.json').read_text()), src)}")
        return
    pols = [p.strip() for p in policies.split(",") if p.strip()]
    for p in pols:  # an unknown name or parameter is an error listing the valid ones, before Spark starts
        name, params = parse_policy(p)
        build_scheduler(name, **dict(params))
    wls = tuple(w.strip() for w in workloads.split(",") if w.strip())
    if not wls:
        msg = "--workloads must name at least one workload"
        raise typer.BadParameter(msg)
    gens: list[str] = []
    for w in wls:
        g = WORKLOADS.get(w).generator  # an unknown name lists the valid ones
        if g not in gens and hasattr(GENERATORS.get(g).generator_cls, "event_stats"):
            gens.append(g)  # generators with network delays: their SWM estimates are replayed
    ns = sorted({int(x) for x in queries.split(",") if x.strip()})
    if not ns or min(ns) < 1:
        msg = f"--queries must list numbers >= 1, got {queries!r}"
        raise typer.BadParameter(msg)
    target = report_dir("bench-klink", out, update_docs, report="klink.json")
    target.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="adaptstream-bench-klink-"))
    meta: dict[str, Any] = {
        **start_meta("bench", "klink"),
        "duration_s": duration,
        "rate": rate,
        "start_spread_s": start_spread,
        "queries": ns,
        "policies": pols,
        "workloads": list(wls),
        "seed": seed,
        "repeats": repeats,
        "together": together,
        "klink_defaults": klink_defaults(),
    }
    typer.echo("bench klink: SWM estimate replay (pure Python)")
    swm = swm_replay(replay_seconds, seed, tuple(gens))
    spark = build_spark(app_name="bench-klink", log_file=str(work / "spark.log"), conf={"spark.scheduler.mode": "FAIR"})
    runs: list[dict] = []
    try:
        typer.echo("bench klink: warm-up (1 query, not recorded)")
        one_run(spark, "default", 1, 8.0, rate, 0.0, seed + 999, work, wls)
        for i, n in enumerate(sorted(ns, reverse=True)):
            order = pols[i % len(pols) :] + pols[: i % len(pols)]
            reps: dict[str, list[dict]] = {}
            last_rep: float | None = None
            for rep in range(repeats):  # repeats interleaved: drift over the application's life hits every policy
                t_rep = time.time()
                whole = rep_fits(t_rep - meta["started"], last_rep, budget_minutes * 60)
                for p in order:
                    if not whole or time.time() - meta["started"] > budget_minutes * 60:
                        meta.setdefault("skipped", []).append(f"{p}@N={n}" + (f"#{rep + 1}" if repeats > 1 else ""))
                        typer.echo(f"  N={n} {p:8s} skipped: the {budget_minutes:g} min budget is spent")
                        continue
                    r = _guarded_run(spark, p, n, duration, rate, start_spread, seed + 1000 * rep, work, wls, together)
                    reps.setdefault(p, []).append(r)
                    tag = f" #{rep + 1}" if repeats > 1 else ""
                    typer.echo(
                        f"  N={n} {p:8s}{tag} windows {r['windows']:3d} mean {_fmt(r['mean_s'])} p99 "
                        f"{_fmt(r['p99_s'])} ({r['wall_s']:.0f} s, load {r['load_after'][0]:.1f})"
                    )
                last_rep = time.time() - t_rep
            runs += [merge_repeats(reps[p]) for p in order if p in reps]
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    meta.update(load_after=os.getloadavg(), finished=time.time())
    result = {"meta": meta, "runs": runs, "swm_replay": swm}
    write_report(result, target)
    typer.echo(f"report: {target / 'klink.md'}")


def _guarded_run(spark, p: str, n: int, duration, rate, spread, seed, work, wls, together: bool = True) -> dict:
    """One run; a run that fails is recorded with its error (the report lists it), not hidden or retried."""
    from adaptstream.errors import AdaptstreamError

    t0 = time.time()
    try:
        return one_run(spark, p, n, duration, rate, spread, seed, work, wls, together)
    except AdaptstreamError as e:
        return {
            "policy": p,
            "queries": n,
            "windows": 0,
            "mean_s": None,
            "p50_s": None,
            "p99_s": None,
            "latencies": [],
            "workloads": {},
            "unfinished": None,
            "wall_s": time.time() - t0,
            "rows": 0,
            "rows_per_s": None,
            "controller": {},
            "cpu_ms_per_decision": None,
            "cpu_ms_per_request": None,
            "load_before": None,
            "load_after": os.getloadavg(),
            "error": str(e)[:300],
        }


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}s"
