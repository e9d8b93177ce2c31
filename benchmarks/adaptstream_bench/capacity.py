"""``adaptstream bench capacity``: fit the capacity model (capacity_model.py) from calibration runs, predict where
each experiment breaks, and check the predictions, in one invocation (issue #56 item 6).

Three phases on one local SparkSession:

1. **Calibration**: every query of the recorded experiments alone (:func:`calibrate`: asap at a low rate and at 3x
   it for the wall-time fit P(n) = a + b n, a fixed trigger at both rates for the CPU fit).
2. **Checks run here**: the predicted breaking rate of one query under asap (``--single``), run at 0.8x, 1x and
   1.25x of it; the predicted number of concurrent queries Spark's default scheduling keeps on deadline
   (``--klink-workloads`` at ``--klink-rate``), run at every N from 0.75x to 1.33x of it (:func:`klink_counts`).
   The driver's JVM heap in use is sampled every second during these runs (per-query memory). The checks' queries
   are calibrated first, the checks run next, the other queries' calibration last.
3. **Recorded experiments**: the brackets of the committed reports under ``--results`` (LMStream's rate searches,
   Klink's default at each N), each cited by its git revision; predicted with this run's fits.

The JSON is rewritten after every phase; the report module (capacity_report.py) judges the targets from it.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from adaptstream_bench.capacity_model import fit_batches, fit_cpu
from adaptstream_bench.capacity_report import deadline_of, fits_of, predict, recorded_experiments, write_report
from adaptstream_bench.meta import ROOT, finish_meta, sample_load, start_meta

console = Console()

#: calibration rate per query (rows/s): 3x it stays below each one's recorded breaking point
CALIBRATION = {
    "LR1S": 1500, "LR1T": 1500, "LR2S": 32000, "CM1S": 32000, "CM1T": 32000, "CM2S": 32000,
    "YSB": 1000, "YSBZ": 1000, "DEBS": 1000, "DEBSP": 1000,
}  # fmt: skip
FIXED_TRIGGER = 5.0  # seconds: the CPU fit's fixed-trigger runs
#: (admission, multiple of the calibration rate) of a query's calibration runs, in order
CALIBRATION_RUNS = (("asap", 1), ("asap", 3), ("fixed", 1), ("fixed", 3))
WALL_FIT_RUNS = (("asap", 1), ("asap", 3))
CPU_FIT_RUNS = (("asap", 1), ("fixed", 1), ("fixed", 3))
SINGLE_FACTORS = (0.8, 1.0, 1.25)
KLINK_SPAN = (0.75, 1.33)  # the N-query check runs every N from 0.75x to 1.33x the prediction (at most KLINK_MAX)
KLINK_MAX = 5
MISSED_SHARE = 0.05  # Klink's default breaks where it misses more than this share of deadlines (issue #56)


class HeapSampler:
    """The driver JVM's heap in use (total - free), once a second, on a thread of its own; the run starts from a
    collected heap (one forced GC before it, none during it: a pause would change what the run measures)."""

    def __init__(self, spark) -> None:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.System.gc()  # each measured run starts from a collected heap
        self._rt = jvm.java.lang.Runtime.getRuntime()
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.samples.append((self._rt.totalMemory() - self._rt.freeMemory()) / 2**20)
            except Exception:  # the JVM going away ends the sampling, not the run
                return

    def __enter__(self) -> HeapSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def max_mb(self) -> float:
        return self._rt.maxMemory() / 2**20


def tree_cpu_seconds(pid: int | None = None) -> float:
    """CPU-seconds (user + system, own and reaped children) of a process and every live descendant, from /proc:
    the driver's Python, its JVM, Python workers and generator processes."""
    root = os.getpid() if pid is None else pid
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    children: dict[int, list[int]] = {}
    for p, (parent, _) in stats.items():
        children.setdefault(parent, []).append(p)
    total, todo = 0.0, [root]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]
        todo += children.get(p, [])
    return total


def _calibration_batches(res) -> tuple[list[int], list[float]]:
    from adaptstream_bench.lmstream_load import _batches

    bs, counted, _ = _batches(res)
    if not len(bs):
        return [], []
    bs = bs[counted]
    return [int(x) for x in bs["rows"]], [float(x) for x in bs["processing_time"]]


def calibrate(spark, query: str, rate: int, seconds: float, runs_dir: Path) -> dict:
    """Four runs. The wall-time fit takes the batches of two asap runs (the rate and 3x it): the regime the
    predictions speak of, batches back to back (a fixed trigger's idle gaps made batches cheaper in the first
    recording). The CPU fit takes the CPU totals of asap at the rate and of a fixed trigger at the rate and at 3x it:
    batch and row counts vary apart, and the trigger's idle gaps show the demand (asap keeps the CPU busy whatever
    the rate, so asap runs alone cannot separate the two costs)."""
    from adaptstream.app.runner import RunSpec, run_workload
    from adaptstream.metrics.summary import load_batches

    rows: list[int] = []
    secs: list[float] = []
    runs: list[dict] = []
    cpu_points: list[tuple[int, int, float]] = []
    for admission, k in CALIBRATION_RUNS:
        r = k * rate
        spec = RunSpec(workload=query, admission=admission, rate=r, duration=seconds, seed=3, trigger=FIXED_TRIGGER,
                       finish_timeout=30.0, warmup=5.0)  # fmt: skip
        cpu0 = tree_cpu_seconds()
        res = run_workload(spark, spec, str(runs_dir / "calibration" / f"{query}-{admission}-{r}"))
        cpu = tree_cpu_seconds() - cpu0
        if (admission, k) in WALL_FIT_RUNS:
            n, p = _calibration_batches(res)
            rows += n
            secs += p
        every = load_batches(res.metrics_dir)
        total = int(every["rows"].sum()) if len(every) else 0
        runs.append({"admission": admission, "rate": r, "batches": len(every), "rows": total, "cpu_s": cpu})
        if (admission, k) in CPU_FIT_RUNS:
            cpu_points.append((len(every), total, cpu))
    out: dict = {"query": query, "rate": rate, "rows": rows, "seconds": secs, "runs": runs}
    try:
        out["fit"] = fit_batches(rows, secs).as_dict()
        out["cpu"] = fit_cpu(cpu_points).as_dict()
    except ValueError as e:
        out["error"] = str(e)
    return out


def check_single(spark, data: dict, query: str, duration: float, runs_dir: Path, budget_end: float) -> None:
    from adaptstream.app.runner import RunSpec, run_workload
    from adaptstream.workloads import WORKLOADS
    from adaptstream_bench.lmstream_load import judge

    slide = WORKLOADS.get(query).lmstream_slide
    p = predict({"kind": "single", "query": query}, *fits_of(data), data["meta"]["cores"])
    check: dict = {"query": query, "slide": slide, "predicted": p, "runs": [], "skipped": []}
    data["checks"]["single"] = check
    if not p:
        check["skipped"].append("no prediction (no fit or no per-row cost)")
        return
    for f in SINGLE_FACTORS:
        rate = max(100, int(round(p * f, -2)))
        if time.time() + duration + 40 > budget_end:
            check["skipped"].append(f"{rate} rows/s (budget)")
            continue
        console.print(f"  single {query} asap at {rate:,} rows/s ({f:g}x the prediction) ...")
        spec = RunSpec(workload=query, admission="asap", rate=rate, duration=duration, seed=21, finish_timeout=20.0,
                       warmup=10.0)  # fmt: skip
        with HeapSampler(spark) as heap:
            row = judge(run_workload(spark, spec, str(runs_dir / "single" / f"{query}-{rate}")), slide)
        row.update(factor=f, heap_mb=heap.median())
        check["runs"].append({k: row[k] for k in ("rate", "factor", "within", "holds", "avg_max_latency",
                                                   "batches", "growing", "generator_limited", "heap_mb")})  # fmt: skip
        console.print(f"    within {row['within']:.0%}, holds {row['holds']}")


def check_klink(spark, data: dict, workloads: tuple[str, ...], rate: int, duration: float, work: Path,
                budget_end: float) -> None:  # fmt: skip
    from adaptstream_bench.klink import one_run
    from adaptstream_bench.klink_report import deadline_misses

    slide, delay = deadline_of(workloads)
    exp = {"kind": "klink", "workloads": list(workloads), "rate": rate}
    p = predict(exp, *fits_of(data), data["meta"]["cores"])
    check: dict = {"workloads": list(workloads), "rate": rate, "slide": slide, "watermark_delay": delay,
                   "predicted": p, "runs": [], "skipped": []}  # fmt: skip
    data["checks"]["klink"] = check
    if not p:
        check["skipped"].append("no prediction (a workload has no fit)")
        return
    for n in klink_counts(p):
        if time.time() + duration + 60 + 3 * n > budget_end:
            check["skipped"].append(f"N={n} (budget)")
            continue
        console.print(f"  {n} queries under Spark's default scheduling at {rate} rows/s each ...")
        with HeapSampler(spark) as heap:
            run = one_run(spark, "default", n, duration, rate, 10.0, 31, work, tuple(workloads))
        share = deadline_misses(run)
        check["runs"].append({
            "queries": n, "missed": share, "holds": share is not None and share <= MISSED_SHARE,
            "windows": run.get("windows"), "mean_s": run.get("mean_s"), "breakdown": run.get("breakdown"),
            "heap_mb": heap.median(), "heap_max_mb": heap.max_mb(),
        })  # fmt: skip
        console.print(f"    missed {share if share is None else f'{share:.0%}'} of deadlines")


def _calibrate_one(spark, data: dict, q: str, seconds: float, runs_dir: Path, target: Path, t0: float) -> None:
    console.print(f"[{(time.time() - t0) / 60:5.1f} min] calibrating {q} at {CALIBRATION[q]:,} rows/s ...")
    c = calibrate(spark, q, CALIBRATION[q], seconds, runs_dir)
    data["calibration"].append(c)
    sample_load(data["meta"])
    f, cp = c.get("fit"), c.get("cpu")
    text = (
        f"a = {f['a']:.3f} s/batch, b = {1e6 * f['b']:.2f} us/row, R2 {f['r2']:.2f}; CPU "
        f"{cp['c_batch']:.3f} s/batch, {1e6 * cp['c_row']:.2f} us/row"
        if f and cp
        else c["error"]
    )
    console.print(f"    {text}")
    write_report(data, target)


def klink_counts(predicted: float) -> list[int]:
    """Every N from 0.75x to 1.33x the prediction (consecutive: the first recording's 3, 4, 6 left 5 unknown), at
    most KLINK_MAX of them around the prediction."""
    lo, hi = max(1, math.floor(KLINK_SPAN[0] * predicted)), max(2, math.ceil(KLINK_SPAN[1] * predicted))
    ns = list(range(lo, hi + 1))
    while len(ns) > KLINK_MAX:  # drop from the side farther from the prediction
        ns.pop(0 if predicted - ns[0] > ns[-1] - predicted else -1)
    return ns


def capacity_command(
    single: Annotated[str, typer.Option(help="the query whose asap breaking rate is checked here")] = "LR1S",
    klink_workloads: Annotated[str, typer.Option(help="comma-separated workloads of the N-query check")] = (
        "YSB,YSBZ,DEBS,DEBSP"
    ),
    klink_rate: Annotated[int, typer.Option(min=1, help="rows/s of each query in the N-query check")] = 300,
    calibration_seconds: Annotated[float, typer.Option(min=15.0, help="seconds of input per calibration run")] = 30.0,
    duration: Annotated[float, typer.Option(min=20.0, help="seconds of input per check run")] = 60.0,
    results: Annotated[str, typer.Option(metavar="DIR", help="the recorded reports to predict")] = str(
        ROOT / "docs" / "results"
    ),
    budget_minutes: Annotated[float, typer.Option(min=5.0, help="start no check run after this much time")] = 40.0,
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="report directory [default: runs/bench-capacity-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write docs/results/capacity.*")] = False,
) -> None:
    """Fit the capacity model, predict each experiment's breaking point, and check predictions against runs."""
    from adaptstream.app.runner import RunSpec, run_workload
    from adaptstream.errors import ConfigError
    from adaptstream.outdirs import report_dir
    from adaptstream.spark.session import build_spark

    wls = tuple(w.strip() for w in klink_workloads.split(",") if w.strip())
    unknown = [w for w in (single, *wls) if w not in CALIBRATION]
    if unknown or not wls:
        msg = f"--single and --klink-workloads take queries from {', '.join(CALIBRATION)}, got {', '.join(unknown)}"
        raise ConfigError(msg)
    if not Path(results).is_dir():
        msg = f"--results {results} is not a folder of recorded reports"
        raise ConfigError(msg)
    target = report_dir("bench-capacity", out, update_docs, report="capacity.json")
    runs_dir = Path("runs/bench-capacity") if update_docs else target / "runs"
    t0 = time.time()
    budget_end = t0 + 60 * budget_minutes
    spark = build_spark(app_name="bench-capacity", conf={"spark.scheduler.mode": "FAIR"})
    data: dict = {
        "meta": {
            **start_meta("bench", "capacity"),
            "master": spark.sparkContext.master,
            "cores": spark.sparkContext.defaultParallelism,  # the pool the model's N queries share
            "spark": spark.version,
            "sizing": f"calibration: each query alone, {calibration_seconds:g} s of input per run: asap at its "
            f"calibration rate and at 3x it (the wall-time fit, first 5 s of batches left out), a {FIXED_TRIGGER:g}-s "
            "fixed trigger at the rate and at 3x it (with asap at the rate: the CPU fit, CPU-seconds of the driver's "
            "process tree per run); the checks' queries calibrated first, then the checks, then the other queries; a "
            "forced GC before each check run; checks: "
            f"{duration:g} s of input per run, one run per setting; a {budget_minutes:g} min budget on starting "
            "check runs. One warm-up query (discarded) first.",
        },
        "calibration": [],
        "checks": {},
        "recorded": [],
    }
    first = list(dict.fromkeys([single, *wls]))  # the checks' queries, then the checks, then the rest: the checks
    rest = [q for q in CALIBRATION if q not in first]  # run on a JVM that has run fewer queries before them
    run_workload(spark, RunSpec(workload=single, admission="asap", rate=1000, duration=8.0, seed=2),
                 str(runs_dir / "jvm-warmup"))  # fmt: skip
    for q in first:
        _calibrate_one(spark, data, q, calibration_seconds, runs_dir, target, t0)
    check_single(spark, data, single, duration, runs_dir, budget_end)
    sample_load(data["meta"])
    write_report(data, target)
    check_klink(spark, data, wls, klink_rate, duration, runs_dir / "klink", budget_end)
    sample_load(data["meta"])
    write_report(data, target)
    for q in rest:
        _calibrate_one(spark, data, q, calibration_seconds, runs_dir, target, t0)
    data["recorded"] = recorded_experiments(Path(results))
    finish_meta(data["meta"])
    md = write_report(data, target)
    console.print(f"bench capacity: report in {md}")
