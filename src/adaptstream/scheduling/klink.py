"""``klink``: least expected slack first (Klink Sec. 3, Alg. 1), with the memory-management mode (Sec. 3.4).

Each query's slack is the least over its input streams (Sec. 3.3) of the expected slack of Eq. 8: the SWM
ingestion time is normal with the mean and spread of scheduling/swm.py, cut to the ``confidence`` interval and
integrated in steps of the cycle ``r``; ``cost^q(t)`` is the expected processing time of the query's waiting rows
(a per-batch intercept and a per-row cost fitted over the last batches, scheduling/base.py). A query whose SWM
was ingested but not yet processed has negative slack and goes first. Queries with no estimate yet (before the
first SWM, or no event-time information) come last, oldest data first.

Holding (our micro-batch counterpart of Klink leaving a query unscheduled while it has slack; a documented
deviation, docs/klink.md): a ready query whose expected slack exceeds ``hold`` seconds is not granted a batch even
when a slot is free; its data waits and joins a later, larger batch. In Flink an operator that runs early costs no
more than one that runs late; in Spark every micro-batch pays a fixed planning and scheduling cost on the driver,
so running a query's batches before its window can close only adds load that delays the queries whose windows do
close. A query is never held without an SWM estimate, in memory mode, or once its oldest waiting data is older
than its shortest SWM period (a wrong estimate cannot starve it). ``hold = inf, overdue = "zero"`` is Alg. 1's
work-conserving form; the defaults are the form that measured better at N = 16 (docs/klink.md, Measured).

Sticking (``stick``, a documented deviation): the query chosen first while its SWM is ingested but not processed
stays first until that SWM is processed; plain least slack first switches away as soon as a batch lowers the
query's remaining cost (see :meth:`KlinkPolicy.sticky`).

Straddle (``straddle``, a documented deviation, measured worse: off): also hold a ready query whose next SWM is
expected, given it has not arrived yet, sooner than one per-batch cost ``a`` (the intercept of its cost fit) from
now. A batch started then would still run when the SWM arrives, and the SWM would wait for it and then for a batch
of its own; holding until the SWM is ingested processes backlog and SWM in one batch (see :meth:`straddles`).

Burst (``burst``, on: one slot): with its slot busy, a due query (its SWM ingested and waiting) may start a
second concurrent micro-batch while ``burst_queue`` (2) due queries wait (:meth:`SchedulerPolicy._chosen`). On a
slow machine one gated batch at a time had more work than time at N = 16 and every window queued; the burst runs
only then (docs/klink.md, "Burst").

Memory mode: when the memory in use reaches ``memory_bound`` (share of the limit), the order becomes largest
``p_k = sz * (1 - S)`` first (waiting rows times one minus the query's selectivity: the rows one batch removes),
least slack breaking ties, until use fell by ``memory_free`` of what it was on entry or ``memory_seconds`` passed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy, by_oldest


@dataclass(frozen=True)
class KlinkConfig(SchedulerConfig):
    memory_bound: float = 0.85  # b: share of the memory limit that switches to memory mode
    memory_free: float = 0.5  # leave memory mode once this share of the used memory was freed ...
    memory_seconds: float = 3.0  # ... or after this long
    hold: float = 1.0  # seconds of expected slack above which a ready query is held back (inf: never, Alg. 1)
    overdue: str = "overrun"  # slack of an SWM late past its interval: "overrun" (t_max - t - cost) or "zero" (Alg. 1)
    stick: bool = False  # keep the due query chosen first until its SWM is processed (measured worse: off)
    straddle: bool = False  # hold a query whose SWM is due within one per-batch cost (measured worse: off)
    burst: int = 1  # a second concurrent batch for due queries while two of them queue (scheduling/base.py)

    def validate(self) -> None:
        from adaptstream.errors import ConfigError

        super().validate()
        if self.overdue not in ("overrun", "zero"):
            msg = f"overdue must be 'overrun' or 'zero', got {self.overdue!r}"
            raise ConfigError(msg)
        if math.isnan(self.hold) or self.hold < 0:
            msg = f"hold must be >= 0 seconds (inf: never hold), got {self.hold}"
            raise ConfigError(msg)

    def build(self) -> KlinkPolicy:
        return KlinkPolicy(self)


class KlinkPolicy(SchedulerPolicy):
    name = "klink"
    config: KlinkConfig

    def __init__(self, config: KlinkConfig) -> None:
        super().__init__(config)
        self.mm_since: float | None = None  # in memory mode since
        self.mm_entry: float = 0.0  # memory use when it began
        self.held: set[str] = set()  # ready queries held back at the last evaluation (slack above ``hold``)
        self.focus: tuple[str, str, int] | None = None  # ``stick``: (query, stream, manifest seq of its SWM)

    def memory(self, now: float, used_fraction: float) -> None:
        super().memory(now, used_fraction)
        c = self.config
        if self.mm_since is None and used_fraction >= c.memory_bound:
            self.mm_since, self.mm_entry = now, used_fraction
            self._order_at = None
        elif self.mm_since is not None and (
            used_fraction <= self.mm_entry * (1 - c.memory_free) or now - self.mm_since >= c.memory_seconds
        ):
            self.mm_since = None
            self._order_at = None

    @property
    def memory_mode(self) -> bool:
        return self.mm_since is not None

    def slacks(self, now: float, queries: Sequence[QueryState]) -> dict[str, float]:
        c = self.config
        return {q.name: q.slack(now, c.fixed_cost, c.cycle, c.overdue) for q in queries}

    def holding(self, now: float, q: QueryState, slack: float) -> bool:
        """Hold ``q`` back: its window cannot close soon, and a batch now would only add per-batch cost."""
        if self.memory_mode:
            return False
        period = min((s.period for s in q.streams.values()), default=0.0)
        if q.oldest is not None and now - q.oldest >= period:  # a wrong estimate cannot starve it
            return False
        if math.isfinite(slack) and slack > self.config.hold:
            return True
        return self.config.straddle and self.straddles(now, q)

    @staticmethod
    def straddles(now: float, q: QueryState) -> bool:
        """A batch started now would straddle the query's next SWM, and waiting for the SWM finishes sooner.

        With ``a + b * rows`` per batch: started now, the SWM (at ``w``, during the batch) is processed at
        ``now + a + b*R + a + b*r``; held, at ``w + a + b*(R + r)``. Holding wins when ``w - now < a``, so the
        rule compares the SWM's expected remaining time, given it has not arrived, with ``a``. Not once the SWM
        is late past its interval (the estimate was wrong: run), nor while an SWM waits (the query is due)."""
        fit = q.cost_fit()
        if fit is None or q.due:
            return False
        return any((w := s.expected_wait(now)) is not None and w < fit[0] for s in q.streams.values())

    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        sl = self.slacks(now, ready)
        self.held = {q.name for q in ready if self.holding(now, q, sl[q.name])}
        self.holds += int(bool(self.held))
        ready = [q for q in ready if q.name not in self.held]

        def key(q: QueryState) -> tuple:
            known = math.isfinite(sl[q.name])
            least = (0, sl[q.name]) if known else (1, 0.0)
            if self.memory_mode:
                return (-q.pending_rows * (1.0 - q.selectivity), *least, *by_oldest(q))
            return (*least, *by_oldest(q))

        names = [q.name for q in sorted(ready, key=key)]
        focus = self.sticky(names, sl) if self.config.stick and not self.memory_mode else None
        return [focus, *(n for n in names if n != focus)] if focus in names else names

    def sticky(self, names: Sequence[str], sl: Mapping[str, float]) -> str | None:
        """The query to keep first: the one chosen when its SWM was ingested, until that SWM is processed.

        Least slack first thrashes (least laxity first's known flaw): each batch of the most urgent query removes
        some of its waiting cost, which raises its slack above the next query's, so queries whose windows are all
        due take turns and every one of them finishes late. Sticking to one until its window is out ends the
        others' windows no later than they would have and this one's earlier."""
        if self.focus is not None:
            name, stream, seq = self.focus
            q = self.queries.get(name)
            est = q.streams.get(stream) if q is not None else None
            if est is not None and any(p[0] == seq for p in est.pending):
                return name
            self.focus = None
        due = [n for n in names if sl[n] < 0 and self.queries[n].due]
        if not due:
            return None
        q = self.queries[due[0]]  # names are in least-slack order
        stream, est = min(((k, s) for k, s in q.streams.items() if s.pending), key=lambda kv: kv[1].pending[0][1])
        self.focus = (q.name, stream, est.pending[0][0])
        return q.name

    def _extra_state(self) -> dict[str, Any]:
        return {
            "mm_since": self.mm_since,
            "mm_entry": self.mm_entry,
            "holds": self.holds,
            "focus": list(self.focus) if self.focus else None,
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        self.mm_since, self.mm_entry = state["mm_since"], float(state["mm_entry"])
        self.holds = int(state.get("holds", 0))
        f = state.get("focus")
        self.focus = (str(f[0]), str(f[1]), int(f[2])) if f else None
