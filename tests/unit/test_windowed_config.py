"""The windowed-aggregation config without Spark: what the pane mode can compute, and clear errors for the rest."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from adaptstream.errors import ConfigError
from adaptstream.spark.windowed import WindowedConfig, check_device, check_trigger, ends_input

SCHEMA = StructType(
    [
        StructField("k", StringType()),
        StructField("ts", TimestampType()),
        StructField("v", IntegerType()),
        StructField("x", DoubleType()),
        StructField("tags", ArrayType(StringType())),
        StructField("local", TimestampNTZType()),
    ]
)


def _config(**kw):
    args = {"keys": "k", "time": "ts", "window": "30 seconds", "slide": None, "aggs": {"v": "sum"}, "watermark": 0}
    return WindowedConfig.of(**{**args, **kw})


def test_spec_partials_finals_and_output_columns():
    c = _config(slide="10 s", aggs={"v": ["avg", "MAX"], "x": "count"}, watermark="5 seconds")
    spec = c.spec(SCHEMA)
    assert (spec.window, spec.slide, spec.delay) == (30_000_000, 10_000_000, 5_000_000)
    assert spec.values == ("v", "x") and spec.extrema == ("v",)
    assert [n for n, _ in spec.finals] == ["v_avg", "v_max", "x_count"]
    assert c.output_columns() == ["window_start", "window_end", "k", "v_avg", "v_max", "x_count"]
    assert "n_v > 0" in dict(spec.finals)["v_avg"]  # an all-null group averages to null, never divides by 0
    assert _config().slide_us == _config().window_us  # tumbling by default


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"aggs": {"v": ["median"]}}, r"median.*not decomposable.*valid: avg, count, sum, min, max"),
        ({"aggs": {"v": "count_distinct"}}, r"not decomposable"),
        ({"aggs": {}}, r"aggs must map"),
        ({"slide": "20 seconds"}, r"multiple of slide"),
        ({"slide": "40 seconds"}, r"multiple of slide"),
        ({"window": "0"}, r"positive"),
        ({"window": "ten"}, r"window: cannot read a duration"),
        ({"keys": []}, r"non-empty list"),
    ],
)
def test_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        _config(**kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"keys": ["k", "nope"]}, r"\['nope'\] not in the stream; its columns"),
        ({"keys": "tags"}, r"arrays, maps or structs"),
        ({"time": "local"}, r"TimestampNTZType, not TIMESTAMP"),
        ({"time": "v"}, r"not TIMESTAMP"),
        ({"aggs": {"k": "max"}}, r"not numeric"),
        ({"keys": "v_sum"}, r"not in the stream"),
    ],
)
def test_schema_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        _config(**kw).spec(SCHEMA)


def test_output_name_clash_is_refused():
    schema = StructType([*SCHEMA.fields, StructField("v_sum", StringType())])
    with pytest.raises(ConfigError, match=r"\['v_sum'\] would appear twice"):
        _config(keys="v_sum").spec(schema)


def test_device_and_trigger():
    assert check_device("auto") == "cpu" and check_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="not run on a GPU inside Spark tasks yet"):
        check_device("gpu")
    with pytest.raises(ConfigError, match="valid: cpu, auto, gpu"):
        check_device("tpu")
    assert check_trigger({"availableNow": True}) == {"availableNow": True}
    with pytest.raises(ConfigError, match="availableNow"):
        check_trigger({"once": True})
    with pytest.raises(ConfigError, match="not supported"):
        check_trigger({"continuous": "1 second"})


def test_ends_input_reads_the_checkpoint_offsets(tmp_path):
    (tmp_path / "offsets").mkdir()
    mark = '{"seq": 3, "state": "/s", "availableNowEnd": true}'
    (tmp_path / "offsets" / "4").write_text(f'v1\n{{"batchWatermarkMs":0}}\n{mark}\n')
    (tmp_path / "offsets" / "5").write_text(f'v1\n{{}}\n{mark}\n{{"seq": 1, "state": "/t"}}\n')
    (tmp_path / "offsets" / "6").write_text('v1\n{}\n{"offset": 7}\n')  # no adaptstream source
    assert ends_input(str(tmp_path), 4)
    assert not ends_input(str(tmp_path), 5)  # the second source has more to read
    assert not ends_input(str(tmp_path), 6)
    assert not ends_input(str(tmp_path), 9)


def test_reduce_buckets_follow_the_tuners_elasticity_plan_unless_given(monkeypatch):
    from types import SimpleNamespace

    import adaptstream.tuner
    from adaptstream.spark.windowed import _buckets_hook

    spark = SimpleNamespace(conf=SimpleNamespace(get=lambda key: {"spark.sql.shuffle.partitions": "3"}[key]))
    monkeypatch.setattr(adaptstream.tuner, "running_tuner", lambda _spark: None)
    assert _buckets_hook(spark, None) == (3, None)  # no tuner: Spark's shuffle partitions
    assert _buckets_hook(spark, 6) == (6, None)
    plan = SimpleNamespace(reduce_buckets=5)
    tuner = SimpleNamespace(elasticity=SimpleNamespace(plan=plan))
    monkeypatch.setattr(adaptstream.tuner, "running_tuner", lambda _spark: tuner)
    buckets, follow = _buckets_hook(spark, None)
    assert buckets == 5 and follow is not None
    plan.reduce_buckets = 9  # the policy's next plan: the next batch's buckets
    assert follow() == 9
    assert _buckets_hook(spark, 2) == (2, None)  # given explicitly: fixed
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ConfigError, match="positive integer"):
            _buckets_hook(spark, bad)
