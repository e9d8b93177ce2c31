"""Write the golden traces of the workload generators (first seconds of each, fixed seeds and rates).

Run from the repository root: ``PYTHONPATH=src python tests/unit/golden/make_golden_workloads.py``.
tests/unit/workloads/test_golden_workloads.py regenerates the same traces and compares them with these files.
"""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pyarrow.csv as pacsv

from adaptstream.workloads import TaskEventsGeneratorConfig, build_generator

HERE = os.path.dirname(os.path.abspath(__file__))
LR_RATES = [12, 0, 9, 15, 7, 11, 30, 4]
TE_RATES = [6, 0, 8, 5]


def _csv(tables: list[pa.Table]) -> str:
    buf = io.BytesIO()
    pacsv.write_csv(pa.concat_tables(tables), buf, write_options=pacsv.WriteOptions(quoting_style="needed"))
    return buf.getvalue().decode()


def traces() -> dict[str, str]:
    """file name -> CSV text (with a header line) of each golden trace."""
    lr = build_generator("linear_road", seed=7)
    replay = build_generator("task_events", seed=7)
    fitted = TaskEventsGeneratorConfig(seed=7, replay=False).build()
    return {
        "workloads_linear_road_seed7.csv": _csv([lr.generate(t, n) for t, n in enumerate(LR_RATES)]),
        "workloads_task_events_replay_seed7.csv": _csv([replay.generate(t, n) for t, n in enumerate(TE_RATES)]),
        "workloads_task_events_fitted_seed7.csv": _csv([fitted.generate(t, n) for t, n in enumerate(TE_RATES)]),
    }


if __name__ == "__main__":
    for name, text in traces().items():
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)
        print(f"wrote {name} ({text.count(chr(10)) - 1} rows)")
