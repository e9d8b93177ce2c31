"""Partitioning quality metrics of both papers, computed exactly from (key, block) per row.

Prompt (Sec. 3.3): BSI Eq. 2 (blocks) and Eq. 3 (reduce buckets), BCI Eq. 4, KSR Eq. 5, MPI Eq. 6.
Holistic (Sec. 2.3, 3.1): tuple imbalance I Eq. 1, aggregation cost Gamma Eq. 2/4 (= sum of per-block
distinct keys = number of partial results), cardinality imbalance CI Eq. 6, hybrid imbalance HI Eq. 7-10.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from adaptstream.errors import PartitioningError
from adaptstream.partitioning._kernels import mix64_np


def _check(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(keys)
    b = np.asarray(blocks).astype(np.int64)
    if k.shape != b.shape or k.ndim != 1:
        msg = f"keys and blocks must be 1-d arrays of one length, got {k.shape} and {b.shape}"
        raise PartitioningError(msg)
    if b.size and (b.min() < 0 or b.max() >= num_blocks):
        msg = f"block ids must lie in [0, {num_blocks}), got [{b.min()}, {b.max()}]"
        raise PartitioningError(msg)
    return k, b


def block_sizes(blocks: np.ndarray, num_blocks: int) -> np.ndarray:
    """|Block_i|: tuples per block."""
    return np.bincount(np.asarray(blocks, dtype=np.int64), minlength=num_blocks)


def key_block_pairs(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Distinct (key code, block) pairs = key fragments; also returns the number of distinct keys K."""
    k, b = _check(keys, blocks, num_blocks)
    codes, uniq = pd.factorize(k)
    pairs = np.unique(codes.astype(np.int64) * num_blocks + b)
    return pairs // num_blocks, pairs % num_blocks, len(uniq)


def block_cardinalities(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> np.ndarray:
    """||Block_i||: distinct keys per block (holistic Eq. 5, CL^j)."""
    _, pb, _ = key_block_pairs(keys, blocks, num_blocks)
    return np.bincount(pb, minlength=num_blocks)


def imbalance(values: np.ndarray) -> float:
    """max - avg (Prompt Eq. 2-4, holistic Eq. 1, 6)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.max() - v.mean()) if v.size else 0.0


def bsi(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> float:
    """Block Size-Imbalance, Prompt Eq. 2 (identical to holistic tuple imbalance I, Eq. 1)."""
    _check(keys, blocks, num_blocks)
    return imbalance(block_sizes(blocks, num_blocks))


def bci(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> float:
    """Block Cardinality-Imbalance, Prompt Eq. 4 (= holistic CI, Eq. 6)."""
    return imbalance(block_cardinalities(keys, blocks, num_blocks))


def aggregation_cost(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> int:
    """Gamma = sum_o |f(L^o)| (holistic Eq. 2, 4): partial results the aggregation stage must merge."""
    pk, _, _ = key_block_pairs(keys, blocks, num_blocks)
    return len(pk)


def ksr(keys: np.ndarray, blocks: np.ndarray, num_blocks: int) -> float:
    """Key Split Ratio, Prompt Eq. 5: key fragments / distinct keys (1 = no key split)."""
    pk, _, k = key_block_pairs(keys, blocks, num_blocks)
    return len(pk) / k if k else 1.0


def mpi(
    bsi_value: float,
    bci_value: float,
    ksr_value: float,
    p: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3),
) -> float:
    """Micro-batch Partitioning-Imbalance, Prompt Eq. 6 (p1+p2+p3 = 1; the paper uses 1/3 each)."""
    if abs(sum(p) - 1.0) > 1e-9:
        msg = f"MPI weights must sum to 1, got {p}"
        raise PartitioningError(msg)
    return p[0] * bsi_value + p[1] * bci_value + p[2] * ksr_value


def minmax(values: np.ndarray) -> np.ndarray:
    """Holistic Eq. 7-8 normalisation to [0, 1] (all zeros when every value is equal)."""
    v = np.asarray(values, dtype=np.float64)
    span = v.max() - v.min() if v.size else 0.0
    return (v - v.min()) / span if span > 0 else np.zeros_like(v)


def hybrid_imbalance(sizes: np.ndarray, cards: np.ndarray, p: float = 0.5) -> float:
    """HI, holistic Eq. 10 over the hybrid loads H^j = p L'^j + (1-p) CL'^j (Eq. 9)."""
    h = p * minmax(sizes) + (1 - p) * minmax(cards)
    return imbalance(h)


def reduce_bucket_sizes(keys: np.ndarray, blocks: np.ndarray, num_blocks: int, num_buckets: int) -> np.ndarray:
    """Reduce input per bucket when every block's partial results are hash-partitioned (Spark's exchange):
    each key fragment is one partial-aggregate record, sent to bucket H(key) mod r."""
    k, b = _check(keys, blocks, num_blocks)
    codes, uniq = pd.factorize(k)
    pairs = np.unique(codes.astype(np.int64) * num_blocks + b)
    frag_keys = np.asarray(uniq, dtype=np.int64)[pairs // num_blocks]
    bucket = (mix64_np(frag_keys, 99) % np.uint64(num_buckets)).astype(np.int64)
    return np.bincount(bucket, minlength=num_buckets)


def batch_report(
    keys: np.ndarray, blocks: np.ndarray, num_blocks: int, num_buckets: int | None = None
) -> dict[str, Any]:
    """All metrics for one batch (used per batch by benchmarks and the streaming source)."""
    k, b = _check(keys, blocks, num_blocks)
    sizes = block_sizes(b, num_blocks)
    pk, pb, nkeys = key_block_pairs(k, b, num_blocks)
    cards = np.bincount(pb, minlength=num_blocks)
    gamma = len(pk)
    bsi_v, bci_v = imbalance(sizes), imbalance(cards)
    ksr_v = gamma / nkeys if nkeys else 1.0
    buckets = reduce_bucket_sizes(k, b, num_blocks, num_buckets or num_blocks)
    return {
        "rows": len(k),
        "num_blocks": num_blocks,
        "distinct_keys": nkeys,
        "block_sizes": sizes.tolist(),
        "block_cardinalities": cards.tolist(),
        "bsi": bsi_v,
        "bci": bci_v,
        "ksr": ksr_v,
        "mpi": mpi(bsi_v, bci_v, ksr_v),
        "tuple_imbalance": bsi_v,
        "cardinality_imbalance": bci_v,
        "hybrid_imbalance": hybrid_imbalance(sizes, cards),
        "aggregation_cost": gamma,
        "bucket_bsi": imbalance(buckets),
    }
