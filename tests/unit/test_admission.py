"""Admission policies without Spark: hand-checked decisions and seeded golden replays."""

from __future__ import annotations

import json
import os
from dataclasses import asdict

import numpy as np
import pytest

from adaptstream.admission import ADMISSION, BatchOutcome, PendingDataset, build_admission
from adaptstream.admission.replay import replay
from adaptstream.errors import ConfigError, UnknownNameError

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "admission_replay.json")


def _ds(seq: int, arrival: float, rows: int = 100) -> PendingDataset:
    return PendingDataset(seq, arrival, rows)


def test_registry_lists_valid_choices():
    with pytest.raises(UnknownNameError, match="valid choices: asap, fixed, lmstream"):
        ADMISSION.get("bogus")


def test_asap_admits_whenever_data_waits():
    p = build_admission("asap")
    assert not p.admit(5.0, [])
    assert p.admit(5.0, [_ds(0, 4.9)])


def test_fixed_fires_on_the_trigger_grid_and_immediately_after_an_overrun():
    p = build_admission("fixed", trigger=10.0)
    assert not p.admit(3.0, [_ds(0, 2.0)])  # query started at 3 s: first trigger at 10 s
    assert not p.admit(9.99, [_ds(0, 2.0)])
    assert p.admit(10.0, [_ds(0, 2.0)])
    assert not p.admit(15.0, [_ds(1, 14.0)])
    # the batch overran the 20 s trigger point: the next one starts at once
    assert p.admit(23.5, [_ds(1, 14.0)])
    assert not p.admit(29.0, [_ds(2, 28.0)])


def test_fixed_without_data_skips_the_trigger():
    p = build_admission("fixed", trigger=10.0)
    p.admit(0.5, [])
    assert not p.admit(10.0, [])
    assert not p.admit(12.0, [_ds(0, 11.0)])  # next trigger point is 20 s
    assert p.admit(20.0, [_ds(0, 11.0)])


def test_fixed_restored_after_an_overrun_fires_at_once():
    p = build_admission("fixed", trigger=10.0)
    assert not p.admit(3.0, [_ds(0, 2.0)])  # started at 3 s: first trigger at 10 s
    assert p.admit(10.0, [_ds(0, 2.0)])  # next trigger point 20 s; the batch then runs until 23.5 s
    saved = p.state_dict()
    restored, fresh = build_admission("fixed", trigger=10.0), build_admission("fixed", trigger=10.0)
    restored.load_state_dict(saved)
    assert restored.admit(23.5, [_ds(1, 14.0)])  # the 20 s trigger passed while the batch ran: at once
    assert not fresh.admit(23.5, [_ds(1, 14.0)])  # without the state: waits for 30 s


def test_lmstream_tumbling_target_is_the_mean_of_every_past_max_latency():
    """Eq. 3 over the whole history, kept as a running sum and count (bounded), also after a restore."""
    p = build_admission("lmstream", slide=0.0, margin=0.0, warmup_batches=0)
    lats = [float(x) for x in range(1, 1001)]
    for lat in lats:
        p.on_batch_complete(BatchOutcome(rows=10, admitted_at=0.0, completed_at=1.0, max_latency=lat))
    assert p.target == pytest.approx(sum(lats) / len(lats))
    q = build_admission("lmstream", slide=0.0, margin=0.0, warmup_batches=0)
    q.load_state_dict(json.loads(json.dumps(p.state_dict())))
    assert q.target == p.target and q.avg_throughput == p.avg_throughput


def test_fixed_rejects_non_positive_trigger():
    with pytest.raises(ConfigError):
        build_admission("fixed", trigger=0.0)


def test_lmstream_eq6_estimate_and_sliding_rule():
    p = build_admission("lmstream", slide=5.0, margin=0.0, warmup_batches=0, estimator="avgthput", lookahead=False)
    assert p.admit(1.0, [_ds(0, 1.0)])  # nothing learned yet: admit
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=1.0, completed_at=1.5, max_latency=0.5))
    assert p.avg_throughput == pytest.approx(2000.0)  # Eq. 4
    pending = [_ds(1, 2.0, 1000), _ds(2, 3.0, 1000)]
    # EstMaxLat = max age (4.0 - 2.0) + 2000 rows / 2000 rows/s = 3.0 (Eq. 6)
    assert p.estimate_max_latency(4.0, pending) == pytest.approx(3.0)
    assert not p.admit(4.0, pending)
    assert p.admit(6.0, pending)  # 4.0 + 1.0 >= 5


def test_lmstream_tumbling_targets_the_mean_of_past_max_latency():
    p = build_admission("lmstream", slide=0.0, margin=0.0, warmup_batches=0)
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=0.0, completed_at=1.0, max_latency=2.0))
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=2.0, completed_at=3.0, max_latency=4.0))
    assert p.target == pytest.approx(3.0)
    assert not p.admit(10.0, [_ds(0, 9.0, 1000)])  # 1.0 + 1.0 < 3.0
    assert p.admit(10.0, [_ds(0, 8.0, 1000)])  # 2.0 + 1.0 >= 3.0


def test_lmstream_auto_margin_learns_from_underestimates():
    p = build_admission("lmstream", slide=5.0, margin="auto", poll_interval=0.0, warmup_batches=0)
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=0.0, completed_at=1.0, max_latency=1.0))
    assert p.margin() == pytest.approx(0.5)  # no error known yet: the floor, 0.1 x slide
    assert p.admit(10.0, [_ds(0, 6.4, 1000)])  # age 3.6 + Proc 1.0 + 0.5 >= 5 (4.6 alone would wait)
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=10.0, completed_at=11.8, max_latency=5.4))
    # errors: actual 1.8 s vs estimated 1.0 s, and the residuals -0.4 / +0.4 of the refit (Proc = 1.4 s per 1000)
    under = np.array([0.8, 0.0, 0.4])  # an over-estimate counts as 0: it cannot break the bound
    assert p.margin() == pytest.approx(under.mean() + 2 * under.std())  # 1.05 s: above the largest error, 0.8 s
    assert build_admission("lmstream", slide=5.0, warmup_batches=0, margin_z=0.0).margin() == pytest.approx(0.5)


def test_lmstream_margin_floor_stays_under_accurate_estimates():
    """Accurate estimates would learn a margin of ~0: the floor keeps room for the noise they did not show."""
    p = build_admission("lmstream", slide=10.0, warmup_batches=0, margin_floor=0.2)
    _learn(p, [(1000, 1.0)])
    assert p.margin() == pytest.approx(2.0)
    t = 50.0
    for seq in range(4):
        assert p.admit(t, [_ds(seq, t - 9.0, 1000)])
        p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=t, completed_at=t + 1.0, max_latency=10.0))
        t += 12.0
    assert p.margin() == pytest.approx(2.0)
    assert build_admission("lmstream", slide=10.0, margin_floor=0.0).margin() == 0.0
    with pytest.raises(ConfigError, match="margin_floor"):
        build_admission("lmstream", margin_floor=1.5)


def test_lmstream_tumbling_margin_is_the_p90_of_errors_without_floor():
    p = build_admission("lmstream", slide=0.0, warmup_batches=0)
    _learn(p, [(1000, 1.0)])
    assert p.margin() == 0.0  # a soft target (Eq. 3): no floor that would drag the running mean down


@pytest.mark.parametrize("bad", [-1.0])
def test_lmstream_rejects_negative_slide(bad):
    with pytest.raises(ConfigError):
        build_admission("lmstream", slide=bad, warmup_batches=0)


def test_golden_replays_match():
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    from make_golden_admission import traces

    with open(GOLDEN) as f:
        golden = json.load(f)
    assert traces() == golden


def test_replay_shapes_match_the_paper_claims():
    """Sliding: lmstream bounds MaxLat near the slide; fixed(10 s) exceeds a 5 s slide every batch."""
    rows = [1000] * 60
    lm = replay(build_admission("lmstream", slide=5.0, warmup_batches=0), rows)
    fx = replay(build_admission("fixed", trigger=10.0), rows)
    assert sum(b.max_latency <= 5.0 for b in lm) / len(lm) >= 0.9
    assert all(b.max_latency > 5.0 for b in fx)
    assert sum(b.rows for b in lm) == sum(b.rows for b in fx) == 60_000
    assert [asdict(b) for b in lm] != [asdict(b) for b in fx]


def test_lmstream_lookahead_covers_slow_polls():
    """When the engine polls only every second, the policy admits a poll early: waiting would come too late."""
    p = build_admission("lmstream", slide=5.0, margin="auto", poll_interval=0.02, warmup_batches=0)
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=0.0, completed_at=1.0, max_latency=1.0))
    pending = [_ds(0, 10.0, 1000)]  # estimate at time t: (t - 10) + 1.0
    assert not p.admit(11.0, pending)  # first poll after the batch: gap prior Proc(0 rows) = 0 here
    assert not p.admit(12.0, pending)  # the 1 s gap after the first poll is the no-data batch's
    assert p.decision_gap() == pytest.approx(0.02)  # no ordinary gap seen yet
    assert p.admit(13.0, pending)  # ordinary gaps are 1 s now: 3.0 + 1.0 + 1.0 >= 5, the next poll is too late
    assert p.state()["gap"] == pytest.approx(1.0)


def test_lmstream_paper_rule_ignores_poll_gaps():
    p = build_admission("lmstream", slide=5.0, margin=0.0, warmup_batches=0, lookahead=False)
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=0.0, completed_at=1.0, max_latency=1.0))
    pending = [_ds(0, 10.0, 1000)]
    assert not p.admit(11.0, pending) and not p.admit(12.0, pending) and not p.admit(13.0, pending)
    assert p.admit(14.0, pending)


def test_lmstream_warmup_batch_not_learned():
    p = build_admission("lmstream", slide=5.0, margin=0.0)  # default: one warm-up batch
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=0.0, completed_at=4.0, max_latency=4.0))
    assert p.avg_throughput is None  # code generation made this one slow: nothing learned yet
    assert p.admit(5.0, [_ds(0, 4.9)])
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=5.0, completed_at=5.5, max_latency=0.6))
    assert p.avg_throughput == pytest.approx(2000.0)


def test_lmstream_batch_time_is_not_a_poll_gap():
    p = build_admission("lmstream", slide=5.0, margin="auto", poll_interval=0.02)
    assert p.admit(0.0, [_ds(0, 0.0)])  # cold start
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=0.0, completed_at=4.0, max_latency=4.0))
    assert p.admit(4.0, [_ds(1, 1.0)])  # warm-up batch: still nothing learned, admitted
    p.on_batch_complete(BatchOutcome(rows=1000, admitted_at=4.0, completed_at=5.0, max_latency=4.0))
    p.admit(5.0, [_ds(2, 4.5)])
    assert p.decision_gap() == pytest.approx(0.02)  # the 1 s batch was not taken for a slow poll


def _learn(p, batches):
    """Feed completed batches (rows, processing seconds) to a policy."""
    t = 0.0
    for rows, proc in batches:
        p.on_batch_complete(BatchOutcome(rows=rows, admitted_at=t, completed_at=t + proc, max_latency=proc))
        t += proc + 1.0


def test_lmstream_regression_tracks_a_load_ramp_within_its_window():
    """Proc = a + b * rows over the last `history` batches: after the cost per row doubled, the estimate follows
    within one window, while the paper's cumulative AvgThPut still averages in the old cost."""
    reg = build_admission("lmstream", slide=5.0, warmup_batches=0, history=8)
    paper = build_admission("lmstream", slide=5.0, warmup_batches=0, estimator="avgthput", lookahead=False)
    early = [(r, 0.3 + r / 10_000) for r in (1000, 3000, 2000, 4000, 1500, 2500, 3500, 1000)] * 3
    late = [(r, 0.3 + r / 5_000) for r in (1000, 3000, 2000, 4000, 1500, 2500, 3500, 1000)]
    _learn(reg, early + late)
    _learn(paper, early + late)
    a, b = reg.proc_model()
    assert a == pytest.approx(0.3, abs=1e-6) and b == pytest.approx(1 / 5_000, rel=1e-6)
    assert reg.estimate_proc(4000) == pytest.approx(1.1)
    assert reg.estimate_proc(1000) == pytest.approx(0.5)
    # Eq. 4 has no per-batch cost: a small batch's 0.3 s overhead is spread over all rows, and the old cost lingers
    assert paper.estimate_proc(1000) < 0.3


def test_lmstream_constant_batches_fall_back_to_a_proportional_fit():
    p = build_admission("lmstream", slide=5.0, warmup_batches=0)
    _learn(p, [(1000, 0.5), (1010, 0.52), (990, 0.49)])
    a, b = p.proc_model()
    assert a == 0.0 and b == pytest.approx((0.5 + 0.52 + 0.49) / 3000, rel=0.02)


def test_lmstream_constant_batches_take_the_intercept_from_the_no_data_batch():
    """Equal batches cannot tell a per-batch cost from a per-row one; Spark's no-data batch after each data batch
    is a batch of zero rows, so the gap it leaves between polls is the intercept, and a small batch (the end of a
    burst) is not estimated at a proportional fraction of a big one's time."""
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, poll_interval=0.02)
    t = 0.0
    for seq in range(4):
        assert p.admit(t, [_ds(seq, t - 5.0, 16_000)])  # old enough: admitted at the first poll
        p.on_batch_complete(BatchOutcome(rows=16_000, admitted_at=t, completed_at=t + 1.0, max_latency=6.0))
        t += 1.0
        p.admit(t, [])  # first poll after the batch; Spark then runs its no-data batch (0.5 s)
        t += 0.52
        p.admit(t, [])
        t += 3.0
    assert p.zero_row_cost() == pytest.approx(0.5)
    a, b = p.proc_model()
    assert a == pytest.approx(0.5) and b == pytest.approx(0.5 / 16_000)
    assert p.estimate_proc(4_000) == pytest.approx(0.625)  # proportional: 0.25 s
    assert p.estimate_proc(16_000) == pytest.approx(1.0)


def test_lmstream_over_estimates_do_not_raise_the_margin():
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, history=6)
    _learn(p, [(r, 0.2 + r / 10_000) for r in (1000, 3000, 2000)])
    t = 100.0
    for seq in range(6):
        assert p.admit(t, [_ds(seq, t - 4.5, 2000)])
        proc = p.estimate_proc(2000) / 3  # every batch far cheaper than estimated
        p.on_batch_complete(BatchOutcome(rows=2000, admitted_at=t, completed_at=t + proc, max_latency=4 + proc))
        t += proc + 5.0
    assert p.margin() == pytest.approx(0.5)  # the floor: no under-estimate, whatever the spread


def test_lmstream_gap_prior_is_a_no_data_batch_from_the_start():
    """Before any gap was seen, the first poll after a batch expects Proc(0 rows) until the next chance."""
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0)
    _learn(p, [(r, 0.8 + r / 10_000) for r in (1000, 3000, 2000, 4000)])
    assert p.decision_gap() == pytest.approx(0.8)
    pending = [_ds(0, 10.0, 1000)]  # Proc(1000) = 0.9; the next chance is 0.8 s away, rate unknown (0)
    assert p.admit(13.4, pending)  # 3.4 + 0.8 + 0.9 = 5.1 >= 5: waiting for the no-data batch would break it
    q = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0, lookahead=False)
    _learn(q, [(r, 0.8 + r / 10_000) for r in (1000, 3000, 2000, 4000)])
    assert not q.admit(13.4, pending)  # the paper's rule waits, and the next poll comes 0.8 s later: 5.2 s


def test_lmstream_never_grows_a_batch_the_next_one_cannot_follow():
    """At 4000 rows/s with Proc = 1 + rows/4000, a 3 s batch takes 4 s: its successor needs >= 4 + 5 s > 5 s.
    The policy admits while the next batch can still keep the bound, well before this batch's own estimate."""
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0)
    _learn(p, [(r, 1.0 + r / 4000) for r in (2000, 6000, 4000, 8000)])
    pending = [_ds(k, 10.0 + k, 4000) for k in range(2)]  # 8000 rows: Proc 3 s; own estimate 1 + 3 = 4 < 5
    assert p.estimate_max_latency(11.0, pending) == pytest.approx(4.0)
    assert p.admit(11.0, pending)
    assert p.state()["est_next"] == pytest.approx(3.0 + 1.0 + 3.0)  # 3 s of arrivals at 4000 rows/s
    assert p.state()["rate"] == pytest.approx(4000.0)


def test_lmstream_margin_adapts_to_the_estimation_error():
    """Under-estimates raise the margin (the largest recent error, sliding); good estimates bring it back."""
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, history=6)
    _learn(p, [(r, 0.2 + r / 10_000) for r in (1000, 3000, 2000)])
    assert p.margin() == pytest.approx(0.5)  # the floor (0.1 x slide): no estimate checked yet
    t = 100.0
    for seq, wrong in enumerate([True] * 6 + [False] * 6):
        pending = [_ds(seq, t - 4.5, 2000)]
        assert p.admit(t, pending)  # age 4.5 + gap Proc(0) 0.2 + Proc(2000 + a few) 0.4 >= 5 - margin
        est = p.estimate_proc(2000)
        proc = est * 2 if wrong else est
        p.on_batch_complete(BatchOutcome(rows=2000, admitted_at=t, completed_at=t + proc, max_latency=4 + proc))
        t += proc + 5.0
        if wrong:
            assert p.margin() > 0.1
            peak = p.margin()
    # back to the floor (0.1 x slide) once the wrong estimates left the record
    assert p.margin() == pytest.approx(0.5) and peak > 0.5


def test_lmstream_rejects_an_unknown_estimator():
    with pytest.raises(ConfigError, match="regression, avgthput"):
        build_admission("lmstream", estimator="bogus")


def test_lmstream_decisions_on_recorded_spark_traces_match_golden():
    """Per-batch traces recorded from real Spark runs (scripts/record_admission_trace.py): lmstream's decisions
    on them are pinned (regenerate with scripts/make_golden_admission.py when the policy changes on purpose)."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    from make_golden_admission import recorded_decisions

    with open(os.path.join(os.path.dirname(GOLDEN), "admission_recorded.json")) as f:
        golden = json.load(f)
    decisions = recorded_decisions()
    assert set(decisions) >= {"LR1S-6000-asap", "LR1S-6000-asap-load-ramp", "LR1S-6000-lmstream-old"}
    assert decisions == golden


def test_lmstream_margin_learns_the_underestimates_of_a_recorded_run():
    """LR1S at 6000 rows/s under asap: the window state fills for 30 s, so every batch took longer than its rows
    predicted; the margin grows to cover that, and the decisions admit no later than they would without it."""
    from adaptstream.admission.replay import replay_recorded

    with open(os.path.join(os.path.dirname(GOLDEN), "traces", "LR1S-6000-asap.json")) as f:
        trace = json.load(f)
    auto = build_admission("lmstream", slide=5.0)
    fixed0 = build_admission("lmstream", slide=5.0, margin=0.0)
    a, z = replay_recorded(auto, trace, after_gap=0.5), replay_recorded(fixed0, trace, after_gap=0.5)
    under = [d["proc"] - d["est_proc"] for d in a if d["est_proc"] is not None]
    assert sum(e > 0 for e in under) > len(under) / 2  # mostly under-estimated
    assert auto.margin() > 0.2 and fixed0.margin() == 0.0
    assert all(x["admit_delay"] <= y["admit_delay"] for x, y in zip(a, z, strict=True))
    assert sum(d["admit_delay"] for d in a) < sum(d["admit_delay"] for d in z)


def test_lmstream_stops_buffering_when_the_load_ramps_up_on_a_recorded_trace():
    """Recorded while other work raised the machine's load (processing 1.6 s -> 9 s per batch at a constant 6000
    rows/s): the next batch could never keep the bound, so lmstream admits every batch at its first chance and its
    margin grows, while the paper's exact rule still holds batches back."""
    from adaptstream.admission.replay import replay_recorded

    with open(os.path.join(os.path.dirname(GOLDEN), "traces", "LR1S-6000-asap-load-ramp.json")) as f:
        trace = json.load(f)
    ours = build_admission("lmstream", slide=5.0)
    paper = build_admission("lmstream", slide=5.0, estimator="avgthput", lookahead=False, margin=0.0, warmup_batches=0)
    a, z = replay_recorded(ours, trace, after_gap=0.5), replay_recorded(paper, trace, after_gap=0.5)
    assert all(d["admit_delay"] <= 0 for d in a)
    assert any(d["admit_delay"] > 0.5 for d in z)
    assert ours.margin() > 1.0


def test_lmstream_margin_covers_the_slow_batch_at_the_breaking_point_of_a_quiet_run():
    """LR1S at 8000 rows/s on a quiet machine, where lmstream and asap both broke the 5 s bound: one batch took 4.25 s
    against 1.91 s estimated. The margin grows to cover that error and the policy stops buffering (admits at once).
    With the guard, the first recorded miss (batch 6, 5.39 s) already hands every later batch to the at-once rule;
    without it the policy buffered one more batch by 1.46 s before the margin caught up."""
    from adaptstream.admission.replay import replay_recorded

    with open(os.path.join(os.path.dirname(GOLDEN), "traces", "LR1S-8000-lmstream-quiet.json")) as f:
        trace = json.load(f)
    policy = build_admission("lmstream", slide=5.0)
    decisions = replay_recorded(policy, trace, after_gap=0.5)
    worst = max(d["proc"] - d["est_proc"] for d in decisions if d["est_proc"] is not None)
    assert worst > 2.0
    assert policy.margin() >= worst - 1e-9
    first_miss = next(i for i, d in enumerate(decisions) if d["max_latency"] > 5.0)
    assert first_miss == 6 and all(d["admit_delay"] <= 0 for d in decisions[first_miss + 1 :])
    assert policy.state()["guard_stays"] >= 1
    unguarded = replay_recorded(build_admission("lmstream", slide=5.0, guard=0), trace, after_gap=0.5)
    assert unguarded[first_miss + 1]["admit_delay"] > 1.0  # it buffered while its estimates held
    assert all(d["admit_delay"] <= 0 for d in unguarded[-2:])


def _outcome(rows: int, max_latency: float) -> BatchOutcome:
    return BatchOutcome(rows=rows, admitted_at=0.0, completed_at=0.5, max_latency=max_latency)


def _buffers(p, t: float = 50.0) -> bool:
    """True when the policy would keep a young 1000-row dataset waiting (well inside a 5 s slide)."""
    return not p.admit(t, [_ds(99, t - 0.1, 1000)])


def test_lmstream_guard_admits_at_once_for_its_stay_after_a_miss():
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0, guard=3)
    _learn(p, [(r, 0.2 + r / 10_000) for r in (1000, 3000, 2000, 4000)])
    assert _buffers(p)
    p.on_batch_complete(_outcome(2000, 5.2))  # a miss of the 5 s bound
    for _ in range(3):
        assert not _buffers(p)  # the at-once rule, as Spark's default
        assert p.state()["guard_stays"] == 1
        p.on_batch_complete(_outcome(1000, 1.0))
    assert _buffers(p)  # the stay is over: lmstream buffers again


def test_lmstream_guard_doubles_the_stay_on_a_repeated_miss_and_starts_over_after_a_calm_stretch():
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0, guard=2)
    _learn(p, [(r, 0.2 + r / 10_000) for r in (1000, 3000, 2000, 4000)])
    p.on_batch_complete(_outcome(2000, 6.0))
    for _ in range(2):
        p.on_batch_complete(_outcome(1000, 1.0))
    assert _buffers(p)
    p.on_batch_complete(_outcome(2000, 6.0))  # missed again right after the stay: 4 batches now
    stay = 0
    while not _buffers(p):
        stay += 1
        p.on_batch_complete(_outcome(1000, 1.0))
    assert stay == 4
    for _ in range(5):  # more than 2 x guard on-time batches
        p.on_batch_complete(_outcome(1000, 1.0))
    p.on_batch_complete(_outcome(2000, 6.0))
    stay = 0
    while not _buffers(p):
        stay += 1
        p.on_batch_complete(_outcome(1000, 1.0))
    assert stay == 2


def test_lmstream_guard_off_and_tumbling_windows_keep_buffering_after_a_miss():
    for params in ({"slide": 5.0, "guard": 0}, {"slide": 0.0}):
        p = build_admission("lmstream", warmup_batches=0, margin=0.0, **params)
        _learn(p, [(r, 0.2 + r / 10_000) for r in (1000, 3000, 2000, 4000)])
        p.on_batch_complete(_outcome(2000, 60.0))
        assert _buffers(p), params


def test_lmstream_guard_stay_survives_a_restart():
    p = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0, guard=3)
    _learn(p, [(r, 0.2 + r / 10_000) for r in (1000, 3000, 2000, 4000)])
    p.on_batch_complete(_outcome(2000, 5.5))
    p.on_batch_complete(_outcome(1000, 1.0))
    q = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0, guard=3)
    q.load_state_dict(json.loads(json.dumps(p.state_dict())))
    assert not _buffers(q)
    q.on_batch_complete(_outcome(1000, 1.0))
    assert not _buffers(q)
    q.on_batch_complete(_outcome(1000, 1.0))
    assert _buffers(q)
    old = p.state_dict()
    del old["state"]["guard"]  # a snapshot written before the guard existed loads with no stay
    r = build_admission("lmstream", slide=5.0, warmup_batches=0, margin=0.0, guard=3)
    r.load_state_dict(old)
    assert _buffers(r)


def test_lmstream_rejects_a_negative_guard():
    with pytest.raises(ConfigError, match="guard"):
        build_admission("lmstream", slide=5.0, guard=-1)
