"""Prompt Alg. 4 (latency-aware auto-scale): golden decisions, grace period, no oscillation on a flat rate."""

from __future__ import annotations

import numpy as np
import pytest

from adaptstream.elasticity import BatchStats, build_elasticity
from adaptstream.errors import ConfigError


def feed(policy, loads, rows=1000, keys=100):
    out = []
    for i, w in enumerate(loads):
        r = rows[i] if isinstance(rows, list) else rows
        k = keys[i] if isinstance(keys, list) else keys
        out.append(policy.on_batch(BatchStats(w, 1.0, r, k)).as_tuple())
    return out


def test_golden_scale_out_follows_rate_and_keys():
    p = build_elasticity("prompt", d=3)  # starts at p = r = 2
    # rate rises, keys flat: a map task after d = 3 overloaded batches
    assert feed(p, [1.2, 1.2, 1.2], rows=[1000, 1500, 2000]) == [(2, 2, 2), (2, 2, 2), (3, 2, 3)]
    # keys rise, rate flat (at the new reference): a reduce bucket
    assert feed(p, [1.1, 1.1, 1.1], rows=1500, keys=[100, 200, 300])[-1] == (3, 3, 3)
    # both rise: both
    assert feed(p, [1.1, 1.1, 1.1], rows=3000, keys=400)[-1] == (4, 4, 4)
    assert [e["direction"] for e in p.decision_log()] == ["out", "out", "out"]


def test_stable_zone_changes_nothing():
    p = build_elasticity("prompt")
    assert set(feed(p, [0.85, 0.81, 0.9, 0.88] * 10)) == {(2, 2, 2)}


def test_scale_in_needs_d_low_batches_and_a_safe_prediction():
    p = build_elasticity("prompt", d=2, initial_map_tasks=4, initial_reduce_buckets=4)
    assert feed(p, [0.3, 0.3]) == [(4, 4, 4), (3, 3, 3)]  # 0.3 * 4/3 = 0.4 <= 0.9
    p = build_elasticity("prompt", d=2, initial_map_tasks=2, initial_reduce_buckets=2)
    assert feed(p, [0.75, 0.75, 0.75, 0.75]) == [(2, 2, 2)] * 4  # 0.75 * 2 = 1.5 > 0.9: no scale-in


def test_grace_period_blocks_the_reverse_decision():
    p = build_elasticity("prompt", d=1, grace=4)
    assert feed(p, [1.5])[-1] == (3, 3, 3)  # scale-out
    # low load right after: no scale-in for 4 batches (the grace period), then one
    assert feed(p, [0.2, 0.2, 0.2, 0.2]) == [(3, 3, 3)] * 4
    assert feed(p, [0.2]) == [(2, 2, 2)]
    # the same direction is not blocked: a scale-in right after a scale-in
    assert feed(p, [0.2]) == [(1, 1, 1)]


def _simulate(policy, rate, keys, batches, seed=0):
    """An engine whose processing time follows the plan (map stage rows/p, reduce stage keys/r), 3 % noise."""
    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(batches):
        plan = policy.plan
        pt = (rate / 4000.0 / plan.map_tasks + keys / 500.0 / plan.reduce_buckets) * rng.uniform(0.97, 1.03)
        plans.append(policy.on_batch(BatchStats(pt, 1.0, int(rate * rng.uniform(0.99, 1.01)), keys)).as_tuple())
    return plans


@pytest.mark.parametrize(("start", "rate"), [(1, 8000), (8, 8000), (1, 20000), (8, 2000)])
def test_no_oscillation_on_a_flat_rate(start, rate):
    p = build_elasticity("prompt", initial_map_tasks=start, initial_reduce_buckets=start, max_executors=16)
    plans = _simulate(p, rate, 1000, 200)
    assert len(set(plans[100:])) == 1, "the plan keeps changing at a flat rate"
    dirs = [e["direction"] for e in p.decision_log()]
    assert dirs in (["out"] * len(dirs), ["in"] * len(dirs)), dirs  # converges one way, never flips back
    last = p.decision_log()[-1]["batch"] if dirs else 0
    assert last < 100


def test_executors_follow_the_wider_stage():
    p = build_elasticity(
        "prompt", initial_map_tasks=5, initial_reduce_buckets=2, cores_per_executor=2, max_executors=16
    )
    assert p.plan.executors == 3
    p = build_elasticity("prompt", initial_map_tasks=9, initial_reduce_buckets=2, max_executors=4)
    assert p.plan.executors == 4


def test_restart_resumes_counts_and_grace():
    a = build_elasticity("prompt", d=3)
    feed(a, [1.2, 1.2])
    b = build_elasticity("prompt", d=3)
    b.load_state_dict(a.state_dict())
    assert feed(b, [1.2]) == feed(a, [1.2]) == [(3, 3, 3)]


def test_static_and_errors():
    s = build_elasticity("static", map_tasks=4, reduce_buckets=3, executors=2)
    assert feed(s, [5.0, 0.1]) == [(4, 3, 2)] * 2
    with pytest.raises(ConfigError, match="step < thres"):
        build_elasticity("prompt", thres=0.1, step=0.2)
    with pytest.raises(ConfigError, match="is not a valid int"):
        build_elasticity("prompt", d="x")
    with pytest.raises(ConfigError, match="batch_interval > 0"):
        BatchStats(1.0, 0.0, 1, 1)


# -- the DS2-style rate-based controller (the benchmark's modern anchor) -------------------------------------------
def test_ds2_scales_in_one_step_to_the_rate_it_measured():
    p = build_elasticity("ds2", initial_executors=2, max_executors=8, window=3, activation=2)
    # 2 executors busy 1.6 intervals per interval: 2 x 1.6 / 0.8 = 4 executors, decided after the window
    assert feed(p, [1.6, 1.6, 1.6]) == [(2, 2, 2), (2, 2, 2), (4, 4, 4)]
    # the activation period: two batches measured while new executors start are not counted
    assert feed(p, [3.0, 3.0]) == [(4, 4, 4), (4, 4, 4)]
    # then 4 executors at W 0.3: 4 x 0.3 / 0.8 = 1.5 -> 2
    assert feed(p, [0.3, 0.3, 0.3])[-1] == (2, 2, 2)
    assert [(e["from"], e["to"], e["direction"]) for e in p.decision_log()] == [(2, 4, "out"), (4, 2, "in")]


def test_ds2_holds_at_the_target_and_stays_within_bounds():
    p = build_elasticity("ds2", initial_executors=3, max_executors=4, target_utilization=0.75)
    assert set(feed(p, [0.7, 0.75, 0.72] * 5)) == {(3, 3, 3)}  # 3 x 0.72 / 0.75 = 2.9 -> 3: no change
    assert feed(p, [5.0] * 3)[-1] == (4, 4, 4)  # wants 20, capped at max_executors
    q = build_elasticity("ds2", initial_executors=2, min_executors=2, window=1, activation=0)
    assert feed(q, [0.01]) == [(2, 2, 2)]  # wants 1, held at min_executors
    r = build_elasticity("ds2", initial_executors=2, cores_per_executor=2, window=1, activation=0)
    assert feed(r, [1.2]) == [(6, 6, 3)]  # 2 x 1.2 / 0.8 = 3 executors of 2 cores: 6 tasks


def test_ds2_restart_resumes_the_window_and_the_activation_period():
    p = build_elasticity("ds2", window=3, activation=2)
    feed(p, [1.6, 1.6, 1.6, 0.5])  # decided (2 -> 4), one activation batch spent
    q = build_elasticity("ds2", window=3, activation=2)
    q.load_state_dict(p.state_dict())
    assert feed(q, [0.2, 0.3, 0.3, 0.3]) == feed(p, [0.2, 0.3, 0.3, 0.3])


@pytest.mark.parametrize(
    "params",
    [{"target_utilization": 0.0}, {"target_utilization": 1.5}, {"window": 0}, {"activation": -1},
     {"initial_executors": 5, "max_executors": 4}, {"min_executors": 0}],
)  # fmt: skip
def test_ds2_refuses_bad_parameters(params):
    with pytest.raises(ConfigError):
        build_elasticity("ds2", **params)
