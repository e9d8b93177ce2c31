"""The generators still produce the checked-in golden traces (tests/unit/golden/make_golden_workloads.py)."""

from __future__ import annotations

import os
import sys

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")


def test_generators_match_golden_traces() -> None:
    sys.path.insert(0, GOLDEN)
    try:
        from make_golden_workloads import traces
    finally:
        sys.path.remove(GOLDEN)
    produced = traces()
    assert len(produced) == 3
    for name, text in produced.items():
        with open(os.path.join(GOLDEN, name)) as f:
            assert text == f.read(), f"{name} changed; regenerate only for an intended generator change"
