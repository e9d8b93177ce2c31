"""Every partitioner on small hand-checked inputs, against plain-Python references, and golden traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from adaptstream.errors import ConfigError, PartitioningError, UnknownNameError
from adaptstream.partitioning import MAIN_NAMES, PARTITIONERS, build_partitioner, key_hash
from adaptstream.partitioning._kernels import block_of
from adaptstream.partitioning.hll import BlockHLL, hll_count
from adaptstream.partitioning.metrics import batch_report
from adaptstream.partitioning.time import TimePartitioner

from .golden.make_golden import NUM_BLOCKS, golden_keys, traces
from .reference import reference_assign

GOLDEN = Path(__file__).parent / "golden" / "traces.json"


def test_registry_names_and_errors():
    for name in MAIN_NAMES:
        assert name in PARTITIONERS
    with pytest.raises(UnknownNameError, match="valid choices: am, am-hll"):
        build_partitioner("nope")
    with pytest.raises(ConfigError, match="no parameter"):
        build_partitioner("hash", choices=3)
    assert build_partitioner("pk2").choices == 2
    assert build_partitioner("pk5").choices == 5
    assert build_partitioner("am", cardinality="hll").name == "am-hll"


def test_assign_validates_arguments():
    p = build_partitioner("hash")
    with pytest.raises(PartitioningError):
        p.assign(np.arange(3), 0)
    with pytest.raises(PartitioningError):
        p.assign(np.array([1.5, 2.5]), 2)
    assert p.assign(np.array([], dtype=np.int64), 3).shape == (0,)


def test_shuffle_round_robin_carries_offset():
    p = build_partitioner("shuffle")
    assert p.assign(np.arange(7), 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert p.assign(np.arange(2), 3).tolist() == [1, 2]


def test_hash_same_key_same_block_across_instances():
    keys = np.array([5, 9, 5, 11, 9, 5])
    a = build_partitioner("hash").assign(keys, 4)
    b = build_partitioner("hash").assign(keys, 4)
    assert a.tolist() == b.tolist()
    assert a[0] == a[2] == a[5] and a[1] == a[4]


def test_time_blocks_follow_arrival_times():
    p = TimePartitioner()
    p.set_arrival_times(np.array([0.0, 0.1, 0.2, 0.6, 0.9, 0.95]), 0.0, 1.0)
    # two block intervals [0, .5) and [.5, 1): a bursty first half makes the first block bigger
    assert p.assign(np.arange(6), 2).tolist() == [0, 0, 0, 1, 1, 1]
    p.set_arrival_times(np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.9]), 0.0, 1.0)
    assert p.assign(np.arange(6), 2).tolist() == [0, 0, 0, 0, 0, 1]
    # without arrival information: constant rate -> contiguous equal ranges
    assert p.assign(np.arange(6), 3).tolist() == [0, 0, 1, 1, 2, 2]


def test_time_uses_observe_chunks():
    p = build_partitioner("time")
    p.observe(np.arange(4))
    p.observe(np.arange(4))
    out = p.assign(np.arange(8), 2)
    assert out[:4].tolist() == [out[0]] * 4 and out.max() <= 1


@pytest.mark.parametrize("mode", ["pk", "cm", "am", "cam", "lm"])
@pytest.mark.parametrize("choices", [2, 5])
def test_online_kernel_matches_python_reference(mode, choices):
    keys = np.random.default_rng(3).zipf(1.3, 3000).astype(np.int64)
    name = f"pk{choices}" if mode == "pk" else mode
    params = {} if mode == "pk" else {"choices": choices}
    got = build_partitioner(name, **params).assign(keys, 6)
    want = reference_assign(mode, keys, 6, choices)
    assert got.tolist() == want.tolist()


def test_pk2_hand_trace():
    # one key repeated: PK alternates between its two candidates by least load
    keys = np.full(6, 42, dtype=np.int64)
    c1, c2 = int(block_of(keys[:1], 1, 8)[0]), int(block_of(keys[:1], 2, 8)[0])
    out = build_partitioner("pk2").assign(keys, 8)
    if c1 != c2:
        assert out.tolist() == [c1, c2, c1, c2, c1, c2]
    else:
        assert out.tolist() == [c1] * 6


def test_am_keeps_keys_whole_within_window():
    keys = np.random.default_rng(1).zipf(1.5, 5000).astype(np.int64)
    for name in ("am", "cam"):
        out = build_partitioner(name).assign(keys, 4)
        per_key = pd.DataFrame({"k": keys, "b": out}).groupby("k")["b"].nunique()
        assert per_key.max() == 1


def test_window_explicit_keeps_affinity_across_batches():
    keys = np.arange(100, dtype=np.int64)
    p = build_partitioner("am", window="explicit")
    first = p.assign(keys, 4)
    second = p.assign(keys, 4)
    assert first.tolist() == second.tolist()
    p.on_window_boundary()
    assert p.memory_bytes() > 0


def test_hll_accuracy_and_fixed_memory():
    for n in (1000, 50_000):
        est = hll_count(np.arange(n, dtype=np.int64) * 7919)
        assert abs(est - n) / n < 0.05
    a = BlockHLL(8)
    assert a.nbytes == BlockHLL(8).nbytes and a.regs.shape == (8, 4096)


def test_hll_variants_close_to_exact():
    keys = np.random.default_rng(5).zipf(1.2, 20_000).astype(np.int64)
    for name in ("cm", "am", "cam", "lm"):
        exact = batch_report(keys, build_partitioner(name).assign(keys, 4), 4)
        approx = batch_report(keys, build_partitioner(f"{name}-hll").assign(keys, 4), 4)
        assert approx["aggregation_cost"] <= exact["aggregation_cost"] * 1.2 + 10
        assert abs(approx["bsi"] - exact["bsi"]) <= 0.2 * len(keys)


def test_auto_rule_and_log():
    p = build_partitioner("auto")
    few = np.random.default_rng(0).integers(0, 4, 10_000)
    many = np.arange(10_000)
    p.assign(few, 4)
    p.assign(many, 4)
    log = p.decision_log()
    assert [d["choice"] for d in log] == ["shuffle", "cam"]
    assert log[0]["groups"] == 4 and log[1]["groups"] == 10_000


def test_key_hash_stable_across_processes():
    table = pa.table({"a": [1, 2, 1, 3], "b": ["x", "y", "x", "x"]})
    here = key_hash(table, ["a", "b"])
    assert here[0] == here[2] and len(set(here.tolist())) == 3
    code = (
        "import pyarrow as pa; from adaptstream.partitioning import key_hash; "
        "print(key_hash(pa.table({'a':[1,2,1,3],'b':['x','y','x','x']}), ['a','b']).tolist())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONHASHSEED": "123"},
    )
    assert json.loads(other.stdout) == here.tolist()
    assert key_hash(table.to_pandas(), ["a", "b"]).tolist() == here.tolist()
    with pytest.raises(PartitioningError):
        key_hash(table, ["zz"])


def test_every_partitioner_returns_valid_blocks():
    keys = golden_keys()
    for name in PARTITIONERS.names():
        out = build_partitioner(name).assign(keys, 5)
        assert out.dtype == np.int32 and out.shape == keys.shape
        assert out.min() >= 0 and out.max() < 5


def test_golden_traces():
    want = json.loads(GOLDEN.read_text())
    got = traces()
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name]["blocks"] == want[name]["blocks"], name
        assert got[name]["ksr"] == pytest.approx(want[name]["ksr"]), name
    assert len(want["hash"]["blocks"]) == len(golden_keys()) and NUM_BLOCKS == 4


def test_string_params_from_spark_options_are_coerced():
    p = build_partitioner("cam", choices="5", cardinality="hll")
    assert p.choices == 5 and p.cardinality == "hll"
    assert build_partitioner("lm", p="0.25").p == 0.25
    with pytest.raises(ConfigError, match="not a valid int"):
        build_partitioner("cam", choices="many")
