"""``adaptstream submit APP.py [APP ARGS]``: run an unmodified PySpark application under the tuner.

The session is built first (so the script's ``SparkSession.builder.getOrCreate()`` returns it) and tuned; the script
runs as ``__main__`` with its own arguments; whatever it leaves running is stopped when it returns; the tuner then
closes (``--metrics DIR/tuner.json``) and a summary per query is printed. The exit status is the script's own: its
``sys.exit`` code, 0 when it returns, 1 when it raises (its traceback is shown once)."""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from typing import Any

from adaptstream.errors import ConfigError


def exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    return e.code if isinstance(e.code, int) else 1


def run_script(path: str, args: list[str]) -> int:
    """Run ``path`` as ``__main__`` with ``sys.argv = [path, *args]``; its exit status."""
    saved = sys.argv
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
        return 0
    except SystemExit as e:
        return exit_code(e)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.argv = saved
        sys.path.pop(0)


def stop_active(spark: Any) -> list[str]:
    """Stop the queries the script left running (the application ends with it); their names."""
    names = []
    for q in list(spark.streams.active):
        names.append(q.name or str(q.id))
        q.stop()
    return names


def executor_seconds(timeline: list[list[float]], end: float) -> float:
    """The integral of the executor count over the run (what the application held, as Spark reported it)."""
    total = 0.0
    for (t, n), nxt in zip(timeline, [*timeline[1:], [end, 0]], strict=True):
        total += n * max(0.0, nxt[0] - t)
    return total


def submit(script: str, args: list[str], *, master: str, metrics: str | None, **tune_kwargs: Any) -> tuple[int, dict]:
    """Run ``script`` under a tuner on ``master``; (its exit status, the tuner's final status)."""
    from adaptstream.app.multiquery import spark_conf
    from adaptstream.spark.session import build_spark
    from adaptstream.tuner import TunerConfig, tune

    if not os.path.isfile(script):
        msg = f"no such application script: {script!r}"
        raise ConfigError(msg)
    TunerConfig(**tune_kwargs, metrics_path=metrics).check(master)  # before Spark starts
    log_file = os.path.join(metrics, "spark.log") if metrics else None
    spark = build_spark(
        master=master,
        app_name=os.path.basename(script),
        log_file=log_file,
        conf=spark_conf(tune_kwargs.get("scheduler", "default")),
    )
    tuner = tune(spark, metrics_path=metrics, **tune_kwargs)
    try:
        code = run_script(script, args)
        left = stop_active(spark)
    finally:
        status = tuner.status()
        status["executor_seconds"] = executor_seconds(status["executors"], time.time())
        tuner.close()
        if metrics:
            _add_to_report(os.path.join(metrics, "tuner.json"), status, code)
        spark.stop()
    status["stopped_at_exit"] = left
    return code, status


def _add_to_report(path: str, status: dict, code: int) -> None:
    import json

    with open(path) as f:
        doc = json.load(f)
    doc.update(exit_status=code, executor_seconds=status["executor_seconds"])
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)


def summary_rows(status: dict) -> list[tuple[str, ...]]:
    """One row per query for the CLI's table."""

    def fmt(x: float | None, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    rows: list[tuple[str, ...]] = []
    for name, q in sorted(status["queries"].items()):
        rows.append(
            (
                name,
                str(q["batches"]),
                str(q["rows"]),
                fmt(q["batch_seconds_mean"], ".2f"),
                fmt(q["batch_seconds_p99"], ".2f"),
                fmt(None if q["within_target"] is None else 100 * q["within_target"], ".0f"),
                str(q["decisions"]),
                q["state"],
            )
        )
    return rows
