"""Hypothesis properties of partitioners and metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptstream.partitioning import PARTITIONERS, build_partitioner
from adaptstream.partitioning.metrics import aggregation_cost, batch_report

key_arrays = st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=400).map(lambda v: np.array(v, np.int64))
blocks_st = st.integers(1, 12)


@settings(max_examples=60, deadline=None)
@given(keys=key_arrays, p=blocks_st)
def test_hash_keeps_keys_whole(keys, p):
    out = build_partitioner("hash").assign(keys, p)
    assert pd.DataFrame({"k": keys, "b": out}).groupby("k")["b"].nunique().max() == 1


@settings(max_examples=60, deadline=None)
@given(keys=key_arrays, p=blocks_st)
def test_shuffle_sizes_differ_by_at_most_one(keys, p):
    sizes = np.bincount(build_partitioner("shuffle").assign(keys, p), minlength=p)
    assert sizes.max() - sizes.min() <= 1


@settings(max_examples=40, deadline=None)
@given(keys=key_arrays, p=blocks_st, name=st.sampled_from(PARTITIONERS.names()))
def test_gamma_between_cardinality_and_v_times_cardinality(keys, p, name):
    out = build_partitioner(name).assign(keys, p)
    distinct = len(np.unique(keys))
    gamma = aggregation_cost(keys, out, p)
    assert distinct <= gamma <= p * distinct


@settings(max_examples=80, deadline=None)
@given(keys=key_arrays, p=blocks_st)
def test_prompt_blocks_equal_within_one(keys, p):
    sizes = np.bincount(build_partitioner("prompt").assign(keys, p), minlength=p)
    assert sizes.max() - sizes.min() <= 1


@settings(max_examples=60, deadline=None)
@given(groups=st.integers(1, 20), copies=st.integers(1, 30), p=st.integers(1, 8))
def test_prompt_ksr_minimal_without_skew(groups, copies, p):
    # no skew: every key equally frequent and the key count a multiple of P -> no key is split (KSR = 1)
    keys = np.repeat(np.arange(groups * p, dtype=np.int64) * 7 + 1, copies)
    np.random.default_rng(groups).shuffle(keys)
    rep = batch_report(keys, build_partitioner("prompt").assign(keys, p), p)
    assert rep["ksr"] == 1.0 and rep["bsi"] == 0.0


@settings(max_examples=40, deadline=None)
@given(keys=key_arrays, p=blocks_st, name=st.sampled_from(["am", "cam", "am-hll", "cam-hll"]))
def test_affinity_partitioners_use_only_key_candidates(keys, p, name):
    out = build_partitioner(name).assign(keys, p)
    per_key = pd.DataFrame({"k": keys, "b": out}).groupby("k")["b"].nunique()
    assert per_key.max() <= 2  # 2 candidates per key, and exact AM/cAM never split
    if not name.endswith("hll"):
        assert per_key.max() == 1
