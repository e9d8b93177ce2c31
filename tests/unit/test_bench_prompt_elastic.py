"""The elasticity benchmark's report logic without Spark: executor-seconds, on-time shares, JSON shape, verdicts
by rule; the policies' plans; --elastic-params."""

from __future__ import annotations

import json

import pytest

from adaptstream.app.runner import RunSpec, elastic_policy
from adaptstream.errors import ConfigError
from adaptstream_bench.prompt_elastic import da_conf, plans, smallest_on_time
from adaptstream_bench.prompt_elastic_report import (
    executor_seconds,
    policy_figures,
    run_figures,
    scale_actions,
    step_delays,
    step_target,
    targets,
    write_report,
)

T0 = 1_000_000.0


def _run(policy: str, pattern: str, ws: list[float], executors: list[tuple[float, float | None]], end: float) -> dict:
    """A hand-made run: one batch every 2 s from T0 with the given W; executors as (added, removed) offsets."""
    batches = [
        {
            "batch": i,
            "started": T0 + 2 * i,
            "ended": T0 + 2 * i + 1,
            "w": w,
            "rows": 100,
            "keys": 10,
            "map_tasks": 3,
            "reduce_buckets": 2,
            "executors": 1,
        }
        for i, w in enumerate(ws)
    ]
    return {
        "policy": policy,
        "pattern": pattern,
        "t0": T0,
        "window": [T0 + 4, T0 + end],  # warm-up: the first two batches
        "executors": [
            {"id": str(k), "added": T0 + a, "removed": None if r is None else T0 + r}
            for k, (a, r) in enumerate(executors)
        ],
        "datasets": [{"arrival": T0 + k, "rows": 100, "latency": 1.0 + k / 10} for k in range(10)],
        "batches": batches,
    }


def test_executor_seconds_integrates_over_the_window():
    ivs = [{"added": 0.0, "removed": 10.0}, {"added": 5.0, "removed": None}, {"added": 20.0, "removed": 30.0}]
    assert executor_seconds(ivs, 0.0, 10.0) == pytest.approx(10 + 5)
    assert executor_seconds(ivs, 8.0, 25.0) == pytest.approx(2 + 17 + 5)
    assert executor_seconds([], 0.0, 10.0) == 0.0


def test_run_figures_skip_the_warm_up():
    run = _run("prompt", "step", [5.0, 5.0, 0.5, 0.9, 1.0, 1.2], [(0, None)], end=12)
    f = run_figures(run)
    assert f["batches"] == 4 and f["on_time"] == 3 and f["on_time_share"] == 0.75  # W = 1.0 is on time
    assert f["executor_seconds"] == pytest.approx(8.0) and f["mean_executors"] == pytest.approx(1.0)
    assert f["w_max"] == 1.2 and f["latency_p95_s"] == pytest.approx(1.9 - 0.05 * 0.1 * 10, abs=0.05)


def _doc(prompt_ws, prompt_execs, peak_execs, da_ws, da_execs) -> dict:
    runs = []
    for pattern in ("sinusoidal", "step"):
        runs += [
            _run("prompt", pattern, prompt_ws, prompt_execs, end=24),
            _run("static_peak", pattern, [0.5] * 12, peak_execs, end=24),
            _run("static_mean", pattern, [1.5] * 12, [(0, None), (0, None)], end=24),
            _run("dynamic_allocation", pattern, da_ws, da_execs, end=24),
        ]
    return {"runs": runs}


def _verdicts(doc: dict) -> list[bool | None]:
    return [t["met"] for t in targets(policy_figures(doc["runs"]))]


def test_targets_met_by_rule():
    # prompt: all on time, 1 executor for 20 s = 20 exec-s per pattern; peak: 3 x 20 = 60 (prompt 33 %)
    # dynamic allocation: one batch late, 2 executors: prompt wins at lower executor-seconds
    doc = _doc([0.5] * 12, [(0, None)], [(0, None)] * 3, [0.5] * 11 + [1.5], [(0, None)] * 2)
    pol = policy_figures(doc["runs"])
    assert pol["prompt"]["on_time_share"] == 1.0 and pol["prompt"]["executor_seconds"] == pytest.approx(40.0)
    assert pol["static_peak"]["executor_seconds"] == pytest.approx(120.0)
    assert pol["static_mean"]["on_time_share"] == 0.0
    assert set(pol["prompt"]["by_pattern"]) == {"sinusoidal", "step"}
    assert _verdicts(doc) == [True, True]


def test_targets_missed_by_rule():
    # per pattern 20 batches counted after the warm-up, one late: 95 % on time, still met
    one_late = _doc([0.5] * 21 + [1.1], [(0, None)], [(0, None)] * 3, [0.5] * 22, [(0, None)])
    assert _verdicts(one_late) == [True, False]  # DA on time 100 % > prompt's 95 %
    # one late of 10 per pattern: 90 %, missed
    two_late = _doc([0.5] * 11 + [1.1], [(0, None)], [(0, None)] * 3, [0.5] * 12, [(0, None)])
    assert _verdicts(two_late)[0] is False
    # on time, but 2 executors of static peak's 3 = 67 % > 60 %: missed
    costly = _doc([0.5] * 12, [(0, None)] * 2, [(0, None)] * 3, [1.5] * 12, [(0, None)] * 3)
    assert _verdicts(costly) == [False, True]
    # prompt more on time than DA, but with more executor-seconds (beyond the 5 % margin): missed
    dearer = _doc([0.5] * 12, [(0, None)] * 2, [(0, None)] * 4, [1.5] * 12, [(0, None)])
    assert _verdicts(dearer) == [True, False]


def test_targets_not_applicable_without_the_policies():
    runs = [
        r
        for r in _doc([0.5] * 12, [(0, None)], [(0, None)] * 3, [0.5] * 12, [(0, None)])["runs"]
        if r["policy"] == "prompt"
    ]
    assert [t["met"] for t in targets(policy_figures(runs))] == [None, None]


def test_failed_run_counts_no_batch():
    run = {**_run("prompt", "step", [], [], end=4), "error": "AdaptstreamError: boom"}
    f = run_figures(run)
    assert f["batches"] == 0 and f["on_time_share"] is None and f["executor_seconds"] == 0.0


def test_write_report_json_shape_markdown_and_plots(tmp_path):
    doc = _doc([0.5] * 12, [(0, None)], [(0, None)] * 3, [0.5] * 11 + [1.5], [(0, None)] * 2)
    doc["meta"] = {
        "command": "adaptstream bench prompt-elastic --update-docs",
        "git": "abc1234",
        "machine": {"host": "h", "cpus": 2, "python": "3"},
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [2.0, 2.0, 2.0],
        "load_mean": 1.5,
        "started": T0,
        "wall_s": 600.0,
        "notes": ["a note"],
        "config": {
            "workers": 3,
            "worker_memory": "1g",
            "executor_memory": "512m",
            "workload": "LR2S",
            "reduce": "prompt",
            "trigger": 2.0,
            "num_blocks": 3,
            "seed": 0,
            "rate": 4000,
            "amplitude": 0.6,
            "period": 60.0,
            "duration": 24.0,
            "warmup": 4.0,
            "key_note": "k",
            "prompt_initial": "2",
            "static_peak": 3,
            "static_mean": 2,
            "peak_rule": "r",
            "mean_rule": "m",
            "da_conf_note": "d",
            "load_sample_s": 5.0,
        },
    }
    write_report(doc, tmp_path)
    saved = json.loads((tmp_path / "prompt_elastic.json").read_text())
    assert set(saved["policies"]) == {"prompt", "static_peak", "static_mean", "dynamic_allocation"}
    for p in saved["policies"].values():
        assert {"on_time_share", "executor_seconds"} <= set(p)
    # the hand-made runs plan nothing, so the step response has no rise to judge: undecided, never met
    assert [t["met"] for t in saved["targets"]] == [True, True, True, None]
    assert {"max_executors_planned", "min_executors_planned", "scale_outs", "scale_ins"} <= set(
        saved["policies"]["prompt"]
    )
    md = (tmp_path / "prompt_elastic.md").read_text()
    assert "**met**" in md and "a note" in md and "prompt_elastic-step.png" in md
    assert (tmp_path / "prompt_elastic-sinusoidal.png").stat().st_size > 1000
    assert (tmp_path / "prompt_elastic-step.png").stat().st_size > 1000
    assert "records no policy descriptions" in md  # this meta has none: the writer's own, named as such
    doc["meta"]["policy_notes"] = {"prompt": "- `prompt`: as the run recorded it"}
    write_report(doc, tmp_path)
    md = (tmp_path / "prompt_elastic.md").read_text()
    assert "as the run recorded it" in md and "records no policy descriptions" not in md
    assert "`ds2`: a DS2-style" not in md  # the recorded descriptions only


def test_plans_follow_the_sizing_rule():
    p = plans(3, 0.6)
    assert p["static_peak"]["executors"] == 3 and p["static_mean"]["executors"] == 2  # ceil(3 / 1.6)
    assert p["prompt"]["executors"] == 2 and "max_executors=3" in p["prompt"]["params"]
    assert plans(4, 1 / 3)["static_mean"]["executors"] == 3  # ceil(4 / (4/3)) = 3, no float slip to 4
    conf = da_conf(3, 5.0)
    assert conf["spark.dynamicAllocation.enabled"] == "true"
    assert conf["spark.dynamicAllocation.shuffleTracking.enabled"] == "true"
    assert conf["spark.dynamicAllocation.maxExecutors"] == "3" and conf["spark.dynamicAllocation.minExecutors"] == "1"


def test_elastic_params():
    spec = RunSpec(
        workload="LR2S", reduce="prompt", elastic="static", elastic_params=plans(3, 0.6)["static_mean"]["params"]
    )
    assert elastic_policy(spec).plan.as_tuple() == (2, 2, 2)
    prompt = elastic_policy(
        RunSpec(
            workload="LR2S",
            reduce="prompt",
            elastic="prompt",
            num_blocks=3,
            reduce_buckets=2,
            elastic_params="max_executors=3",
        )
    )
    assert prompt.plan.as_tuple() == (3, 2, 3)
    with pytest.raises(ConfigError, match="has no parameter"):
        elastic_policy(RunSpec(workload="LR2S", reduce="prompt", elastic="static", elastic_params="bogus=1"))
    with pytest.raises(ConfigError, match="name=value"):
        elastic_policy(RunSpec(workload="LR2S", reduce="prompt", elastic="static", elastic_params="executors"))
    with pytest.raises(ConfigError, match=">= 1"):
        elastic_policy(RunSpec(workload="LR2S", reduce="prompt", elastic="static", elastic_params="executors=0"))


def test_checks_say_whether_executors_lowered_w():
    from adaptstream_bench.prompt_elastic_report import checks, complete

    meta = {"config": {"static_peak": 3, "static_mean": 2}}
    lowered = complete({**_doc([0.5] * 12, [(0, None)], [(0, None)] * 3, [0.5] * 12, [(0, None)]), "meta": meta})
    assert any("lowered W by 67%" in x for x in checks(lowered))
    assert any("Sizing check" in x and "did serve the peak" in x for x in checks(lowered))
    runs = _doc([0.5] * 12, [(0, None)], [(0, None)] * 3, [0.5] * 12, [(0, None)])["runs"]
    for run in runs:  # static_peak as slow as static_mean, and late
        if run["policy"] == "static_peak":
            for b in run["batches"]:
                b["w"] = 1.5
    flat = checks(complete({"runs": runs, "meta": meta}))
    assert any("did not lower W" in x for x in flat) and any("did not serve the peak" in x for x in flat)


def _planned(run: dict, plan: list[int]) -> dict:
    for b, k in zip(run["batches"], plan, strict=True):
        b["planned_executors"] = k
    return run


def test_scale_actions_count_what_was_planned_and_what_spark_did():
    # executors: one from before the first input, one added at 9 s and removed at 17 s, one added at 21 s
    run = _run("prompt", "step", [0.5] * 12, [(-5, None), (9, 17), (21, None)], end=24)
    f = scale_actions(_planned(run, [1, 1, 1, 2, 2, 2, 1, 1, 2, 3, 3, 2]))
    assert f["max_executors_planned"] == 3 and f["min_executors_planned"] == 1
    assert (f["planned_scale_outs"], f["planned_scale_ins"]) == (3, 2)
    assert (f["scale_outs"], f["scale_ins"]) == (2, 1)  # the executor alive before the first input is not one


def test_the_step_response_is_judged_on_the_plan_with_spark_adds_beside_it():
    # period 12 s: the rate rises at 6 s and 18 s; batches every 2 s, each ends 1 s after it starts
    run = _run("prompt", "step", [0.5] * 12, [(0, None), (9.5, None)], end=24)
    _planned(run, [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3])  # more after the batch starting at 8 s (ends 9 s)
    d = step_delays(run, 12.0)
    assert [x["rise"] for x in d] == [6.0, 18.0]
    assert d[0]["planned_s"] == pytest.approx(3.0) and d[0]["added_s"] == pytest.approx(3.5)
    assert d[1]["planned_s"] == pytest.approx(3.0) and d[1]["added_s"] is None
    assert step_target({"step_delays": d}, trigger=2.0, workers=3)["met"] is True  # 3 s <= 2 x 2 s
    assert step_target({"step_delays": d}, trigger=1.0, workers=3)["met"] is False  # 3 s > 2 x 1 s
    # a rise where the plan already had every worker is not judged
    assert step_target({"step_delays": d[1:]}, trigger=1.0, workers=2)["met"] is None
    late = _planned(_run("prompt", "step", [0.5] * 12, [(0, None)], end=24), [1] * 12)
    assert step_target({"step_delays": step_delays(late, 12.0)}, trigger=2.0, workers=3)["met"] is False


def test_the_static_sizes_are_the_smallest_count_that_kept_every_batch_on_time():
    assert smallest_on_time({1: 0.6, 2: 1.0, 3: 1.0}) == 2
    assert smallest_on_time({2: 0.9, 3: None}) is None  # none did (a failed run decides nothing)
    assert smallest_on_time({}) is None
    p = plans(4, 0.6, peak=3, mean=2)
    assert (p["static_peak"]["executors"], p["static_mean"]["executors"], p["prompt"]["executors"]) == (3, 2, 2)
    assert "max_executors=4" in p["prompt"]["params"]


def test_the_ds2_baseline_plan_builds_its_policy():
    spec = RunSpec(workload="LR2S", reduce="prompt", elastic="ds2", elastic_params=plans(4, 0.6)["ds2"]["params"])
    policy = elastic_policy(spec)
    assert policy.name == "ds2" and policy.plan.as_tuple() == (3, 3, 3)  # the mean's plan: ceil(4 / 1.6)


def test_the_app_routes_workload_is_lr2s_with_its_rounds_and_touches_no_registry():
    from adaptstream.workloads import WORKLOADS
    from adaptstream_bench.elastic_app import worked_workload

    before = WORKLOADS.names()
    name = worked_workload(7)
    w, lr2s = WORKLOADS.get(name), WORKLOADS.get("LR2S")
    assert w.name == "LR2S_W7" and w.rounds == 7
    assert (w.window_s, w.slide_s, w.key_columns) == (lr2s.window_s, lr2s.slide_s, lr2s.key_columns)
    assert w.batch_sql("t") == lr2s.batch_sql("t")  # the oracle is LR2S's own
    assert WORKLOADS.names() == before  # loaded by module:object, not registered


def test_app_batches_take_w_from_sparks_progress_and_the_plan_after_each_batch():
    from adaptstream_bench.elastic_app import app_batches

    progress = [
        {"query": "q", "batch": 2, "rows": 500, "seconds": 6.0, "started": 110.0},
        {"query": "q", "batch": 0, "rows": 0, "seconds": 0.5, "started": 100.0},  # no data: not a batch
        {"query": "q", "batch": 1, "rows": 400, "seconds": 2.0, "started": 105.0},
    ]
    plans = [["q", 1, 2], ["q", 2, 3]]
    got = app_batches(progress, plans, 4.0, {"num_blocks": 4, "workers": 4})
    assert [b["batch"] for b in got] == [1, 2]
    assert [b["w"] for b in got] == [0.5, 1.5]
    assert [b["ended"] for b in got] == [107.0, 116.0]
    assert [b["planned_executors"] for b in got] == [2, 3]
    assert app_batches(progress, [], 4.0, {"num_blocks": 4, "workers": 4})[0]["planned_executors"] is None
