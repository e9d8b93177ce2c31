"""``adaptstream.windowed_aggregate`` on a user's schema: every allocator's windows equal plain batch SQL over the
same rows (the oracle), finite input ends with every window emitted, late and untimed rows are counted."""

from __future__ import annotations

import json
import os

import pytest

import adaptstream
from adaptstream.errors import ConfigError

SCHEMA = "k STRING, ts TIMESTAMP, v INT"
AGGS = {"v": ["avg", "count", "sum", "min", "max"]}
ORACLE = """SELECT window.start AS window_start, window.end AS window_end, k, avg(v) AS v_avg, count(v) AS v_count,
    sum(v) AS v_sum, min(v) AS v_min, max(v) AS v_max
    FROM {view} WHERE ts IS NOT NULL GROUP BY window(ts, '{w}', '{s}'), k"""


def _field(x) -> str:
    return "" if x is None else str(x)


def _csv(path, rows) -> None:
    """Rows (key, second of 2024-01-01 or None, value or None); None is the empty field (null)."""
    with open(path, "w") as f:
        for k, t, v in rows:
            ts = None if t is None else f"2024-01-01 00:{t // 60:02d}:{t % 60:02d}"
            f.write(f"{k},{_field(ts)},{_field(v)}\n")


def _rows(n: int, seed: int, hot: float = 0.0, start: int = 0, span: int = 180) -> list[tuple]:
    """n rows over ``span`` seconds from ``start``, out of order within them; a share ``hot`` has key "hot"; v has
    nulls."""
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = "hot" if rnd.random() < hot else f"k{rnd.randrange(12)}"
        out.append((k, start + rnd.randrange(span), None if i % 17 == 0 else rnd.randrange(-50, 1000)))
    return out


def _stream(spark, src, **opts):
    reader = spark.readStream.format("adaptstream").schema(SCHEMA).option("path", str(src))
    reader = reader.option("fileStableSeconds", "0").option("numBlocks", "3")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def _norm(rows) -> list[tuple]:
    return sorted(tuple(round(x, 9) if isinstance(x, float) else x for x in r) for r in rows)


def _oracle(spark, src, w="30 seconds", s="10 seconds") -> list[tuple]:
    spark.read.schema(SCHEMA).csv(str(src)).createOrReplaceTempView("windowed_oracle")
    return _norm(spark.sql(ORACLE.format(view="windowed_oracle", w=w, s=s)).collect())


def _sink_rows(spark, sink) -> list[tuple]:
    return _norm(spark.read.parquet(str(sink)).drop("batch_id").collect())


@pytest.mark.parametrize("reduce", ["hash", "prompt", "split"])
def test_each_allocator_equals_batch_sql_and_finite_input_emits_every_window(spark, tmp_path, reduce):
    src = tmp_path / "in"
    src.mkdir()
    _csv(src / "a.csv", _rows(600, 1, hot=0.6))  # one key is 60 % of the rows: split spreads it over buckets
    _csv(src / "b.csv", _rows(400, 2, start=180))  # after a.csv's watermark: none late
    sink, ck = tmp_path / "out", tmp_path / "ck"
    q = adaptstream.windowed_aggregate(
        _stream(spark, src, maxFilesPerTrigger="1"),
        keys="k",
        time="ts",
        window="30 seconds",
        slide="10 seconds",
        aggs=AGGS,
        sink=str(sink),
        reduce=reduce,
        reduce_buckets=4,
        watermark="5 seconds",
        checkpoint=str(ck),
        trigger={"availableNow": True},
    )
    q.awaitTermination(120)
    assert not q.isActive
    got = _sink_rows(spark, sink)
    assert got == _oracle(spark, src)
    assert spark.read.parquet(str(sink)).columns[:8] == [
        "window_start",
        "window_end",
        "k",
        "v_avg",
        "v_count",
        "v_sum",
        "v_min",
        "v_max",
    ]
    stats = adaptstream.windowed_stats(str(ck))
    assert stats == {"batches": 2, "rows": 1000, "late": 0, "untimed": 0, "windows": len(got)}
    with open(ck / "adaptstream" / "metrics" / "panes.jsonl") as f:
        batches = [json.loads(line) for line in f]
    assert [b["reduce_buckets"] for b in batches] == [4, 4]
    if reduce == "split":  # the hot key's tuples are spread: no reduce task holds most of the batch
        first = batches[0]["reduce_tasks"]
        assert max(t["shuffle_records"] for t in first) < 0.6 * sum(t["shuffle_records"] for t in first)


def test_function_sink_late_and_untimed_rows_counted_across_a_restart(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    first = [("a", 100, 1), ("b", 110, 2), ("a", 125, 3), ("c", None, 9)]
    _csv(src / "1.csv", first)
    ck = tmp_path / "ck"
    seen: list[tuple[int, list]] = []

    def run() -> None:
        q = adaptstream.windowed_aggregate(
            _stream(spark, src),
            keys=["k"],
            time="ts",
            window="20 seconds",
            aggs={"v": "sum"},
            sink=lambda df, batch_id: seen.append((batch_id, sorted(tuple(r) for r in df.collect()))),
            checkpoint=str(ck),
            trigger={"availableNow": True},
        )
        q.awaitTermination(120)
        assert not q.isActive

    run()
    windows = [r for _, rows in seen for r in rows]
    assert [r[2:] for r in windows] == [("a", 1), ("b", 2), ("a", 3)]  # every window, at the end of the input
    assert adaptstream.windowed_stats(str(ck))["untimed"] == 1
    # the end of the first input moved the watermark past its last window: rows before it are late, counted
    _csv(src / "2.csv", [("a", 101, 5), ("b", 141, 7), ("a", 179, 8)])
    run()
    stats = adaptstream.windowed_stats(str(ck))
    assert (stats["rows"], stats["late"], stats["untimed"]) == (5, 1, 1)
    later = [r[2:] for b, rows in seen[1:] for r in rows]
    assert later == [("b", 7), ("a", 8)]
    assert seen[-1][0] == 1  # the second run's batch id follows the first's


def test_drained_source_emits_every_window_and_the_query_stops_without_available_now(spark, tmp_path):
    """The source's ``drain`` (sealed by an empty end-of-input file) ends a query on Spark's default trigger: the
    batch that reads the end emits every window, whatever the watermark, and the query stops itself."""
    src = tmp_path / "in"
    src.mkdir()
    _csv(src / "a.csv", _rows(300, 3))
    _csv(src / "b.csv", _rows(200, 4, start=180))
    end = tmp_path / "end.csv"
    end.write_text("")
    sink, ck = tmp_path / "out", tmp_path / "ck"
    q = adaptstream.windowed_aggregate(
        _stream(spark, src, maxFilesPerTrigger="1", drain="true", sentinelPath=str(end)),
        keys="k",
        time="ts",
        window="30 seconds",
        slide="10 seconds",
        aggs=AGGS,
        sink=str(sink),
        reduce="split",
        reduce_buckets=3,
        watermark="1 hour",  # no window would close before the end of the input
        checkpoint=str(ck),
    )
    assert q.awaitTermination(120), "the drained query did not stop"
    assert q.exception() is None
    assert _sink_rows(spark, sink) == _oracle(spark, src)
    assert adaptstream.windowed_stats(str(ck))["rows"] == 500
    assert not spark.streams.active


def _temp_checkpoints() -> set[str]:
    import glob
    import tempfile

    return set(glob.glob(os.path.join(tempfile.gettempdir(), "adaptstream-windowed-*")))


def test_a_temporary_checkpoint_is_removed_when_the_query_ends(spark, tmp_path):
    """No ``checkpoint``: a temporary one, deleted once the query ends without an error (as Spark does)."""
    from adaptstream.spark.listener import wait_for_listeners

    src = tmp_path / "in"
    src.mkdir()
    _csv(src / "a.csv", _rows(50, 5))
    before, seen = _temp_checkpoints(), []
    q = adaptstream.windowed_aggregate(
        _stream(spark, src), keys="k", time="ts", window="30 seconds", aggs={"v": "sum"},
        sink=lambda df: seen.append(df.count()), trigger={"availableNow": True},
    )  # fmt: skip
    assert _temp_checkpoints() - before, "no temporary checkpoint was made"
    q.awaitTermination(120)
    assert not q.isActive and q.exception() is None and sum(seen) > 0
    wait_for_listeners(spark)
    assert _temp_checkpoints() - before == set()


def test_user_errors_are_config_errors(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    df = _stream(spark, src)
    before = _temp_checkpoints()
    common = {"keys": "k", "time": "ts", "window": "30 seconds", "sink": str(tmp_path / "o")}
    with pytest.raises(ConfigError, match=r"not in the stream"):
        adaptstream.windowed_aggregate(df, **{**common, "keys": "nope"}, aggs={"v": "sum"})
    with pytest.raises(ConfigError, match=r"not decomposable.*avg, count, sum, min, max"):
        adaptstream.windowed_aggregate(df, **common, aggs={"v": ["median"]})
    with pytest.raises(ConfigError, match=r"multiple of slide"):
        adaptstream.windowed_aggregate(df, **common, slide="20 seconds", aggs={"v": "sum"})
    with pytest.raises(ConfigError, match=r"not TIMESTAMP"):
        adaptstream.windowed_aggregate(df, **{**common, "time": "v"}, aggs={"v": "sum"})
    with pytest.raises(ConfigError, match=r"not numeric"):
        adaptstream.windowed_aggregate(df, **common, aggs={"k": "max"})
    with pytest.raises(ConfigError, match=r"valid choices: hash"):
        adaptstream.windowed_aggregate(df, **common, aggs={"v": "sum"}, reduce="nope")
    with pytest.raises(ConfigError, match=r"streaming DataFrame"):
        adaptstream.windowed_aggregate(spark.range(3), **common, aggs={"v": "sum"})
    assert not spark.streams.active
    assert _temp_checkpoints() == before  # a refused call leaves no temporary checkpoint behind


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [0, 1])
def test_kill_9_inside_a_batch_and_restart_give_each_window_once(spark, tmp_path, kill_at):
    """SIGKILL after a batch's windows reached the sink but before Spark committed it: the restart replays the
    batch (the sink overwrites its batch id) and the windows equal batch SQL, none missing, none twice. Batch 0
    too: there Spark asks the restarted source for its initial offset again, and the offsets log's query wins
    (found by ``bench chaos``: the restart failed with 'offset 1 is beyond the manifest (0 datasets)')."""
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        _csv(src / f"{i}.csv", _rows(150, 10 + i, hot=0.5, start=60 * i, span=60))
    out, ck = tmp_path / "out", tmp_path / "ck"
    here = Path(__file__).resolve()
    env = {**os.environ, "PYTHONPATH": str(here.parents[2] / "src"), "SPARK_LOCAL_IP": "127.0.0.1"}
    driver = [sys.executable, str(here.with_name("windowed_driver.py")), str(src), str(out), str(ck)]
    killed = subprocess.run([*driver, str(kill_at)], env=env, capture_output=True, timeout=600, check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (ck / "commits" / str(kill_at)).exists()  # the batch was not committed
    finished = subprocess.run(driver, env=env, capture_output=True, timeout=600, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    got = _sink_rows(spark, out)
    want = _oracle(spark, src, w="20 seconds", s="10 seconds")
    assert got == sorted(tuple(r[i] for i in (0, 1, 2, 5, 4, 7)) for r in want)  # window, k, sum, count, max
    assert adaptstream.windowed_stats(str(ck))["late"] == 0
