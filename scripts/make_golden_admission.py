"""Regenerate tests/unit/golden/admission_*.json: seeded replays of every admission policy (no Spark)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict

from adaptstream.admission import build_admission
from adaptstream.admission.replay import replay
from adaptstream.connectors.traffic import RandomTraffic

CASES = {
    "fixed": {"trigger": 10.0},
    "asap": {},
    "lmstream-sliding": {"slide": 5.0},
    "lmstream-tumbling": {"slide": 0.0},
}


def traces() -> dict[str, list[dict]]:
    traffic = RandomTraffic(rate=1000, seed=7)
    rows = [traffic.rows_at(k) for k in range(60)]
    out = {}
    for case, params in CASES.items():
        policy = build_admission(case.split("-")[0], **params)
        out[case] = [asdict(b) for b in replay(policy, rows)]
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "unit", "golden", "admission_replay.json")
    with open(path, "w") as f:
        json.dump(traces(), f, indent=1)
    print(f"wrote {path}")
