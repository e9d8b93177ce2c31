"""The ``app`` route of ``adaptstream bench prompt-elastic``: elasticity of a user's own application through
``adaptstream.tune``, where each row costs executor CPU.

Why: in the pane route (``adaptstream run --reduce``) a batch's time on four workers capped at 30 % of a core was
mostly fixed per-job cost, so one executor served every rate the generator could write (docs/prompt.md). A user's
application whose per-row step dominates (parsing, feature extraction, scoring) is where executors add capacity.
Here that step is **synthetic**: a Python UDF computes ``rounds`` chained SHA-256 digests of each row's vehicle id
and speed (real CPU on the executors, about 0.4 us per round on an uncapped core of this machine) and returns the
speed unchanged, so the query's results are LR2S's and equal its batch SQL over the same rows.

The application is what a user writes: ``adaptstream.tune(spark, elastic=...)`` (Prompt's Alg. 4, the DS2-style
controller or a static plan), then an ``adaptstream`` source with generated input and Spark's own windowed
aggregation behind the UDF. Per batch: Spark's own progress (start, ``triggerExecution``, input rows) from a
``StreamingQueryListener``, and the executors the tuner planned after it (``Tuner.status()["plans"]``).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from adaptstream.workloads.lmstream_queries import LR2S, SegmentSpeedWorkload


@dataclass(frozen=True)
class WorkedSegmentSpeed(SegmentSpeedWorkload):
    """LR2S behind a per-row UDF of ``rounds`` SHA-256 digests (synthetic work; the results are LR2S's)."""

    rounds: int = 0

    def stream_query(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        rounds = self.rounds
        spd_type = df.schema["Spd"].dataType

        def work(vid: Any, spd: Any) -> Any:  # pickled by value: executors need not import this module
            import hashlib

            h = f"{vid}:{spd}".encode()
            for _ in range(rounds):
                h = hashlib.sha256(h).digest()
            return spd

        return super().stream_query(df.withColumn("Spd", F.udf(work, spd_type)(F.col("VID"), F.col("Spd"))))


def worked_workload(rounds: int) -> str:
    """The workload name of LR2S behind ``rounds`` digests per row, as ``module:object`` (the registries' plugin
    form), so nothing is added to the shared WORKLOADS registry."""
    return f"{__name__}:LR2S_W{int(rounds)}"


def __getattr__(name: str) -> WorkedSegmentSpeed:  # PEP 562: LR2S_W<rounds> built on first access
    m = re.fullmatch(r"LR2S_W(\d+)", name)
    if m is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    rounds = int(m.group(1))
    base = {k: getattr(LR2S, k) for k in LR2S.__dataclass_fields__}
    desc = f"{LR2S.description}, {rounds} SHA-256 rounds per row (synthetic work)"
    return WorkedSegmentSpeed(**{**base, "name": name, "rounds": rounds, "description": desc})


class ProgressLog:
    """Spark's progress of the named queries as plain records (a ``StreamingQueryListener`` on the session)."""

    def __init__(self, spark: Any) -> None:
        from adaptstream.spark.listener import TunerListener

        self.spark = spark
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._listener = TunerListener(self._on_progress, lambda name, error: None)
        spark.streams.addListener(self._listener)

    def _on_progress(self, p: Any) -> None:
        started = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        rec = {"query": p.query, "batch": p.batch, "rows": p.rows, "seconds": p.seconds, "started": started}
        with self._lock:
            self.records.append(rec)

    def of(self, query: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.records if r["query"] == query]

    def close(self) -> None:
        from adaptstream.spark.listener import wait_for_listeners

        wait_for_listeners(self.spark)  # the events Spark posted before the run ended
        self.spark.streams.removeListener(self._listener)


def app_batches(progress: list[dict], plans: list[list[Any]], trigger: float, a: dict) -> list[dict]:
    """The run's data batches in the report's shape: W = Spark's triggerExecution / batch interval, and the
    executors the policy planned after each batch (None for a run without the tuner's elasticity)."""
    planned = {int(p[1]): int(p[2]) for p in plans}  # [query, batch, executors, slot wait]
    out = []
    for r in sorted(progress, key=lambda r: r["batch"]):
        if r["rows"] <= 0:
            continue
        out.append(
            {
                "batch": r["batch"],
                "started": r["started"],
                "ended": r["started"] + r["seconds"],
                "w": r["seconds"] / trigger,
                "rows": r["rows"],
                "keys": None,
                "map_tasks": a["num_blocks"],
                "reduce_buckets": a["workers"],
                "planned_executors": planned.get(int(r["batch"])),
            }
        )
    return out


def run_app(spark: Any, spec: Any, run_dir: Path, a: dict, policy: str | None, params: str, name: str) -> dict:
    """One run of the user's application: ``tune`` with ``policy`` (None: Spark alone), the query until its input
    is done, then its batches (Spark's progress) and the tuner's plans. Raises what the run raised."""
    import adaptstream
    from adaptstream.app.runner import run_workload

    log = ProgressLog(spark)
    tuner = None
    try:
        if policy is not None:
            tuner = adaptstream.tune(
                spark,
                elastic=policy,
                elastic_params=params,
                latency_target=a["trigger"],
                metrics_path=str(run_dir / "tuner"),
            )
        extra = {"amplitude": str(a["amplitude"]), "period": str(a["period"])}
        res = run_workload(spark, spec, str(run_dir), extra_options=extra, query_name=name)
        status = tuner.status() if tuner is not None else {}
    finally:
        if tuner is not None:
            tuner.close()
        log.close()
    return {
        "unfinished": res.unfinished,
        "batches": app_batches(log.of(name), status.get("plans", []), a["trigger"], a),
        "elasticity_log": status.get("elasticity_log", []),
    }
