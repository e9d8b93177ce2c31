"""Pane execution mode (spark/pane.py): every allocator's windowed results equal the batch SQL oracle, across many
micro-batches, after a restart from the checkpoint and after a SIGKILL between the sink's writes and Spark's
commit; reduce buckets are exactly the allocator's; reduce-stage task metrics come from Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adaptstream.elasticity.base import BatchStats, ElasticityPolicy, ExecutionPlan
from adaptstream.spark.pane import PaneExecutor, bucket_route, read_results
from adaptstream.workloads import WORKLOADS, LinearRoadGeneratorConfig, build_generator, write_dataset, write_run
from adaptstream.workloads.io import dataset_file_name
from adaptstream.workloads.oracle import compare_multisets, read_static

pytestmark = pytest.mark.spark


def _generator(name: str):
    if name == "linear_road":  # dense traffic so that LR2's slow-segment filter keeps some rows
        return LinearRoadGeneratorConfig(seed=11, segment_capacity=15.0).build(), 25, 120
    return build_generator(name, seed=11), 55, 300


def _write_input(out: Path, workload, seconds: int | None = None) -> None:
    gen, default_seconds, rate = _generator(workload.generator)
    write_run(gen, workload, out, [rate] * (seconds or default_seconds))


def _stream(
    spark,
    workload,
    input_dir: str,
    ex: PaneExecutor,
    work: Path,
    blocks: int = 3,
    partitioner: str = "hash",
    extra: dict[str, str] | None = None,
):
    reader = (
        spark.readStream.format("adaptstream")
        .schema(workload.generator_class().spark_schema_ddl)
        .option("path", input_dir)
        .option("admission", "asap")
        .option("maxDatasetsPerBatch", "6")
        .option("metricsPath", str(work / "source-metrics"))
        .option("fileStableSeconds", "0")
    )
    if partitioner != "time":
        reader = reader.option("partitioner", partitioner).option("partitionKey", ",".join(workload.key_columns))
    for k, v in (extra or {}).items():
        reader = reader.option(k, v)
    df = reader.option("numBlocks", str(blocks)).load()
    q = df.writeStream.foreachBatch(ex).option("checkpointLocation", str(work / "checkpoint")).start()
    try:
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()


def _oracle(spark, workload, input_dir: str) -> list[tuple]:
    return [tuple(r) for r in workload.batch_query(read_static(spark, workload, input_dir)).collect()]


@pytest.mark.parametrize(
    ("name", "allocator", "partitioner"),
    [
        ("LR2S", "hash", "time"),
        ("LR2S", "prompt", "hash"),
        ("LR2S", "split", "time"),  # hot keys split over buckets, merged when the window closes
        pytest.param("CM2S", "split", "pk2", marks=pytest.mark.slow),
        pytest.param("CM1S", "prompt", "pk2", marks=pytest.mark.slow),
        pytest.param("CM2S", "prompt", "time", marks=pytest.mark.slow),
        pytest.param("CM1T", "hash", "cam", marks=pytest.mark.slow),
    ],
)
def test_pane_mode_equals_batch_oracle(spark, tmp_path, name, allocator, partitioner):
    w = WORKLOADS.get(name)
    _write_input(tmp_path / "in", w)
    ex = PaneExecutor(w, allocator, 3, str(tmp_path / "state"), str(tmp_path / "results"), str(tmp_path / "metrics"))
    _stream(spark, w, str(tmp_path / "in"), ex, tmp_path, partitioner=partitioner)
    got, want = read_results(spark, str(tmp_path / "results")), _oracle(spark, w, str(tmp_path / "in"))
    assert want, "the oracle must have something to compare"
    assert compare_multisets(got, want) == []
    stats = [json.loads(line) for line in (tmp_path / "metrics" / "panes.jsonl").read_text().splitlines()]
    data = [s for s in stats if s["rows"]]
    assert len(data) >= 4  # many micro-batches, each a map/reduce job
    if not w.tumbling:  # windows close in several batches, not only at the end
        assert sum(s["windows"] > 0 for s in stats) >= 2
    for s in data:  # Spark's own task metrics: R reduce tasks that together read every data row of the batch
        assert len(s["reduce_tasks"]) == 3
        assert sum(t["shuffle_records"] for t in s["reduce_tasks"]) == s["rows"]


def test_restart_from_checkpoint_and_replayed_batch(spark, tmp_path):
    """Half the input, stop; the rest, restart from the checkpoint; then Spark's last commit is removed, so it
    replays that batch on the next start: every window exactly once, equal to the oracle."""
    w = WORKLOADS.get("LR2S")
    gen, seconds, rate = _generator(w.generator)
    src = tmp_path / "in"
    src.mkdir()
    half = seconds * 3 // 4  # the first stop comes after some windows closed
    paths = write_run(gen, None, src, [rate] * half)
    work = tmp_path / "work"

    def executor():
        return PaneExecutor(w, "prompt", 3, str(work / "state"), str(work / "results"), str(work / "metrics"))

    _stream(spark, w, str(src), executor(), work)
    first = len(read_results(spark, str(work / "results")))
    first_batches = [json.loads(x)["batch"] for x in (work / "metrics" / "panes.jsonl").read_text().splitlines()]
    mtime = paths[-1].stat().st_mtime
    for k in range(half, seconds):
        write_dataset(gen.generate(k, rate), src / dataset_file_name(k), "csv", gen.csv_header(), mtime=mtime + k)
    write_dataset(
        w.sentinel(seconds - 1), src / dataset_file_name(seconds), "csv", gen.csv_header(), mtime=mtime + seconds + 1
    )
    _stream(spark, w, str(src), executor(), work)
    got, want = read_results(spark, str(work / "results")), _oracle(spark, w, str(src))
    assert first < len(want) and first_batches
    later = [json.loads(x)["batch"] for x in (work / "metrics" / "panes.jsonl").read_text().splitlines()]
    assert later[len(first_batches)] == first_batches[-1] + 1  # resumed from the checkpoint, not from scratch
    assert compare_multisets(got, want) == []
    commits = sorted((work / "checkpoint" / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()  # as if the driver died after the sink wrote and before Spark committed
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    before = len((work / "metrics" / "panes.jsonl").read_text().splitlines())
    _stream(spark, w, str(src), executor(), work)
    replayed = (work / "metrics" / "panes.jsonl").read_text().splitlines()[before:]
    assert [json.loads(x)["batch"] for x in replayed][:1] == [int(last.name)]
    assert compare_multisets(read_results(spark, str(work / "results")), want) == []


@pytest.mark.slow
def test_sigkill_of_the_driver_between_write_and_commit(spark, tmp_path):
    """A real kill -9 of the driver process inside foreachBatch, then a restart: results equal the oracle."""
    w = WORKLOADS.get("CM1S")
    _write_input(tmp_path / "in", w, seconds=24)  # 4 batches of 6 datasets: killed in the third, two after restart
    work = tmp_path / "work"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "SPARK_LOCAL_IP": "127.0.0.1"}
    driver = [
        sys.executable,
        str(Path(__file__).with_name("pane_driver.py")),
        "CM1S",
        "prompt",
        str(tmp_path / "in"),
        str(work),
    ]
    killed = subprocess.run([*driver, "2"], env=env, capture_output=True, timeout=600, check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]
    done_before = len((work / "metrics" / "panes.jsonl").read_text().splitlines())
    finished = subprocess.run(driver, env=env, capture_output=True, timeout=600, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    stats = [json.loads(x) for x in (work / "metrics" / "panes.jsonl").read_text().splitlines()]
    killed_batch = stats[done_before - 1]["batch"]
    assert stats[done_before]["batch"] == killed_batch  # Spark replayed the batch the kill interrupted
    got, want = read_results(spark, str(work / "results")), _oracle(spark, w, str(tmp_path / "in"))
    assert compare_multisets(got, want) == []


class _CyclingPlan(ElasticityPolicy):
    """A scripted elasticity policy: map tasks 2, 4, 3, 2, 4, ... one step per completed batch."""

    name = "cycling"
    steps = (2, 4, 3)

    def __init__(self) -> None:
        self.i = 0

    @property
    def plan(self) -> ExecutionPlan:
        return ExecutionPlan(self.steps[self.i % len(self.steps)], 3, 1)

    def on_batch(self, stats: BatchStats) -> ExecutionPlan:
        self.i += 1
        return self.plan

    def _state(self) -> dict:
        return {"i": self.i}

    def _load_state(self, state) -> None:
        self.i = int(state["i"])


def test_elastic_map_tasks_reach_the_next_batch(spark, tmp_path):
    """Alg. 4's map-task decision after batch i is the number of Spark input partitions of batch i+1 (the source
    reads the pane executor's blocks file), and the results still equal the oracle."""
    w = WORKLOADS.get("LR2S")
    _write_input(tmp_path / "in", w)
    blocks_file = tmp_path / "state" / "map_tasks.json"
    ex = PaneExecutor(
        w,
        "prompt",
        3,
        str(tmp_path / "state"),
        str(tmp_path / "results"),
        str(tmp_path / "metrics"),
        elastic=_CyclingPlan(),
        blocks_file=str(blocks_file),
    )
    _stream(
        spark,
        w,
        str(tmp_path / "in"),
        ex,
        tmp_path,
        blocks=5,
        partitioner="time",
        extra={"blocksFile": str(blocks_file)},
    )
    assert (
        compare_multisets(read_results(spark, str(tmp_path / "results")), _oracle(spark, w, str(tmp_path / "in"))) == []
    )
    stats = [json.loads(line) for line in (tmp_path / "metrics" / "panes.jsonl").read_text().splitlines()]
    planned = [_CyclingPlan.steps[0]] + [s["elastic"]["map_tasks"] for s in stats[:-1]]
    data = [(s, want) for s, want in zip(stats, planned, strict=True) if s["rows"]]
    assert len(data) >= 4
    for s, want in data[:-1]:  # the last batch may hold fewer datasets than blocks (a dataset is never split)
        assert s["map_tasks"] == want, (s["batch"], s["map_tasks"], want)
    assert len({s["map_tasks"] for s, _ in data[:-1]}) >= 2  # the count changed between batches, never 5
    assert json.loads(blocks_file.read_text())["after_batch"] == stats[-1]["batch"]


def test_panes_of_closed_windows_are_dropped(tmp_path):
    """Only batches whose every pane's windows ended before the watermark the batch started from go."""
    w = WORKLOADS.get("LR2S")  # 30 s windows
    ex = PaneExecutor(w, "hash", 2, str(tmp_path / "state"), str(tmp_path / "results"))
    for b, max_pane in enumerate([100, 120, 140, None]):
        os.makedirs(tmp_path / "state" / "panes" / f"batch_id={b}")
        meta = {"batch": b, "max_t_through": None, "wm": None, "max_pane": max_pane}
        (tmp_path / "state" / "meta" / f"{b}.json").write_text(json.dumps(meta))
    ex._collect_garbage(wm_prev=150, batch_id=4)  # 100 + 30 <= 150, 120 + 30 <= 150; 140 + 30 > 150
    assert sorted(os.listdir(tmp_path / "state" / "panes")) == ["batch_id=2"]


@pytest.mark.parametrize("buckets", [1, 3, 7])
def test_route_values_land_in_their_bucket(spark, buckets):
    route = bucket_route(spark, buckets)
    df = spark.createDataFrame([(b, v) for b, v in enumerate(route)] * 3, "b INT, pk BIGINT")
    got = df.repartition(buckets, "pk").selectExpr("b", "spark_partition_id() AS p").distinct().collect()
    assert sorted((r["b"], r["p"]) for r in got) == [(b, b) for b in range(buckets)]
