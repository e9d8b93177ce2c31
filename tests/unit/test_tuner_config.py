"""The tuner's pure parts: its config checks, the source defaults it ships to the source's process, the per-query
summary, and Spark's progress as the listener reads it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from adaptstream.errors import ConfigError
from adaptstream.spark.listener import progress_of
from adaptstream.tuner import QueryRecord, TunerConfig, _merge


def test_the_tuned_source_carries_its_defaults_by_value_and_its_own_options_win(tmp_path):
    from pyspark import cloudpickle  # Spark's own copy: what ships the class to the source's process

    from adaptstream.spark.datasource import AdaptstreamDataSource, register
    from adaptstream.spark.options import SourceOptions

    registered: list = []
    context = SimpleNamespace(getConf=lambda: {}, environment={})  # register() reads it (test_register_env.py)
    fake_session = SimpleNamespace(dataSource=SimpleNamespace(register=registered.append), sparkContext=context)
    register(fake_session, {"admission": "fixed", "admissionParams": "trigger=2", "controller": "127.0.0.1:9"})
    (tuned,) = registered
    assert issubclass(tuned, AdaptstreamDataSource) and tuned.name() == "adaptstream"
    shipped = cloudpickle.loads(cloudpickle.dumps(tuned))  # how Spark sends it to the source's process
    assert shipped.defaults == tuned.defaults
    mine = shipped({"path": str(tmp_path), "ADMISSION": "asap"})._options()
    assert (mine["admission"], mine["controller"]) == ("asap", "127.0.0.1:9")  # its own option wins
    theirs = SourceOptions.parse(shipped({"path": str(tmp_path)})._options())
    assert (theirs.admission, theirs.admission_policy().trigger, theirs.controller) == ("fixed", 2.0, "127.0.0.1:9")
    register(fake_session)
    assert registered[-1] is AdaptstreamDataSource  # untuned again: the plain class, no defaults


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scheduler": "klnk"}, "valid choices: default, fair, fcfs, hr, klink, rr, sbox"),
        ({"scheduler": "klink", "scheduler_params": "hold=-1"}, "hold must be >= 0"),
        ({"elastic": "prompt"}, "needs a cluster manager"),
        ({"elastic": "prompt", "elastic_params": "bogus=1"}, r"has no parameter\(s\) \['bogus'\]"),
        ({"admission": "lmstream", "admission_params": "history=1"}, "lmstream needs history >= 2"),
        ({"latency_target": 0.0}, "latency_target must be > 0"),
        ({"latency_target": "fast"}, "latency_target must be > 0 seconds or 'auto'"),
        ({"port": 70000}, r"port must be in \[0, 65535\]"),
    ],
)
def test_tuner_config_refuses_bad_input_before_anything_starts(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        TunerConfig(**kwargs).check("local[2]")


def test_the_query_summary_counts_decisions_of_its_sources_and_the_latency_target():
    rec = QueryRecord("q")
    for s in (0.5, 1.0, 12.0):
        rec.batches += 1
        rec.durations.append(s)
        rec.within_target += int(s <= 10.0)
    rec.controller_names.update({"a", "b"})
    out = rec.summary(
        _merge({"a": {"grants": 3, "holds": 1}, "b": {"grants": 2, "holds": 0}, "c": {"grants": 9}}, {"a", "b"})
    )
    assert (out["decisions"], out["grants"], out["holds"]) == (6, 5, 1)
    assert out["within_target"] == pytest.approx(2 / 3) and out["batch_seconds_mean"] == pytest.approx(13.5 / 3)


def test_progress_is_read_with_the_scheduled_source_names():
    src = SimpleNamespace(endOffset=json.dumps({"seq": 4, "ctl": "abc"}))
    other = SimpleNamespace(endOffset='{"offset": 7}')
    p = SimpleNamespace(
        name=None,
        id="qid",
        runId="rid",
        batchId=3,
        numInputRows=42,
        durationMs={"triggerExecution": 1500},
        timestamp="t",
        sources=[src, other],
    )
    got = progress_of(p)
    assert (got.query, got.batch, got.rows, got.seconds, got.controller_names) == ("qid", 3, 42, 1.5, ("abc",))


def test_the_tuner_records_what_it_planned_after_each_judged_batch():
    from adaptstream.elasticity import ELASTICITY
    from adaptstream.spark.listener import Progress
    from adaptstream.tuner import Tuner

    asked: list[int] = []
    ctl = SimpleNamespace(executors=lambda: [], scale_to=lambda n: asked.append(n))
    params = "initial_map_tasks=1;initial_reduce_buckets=1;min_tasks=1;max_executors=3;d=1;grace=0"
    config = TunerConfig(elastic="prompt", latency_target=2.0)
    tuner = Tuner(SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]")), config)
    tuner.elasticity, tuner.executor_control = ELASTICITY.build("prompt", params).build(), ctl
    for batch, seconds in ((4, 3.0), (5, 3.0), (6, 0.1)):  # late, late, early against a 2-s target
        tuner._scale(Progress("q", "r", batch, 1000, seconds, "t", ()))
    plans = list(tuner.plans)
    assert [p[:2] for p in plans] == [["q", 4], ["q", 5], ["q", 6]]
    assert [p[2] for p in plans] == [2, 3, 2]  # out after each late batch, in after the early one
    assert asked and asked[0] == plans[0][2]  # what it planned is what it asked Spark for


def test_the_executor_timeline_is_sampled_between_batches_and_the_sampler_stops(monkeypatch):
    """An executor asked for after one batch registers while the next (possibly long) batch runs: the timeline
    sees it within a poll, not only when that batch ends."""
    import threading

    from adaptstream import tuner as tuner_mod

    counts, seen = [1, 1, 2, 2, 2], threading.Event()

    def size() -> int:
        n = counts.pop(0) if len(counts) > 1 else counts[0]
        if len(counts) == 1:
            seen.set()
        return n

    ids = SimpleNamespace(size=size)
    sc = SimpleNamespace(master="spark://127.0.0.1:7077", _jsc=SimpleNamespace(sc=lambda: SimpleNamespace(
        getExecutorIds=lambda: ids)))  # fmt: skip
    monkeypatch.setattr(tuner_mod, "EXECUTOR_POLL_S", 0.01)
    t = tuner_mod.Tuner(SimpleNamespace(sparkContext=sc), TunerConfig())
    watch = threading.Thread(target=t._watch_executors, daemon=True)
    watch.start()
    assert seen.wait(10), "the sampler never polled the executors"
    t._stop_watch.set()
    watch.join(10)
    assert not watch.is_alive()
    assert [n for _, n in t.executors] == [1, 2]  # one entry per change


def test_under_the_auto_target_each_query_is_judged_and_scaled_against_its_slide_or_trigger(monkeypatch):
    """Queries of 5-s and 10-s slides, one on a 3-s processing-time trigger and one with neither, in one
    application: a 7-s batch is late for the first and third, on time for the others, and Alg. 4 sees each batch
    against its own query's target (one target for all scaled against the slower queries' normal batches)."""
    from adaptstream import tuner as tuner_mod
    from adaptstream.spark.listener import Progress
    from adaptstream.tuner import DEFAULT_TARGET_S, Tuner, latency_target_value

    assert latency_target_value(" Auto ") == latency_target_value(None) == "auto"
    assert latency_target_value("2.5") == 2.5 and latency_target_value("auto", default=4.0) == 4.0
    asked: list[str] = []
    monkeypatch.setattr(tuner_mod, "trigger_interval", lambda spark, qid: asked.append(qid) or {"t": 3.0}.get(qid))
    seen: list = []
    plan = SimpleNamespace(executors=1)
    elasticity = SimpleNamespace(plan=plan, on_batch=lambda stats: seen.append(stats) or plan)
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]"))
    tuner = Tuner(spark, TunerConfig(elastic="prompt"))  # "auto" is the default
    tuner.elasticity = elasticity
    tuner.executor_control = SimpleNamespace(executors=lambda: [None], scale_to=lambda n: None)
    tuner._on_register("fast-src", {"main": (5.0, 1.0)})
    tuner._on_register("slow-src", {"main": (10.0, 1.0), "side": (20.0, 0.0)})
    names = ("fast", "slow", "timed", "plain")
    for _ in range(2):
        for query, src, qid in zip(names, ("fast-src", "slow-src", "csv", "csv"), ("f", "s", "t", "p"), strict=True):
            tuner._on_progress(Progress(query, "r", 1, 100, 7.0, "t", (src,), qid))
    out = {n: r.summary({}) for n, r in tuner.queries.items()}
    assert [out[n]["latency_target"] for n in names] == [5.0, 10.0, 3.0, DEFAULT_TARGET_S]
    # a slide's bound is MaxLat <= slide, about two batch times: its batches get half of it
    assert [out[n]["batch_target"] for n in names] == [2.5, 5.0, 3.0, DEFAULT_TARGET_S]
    assert [out[n]["within_target"] for n in names] == [0.0, 0.0, 0.0, 1.0]
    assert [s.batch_interval for s in seen[:4]] == [2.5, 5.0, 3.0, DEFAULT_TARGET_S]
    assert sorted(asked) == ["f", "p", "s", "t"]  # Spark asked once per query run, not per batch
    assert "target:plain" in tuner.warned  # said once in the log: it gave neither


def test_a_fixed_latency_target_applies_to_every_query():
    from adaptstream.spark.listener import Progress
    from adaptstream.tuner import Tuner

    tuner = Tuner(SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]")), TunerConfig(latency_target=2.0))
    tuner._on_register("fast-src", {"main": (5.0, 1.0)})
    tuner._on_progress(Progress("fast", "r", 1, 100, 3.0, "t", ("fast-src",), "f"))
    out = tuner.queries["fast"].summary({})
    assert (out["latency_target"], out["batch_target"], out["within_target"]) == (2.0, 2.0, 0.0)


def test_the_joint_loop_counts_the_slot_wait_and_slots_follow_the_executors():
    """Klink with one slot and four queries: batches that are short but waited for the slot are late for Alg. 4,
    which scales out, and the scheduler then grants as many concurrent batches as executors were planned."""
    import threading

    from adaptstream.elasticity import ELASTICITY
    from adaptstream.scheduling import build_scheduler
    from adaptstream.spark.listener import Progress
    from adaptstream.tuner import Tuner

    policy = build_scheduler("fcfs", slots=1)
    policy.register("src-b")
    policy.queries["src-b"].last_wait = 2.5  # it waited 2.5 s for the one slot before its latest grant
    lock = threading.Lock()
    controller = SimpleNamespace(policy=policy, lock=lock, changed=threading.Condition(lock))
    params = "initial_map_tasks=1;initial_reduce_buckets=1;min_tasks=1;max_executors=4;d=1;grace=0"
    for joint, planned, slots in ((True, 2, 2), (False, 1, 1)):
        policy.set_slots(1)
        t = Tuner(SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]")),
                  TunerConfig(scheduler="fcfs", elastic="prompt", latency_target=2.0, joint=joint))  # fmt: skip
        t.controller = controller
        t.elasticity = ELASTICITY.build("prompt", params).build()
        t.executor_control = SimpleNamespace(executors=lambda: [], scale_to=lambda n: None)
        t._scale(Progress("b", "r", 4, 1000, 1.0, "t", ("src-b",), "qb"), 2.0)  # 1 s batch + 2.5 s wait: late
        (plan,) = t.plans
        assert (plan[2], plan[3], policy.slots) == (planned, 2.5 if joint else 0.0, slots), joint


def test_sources_without_a_query_id_get_distinct_scheduler_names(tmp_path):
    """Every built-in workload's source keeps its state in <metricsPath>/source: named by that directory alone,
    four queries were one to the scheduler. The state directory's path is the name; a long one is cut to the
    controller's limit and stays distinct."""
    from adaptstream.control.messages import MAX_NAME
    from adaptstream.spark.datasource import state_name

    a, b = (str(tmp_path / q / "metrics" / "source") for q in ("LR1S", "CM2S"))
    assert state_name(a) != state_name(b) and state_name(a + "/") == state_name(a) == a
    deep = [str(tmp_path / ("x" * 150) / q / "source") for q in ("LR1S", "CM2S")]
    names = [state_name(d) for d in deep]
    assert names[0] != names[1] and all(len(n) <= MAX_NAME for n in names)
