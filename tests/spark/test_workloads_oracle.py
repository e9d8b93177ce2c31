"""Every LMStream workload and the DEBS 2015 taxi windows: the streaming result (append mode, several
micro-batches) equals its batch SQL oracle.

Input: a few dozen one-second datasets written by the workload's generator plus the end-of-stream sentinel,
streamed through ``format("adaptstream")`` (files connector, at most 10 datasets per micro-batch, admission
asap): the source's delivery and the query's semantics are checked together against the batch SQL oracle.
"""

from __future__ import annotations

import pytest

from adaptstream.metrics.summary import load_batches
from adaptstream.workloads import WORKLOADS, LinearRoadGeneratorConfig, build_generator, write_dataset, write_run
from adaptstream.workloads.io import dataset_file_name
from adaptstream.workloads.oracle import assert_stream_equals_batch, file_stream_factory, read_static

pytestmark = pytest.mark.spark

INPUTS = {  # generator -> (seconds, rows per second)
    "linear_road": (25, 120),
    "task_events": (55, 400),  # 22,000 rows: the 20,000-row trace replay, then fitted rows
    "debs_rides": (35, 300),  # 10,500 rows: the 10,000-ride sample wraps around
}


def _write_input(tmp_dir, generator_name: str) -> str:
    seconds, rate = INPUTS[generator_name]
    if generator_name == "linear_road":  # dense traffic so that LR2's slow-segment filter keeps some rows
        gen = LinearRoadGeneratorConfig(seed=11, segment_capacity=15.0).build()
    else:
        gen = build_generator(generator_name, seed=11)
    paths = write_run(gen, None, tmp_dir, [rate] * seconds)
    # one sentinel late enough for every workload of this generator (the tumbling ones need the most)
    wl = max(
        (w for w in map(WORKLOADS.get, WORKLOADS.names()) if w.generator == generator_name),
        key=lambda w: w.window_s + w.effective_slide_s,
    )
    write_dataset(
        wl.sentinel(after_second=seconds - 1),
        tmp_dir / dataset_file_name(seconds),
        "csv",
        gen.csv_header(),
        mtime=paths[-1].stat().st_mtime + 1,
    )
    return str(tmp_dir)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    return {g: _write_input(tmp_path_factory.mktemp(g), g) for g in INPUTS}


def adaptstream_factory(spark, workload, input_dir: str, metrics_dir: str, admission: str = "asap"):
    ddl = workload.generator_class().spark_schema_ddl

    def make():
        return (
            spark.readStream.format("adaptstream")
            .schema(ddl)
            .option("path", input_dir)
            .option("admission", admission)
            .option("slide", str(workload.lmstream_slide))
            .option("maxDatasetsPerBatch", "10")
            .option("metricsPath", metrics_dir)
            .load()
        )

    return make


@pytest.mark.parametrize("name", ["LR1S", "LR1T", "LR2S", "CM1S", "CM1T", "CM2S", "DEBS", "DEBSP"])
def test_stream_equals_batch_oracle(spark, inputs, tmp_path, name: str) -> None:
    w = WORKLOADS.get(name)
    src = inputs[w.generator]
    factory = adaptstream_factory(spark, w, src, str(tmp_path / "metrics"))
    result = assert_stream_equals_batch(spark, w, src, factory)
    assert len(result.batch_rows) > 0, "the oracle must have something to compare"
    assert len(result.stream_batches) >= 4  # several micro-batches, not one
    if name.startswith("CM1"):  # ORDER BY SUM(cpu) holds within every micro-batch's output
        idx = result.columns.index("totalCpu")
        for batch in result.stream_batches:
            values = [r[idx] for r in batch]
            assert values == sorted(values, key=lambda v: (v is not None, v))
    if name == "LR1S":  # each report appears in every one of the 6 sliding windows that contain it
        assert len(result.batch_rows) % 6 == 0
    # the source planned each range (twice for the self-joins) after admitting it, and accounted every dataset
    batches = load_batches(str(tmp_path / "metrics"))
    assert (batches["planned_at"] > batches["admitted_at"]).all()
    assert batches["rows"].sum() == len(read_static(spark, w, src).collect())


@pytest.mark.parametrize("name", ["LR2S", "CM2S"])
def test_spark_file_source_equals_batch_oracle(spark, inputs, name: str) -> None:
    """Spark's own CSV file source pushes filters into the scan: the sentinel must still reach the watermark."""
    w = WORKLOADS.get(name)
    src = inputs[w.generator]
    result = assert_stream_equals_batch(spark, w, src, file_stream_factory(spark, w, src, max_files_per_trigger=10))
    assert len(result.batch_rows) > 0 and len(result.stream_batches) >= 4


def test_the_elastic_benchs_app_route_query_equals_lr2s_batch_oracle(spark, inputs, tmp_path) -> None:
    """``bench prompt-elastic --route app`` runs LR2S behind a per-row UDF (synthetic work): its streaming result
    must still equal LR2S's batch SQL over the same rows."""
    from adaptstream_bench.elastic_app import worked_workload

    w = WORKLOADS.get(worked_workload(3))
    assert w.rounds == 3 and w.window_s == WORKLOADS.get("LR2S").window_s
    src = inputs[w.generator]
    result = assert_stream_equals_batch(spark, w, src, adaptstream_factory(spark, w, src, str(tmp_path / "m")))
    assert len(result.batch_rows) > 0 and len(result.stream_batches) >= 4
