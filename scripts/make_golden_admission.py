"""Regenerate tests/unit/golden/admission_*.json: seeded replays of every admission policy (no Spark), and the
lmstream decisions on per-batch traces recorded from real Spark runs (tests/unit/golden/traces/*.json, written by
``scripts/record_admission_trace.py``)."""

from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import asdict

from adaptstream.admission import build_admission
from adaptstream.admission.replay import replay, replay_recorded
from adaptstream.connectors.traffic import RandomTraffic

CASES = {
    "fixed": {"trigger": 10.0},
    "asap": {},
    "lmstream-sliding": {"slide": 5.0},
    "lmstream-tumbling": {"slide": 0.0},
}
GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "..", "tests", "unit", "golden")
AFTER_GAP = 0.5  # the no-data batch after the first poll that follows a batch, in the recorded replays


def traces() -> dict[str, list[dict]]:
    traffic = RandomTraffic(rate=1000, seed=7)
    rows = [traffic.rows_at(k) for k in range(60)]
    out = {}
    for case, params in CASES.items():
        policy = build_admission(case.split("-")[0], **params)
        out[case] = [asdict(b) for b in replay(policy, rows)]
    return out


def recorded_traces() -> dict[str, dict]:
    found = {}
    for path in sorted(glob.glob(os.path.join(GOLDEN_DIR, "traces", "*.json"))):
        with open(path) as f:
            found[os.path.basename(path)[:-5]] = json.load(f)
    return found


def recorded_decisions() -> dict[str, list[dict]]:
    """lmstream's decisions (default configuration) on every recorded trace."""
    return {
        name: replay_recorded(build_admission("lmstream", slide=t["slide"]), t, after_gap=AFTER_GAP)
        for name, t in recorded_traces().items()
    }


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(GOLDEN_DIR, "admission_replay.json")
    with open(path, "w") as f:
        json.dump(traces(), f, indent=1)
    rec = os.path.join(os.path.dirname(path), "admission_recorded.json")
    with open(rec, "w") as f:
        json.dump(recorded_decisions(), f, indent=1)
    print(f"wrote {path} and {rec}")
