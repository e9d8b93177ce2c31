"""Multi-query scheduling: which of an application's streaming queries may cut its next micro-batch now.

One policy instance serves every query of a Spark application (it lives in the driver-side controller,
control/controller.py). The engine side reports what happens and asks for grants; the policy orders the ready
queries and hands out at most ``slots`` concurrent micro-batches (Klink's scheduling cycle: the order is
recomputed at most every ``cycle`` seconds, or when a batch finished). Policies that do not gate (``default``,
``fair``) grant every request: Spark runs each query's loop freely, as it does without adaptstream.

Events (all times are wall-clock seconds passed by the caller, so policies are testable with a manual clock):

* ``register(query, streams)``: a query (re-)registers with its input streams, each ``(period, lateness)``: the
  window slide (the SWM period) and the watermark delay. Re-registration after a restart keeps what was learned.
* ``progress(query, stream, seq, arrival, event_wall, origin, ...)``: dataset ``seq`` arrived; its newest event
  was generated at ``event_wall``; network delays of its events as count / sum / sum of squares.
* ``poll(query, now, want, pending_rows, oldest)``: the source's ``latestOffset``; True grants a micro-batch.
* ``complete(query, now, end_seq, rows, seconds)``: the granted batch finished (the next ``latestOffset``).
* ``output(query, now, rows)``: the query's sink wrote ``rows`` result rows (measured selectivity).
* ``memory(now, used_fraction)``: memory use of the executors (Klink's memory mode).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptstream.policy import Policy
from adaptstream.scheduling.swm import SwmEstimator

DEFAULT_SELECTIVITY = 0.5  # before the sink reported any output (Klink's memory mode, hr)
SELECTIVITY_DECAY = 0.95  # per completed batch: windows close every few batches, so the ratio spans many
READY_FOR = 1.0  # seconds a "want" stays valid without a new poll (sources poll every 20 ms while idle)
COST_HISTORY = 32  # completed batches per query in the cost fit (bounded memory)
MIN_FIT = 4  # batches (of at least two sizes) before a per-row cost is fitted
MAX_QUERIES = 4096


@dataclass(frozen=True)
class SchedulerConfig:
    """Settings every scheduler shares (a policy's config subclasses this)."""

    slots: int = 1  # micro-batches running at once (gating policies)
    burst: int = 0  # extra slots, only for queries whose SWM waits, while at least ``burst_queue`` of them wait
    burst_queue: int = 2  # due queries waiting (the slots all busy) before a burst slot opens
    cycle: float = 0.120  # Klink's r: seconds between re-evaluations of the order
    lease: float = 60.0  # a granted batch that never reports back frees its slot after this long
    fixed_cost: float = 0.15  # seconds of engine overhead per micro-batch (the cost model's intercept)
    history: int = 400  # Klink's h: epochs of delay statistics kept per stream
    confidence: float = 0.95  # Klink's f
    variance: str = "delay"  # "delay" or "mean" (Eq. 6 literally), see scheduling/swm.py
    longpoll: bool = True  # a refused source waits at the controller up to a cycle, granted as a slot frees

    def validate(self) -> None:
        from adaptstream.errors import ConfigError

        counts_bad = self.slots < 1 or self.burst < 0 or self.burst_queue < 1 or self.history < 2
        if counts_bad or self.cycle <= 0 or self.lease <= 0:
            msg = f"scheduler settings out of range: {self}"
            raise ConfigError(msg)
        if not 0.0 < self.confidence < 1.0:
            msg = f"confidence must be in (0, 1), got {self.confidence}"
            raise ConfigError(msg)
        if self.variance not in ("delay", "mean"):
            msg = f"variance must be 'delay' or 'mean', got {self.variance!r}"
            raise ConfigError(msg)


@dataclass
class QueryState:
    """What the scheduler knows about one query."""

    name: str
    streams: dict[str, SwmEstimator] = field(default_factory=dict)
    pending_rows: int = 0
    oldest: float | None = None  # arrival of the oldest dataset waiting
    ready_at: float | None = None  # last poll that wanted a batch
    running_since: float | None = None
    granted_at: float | None = None  # last grant (round robin, fcfs tie-breaks)
    blocked_since: float | None = None  # first refusal with every slot busy since the last grant
    last_wait: float = 0.0  # seconds the latest grant came after that refusal: waiting for capacity, not held
    per_row: float = 0.0  # seconds of processing per row (EWMA)
    selectivity: float = DEFAULT_SELECTIVITY  # output rows per input row, measured once the sink reports
    out_pending: int = 0  # rows the sink wrote since the last completed batch
    measured: bool = False  # the sink reported (selectivity is measured, not the default)
    in_decayed: float = 0.0  # decayed sums of rows in / rows out over completed batches (selectivity's terms)
    out_decayed: float = 0.0
    batches: int = 0
    rows: int = 0
    seconds: float = 0.0
    recent: list[tuple[int, float]] = field(default_factory=list)  # (rows, seconds) of the last batches
    _fit: tuple[tuple, tuple[float, float]] | None = field(default=None, repr=False, compare=False)  # cache

    def cost(self, fixed: float) -> float:
        """cost^q(t): the expected processing time of what waits now, ``a + b * rows waiting`` from
        :meth:`cost_fit`; ``fixed`` before any batch completed."""
        fit = self.cost_fit()
        if fit is None:
            return fixed
        a, b = fit
        return a + b * self.pending_rows

    def cost_fit(self) -> tuple[float, float] | None:
        """(a, b) of ``seconds = a + b * rows`` over :attr:`recent`, both >= 0; None before the first batch.

        Robust on purpose (Theil-Sen: the median of the pairwise slopes, then the median intercept): a query's
        first micro-batches are cold (Python workers, code generation) and a loaded driver adds spikes, and a
        least-squares line through two such points, or a per-row rate that charges the per-batch cost (0.3-1 s
        on this machine) to every row, estimated 3.4-4 s for backlogs that took 1 s (docs/klink.md). Until
        :data:`MIN_FIT` batches of at least two sizes completed, no per-row cost is charged: ``a`` is the median
        batch time and ``b`` 0."""
        if not self.recent:
            return None
        key = tuple(self.recent)
        if self._fit is not None and self._fit[0] == key:
            return self._fit[1]
        fit = _theil_sen(self.recent)
        self._fit = (key, fit)
        return fit

    def slack(self, t: float, fixed: float, cycle: float, overdue: str = "overrun") -> float:
        """Klink Sec. 3.3: a query's slack is the least over its input streams (+inf when nothing is known)."""
        c = self.cost(fixed)
        return min((s.slack(t, c, cycle, overdue) for s in self.streams.values()), default=math.inf)

    @property
    def due(self) -> bool:
        """An SWM of this query was ingested and waits for its micro-batch."""
        return any(s.pending for s in self.streams.values())

    def state(self) -> dict[str, Any]:
        return {
            "streams": {k: [s.period, s.lateness, s.state()] for k, s in self.streams.items()},
            "pending_rows": self.pending_rows,
            "oldest": self.oldest,
            "ready_at": self.ready_at,
            "running_since": self.running_since,
            "granted_at": self.granted_at,
            "blocked_since": self.blocked_since,
            "last_wait": self.last_wait,
            "per_row": self.per_row,
            "selectivity": self.selectivity,
            "out_pending": self.out_pending,
            "measured": self.measured,
            "in_decayed": self.in_decayed,
            "out_decayed": self.out_decayed,
            "batches": self.batches,
            "rows": self.rows,
            "seconds": self.seconds,
            "recent": [list(x) for x in self.recent],
        }


class SchedulerPolicy(Policy):
    """Shared bookkeeping and the grant rule; a policy supplies :meth:`order` (most urgent first)."""

    name = "base"
    gates = True  # False: every poll is granted (Spark as it is)

    def __init__(self, config: SchedulerConfig) -> None:
        config.validate()
        self.config = config
        self.queries: dict[str, QueryState] = {}
        self._order: list[str] = []
        self._order_at: float | None = None
        self.mem_used: float = 0.0
        self.decisions = 0  # order evaluations (controller CPU per cycle = its CPU time / this)
        self.holds = 0  # order evaluations that held a ready query back (klink's ``hold``)
        self.memory_decisions = 0  # order evaluations made in memory mode (klink)
        self.bursts = 0  # grants made beyond ``slots`` (``burst``)
        self.slots = config.slots  # concurrent micro-batches now: the config's, or what set_slots made it

    # -- events --------------------------------------------------------------------------------------------
    def register(
        self, query: str, streams: Mapping[str, tuple[float, float]] | None = None, now: float | None = None
    ) -> None:
        q = self.queries.get(query)
        if q is None:
            if len(self.queries) >= MAX_QUERIES:
                msg = f"more than {MAX_QUERIES} queries registered"
                raise ValueError(msg)
            q = self.queries[query] = QueryState(query)
        for name, (period, lateness) in (streams or {}).items():
            old = q.streams.get(name)
            if old is None or old.period != float(period) or old.lateness != float(lateness):
                c = self.config
                q.streams[name] = SwmEstimator(period, lateness, c.history, c.confidence, c.variance)
        q.running_since = None  # a (re)started query has no batch of ours in flight
        q.ready_at = None
        self._order_at = None

    def unregister(self, query: str) -> None:
        self.queries.pop(query, None)
        self._order_at = None

    def progress(
        self,
        query: str,
        stream: str,
        seq: int,
        arrival: float,
        event_wall: float,
        origin: float,
        n: int = 1,
        total: float | None = None,
        squares: float | None = None,
    ) -> bool:
        q = self._query(query)
        est = q.streams.get(stream)
        if est is None:
            return False
        return est.observe(seq, arrival, event_wall, origin, n, total, squares)

    def complete(
        self, query: str, now: float, end_seq: int, rows: int, seconds: float, rows_out: int | None = None
    ) -> None:
        q = self._query(query)
        q.running_since = None
        q.batches += 1
        q.rows += int(rows)
        q.seconds += float(seconds)
        if rows_out is not None:
            q.out_pending += int(rows_out)
            q.measured = True
        if rows > 0:
            sample = max(float(seconds) - self.config.fixed_cost, 0.0) / rows
            q.per_row = sample if q.batches == 1 else 0.8 * q.per_row + 0.2 * sample
            q.recent.append((int(rows), float(seconds)))
            del q.recent[:-COST_HISTORY]
            if q.measured:  # the sink reports what it wrote
                q.in_decayed = SELECTIVITY_DECAY * q.in_decayed + rows
                q.out_decayed = SELECTIVITY_DECAY * q.out_decayed + q.out_pending
                q.out_pending = 0
                q.selectivity = q.out_decayed / q.in_decayed
        for est in q.streams.values():
            est.processed(end_seq)
        self._order_at = None  # a slot is free: re-evaluate now

    def output(self, query: str, now: float, rows: int) -> None:
        """The query's sink wrote ``rows`` result rows (one micro-batch, the no-data ones included).

        Selectivity = rows out / rows in, both summed with decay ``SELECTIVITY_DECAY`` per completed batch; rows
        out are attributed to the next completed batch (a windowed query emits when the watermark passes, so only
        a ratio over many batches means anything). Not capped at 1: a join can write more rows than it read."""
        if rows < 0:
            msg = f"rows out must be >= 0, got {rows}"
            raise ValueError(msg)
        q = self._query(query)
        q.out_pending += int(rows)
        q.measured = True

    def memory(self, now: float, used_fraction: float) -> None:
        self.mem_used = float(used_fraction)

    def poll(self, query: str, now: float, want: bool, pending_rows: int = 0, oldest: float | None = None) -> bool:
        """The source asks whether it may cut a micro-batch now (``want``: its admission policy would)."""
        q = self._query(query)
        q.pending_rows, q.oldest = int(pending_rows), oldest
        if q.running_since is not None:  # it polls, so its batch is over (the completion report was lost)
            q.running_since = None
            self._order_at = None
        if not want:
            q.ready_at, q.blocked_since = None, None
            return False
        q.ready_at = now
        if not self.gates:
            q.granted_at = now
            return True
        for other in self.queries.values():
            if other.running_since is not None and now - other.running_since > self.config.lease:
                other.running_since = None
        running = sum(1 for o in self.queries.values() if o.running_since is not None)
        if running >= self.slots + self.config.burst:
            return self._blocked(q, now)
        if self._order_at is None or now - self._order_at >= self.config.cycle:
            self._reorder(now)
        if query not in self._chosen(now, running):
            if query in self._order:  # queued behind others for a slot
                return self._blocked(q, now)
            q.blocked_since = None  # held on purpose (klink's hold): not a wait for capacity
            return False
        self.bursts += int(running >= self.slots)
        q.running_since = now
        q.granted_at = now
        q.last_wait = now - q.blocked_since if q.blocked_since is not None else 0.0
        q.blocked_since = None
        return True

    @staticmethod
    def _blocked(q: QueryState, now: float) -> bool:
        """A refusal because every slot is busy: the query waits for capacity (a hold with a free slot does not
        count; the tuner's elasticity policy sees this wait, docs/tuning.md)."""
        if q.blocked_since is None:
            q.blocked_since = now
        return False

    def set_slots(self, slots: int) -> None:
        """Concurrent micro-batches from now on (the tuner makes them follow the executors)."""
        self.slots = max(1, int(slots))
        self._order_at = None

    def _chosen(self, now: float, running: int) -> list[str]:
        """The ready queries that may start a batch now: the first free ``slots`` in order, or, with every slot
        busy, the first due queries (an SWM of theirs ingested and waiting) for the free ``burst`` slots when at
        least ``burst_queue`` of them wait.

        Why a burst: with one micro-batch at a time the slot can have more work than time (16 queries closing
        10 s windows on a slow machine: docs/klink.md), and then every window waits in the queue; a second
        concurrent batch slows both (they share the cores) but overlaps their per-batch driver work. Only for due
        queries and only while they queue, so an unloaded slot runs as before."""
        c = self.config
        ready = [n for n in self._order if self._is_ready(self.queries.get(n), now)]
        if running < self.slots:
            return ready[: self.slots - running]
        due = [n for n in ready if self.queries[n].due]
        return due[: self.slots + c.burst - running] if len(due) >= c.burst_queue else []

    @property
    def memory_mode(self) -> bool:
        """Whether the order is made for memory now (Klink Sec. 3.4; the other policies have no such mode)."""
        return False

    # -- ordering ------------------------------------------------------------------------------------------
    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        """Names of the ready queries, most urgent first. A ready query left out is held back: not granted even
        while a slot is free (klink's ``hold``)."""
        raise NotImplementedError

    def _reorder(self, now: float) -> None:
        ready = [q for q in self.queries.values() if self._is_ready(q, now)]
        self._order = self.order(now, ready) if ready else []
        self._order_at = now
        self.decisions += 1
        self.memory_decisions += int(self.memory_mode)

    @staticmethod
    def _is_ready(q: QueryState | None, now: float) -> bool:
        return q is not None and q.running_since is None and q.ready_at is not None and now - q.ready_at <= READY_FOR

    def _query(self, query: str) -> QueryState:
        q = self.queries.get(query)
        if q is None:
            self.register(query)
            q = self.queries[query]
        return q

    def current_order(self) -> list[str]:
        return list(self._order)

    def swm_accuracy(self) -> tuple[int, int]:
        """(SWMs ingested inside the interval predicted at their epoch's start, SWMs checked), over all streams."""
        hits = sum(s.hits for q in self.queries.values() for s in q.streams.values())
        checked = sum(s.checked for q in self.queries.values() for s in q.streams.values())
        return hits, checked

    def pool_weights(self) -> dict[str, float] | None:
        """FAIR-pool weights per query, for policies that use Spark's pools (None: no pools)."""
        return None

    # -- snapshot ------------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """What the policy learned; not the heap sample (``mem_used``): the controller's sampler thread sets that
        at any time, and a restored one would describe a JVM that is gone."""
        return {
            "queries": {k: q.state() for k, q in self.queries.items()},
            "order": list(self._order),
            "order_at": self._order_at,
            "decisions": self.decisions,
            "memory_decisions": self.memory_decisions,
            "bursts": self.bursts,
            "slots": self.slots,
            **self._extra_state(),
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        c = self.config
        self.queries = {}
        for name, s in state["queries"].items():
            q = QueryState(name)
            for sname, (period, lateness, est_state) in s["streams"].items():
                est = SwmEstimator(period, lateness, c.history, c.confidence, c.variance)
                est.load(est_state)
                q.streams[sname] = est
            for k in (
                "pending_rows",
                "oldest",
                "ready_at",
                "running_since",
                "granted_at",
                "per_row",
                "selectivity",
                "out_pending",
                "measured",
                "in_decayed",
                "out_decayed",
                "batches",
                "rows",
                "seconds",
            ):
                setattr(q, k, s[k])
            q.recent = [(int(r), float(t)) for r, t in s.get("recent", ())]
            q.blocked_since, q.last_wait = s.get("blocked_since"), float(s.get("last_wait", 0.0))
            self.queries[name] = q
        self._order, self._order_at = list(state["order"]), state["order_at"]
        self.decisions = int(state["decisions"])  # mem_used is not state: the sampler measures it afresh
        self.memory_decisions = int(state.get("memory_decisions", 0))
        self.bursts = int(state.get("bursts", 0))
        self.slots = int(state.get("slots", c.slots))
        self._load_extra(state)

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`_extra_state` saved."""


def by_oldest(q: QueryState) -> tuple[float, str]:
    """Tie-break shared by the policies: the query whose oldest waiting data arrived first, then the name."""
    return (q.oldest if q.oldest is not None else math.inf, q.name)


def _theil_sen(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(a, b) of ``seconds = a + b * rows``, both >= 0: median pairwise slope and median intercept (b = 0 with
    fewer than :data:`MIN_FIT` points or a single size)."""
    times = sorted(t for _, t in points)
    slopes = sorted(
        (t2 - t1) / (r2 - r1) for i, (r1, t1) in enumerate(points) for r2, t2 in points[i + 1 :] if r2 != r1
    )
    b = max(_median(slopes), 0.0) if len(points) >= MIN_FIT and slopes else 0.0
    a = _median(sorted(t - b * r for r, t in points)) if b > 0 else _median(times)
    return max(a, 0.0), b


def _median(xs: Sequence[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
