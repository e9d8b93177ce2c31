"""prompt_fast (ours: Alg. 4 plus a scale-out at the onset of a load rise): golden decisions, and a replay of the
step run recorded in docs/results/prompt_elastic.json (git 3686814) where Alg. 4 answered a rise after 22 s."""

from __future__ import annotations

from adaptstream.elasticity import BatchStats, build_elasticity


def feed(policy, loads, rows):
    return [policy.on_batch(BatchStats(w, 1.0, r, 0)).as_tuple() for w, r in zip(loads, rows, strict=True)]


def test_onset_scales_out_on_the_first_batch_of_a_rise():
    fast, paper = build_elasticity("prompt_fast"), build_elasticity("prompt")  # both start at p = r = 2
    loads, rows = [0.5, 0.5, 0.5, 0.8], [1000, 1000, 1000, 2000]
    # W 0.8 with the rows doubled predicts 1.6: 2 x 1.6 / 0.9 -> 4 tasks (at most double)
    assert feed(fast, loads, rows)[-1] == (4, 4, 4)
    assert feed(paper, loads, rows)[-1] == (2, 2, 2)  # Alg. 4 waits for d = 3 batches above thres
    log = fast.decision_log()[-1]
    assert log["rule"] == "onset" and log["from"] == [2, 2] and log["to"] == [4, 4]
    assert abs(log["predicted_w"] - 1.6) < 1e-9


def test_onset_step_is_at_least_increment_and_at_most_double():
    p = build_elasticity("prompt_fast", initial_map_tasks=4, initial_reduce_buckets=4, max_executors=16)
    # growth 1.1 at W 0.85: predicted 0.935 -> ceil(4 x 0.935 / 0.9) = 5
    assert feed(p, [0.5, 0.85], [1000, 1100])[-1] == (5, 5, 5)
    q = build_elasticity("prompt_fast", initial_map_tasks=4, initial_reduce_buckets=4, max_executors=16)
    assert feed(q, [0.5, 2.0], [1000, 4000])[-1] == (8, 8, 8)  # predicted 8.0 would ask for 36: capped at 8


def test_no_onset_below_tolerance_or_below_thres():
    p = build_elasticity("prompt_fast")
    # rows jitter by 4 % (tolerance 5 %) at W 0.88; then +25 % rows at W 0.5 (predicted 0.625)
    assert set(feed(p, [0.88, 0.88, 0.5], [1000, 1040, 1300])) == {(2, 2, 2)}


def test_the_batch_after_an_onset_does_not_fire_it_again():
    p = build_elasticity("prompt_fast", d=3, grace=3, max_executors=16)
    assert feed(p, [0.5, 1.0], [1000, 1500])[-1] == (4, 4, 4)  # onset (predicted 1.5)
    # the next batch carries the step in full (rows x 2 again, W 1.2): not a second onset
    assert feed(p, [1.2], [3000]) == [(4, 4, 4)]
    # a further rise later is: rows x 1.5 at W 1.2 predicts 1.8 -> 8 tasks (at most double)
    assert feed(p, [1.2], [4500]) == [(8, 8, 8)]


def test_state_round_trip_keeps_the_previous_batch():
    a = build_elasticity("prompt_fast")
    feed(a, [0.5], [1000])
    b = build_elasticity("prompt_fast")
    b.load_state_dict(a.state_dict())
    assert feed(b, [0.8], [2000]) == feed(a, [0.8], [2000]) == [(4, 4, 4)]


# the recorded step run of `prompt` (app route, trigger 5 s): (W, rows, executors planned after the batch)
RECORDED = [
    (0.314, 3840, 2), (0.354, 4800, 2), (0.336, 4800, 1), (1.216, 5760, 1), (0.718, 5760, 1), (0.484, 3840, 1),
    (0.948, 15360, 1), (1.257, 23040, 1), (1.237, 23040, 2), (1.401, 26880, 2), (1.82, 26880, 2),
    (3.463, 8640, 3), (1.001, 16320, 3), (0.64, 7680, 3), (0.86, 15360, 3), (3.4, 19200, 3),
    (1.517, 65280, 3), (0.642, 11520, 3),
]  # fmt: skip
PARAMS = dict(
    initial_map_tasks=2, initial_reduce_buckets=2, min_executors=1, max_executors=4, max_tasks=8,
    cores_per_executor=1,
)  # fmt: skip


def _replay(name):
    p = build_elasticity(name, **PARAMS)
    return [p.on_batch(BatchStats(w * 5.0, 5.0, rows, 0)).executors for w, rows, _ in RECORDED]


def test_replay_of_the_recorded_step_run():
    # Alg. 4 replayed on the recorded W and rows plans what the live run planned: the replay is faithful
    assert _replay("prompt") == [x[2] for x in RECORDED]
    # the first batch that started after the rise at 30 s (the 7th, 15,360 rows after 3,840) ended 8.6 s after
    # it; Alg. 4 first planned more 3 batches later (22.1 s), prompt_fast at that batch. The 4th batch (W 1.22,
    # rows +20 %) is an onset too. Open loop: the W after a decision are those of the recorded run.
    fast = _replay("prompt_fast")
    assert fast[:7] == [2, 2, 1, 2, 2, 2, 4]  # the 7th batch: 2 -> 4 (predicted W 3.8, at most double)
    assert fast.index(4) == 6 and _replay("prompt").index(2, 3) == 8
