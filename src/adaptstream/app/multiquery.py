"""Several workloads at once in one Spark application, scheduled by one driver-side controller.

``adaptstream run --workload A --workload B --scheduler klink`` comes here. Each workload runs through
:func:`adaptstream.app.runner.run_workload` on its own thread (Spark runs each streaming query's micro-batch loop on
its own thread anyway) into ``RUN_DIR/<NAME>/`` with exactly the layout of a one-workload run; a workload named
twice becomes ``NAME``, ``NAME-2``, ... Every query keeps its own source state (``<its run dir>/metrics/source``),
also when several read one ``--input`` directory.

The scheduler: gating policies (``klink``, ``rr``, ``fcfs``, ``hr``, ``sbox``) run in a :class:`Controller`
started here, whose address every source gets in its ``controller`` option; ``fair`` puts each query in its own
FAIR pool (``spark.scheduler.mode=FAIR`` must be in the SparkSession's conf: :func:`spark_conf`); ``default``
starts nothing: Spark as it is. With one workload there is nothing to arbitrate: the scheduler is not started.
Spark starts the queries one at a time, because it gives a new Python source process only 10 s to connect back,
which a loaded machine can miss (a query whose source missed it is started again, up to 5 times). Starting one
takes 4-6 s on an idle 2-core machine and 10-15 s beside running queries, so with generated input the queries
start first and their input together (``together``, the default): each generator waits at a start gate until
every query is up, then query i's event time 0 is ``go + delay_i`` with ``delay_i`` uniform in
``[0, start_spread]`` seconds (Klink Sec. 6.1.1: all queries deployed, window deadlines spread). Without it
(``together=False``, or ``--input`` files, whose arrivals the runner does not control) a query starts at its delay
once the previous one completed its first micro-batch, so N queries' start-ups add up and fewer than N may run at
once: measured with 16 queries of 60 s input, the last one started 160 s after the first.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from adaptstream.app.feedback import controller_options
from adaptstream.app.runner import RunResult, RunSpec, check_spec, run_workload
from adaptstream.connectors.generator import gate_ready_path, open_start_gate
from adaptstream.errors import AdaptstreamError

START_WAIT = 120.0  # seconds a query waits for the previous one's source to come up before starting anyway


@dataclass(frozen=True)
class MultiSpec:
    specs: tuple[RunSpec, ...]
    scheduler: str = "default"
    start_spread: float = 0.0  # each query starts at a random time in [0, start_spread] seconds
    seed: int = 0
    scheduler_params: tuple[tuple[str, Any], ...] = ()  # e.g. (("slots", 2),)
    together: bool = True  # generated inputs begin together once every query is up (start gates)


@dataclass
class MultiResult:
    spec: MultiSpec
    run_dir: str
    names: list[str]
    results: dict[str, RunResult]
    controller: dict[str, Any] | None = None
    start_delays: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0


WORKER_TIMEOUT = "Python worker failed to connect back"


def run_workload_retrying(spark, spec: RunSpec, run_dir: str, attempts: int = 5, **kwargs: Any) -> RunResult:
    """:func:`run_workload`, started again (fresh) when Spark's new Python source process missed its 10 s to
    connect back: on a loaded machine that happens before the query read anything, and says nothing about it.
    Each new attempt waits 5 s longer, so a busy moment (another query's first batch) can pass."""
    for attempt in range(1, attempts + 1):
        try:
            return run_workload(spark, spec, run_dir, fresh=True, **kwargs)
        except AdaptstreamError as e:
            if WORKER_TIMEOUT not in str(e) or attempt == attempts:
                raise
            time.sleep(5.0 * attempt)
    raise AssertionError("unreachable")


def _gates(ms: MultiSpec, names: list[str], run_dir: str) -> dict[str, str]:
    """Start gate files of the generated queries (none when ``together`` is off or only one query runs)."""
    if not ms.together or len(names) < 2:
        return {}
    folder = os.path.join(run_dir, "start-gates")
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    return {n: os.path.join(folder, n) for n, s in zip(names, ms.specs, strict=True) if not s.input_dir}


def _open_gates(
    gates: dict[str, str], alive: dict[str, threading.Event], delays: dict[str, float], errors: list
) -> None:
    """Once every query is up (or failed, or gave up waiting), open each gate at go + its start delay."""
    for name in alive:
        alive[name].wait(START_WAIT * 2)
    if errors:
        return
    go = time.time() + 1.0
    for name, path in gates.items():
        open_start_gate(path, go + delays[name])


def workload_names(workloads: Sequence[str]) -> list[str]:
    """Run directory names: a workload named twice becomes NAME, NAME-2, NAME-3, ..."""
    seen: dict[str, int] = {}
    names = []
    for w in workloads:
        seen[w] = seen.get(w, 0) + 1
        names.append(w if seen[w] == 1 else f"{w}-{seen[w]}")
    return names


def spark_conf(scheduler: str) -> dict[str, str]:
    """SparkSession settings a scheduler needs before the SparkContext starts."""
    return {"spark.scheduler.mode": "FAIR"} if scheduler.lower() == "fair" else {}


def check_multi(ms: MultiSpec, run_dir: str) -> list[str]:
    """Every check that needs no Spark: the scheduler's name and parameters, each workload's spec."""
    from adaptstream.scheduling import build_scheduler

    build_scheduler(ms.scheduler, **dict(ms.scheduler_params))
    if ms.start_spread < 0:
        from adaptstream.errors import ConfigError

        msg = f"start spread must be >= 0 seconds, got {ms.start_spread}"
        raise ConfigError(msg)
    names = workload_names([s.workload for s in ms.specs])
    for name, spec in zip(names, ms.specs, strict=True):
        check_spec(spec, os.path.join(run_dir, name))
    return names


def run_multi(
    spark, ms: MultiSpec, run_dir: str, on_progress: Callable[[str, dict], None] | None = None
) -> MultiResult:
    """Run every workload concurrently; returns when all finished (or raises the first failure)."""
    from adaptstream.control.controller import Controller, jvm_heap_used
    from adaptstream.scheduling import build_scheduler

    run_dir = os.path.abspath(run_dir)
    specs = tuple(replace(s, input_dir=os.path.abspath(s.input_dir)) if s.input_dir else s for s in ms.specs)
    ms = replace(ms, specs=specs)
    names = check_multi(ms, run_dir)
    policy = build_scheduler(ms.scheduler, **dict(ms.scheduler_params))
    controller = None
    if policy.gates and len(specs) > 1:
        controller = Controller(policy, memory=jvm_heap_used(spark)).start()
    rng = np.random.default_rng(ms.seed)
    run = _MultiRun(
        spark,
        ms,
        run_dir,
        names,
        controller,
        pools=ms.scheduler.lower() == "fair" and len(specs) > 1,
        delays={n: float(rng.uniform(0.0, ms.start_spread)) if ms.start_spread > 0 else 0.0 for n in names},
        gates=_gates(ms, names, run_dir),
        on_progress=on_progress,
    )
    os.makedirs(run_dir, exist_ok=True)
    for name in names:
        path = os.path.join(run_dir, name)
        if os.path.exists(path):
            shutil.rmtree(path)
    try:
        run.start_and_join()
    finally:
        stats = controller.stats() if controller is not None else None
        if controller is not None:
            controller.stop()
    wall = time.time() - run.t0
    _write_multi_json(run, stats, wall)
    if run.errors:
        first = run.errors[0]
        if isinstance(first, AdaptstreamError):
            raise first
        msg = f"a query of the multi-query run failed: {type(first).__name__}: {first}"
        raise AdaptstreamError(msg) from first
    return MultiResult(ms, run_dir, names, run.results, stats, run.delays, wall)


@dataclass
class _MultiRun:
    """One multi-query run's shared state: each query runs in a thread of its own; one failure stops the rest."""

    spark: Any
    ms: MultiSpec
    run_dir: str
    names: list[str]
    controller: Any
    pools: bool  # FAIR: one pool per query
    delays: dict[str, float]  # the experiment's random start times
    gates: dict[str, str]  # queries that start together: their start-gate files
    on_progress: Callable[[str, dict], None] | None
    t0: float = field(default_factory=time.time)
    results: dict[str, RunResult] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)
    alive: dict[str, threading.Event] = field(default_factory=dict)

    def start_and_join(self) -> None:
        self.alive = {n: threading.Event() for n in self.names}
        threads = [
            threading.Thread(target=self.one, args=(n, s), name=f"adaptstream-{n}", daemon=True)
            for n, s in zip(self.names, self.ms.specs, strict=True)
        ]
        opener = threading.Thread(
            target=_open_gates,
            args=(self.gates, self.alive, self.delays, self.errors),
            name="adaptstream-start-gates",
            daemon=True,
        )
        for t in threads:
            t.start()
        if self.gates:
            opener.start()
        for t in threads:
            t.join()

    def one(self, name: str, spec: RunSpec) -> None:
        try:
            self._wait_for_turn(name)
            if self.pools:  # FAIR: one pool per query, captured from this thread's local property at query start
                self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", name)
            self.results[name] = run_workload_retrying(
                self.spark,
                spec,
                os.path.join(self.run_dir, name),
                on_progress=lambda snap: self._progress(name, snap),
                extra_options=self._source_options(name, spec),
                query_name=f"{name}_{self.ms.scheduler}",
                on_output=lambda _batch_id, rows: self._output(name, rows),
            )
        except BaseException as e:  # reported by the caller's thread
            self.alive[name].set()
            self.errors.append(e)
            for q in self.spark.streams.active:  # one failed query ends the run: stop the others
                q.stop()

    def _wait_for_turn(self, name: str) -> None:
        k = self.names.index(name)
        if k > 0:  # one source process starting at a time: Spark gives each 10 s to connect back
            self.alive[self.names[k - 1]].wait(START_WAIT)
        wait = self.t0 + self.delays[name] - time.time()
        if wait > 0 and name not in self.gates:  # the experiment's design: queries start at random times
            time.sleep(wait)

    def _source_options(self, name: str, spec: RunSpec) -> dict[str, str]:
        from adaptstream.workloads import WORKLOADS

        wl = WORKLOADS.get(spec.workload)
        extra = {"windowPeriod": str(wl.effective_slide_s), "watermarkDelay": str(wl.watermark_delay_s)}
        if self.controller is not None:
            extra.update(controller_options(self.controller, name))
        if name in self.gates:
            extra.update(startGate=self.gates[name])
        return extra

    def _progress(self, name: str, snap: dict) -> None:
        if snap["completed"] > 0:  # its first batch (code generation, state stores) is behind it
            self.alive[name].set()
        if name in self.gates and os.path.exists(gate_ready_path(self.gates[name])):  # up, waiting at its gate
            self.alive[name].set()
        if self.on_progress is not None:
            self.on_progress(name, snap)

    def _output(self, name: str, rows: int) -> None:  # measured selectivity for the scheduler
        if self.controller is not None:
            self.controller.report_output(name, rows)


def _write_multi_json(run: _MultiRun, stats: Any, wall: float) -> None:
    doc = {
        "scheduler": run.ms.scheduler,
        "scheduler_params": dict(run.ms.scheduler_params),
        "workloads": run.names,
        "start_delays": run.delays,
        "controller": stats,
        "wall_seconds": wall,
        "specs": [s.record() for s in run.ms.specs],
        "gated": run.controller is not None,
        "together": bool(run.gates),
        "fair_pools": run.pools,
    }
    with open(os.path.join(run.run_dir, "multi.json"), "w") as f:
        json.dump(doc, f, indent=2)
