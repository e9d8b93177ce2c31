"""Multi-query schedulers without Spark: SWM estimation and slack on seeded delays with a manual clock, each
baseline's order on hand-built states, and a golden trace of decisions for a small three-query scenario."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from adaptstream.errors import ConfigError, UnknownNameError
from adaptstream.policy import ManualClock
from adaptstream.scheduling import SCHEDULERS, SwmEstimator, build_scheduler

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "scheduling_trace.json")


def _feed(est: SwmEstimator, rng, seconds: float, step: float, delay, origin: float = 0.0) -> list[float]:
    """Progress indicators every ``step`` s of generation time, each ingested after a random delay."""
    ingests = []
    seq = 0
    t = 0.0
    while t < seconds:
        t += step
        arrival = t + delay(rng)
        if est.observe(seq, arrival, t, origin):
            ingests.append(arrival)
        seq += 1
    return ingests


def test_swm_estimate_learns_the_mean_delay_and_its_interval_covers_95_percent():
    rng = np.random.default_rng(5)
    est = SwmEstimator(period=2.0, lateness=0.0, history=400, confidence=0.95)
    _feed(est, rng, 2000.0, 0.25, lambda r: r.uniform(0.0, 1.0))
    mu, sigma = est.moments()
    assert mu == pytest.approx(0.5, abs=0.05)  # mean of U(0, 1)
    assert sigma == pytest.approx(math.sqrt(1 / 12), rel=0.2)
    assert len(est.epochs) == 400  # h epochs kept, no more
    assert est.checked >= 900
    assert est.hits / est.checked >= 0.9  # the paper reports 98 % for f = 95 %


def test_literal_eq6_variance_is_the_variance_of_a_mean_and_far_narrower():
    rng = np.random.default_rng(5)
    delay = lambda r: r.uniform(0.0, 1.0)  # noqa: E731
    wide = SwmEstimator(2.0, history=400)
    narrow = SwmEstimator(2.0, history=400, variance="mean")
    _feed(wide, rng, 1200.0, 0.25, delay)
    _feed(narrow, np.random.default_rng(5), 1200.0, 0.25, delay)
    assert narrow.moments()[1] < wide.moments()[1] / 10
    assert narrow.hits / narrow.checked < wide.hits / wide.checked


def test_zipf_delays_still_estimated():
    rng = np.random.default_rng(9)
    est = SwmEstimator(period=3.0)
    _feed(est, rng, 3000.0, 0.5, lambda r: min(float(r.zipf(1.99)) * 0.05, 2.0))  # heavy tail, capped
    assert est.checked > 500
    assert est.hits / est.checked > 0.8


def _trained(period: float = 2.0) -> SwmEstimator:
    est = SwmEstimator(period=period)
    _feed(est, np.random.default_rng(1), 200.0, 0.25, lambda r: r.uniform(0.4, 0.6))
    est.processed(10**9)  # every SWM so far was processed
    return est


def test_slack_shrinks_as_the_swm_approaches_and_cost_grows():
    est = _trained()
    e, sigma, lo, hi = est.interval()
    assert lo < e < hi and sigma > 0
    far, near = est.slack(e - 1.5, 0.1, 0.12), est.slack(e - 0.2, 0.1, 0.12)
    assert far > near
    assert est.slack(e - 1.5, 0.5, 0.12) == pytest.approx(far - 0.4, abs=0.05)  # Eq. 8 is linear in the cost
    assert est.slack(hi + 1.0, 0.1, 0.12) < 0  # overdue: negative


def test_an_ingested_but_unprocessed_swm_has_negative_slack_until_its_batch_completes():
    est = _trained()
    swm_seq = 10_000
    deadline = est.next_deadline
    assert est.observe(swm_seq, deadline + 0.5, deadline + 0.01, 0.0)
    assert est.slack(deadline + 1.0, 0.1, 0.12) == pytest.approx(-0.6)
    assert est.processed(swm_seq) == []  # a batch that ended before it did not carry it
    assert len(est.processed(swm_seq + 1)) == 1
    assert est.slack(deadline + 1.0, 0.1, 0.12) > 0  # the next SWM is a period away


def test_join_slack_is_the_least_over_input_streams():
    pol = build_scheduler("klink")
    pol.register("j", {"a": (2.0, 0.0), "b": (5.0, 0.0)})
    pol.queries["j"].streams["a"] = _trained(2.0)
    pol.queries["j"].streams["b"] = _trained(5.0)
    t = 190.0
    q = pol.queries["j"]
    per_stream = [s.slack(t, q.cost(0.15), 0.12) for s in q.streams.values()]
    assert q.slack(t, 0.15, 0.12) == min(per_stream)


def _ready(pol, now, *names, rows=100):
    """Every named query polls wanting a batch; returns which were granted."""
    return [n for n in names if pol.poll(n, now, True, rows, now - 1.0)]


def test_gating_grants_at_most_slots_batches_and_frees_on_completion():
    pol = build_scheduler("fcfs", slots=1)
    for n in ("a", "b"):
        pol.register(n)
    assert pol.poll("a", 0.0, True, 10, -5.0) is True  # a's data is oldest
    assert pol.poll("b", 0.01, True, 10, -1.0) is False  # one slot, taken
    pol.complete("a", 1.0, 1, 10, 1.0)
    assert pol.poll("b", 1.01, True, 10, -1.0) is True


def test_the_wait_for_a_busy_slot_is_measured_and_more_slots_grant_more_at_once():
    """The tuner's joint loop reads ``last_wait`` (capacity) and sets ``slots`` from the executors."""
    pol = build_scheduler("fcfs", slots=1)
    assert pol.poll("a", 0.0, True, 10, -5.0) is True and pol.queries["a"].last_wait == 0.0
    assert pol.poll("b", 1.0, True, 10, -1.0) is False  # the one slot is a's: b waits from here
    assert pol.poll("b", 2.0, True, 10, -1.0) is False
    pol.complete("a", 3.0, 1, 10, 3.0)
    assert pol.poll("b", 3.5, True, 10, -1.0) is True and pol.queries["b"].last_wait == pytest.approx(2.5)
    pol.complete("b", 4.0, 1, 10, 0.5)
    pol.set_slots(2)
    assert _ready(pol, 5.0, "a") == ["a"]
    assert _ready(pol, 5.2, "b") == ["b"]  # a still runs: two at once now (one slot refused it before)
    restored = build_scheduler("fcfs", slots=1)
    restored.load_state_dict(json.loads(json.dumps(pol.state_dict())))
    assert restored.slots == 2 and restored.state_dict() == pol.state_dict()


def test_a_deliberate_hold_with_a_free_slot_is_not_a_wait_for_capacity():
    pol, t = _held_setup(hold=1.0)
    assert _ready(pol, t, "far", "near") == []
    assert _ready(pol, t + 0.13, "far", "near") == ["near"]
    assert pol.held == {"far"} and pol.queries["far"].blocked_since is None


def test_default_and_fair_never_gate():
    for name in ("default", "fair"):
        pol = build_scheduler(name)
        assert _ready(pol, 0.0, "a", "b", "c") == ["a", "b", "c"]
    assert build_scheduler("fair").pool_weights() == {}


def test_a_lost_grant_frees_its_slot_after_the_lease():
    pol = build_scheduler("rr", lease=5.0)
    assert _ready(pol, 0.0, "a") == ["a"]
    assert _ready(pol, 1.0, "b") == []
    assert _ready(pol, 6.0, "b") == ["b"]


def test_reregistration_after_a_restart_frees_the_slot_and_keeps_learning():
    pol = build_scheduler("klink", hold=math.inf)  # work-conserving: granted although its SWM is far
    pol.register("a", {"main": (2.0, 0.0)})
    pol.queries["a"].streams["main"] = trained = _trained()
    assert _ready(pol, 200.0, "a") == ["a"]
    pol.register("a", {"main": (2.0, 0.0)})  # the query restarted from its checkpoint
    assert pol.queries["a"].running_since is None
    assert pol.queries["a"].streams["main"] is trained


def test_round_robin_serves_the_least_recently_granted():
    pol = build_scheduler("rr")
    order = []
    for k in range(6):
        now = float(k)
        for n in ("a", "b", "c"):
            pol.poll(n, now, True, 10, now)
        got = [n for n in ("a", "b", "c") if pol.queries[n].running_since is not None]
        order += got
        for n in got:
            pol.complete(n, now + 0.5, k + 1, 10, 0.5)
    assert order == ["a", "b", "c", "a", "b", "c"]


def test_highest_rate_prefers_the_cheaper_rows():
    pol = build_scheduler("hr")
    for n, secs in (("slow", 5.0), ("fast", 0.5)):
        pol.register(n)
        pol.complete(n, 0.0, 1, 10_000, secs)
    qs = [pol.queries["slow"], pol.queries["fast"]]
    for q in qs:
        q.pending_rows = 1000
    assert pol.order(1.0, qs) == ["fast", "slow"]


def _held_setup(**params):
    """Query "far" (its SWM ~1.9 s away) and "near" (its SWM was ingested, not processed), one free slot."""
    pol = build_scheduler("klink", slots=2, **params)
    for n in ("far", "near"):
        pol.register(n, {"main": (2.0, 0.0)})
        pol.queries[n].streams["main"] = _trained()
    est = pol.queries["near"].streams["main"]
    deadline = est.next_deadline
    assert est.observe(10_000, deadline + 0.5, deadline + 0.01, 0.0)  # near's SWM arrives
    t = deadline + 0.6  # far's estimator has the same deadline but saw no SWM: its next one is ~1.9 s out
    far = pol.queries["far"].streams["main"]
    far.prediction = (t + 1.9, t + 1.7, t + 2.1)
    return pol, t


def test_klink_holds_a_query_with_slack_above_hold_even_with_a_slot_free():
    pol, t = _held_setup(hold=1.0)
    assert _ready(pol, t, "far", "near") == []  # the order of the first poll (only far ready) holds far
    assert pol.held == {"far"}
    assert _ready(pol, t + 0.13, "far", "near") == ["near"]  # next cycle: a slot is free, yet far waits
    assert pol.held == {"far"} and pol.holds == 2
    pol.complete("near", t + 0.3, 10_001, 100, 0.3)
    assert _ready(pol, t + 1.0, "far") == ["far"]  # ~0.9 s to its SWM, less the batch's cost: below hold


def test_klink_without_hold_is_work_conserving():
    pol, t = _held_setup(hold=math.inf)
    assert _ready(pol, t, "near", "far") == ["near"]  # far was not ready when the order was made
    assert _ready(pol, t + 0.13, "far") == ["far"]
    assert pol.held == set()


def test_klink_never_holds_data_older_than_its_period_or_in_memory_mode():
    pol, t = _held_setup(hold=1.0)
    assert pol.poll("far", t, True, 100, t - 0.1) is False  # fresh data, SWM ~1.9 s away: held
    old, t2 = _held_setup(hold=1.0)
    assert old.poll("far", t2, True, 100, t2 - 2.5) is True  # its oldest data is older than the 2 s period
    mem, t3 = _held_setup(hold=1.0, memory_bound=0.8)
    mem.memory(t3, 0.9)
    assert mem.poll("far", t3, True, 100, t3 - 0.1) is True  # memory mode: process, do not hold


def _straddle_setup(straddle: bool):
    """One query, its SWM ~0.3 s away (sigma ~0.06 s), one completed batch of 0.6 s: the cost fit's a = 0.6 s."""
    pol = build_scheduler("klink", straddle=straddle)
    pol.register("q", {"main": (2.0, 0.0)})
    est = pol.queries["q"].streams["main"] = _trained()
    pol.complete("q", 0.0, 0, 100, 0.6)
    return pol, est, est.interval()


@pytest.mark.parametrize("straddle", [False, True])
def test_klink_straddle_holds_a_batch_that_would_run_into_its_swm(straddle):
    pol, est, (e, _, _, _) = _straddle_setup(straddle)
    t = e - 0.3  # slack ~0.3 - 0.6 < hold: only the straddle rule holds it
    assert pol.poll("q", t, True, 100, t - 0.5) is (not straddle)
    if straddle:
        assert pol.held == {"q"}
        assert est.observe(10_000, t + 0.3, est.next_deadline + 0.01, 0.0)  # the SWM arrives
        assert pol.poll("q", t + 0.31, True, 200, t - 0.5) is True  # backlog and SWM in one batch


def test_klink_straddle_lets_an_early_or_a_late_swm_run():
    pol, _, (e, _, _, hi) = _straddle_setup(True)
    assert pol.poll("q", e - 1.5, True, 100, e - 2.0) is True  # 1.5 s to go: this batch ends before it
    pol.complete("q", e - 0.9, 0, 100, 0.6)
    assert pol.poll("q", hi + 0.05, True, 100, hi - 0.5) is True  # late past its interval: the estimate was wrong


def test_klink_hold_must_be_non_negative():
    with pytest.raises(ConfigError, match="hold"):
        build_scheduler("klink", hold=-1.0)


def test_klink_memory_mode_orders_by_rows_removed_then_returns():
    pol = build_scheduler("klink", memory_bound=0.8, memory_free=0.5, memory_seconds=3.0)
    pol.register("big")
    pol.register("small")
    pol.memory(0.0, 0.9)
    assert pol.memory_mode
    qs = [pol.queries["small"], pol.queries["big"]]
    pol.queries["small"].pending_rows, pol.queries["big"].pending_rows = 10, 10_000
    assert pol.order(0.0, qs) == ["big", "small"]
    pol.memory(1.0, 0.6)
    assert pol.memory_mode  # not yet half of 0.9 freed, not 3 s
    pol.memory(3.5, 0.6)
    assert not pol.memory_mode


def test_decisions_made_in_memory_mode_are_counted_and_survive_a_restart():
    pol = build_scheduler("klink", memory_bound=0.8)
    pol.register("q")
    pol.poll("q", 0.0, True, 10, 0.0)  # granted: one decision, not in memory mode
    pol.complete("q", 0.1, 1, 10, 0.1)
    pol.memory(0.2, 0.9)
    pol.poll("q", 0.3, True, 10, 0.2)
    assert (pol.decisions, pol.memory_decisions) == (2, 1)
    again = build_scheduler("klink", memory_bound=0.8)
    again.load_state_dict(pol.state_dict())
    assert again.memory_decisions == 1
    assert build_scheduler("sbox").memory_mode is False  # only klink has a memory mode


def test_selectivity_is_measured_from_the_sinks_rows_out():
    pol = build_scheduler("klink")
    pol.register("q")
    assert pol.queries["q"].selectivity == 0.5  # the default until the sink reports
    pol.complete("q", 0.0, 1, 100, 0.2)
    assert pol.queries["q"].selectivity == 0.5  # no sink report: still the default
    pol.output("q", 1.0, 30)  # the batch's sink wrote 30 rows
    pol.complete("q", 1.0, 2, 100, 0.2)
    assert pol.queries["q"].selectivity == pytest.approx(0.3)
    # a windowed query writes only when a window closes: the ratio spans batches (decayed sums)
    pol.complete("q", 2.0, 3, 100, 0.2)
    assert pol.queries["q"].selectivity == pytest.approx(30 * 0.95 / (100 * 0.95 + 100))
    pol.output("q", 3.0, 250)  # a join can write more than it read: not capped
    pol.complete("q", 3.0, 4, 100, 0.2)
    want = (30 * 0.95**2 + 250) / (100 * 0.95**2 + 100 * 0.95 + 100)
    assert pol.queries["q"].selectivity == pytest.approx(want)
    pol.register("none")
    pol.output("none", 0.0, 0)  # a query that writes nothing has selectivity 0, not the default
    pol.complete("none", 0.0, 1, 100, 0.2)
    assert pol.queries["none"].selectivity == 0.0
    with pytest.raises(ValueError):
        pol.output("q", 4.0, -1)
    again = build_scheduler("klink")
    again.load_state_dict(pol.state_dict())
    assert again.queries["q"].selectivity == pytest.approx(want) and again.queries["q"].measured


def test_measured_selectivity_changes_highest_rate_and_klink_memory_orders():
    hr = build_scheduler("hr")
    for n in ("agg", "join"):
        hr.register(n)
        hr.complete(n, 0.0, 1, 1000, 1.0)  # same cost per row
        hr.queries[n].pending_rows = 1000
    qs = [hr.queries["agg"], hr.queries["join"]]
    assert hr.order(1.0, qs) == ["agg", "join"]  # equal default selectivity: the name breaks the tie
    hr.output("agg", 1.0, 10)
    hr.output("join", 1.0, 2000)
    for n in ("agg", "join"):
        hr.complete(n, 1.0, 2, 1000, 1.0)
    assert hr.order(2.0, qs) == ["join", "agg"]  # the join outputs more per second of processing

    kl = build_scheduler("klink", memory_bound=0.8)
    for n, out in (("agg", 10), ("join", 2000)):
        kl.register(n)
        kl.output(n, 0.0, out)
        kl.complete(n, 0.0, 1, 1000, 1.0)
        kl.queries[n].pending_rows = 1000
    kl.memory(1.0, 0.9)
    assert kl.memory_mode
    # p_k = sz (1 - S): the aggregation frees memory, the join's output outgrows its input
    assert kl.order(1.0, [kl.queries["join"], kl.queries["agg"]]) == ["agg", "join"]


def test_unknown_scheduler_and_parameter_errors_list_the_choices():
    with pytest.raises(UnknownNameError) as err:
        build_scheduler("edf")
    assert all(n in str(err.value) for n in SCHEDULERS.names())
    with pytest.raises(ConfigError, match="valid"):
        build_scheduler("klink", cyle=0.1)
    with pytest.raises(ConfigError):
        build_scheduler("klink", slots=0)


# -- golden trace -------------------------------------------------------------------------------------------
def scenario(name: str, seed: int = 3, steps: int = 400) -> list[list]:
    """Three queries (tumbling 2 s, sliding 3 s, a join of 4 s and 2 s streams) with uniform network delays,
    started at different times, sharing one slot; each granted batch takes 0.1 s + 0.2 ms per row."""
    rng = np.random.default_rng(seed)
    clock = ManualClock(0.0)
    pol = build_scheduler(name).set_clock(clock)
    queries = {
        "q_tumble": {"main": (2.0, 0.5)},
        "q_slide": {"main": (3.0, 0.5)},
        "q_join": {"left": (4.0, 0.5), "right": (2.0, 0.5)},
    }
    start = {"q_tumble": 0.0, "q_slide": 1.3, "q_join": 2.7}
    seq = dict.fromkeys(queries, 0)
    rows = dict.fromkeys(queries, 0)
    oldest: dict[str, float | None] = dict.fromkeys(queries)
    busy_until: dict[str, float] = {}
    trace = []
    registered: set[str] = set()
    for _ in range(steps):
        now = clock.advance(0.05)
        for q, streams in queries.items():
            if now < start[q]:
                continue
            if q not in registered:
                pol.register(q, streams, now)
                registered.add(q)
            if rng.random() < 0.2:  # a dataset arrives: 50-150 rows generated up to 0-0.6 s ago
                d = float(rng.uniform(0.0, 0.6))
                for s in streams:
                    pol.progress(q, s, seq[q], now, now - d, start[q])
                seq[q] += 1
                rows[q] += int(rng.integers(50, 150))
                oldest[q] = oldest[q] if oldest[q] is not None else now
        for q in [q for q, t in busy_until.items() if t <= now]:
            del busy_until[q]
            pol.complete(q, now, seq[q], 100, 0.1)
        for q in sorted(registered):
            if q in busy_until:
                continue
            if pol.poll(q, now, rows[q] > 0, rows[q], oldest[q]):
                busy_until[q] = now + 0.1 + 0.0002 * rows[q]
                trace.append([round(now, 2), q, rows[q]])
                rows[q], oldest[q] = 0, None
    return trace


def golden_traces() -> dict[str, list]:
    return {name: scenario(name) for name in SCHEDULERS.names()}


def test_golden_decision_traces_match():
    traces = golden_traces()
    if os.environ.get("ADAPTSTREAM_REGEN_GOLDEN"):
        with open(GOLDEN, "w") as f:
            json.dump(traces, f, indent=None, separators=(",", ":"))
    with open(GOLDEN) as f:
        assert traces == json.load(f)


def test_the_policies_really_decide_differently():
    traces = golden_traces()
    gated = {n: [(t, q) for t, q, _ in traces[n]] for n in ("klink", "rr", "fcfs", "sbox", "hr")}
    assert len({json.dumps(v) for v in gated.values()}) == len(gated)
    assert len(traces["default"]) > len(traces["klink"])  # free-running: more, smaller batches


def test_cost_is_fitted_with_an_intercept_once_batch_sizes_differ():
    pol = build_scheduler("klink")
    pol.register("q")
    q = pol.queries["q"]
    q.pending_rows = 3000
    assert q.cost_fit() is None and q.cost(0.15) == 0.15  # nothing measured: the configured fixed cost
    for rows, secs in ((300, 0.63), (300, 0.63), (300, 0.63)):
        pol.complete("q", 0.0, 1, rows, secs)
    assert q.cost_fit() == (pytest.approx(0.63), 0.0)  # one size: the per-batch cost, nothing charged per row
    assert q.cost(0.15) == pytest.approx(0.63)
    for rows, secs in ((1000, 0.7), (3000, 0.9)):
        pol.complete("q", 0.0, 1, rows, secs)
    a, b = q.cost_fit()
    assert a == pytest.approx(0.6, abs=0.01) and b == pytest.approx(1e-4, rel=0.05)
    assert q.cost(0.15) == pytest.approx(0.9, abs=0.02)  # a large backlog costs little more than a small one
    for _ in range(100):
        pol.complete("q", 0.0, 1, 500, 0.65)
    assert len(q.recent) == 32  # bounded


def test_cold_first_batches_do_not_inflate_the_cost_of_a_backlog():
    """Recorded in a Klink run (N=8): DEBSP's first batches, a cold one of 600 rows among them. A per-row rate
    (or a line through the first two) priced its 2100-row backlog at 3.7-3.9 s; it took 1.12 s."""
    pol = build_scheduler("klink")
    pol.register("q")
    q = pol.queries["q"]
    q.pending_rows = 2100
    for rows, secs in ((300, 0.63), (600, 1.18)):
        pol.complete("q", 0.0, 1, rows, secs)
    assert q.cost_fit()[1] == 0.0  # two points: no slope yet
    assert q.cost(0.15) == pytest.approx((0.63 + 1.18) / 2)
    for rows, secs in ((2100, 1.12), (1200, 0.92)):
        pol.complete("q", 0.0, 1, rows, secs)
    assert q.cost(0.15) == pytest.approx(1.13, abs=0.05)


@pytest.mark.parametrize(("overdue", "first"), [("overrun", "late"), ("zero", "near")])
def test_an_overdue_swm_goes_before_an_ingested_one_only_when_its_overrun_counts(overdue, first):
    pol, t = _held_setup(hold=math.inf, overdue=overdue)
    late = pol.queries["far"].streams["main"]
    late.prediction = (t - 3.5, t - 3.7, t - 3.3)  # its SWM was due more than 3 s ago and has not arrived
    order = pol.order(t, [pol.queries["near"], pol.queries["far"]])
    assert order[0] == ("far" if first == "late" else "near")


def test_klink_overdue_must_be_a_known_mode():
    with pytest.raises(ConfigError, match="overdue"):
        build_scheduler("klink", overdue="later")


def _two_due(**params):
    """Queries "a" and "b" whose SWMs were both ingested; a waits with more rows, so its slack is lower."""
    pol = build_scheduler("klink", hold=math.inf, **params)
    for n in ("a", "b"):
        pol.register(n, {"main": (2.0, 0.0)})
        pol.queries[n].streams["main"] = est = _trained()
        pol.queries[n].recent = [(r, 0.15 + 0.001 * r) for r in (100, 500, 1000, 2000)]  # cost 0.15 s + 1 ms/row
        deadline = est.next_deadline
        assert est.observe(10_000, deadline + 0.5, deadline + 0.01, 0.0)
    return pol, deadline + 0.6


def _want(pol, now, **rows):
    """The named queries poll wanting a batch with these waiting rows; the order is made afresh."""
    for n, r in rows.items():
        q = pol.queries[n]
        q.pending_rows, q.oldest, q.ready_at = r, now - 2.0, now
    pol._reorder(now)
    return pol.current_order()


@pytest.mark.parametrize("stick", [False, True])
def test_klink_stick_keeps_the_due_query_first_until_its_swm_is_processed(stick):
    pol, t = _two_due(stick=stick)
    assert _want(pol, t, a=1000, b=500) == ["a", "b"]  # slack a = -0.1 - 1.15 < slack b = -0.05 - 0.65
    assert pol.poll("a", t, True, 1000, t - 2.0) is True
    pol.complete("a", t + 1.05, 5_000, 900, 1.05)  # a batch that did not reach a's SWM: 100 rows left
    # a's remaining cost is 0.25 s now, so its slack rose above b's: plain least slack switches to b
    assert _want(pol, t + 1.06, a=100, b=500) == (["a", "b"] if stick else ["b", "a"])
    if stick:
        assert pol.poll("a", t + 1.06, True, 100, t - 1.0) is True
        again = build_scheduler("klink", hold=math.inf, stick=True)
        again.load_state_dict(pol.state_dict())
        assert again.focus == pol.focus == ("a", "main", 10_000)
        pol.complete("a", t + 1.4, 10_001, 100, 0.3)  # this batch carried a's SWM: a is released
        assert _want(pol, t + 1.41, a=10, b=500)[0] == "b"
        assert pol.focus == ("b", "main", 10_000)


def _due(pol, name: str) -> None:
    """Register ``name`` with a trained stream whose SWM was just ingested and waits for its batch."""
    pol.register(name, {"main": (2.0, 0.0)})
    est = pol.queries[name].streams["main"] = _trained()
    assert est.observe(10_000, est.next_deadline + 0.5, est.next_deadline + 0.01, 0.0)


@pytest.mark.parametrize("queue", [1, 2])
def test_a_burst_slot_opens_only_for_due_queries_while_enough_of_them_queue(queue):
    pol = build_scheduler("klink", burst=1, burst_queue=queue, hold=math.inf)
    for n in ("a", "b", "c"):
        _due(pol, n)
    pol.register("idle", {"main": (2.0, 0.0)})
    pol.queries["idle"].streams["main"] = _trained()  # no SWM waiting: never a burst
    t = 190.0
    first = _ready(pol, t, "a", "b", "c", "idle")  # the slot; the others are in the order from the next cycle
    assert len(first) == 1 and pol.bursts == 0
    rest = [n for n in ("a", "b", "c", "idle") if n not in first]  # a running query does not poll
    second = _ready(pol, t + 0.2, *rest)
    assert len(second) == 1 and second[0] != "idle"  # the burst slot, to a due query
    assert pol.bursts == 1
    rest = [n for n in rest if n not in second]
    assert _ready(pol, t + 0.4, *rest) == []  # slots + burst busy
    pol.complete(second[0], t + 0.5, 10_001, 100, 0.5)
    # one due query left waiting: below a queue of 2 it gets no burst, at a queue of 1 it takes the freed one
    assert _ready(pol, t + 0.7, *rest) == ([n for n in rest if n != "idle"] if queue == 1 else [])
    restored = build_scheduler("klink", burst=1, burst_queue=queue, hold=math.inf)
    restored.load_state_dict(pol.state_dict())
    assert restored.bursts == pol.bursts


def test_a_burst_needs_the_queue_threshold():
    pol = build_scheduler("sbox", burst=1, burst_queue=3)
    for n in ("a", "b", "c"):
        _due(pol, n)
    first = _ready(pol, 190.0, "a", "b", "c")
    assert len(first) == 1
    assert _ready(pol, 190.2, *(n for n in "abc" if n not in first)) == []  # 2 due wait, fewer than burst_queue
    assert pol.bursts == 0


def test_without_burst_the_slots_are_the_limit():
    assert build_scheduler("sbox").config.burst == 0 and build_scheduler("klink").config.burst == 1
    pol = build_scheduler("klink", hold=math.inf, burst=0)
    for n in ("a", "b", "c"):
        _due(pol, n)
    first = _ready(pol, 190.0, "a", "b", "c")
    assert len(first) == 1
    assert _ready(pol, 190.2, *(n for n in "abc" if n not in first)) == []
    assert pol.bursts == 0


@pytest.mark.parametrize("bad", [{"burst": -1}, {"burst_queue": 0}])
def test_burst_settings_out_of_range_are_refused(bad):
    with pytest.raises(ConfigError):
        build_scheduler("klink", **bad)
