"""Regenerate the golden traces: `PYTHONPATH=src python tests/unit/partitioning/golden/make_golden.py`.

Seeded Zipf keys (z=1.2, 300 distinct, 2000 rows), 4 blocks; per partitioner the block of every row and the
batch metrics. A change in any partitioner's decisions shows up as a diff of traces.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from adaptstream.partitioning import PARTITIONERS, build_partitioner
from adaptstream.partitioning.metrics import batch_report
from adaptstream.workloads.partition_workloads import zipf_keys

HERE = Path(__file__).parent
NUM_BLOCKS = 4


def golden_keys() -> np.ndarray:
    return zipf_keys(2000, 1.2, 300, seed=42)


def traces() -> dict:
    keys = golden_keys()
    out = {}
    for name in PARTITIONERS.names():
        blocks = build_partitioner(name).assign(keys, NUM_BLOCKS)
        rep = batch_report(keys, blocks, NUM_BLOCKS)
        out[name] = {
            "blocks": blocks.tolist(),
            "bsi": rep["bsi"],
            "bci": rep["bci"],
            "ksr": rep["ksr"],
            "aggregation_cost": rep["aggregation_cost"],
        }
    return out


if __name__ == "__main__":
    (HERE / "traces.json").write_text(json.dumps(traces(), sort_keys=True) + "\n")
    print("wrote", HERE / "traces.json")
