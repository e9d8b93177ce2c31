"""``adaptstream.tune(spark, ...)``: one tuner per Spark application, for the user's own queries.

What it does, and which Spark lever each part moves (docs/tuning.md):

* **scheduling** - starts the application's controller (control/) in the driver with the named scheduler (Klink or a
  baseline). Every ``format("adaptstream")`` source started in the session afterwards registers with it without any
  option (the tuner registers the source with its controller address and secret as defaults) and asks it before
  each micro-batch: the scheduler decides which query's batch runs next.
* **admission** - the tuner's ``admission`` / ``admission_params`` become every source's defaults (a source's own
  options win).
* **elasticity** - a ``StreamingQueryListener`` reads every query's progress (any source, Spark's own included) and
  feeds one application-wide elasticity policy (Prompt Alg. 4: batch time against the latency target); its
  executor count is asked of the cluster manager (``requestTotalExecutors`` / ``killExecutor``; standalone, YARN,
  Kubernetes). A local master cannot change executors: ``elastic`` there is a ConfigError.
* **restart** - with ``state_path`` the scheduler's and the elasticity policy's state is saved after every batch and
  restored when the application starts again.

The controller is an optional helper: when it stops or dies, queries run on unscheduled (one warning in each
source) and register again when it is back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from adaptstream.errors import ConfigError

log = logging.getLogger("adaptstream.tuner")
STATE_FILE = "tuner-policies.json"
DURATIONS_KEPT = 4096  # batch times per query kept for the p99 (bounded memory)
EXECUTOR_POLL_S = 1.0  # how often the executor timeline is sampled while an elasticity policy runs
AUTO = "auto"  # latency_target: per query, its sources' window slide, else its processing-time trigger interval
DEFAULT_TARGET_S = 10.0  # under "auto", a query that gives neither a slide nor a trigger interval
#: under "auto", the share of a query's window slide its batches may take: its bound is MaxLat <= slide, and a row
#: waits up to one batch (the one running when it arrived) before its own, so MaxLat is about two batch times
SLIDE_BATCH_SHARE = 0.5


@dataclass(frozen=True)
class TunerConfig:
    """What ``tune`` was asked for; checked before anything starts."""

    scheduler: str = "default"
    scheduler_params: str = ""
    elastic: str | None = None
    elastic_params: str = ""
    admission: str | None = None
    admission_params: str = ""
    #: seconds a batch should take at most (the elasticity policy's batch interval) for every query, or "auto":
    #: per query, its latency target is its sources' window slide (batches then get SLIDE_BATCH_SHARE of it), else
    #: its processing-time trigger interval, else DEFAULT_TARGET_S
    latency_target: float | str = AUTO
    state_path: str | None = None
    metrics_path: str | None = None
    port: int = 0  # 0: any free port
    #: with a gating scheduler and an elasticity policy, decide both in one loop: the scheduler's slots follow
    #: the executors planned, and the elasticity policy sees each batch's wait for a slot as part of its time
    joint: bool = True

    def check(self, master: str) -> None:
        from adaptstream.admission import ADMISSION
        from adaptstream.elasticity import ELASTICITY
        from adaptstream.scheduling import SCHEDULERS

        SCHEDULERS.build(self.scheduler, self.scheduler_params).build()
        if self.admission is not None or self.admission_params:
            ADMISSION.build(self.admission or "asap", self.admission_params).build()
        latency_target_value(self.latency_target)
        if self.elastic is not None:
            from adaptstream.spark.executors import check_elastic_master

            ELASTICITY.build(self.elastic, self.elastic_params).build()
            check_elastic_master(master)
        if not 0 <= self.port <= 65535:
            msg = f"port must be in [0, 65535], got {self.port}"
            raise ConfigError(msg)


@dataclass
class QueryRecord:
    """What the tuner saw of one query (from Spark's progress events)."""

    name: str
    batches: int = 0
    rows: int = 0
    within_target: int = 0
    durations: deque = field(default_factory=lambda: deque(maxlen=DURATIONS_KEPT))
    controller_names: set[str] = field(default_factory=set)
    state: str = "running"
    target: float | None = None  # the query's latency target (the latest)
    batch_target: float | None = None  # what its batch times were judged against (the latest)

    def summary(self, decisions: dict[str, int]) -> dict[str, Any]:
        import numpy as np

        d = np.asarray(self.durations, dtype=float)
        return {
            "batches": self.batches,
            "rows": self.rows,
            "decisions": decisions.get("grants", 0) + decisions.get("holds", 0),
            "grants": decisions.get("grants", 0),
            "holds": decisions.get("holds", 0),
            "unscheduled": decisions.get("unscheduled", 0),
            "batch_seconds_mean": float(d.mean()) if d.size else None,
            "batch_seconds_p99": float(np.percentile(d, 99)) if d.size else None,
            "within_target": self.within_target / self.batches if self.batches else None,
            "latency_target": self.target,
            "batch_target": self.batch_target,
            "sources": sorted(self.controller_names),
            "state": self.state,
        }


class Tuner:
    """The running tuner of one SparkSession: a context manager; ``status()`` and ``close()``."""

    def __init__(self, spark: Any, config: TunerConfig) -> None:
        self.spark = spark
        self.config = config
        self.closed = False
        self.queries: dict[str, QueryRecord] = {}
        self.executors: list[list[float]] = []
        #: per data batch the policy judged: [query, Spark batch id, executors planned after it] (bounded)
        self.plans: deque[list[Any]] = deque(maxlen=DURATIONS_KEPT)
        self._data_started: dict[str, tuple[str, float]] = {}  # query -> (run id, start of its last data batch)
        self.warned: set[str] = set()
        self._lock = threading.Lock()
        self.controller: Any = None
        self.elasticity: Any = None
        self.executor_control: Any = None
        self._listener: Any = None
        self._stop_watch = threading.Event()
        self._watch: threading.Thread | None = None
        self.restored: int | None = None  # the batch count saved with the restored state (None: a fresh start)
        self.slides: dict[str, float] = {}  # source (controller name) -> the smallest window slide it registered
        self.triggers: dict[str, float | None] = {}  # "query id/run id" -> its processing-time trigger interval

    # -- life cycle -----------------------------------------------------------------------------------------
    def start(self) -> Tuner:
        from adaptstream.elasticity import ELASTICITY
        from adaptstream.scheduling import SCHEDULERS
        from adaptstream.spark.datasource import register
        from adaptstream.spark.listener import TunerListener

        c = self.config
        policy = SCHEDULERS.build(c.scheduler, c.scheduler_params).build()
        if c.elastic is not None:
            from adaptstream.spark.executors import ExecutorControl

            self.elasticity = ELASTICITY.build(c.elastic, c.elastic_params).build()
            self.executor_control = ExecutorControl(self.spark.sparkContext)
        self._restore(policy)
        self.controller = self._start_controller(policy)
        register(self.spark, self._source_defaults())
        self._listener = TunerListener(self._on_progress, self._on_end)
        self.spark.streams.addListener(self._listener)
        self._note_executors()
        if self.elasticity is not None:
            if self.restored is not None:  # resume at the executors the restored plan had
                n = self.elasticity.plan.executors
                self.executor_control.scale_to(n)
                log.info("adaptstream tuner: executors -> %d (the restored elasticity plan)", n)
            self._follow(self.elasticity.plan.executors)
            self._watch = threading.Thread(target=self._watch_executors, name="adaptstream-executors", daemon=True)
            self._watch.start()
        return self

    def _watch_executors(self) -> None:
        """Sample the executor count between batches too: an executor asked for after batch i registers while
        batch i+1 runs, and a batch can be long; the timeline (and executor-seconds) should not wait for it."""
        while not self._stop_watch.wait(EXECUTOR_POLL_S):
            with contextlib.suppress(Exception):  # the session may be stopping
                self._note_executors()

    def _start_controller(self, policy: Any) -> Any:
        from adaptstream.control.controller import Controller, jvm_heap_used

        ctl = Controller(policy, port=self.config.port, memory=jvm_heap_used(self.spark))
        try:
            ctl.start()
        except OSError as e:  # the port is taken: any free one (sources learn the address from the tuner)
            log.warning("adaptstream tuner: port %d is not free (%s); using another free port", self.config.port, e)
            ctl.port = 0
            ctl.start()
        ctl.on_register = self._on_register
        return ctl

    def _source_defaults(self) -> dict[str, str]:
        c = self.config
        from adaptstream.app.feedback import controller_options

        out = controller_options(self.controller)
        if c.admission is not None:
            out["admission"] = c.admission
        if c.admission_params:
            out["admissionParams"] = c.admission_params
        return out

    def close(self) -> None:
        """Stop the controller and the listener, save the policies' state and write ``tuner.json``; sources
        started afterwards run untuned. Idempotent."""
        if self.closed:
            return
        self.closed = True
        from adaptstream.spark.datasource import register

        self._stop_watch.set()
        if self._watch is not None:
            self._watch.join(timeout=10)

        self.flush()
        with contextlib.suppress(Exception):  # the session may be stopping already
            self.spark.streams.removeListener(self._listener)
        self._save()
        report = self.status()
        self.controller.stop()
        with contextlib.suppress(Exception):
            register(self.spark)  # later sources: plain, not pointed at a stopped controller
        if self.config.metrics_path:
            os.makedirs(self.config.metrics_path, exist_ok=True)
            with open(os.path.join(self.config.metrics_path, "tuner.json"), "w") as f:
                json.dump(report, f, indent=2, default=str)
        _TUNERS.pop(id(self.spark), None)

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the tuner reports -------------------------------------------------------------------------------
    def flush(self, timeout: float = 10.0) -> None:
        """Wait until Spark delivered the progress events posted so far (its listener bus is asynchronous)."""
        from adaptstream.spark.listener import wait_for_listeners

        wait_for_listeners(self.spark, timeout)

    def status(self) -> dict[str, Any]:
        """The tuner's state as a dict: policies, controller, every query seen (events Spark posted before the
        call included), the executor timeline."""
        if not self.closed:
            self.flush()
        stats = self.controller.stats() if self.controller is not None else {}
        per_query = stats.get("per_query", {})
        with self._lock:
            queries = {
                name: rec.summary(_merge(per_query, rec.controller_names)) for name, rec in sorted(self.queries.items())
            }
            executors = [list(x) for x in self.executors]
            plans = [list(x) for x in self.plans]
        return {
            "scheduler": self.config.scheduler,
            "elastic": self.config.elastic,
            "admission": self.config.admission,
            "config": asdict(self.config),
            "controller": self.controller.address if self.controller is not None else None,
            "slots": self.controller.policy.slots if self.controller is not None else None,
            "closed": self.closed,
            "queries": queries,
            "registered": stats.get("registrations", {}),
            "executors": executors,
            "plans": plans,
            "elasticity_log": self.elasticity.decision_log() if self.elasticity is not None else [],
            "controller_stats": {k: v for k, v in stats.items() if k != "per_query"},
        }

    # -- events ---------------------------------------------------------------------------------------------
    def _on_register(self, query: str, streams: dict) -> None:
        periods = [float(v[0]) for v in streams.values() if float(v[0]) > 0]
        if periods:
            with self._lock:
                self.slides[query] = min(periods)
        if streams or not self.controller.policy.gates or query in self.warned:
            return
        self.warned.add(query)
        log.warning(
            "adaptstream tuner: source %s gave no window slide (option windowPeriod) and no watermark delay "
            "(watermarkDelay); %s schedules it as a query without deadline",
            query,
            self.config.scheduler,
        )

    def _on_progress(self, p: Any) -> None:
        trigger = self._trigger(p)  # asks Spark: outside the lock
        with self._lock:
            rec = self.queries.setdefault(p.query, QueryRecord(p.query))
            rec.batches += 1
            rec.rows += p.rows
            rec.durations.append(p.seconds)
            rec.controller_names.update(p.controller_names)
            rec.target, rec.batch_target = self._target(rec, trigger)
            target = rec.batch_target
            rec.within_target += int(p.seconds <= target)
        if self.elasticity is not None and p.rows > 0:
            self._scale(p, target)
        self._save()

    def _on_end(self, name: str, error: str | None) -> None:
        from adaptstream.errors import query_error

        with self._lock:
            rec = self.queries.setdefault(name, QueryRecord(name))
            rec.state = "stopped" if not error else f"failed: {str(query_error(str(error)))[:300]}"
        if error:
            log.warning("adaptstream tuner: query %s failed; the other queries go on (%s)", name, rec.state)

    def _target(self, rec: QueryRecord, trigger: float | None) -> tuple[float, float]:
        """(the query's latency target, its batch-time target): the configured seconds for both, or under "auto"
        the smallest slide its sources registered (batches get SLIDE_BATCH_SHARE of it), else its processing-time
        trigger interval, else DEFAULT_TARGET_S (said once in the log). Called under the lock."""
        target = latency_target_value(self.config.latency_target)
        if target != AUTO:
            return float(target), float(target)
        slides = [self.slides[n] for n in rec.controller_names if n in self.slides]
        if slides:
            return min(slides), SLIDE_BATCH_SHARE * min(slides)
        if trigger:
            return trigger, trigger
        if "target:" + rec.name not in self.warned:
            self.warned.add("target:" + rec.name)
            log.warning(
                "adaptstream tuner: query %s has no window slide (adaptstream source option windowPeriod) and no "
                "processing-time trigger; its batches are judged against %g s (tune(latency_target=...) sets one)",
                rec.name,
                DEFAULT_TARGET_S,
            )
        return DEFAULT_TARGET_S, DEFAULT_TARGET_S

    def _trigger(self, p: Any) -> float | None:
        """The query's processing-time trigger interval in seconds (None: another trigger, or not found); asked
        of Spark once per query run."""
        if latency_target_value(self.config.latency_target) != AUTO or not p.query_id:
            return None
        key = f"{p.query_id}/{p.run_id}"
        if key not in self.triggers:
            self.triggers[key] = trigger_interval(self.spark, p.query_id)
            while len(self.triggers) > DURATIONS_KEPT:  # bounded: forget the oldest run
                self.triggers.pop(next(iter(self.triggers)))
        return self.triggers[key]

    def _scale(self, p: Any, target_s: float | None = None) -> None:
        from adaptstream.elasticity import BatchStats

        if target_s is None:
            target_s = float(latency_target_value(self.config.latency_target, default=DEFAULT_TARGET_S))
        target = self.elasticity.plan.executors
        span = self._span(p)
        wait = self._slot_wait(p)
        plan = self.elasticity.on_batch(BatchStats(p.seconds + wait, target_s, p.rows, 0, span))
        if plan.executors != target or plan.executors != len(self.executor_control.executors()):
            self.executor_control.scale_to(plan.executors)
            log.info("adaptstream tuner: executors -> %d (query %s, batch %.2f s)", plan.executors, p.query, p.seconds)
        self._follow(plan.executors)
        with self._lock:
            self.plans.append([p.query, p.batch, int(plan.executors), round(wait, 3)])
        self._note_executors()

    @property
    def _joint(self) -> bool:
        """Scheduling and scaling decided together (``joint``, with a gating scheduler and an elasticity policy)."""
        return (
            self.config.joint
            and self.elasticity is not None
            and self.controller is not None
            and bool(self.controller.policy.gates)
        )

    def _slot_wait(self, p: Any) -> float:
        """Seconds the query's latest batch waited for a free slot (every slot busy; a deliberate hold not
        counted): time the executors would have saved, so the elasticity policy judges it with the batch."""
        if not self._joint:
            return 0.0
        with self.controller.lock:
            qs = self.controller.policy.queries
            return max((qs[n].last_wait for n in p.controller_names if n in qs), default=0.0)

    def _follow(self, executors: int) -> None:
        """The scheduler's concurrent micro-batches follow the executors: one query's batch per executor."""
        if self._joint:
            with self.controller.lock:
                if self.controller.policy.slots != max(1, int(executors)):
                    self.controller.policy.set_slots(executors)
                    self.controller.changed.notify_all()  # waiting polls re-ask now

    def _span(self, p: Any) -> float | None:
        """Seconds since the query's previous data batch started: the arrivals this batch holds (None for the
        first batch of a run, or a timestamp Spark did not give)."""
        start = progress_start(p.timestamp)
        last = self._data_started.get(p.query)
        if start is not None:
            self._data_started[p.query] = (p.run_id, start)
        if start is None or last is None or last[0] != p.run_id or start <= last[1]:
            return None
        return start - last[1]

    def _note_executors(self) -> None:
        count = executor_count(self.spark.sparkContext)
        with self._lock:
            if not self.executors or self.executors[-1][1] != count:
                self.executors.append([time.time(), count])

    # -- state ----------------------------------------------------------------------------------------------
    def _state_file(self) -> Any:
        from adaptstream.policy import PolicyStateFile

        path = self.config.state_path
        return PolicyStateFile(os.path.join(path, STATE_FILE)) if path else None

    def _restore(self, scheduler: Any) -> None:
        store = self._state_file()
        if store is not None:
            self.restored = store.restore(scheduler=scheduler, elasticity=self.elasticity)

    def _save(self) -> None:
        store = self._state_file()
        if store is None or self.controller is None:
            return
        with self.controller.lock:  # the scheduler is the controller's: snapshot it between requests
            store.save(
                sum(r.batches for r in self.queries.values()),
                scheduler=self.controller.policy,
                elasticity=self.elasticity,
            )


def latency_target_value(value: float | str | None, default: float | None = None) -> float | str:
    """A latency target as given to ``tune`` or ``submit --latency-target``: seconds > 0, or "auto" / None (then
    ``default`` when one is given). Anything else is a ConfigError."""
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return AUTO if default is None else default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0:
        msg = (
            f"latency_target must be > 0 seconds or 'auto' (half each query's slide, or its trigger interval), "
            f"got {value!r}"
        )
        raise ConfigError(msg)
    return seconds


def target_text(value: float | str) -> str:
    """The latency target in words, for summaries."""
    target = latency_target_value(value)
    return "half each query's slide, or its trigger interval" if target == AUTO else f"{float(target):g} s"


def trigger_interval(spark: Any, query_id: str) -> float | None:
    """A running query's processing-time trigger interval in seconds, read from Spark's query object (PySpark has
    no public accessor); None for other triggers or when the query is gone."""
    try:
        query = spark.streams.get(query_id)
        trigger = query._jsq.streamingQuery().trigger()
        ms = float(trigger.intervalMs()) if trigger.getClass().getSimpleName() == "ProcessingTimeTrigger" else 0.0
    except Exception:  # another trigger kind, the query stopped, or a Spark without this internal
        return None
    return ms / 1000.0 if ms > 0 else None


def _merge(per_query: dict[str, dict[str, int]], names: set[str]) -> dict[str, int]:
    out = {"grants": 0, "holds": 0, "unscheduled": 0}
    for n in names:
        for k in out:
            out[k] += per_query.get(n, {}).get(k, 0)
    return out


def executor_count(sc: Any) -> int:
    """Executors alive now; a local master runs one inside the driver."""
    if str(sc.master).lower().startswith("local"):
        return 1
    return int(sc._jsc.sc().getExecutorIds().size())


_TUNERS: dict[int, Tuner] = {}


def running_tuner(spark: Any) -> Tuner | None:
    """The open tuner of this SparkSession, if any."""
    t = _TUNERS.get(id(spark))
    return t if t is not None and not t.closed else None


def progress_start(timestamp: str) -> float | None:
    """A progress event's batch start (ISO 8601, as Spark writes it) in seconds since the epoch."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def tune(
    spark: Any,
    *,
    scheduler: str = "default",
    elastic: str | None = None,
    admission: str | None = None,
    metrics_path: str | None = None,
    scheduler_params: str = "",
    elastic_params: str = "",
    admission_params: str = "",
    latency_target: float | str | None = AUTO,
    state_path: str | None = None,
    port: int = 0,
    joint: bool = True,
) -> Tuner:
    """Tune this SparkSession's streaming queries: one tuner per session (a second call with the same settings
    returns the running one, with other settings it is a ConfigError). Use as a context manager, or ``close()``."""
    config = TunerConfig(
        scheduler,
        scheduler_params,
        elastic,
        elastic_params,
        admission,
        admission_params,
        latency_target_value(latency_target),
        state_path,
        metrics_path,
        int(port),
        bool(joint),
    )
    running = _TUNERS.get(id(spark))
    if running is not None and not running.closed:
        if running.config == config:
            return running
        msg = "this SparkSession is tuned already (with other settings); close() that tuner before tuning it again"
        raise ConfigError(msg)
    mode = spark.sparkContext.getConf().get("spark.scheduler.mode", "FIFO")
    if config.scheduler.strip().lower() == "fair" and str(mode).upper() != "FAIR":
        msg = (
            "scheduler 'fair' needs spark.scheduler.mode=FAIR when the SparkContext starts (adaptstream submit sets it)"
        )
        raise ConfigError(msg)
    config.check(spark.sparkContext.master)
    tuner = Tuner(spark, config).start()
    _TUNERS[id(spark)] = tuner
    return tuner
