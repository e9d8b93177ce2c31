"""Turn a run directory's metrics into a trace for the pure-Python admission tests (tests/unit/golden/traces/).

Usage: python3 scripts/record_admission_trace.py RUN_DIR SLIDE OUT.json "what ran"
"""

from __future__ import annotations

import json
import os
import sys

from adaptstream.admission.replay import recorded_trace

if __name__ == "__main__":
    run_dir, slide, out, source = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(out, "w") as f:
        json.dump(recorded_trace(os.path.join(run_dir, "metrics"), slide, source), f)
    print(f"wrote {out}")
