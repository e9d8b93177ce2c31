"""Rewrite a file of REAL testbed traces so every query is described as `realise` describes it now.

    python benchmarks/costmodel_redescribe.py --traces docs/results/costmodel_real_traces.jsonl

Why: traces recorded before 2026-11-29 carry the generator's aggregation selectivity, which after a join is not
what ran (testbed/placement.py, `agg_selectivity`). Each query is rebuilt from its generator (meta seed and
query index) and must match the recorded one in every other feature; labels, hosts, placements and meta stay as
recorded. Writes the file in place (through a temporary file) and prints how many queries changed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from adaptstream.costmodel.model import read_traces, write_traces
from adaptstream.errors import CostModelError
from adaptstream_bench.costmodel.testbed.corpus import redescribe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True)
    a = ap.parse_args(argv)
    if not a.traces.is_file():
        ap.error(f"no traces file at {a.traces}")
    old = list(read_traces(a.traces))
    try:
        new = [redescribe(t) for t in old]
    except CostModelError as exc:  # the file is left as it was
        print(f"error: {exc}", file=sys.stderr)
        return 1
    tmp = a.traces.with_suffix(".tmp")
    write_traces(tmp, new)
    os.replace(tmp, a.traces)
    changed = sum(n.query != o.query for n, o in zip(new, old, strict=True))
    print(f"{len(new)} traces, {changed} queries redescribed -> {a.traces}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
