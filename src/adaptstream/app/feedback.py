"""The feedback channels between the parts of a running application, named in one place.

Spark's data path runs one way (source -> Spark tasks -> sink); the policies close three loops around it:

* **the blocks file** - the pane executor's elasticity policy (Prompt Alg. 4) decides how many map tasks the next
  micro-batch gets; it writes that count to a file in the run directory, and the source's planner reads it when it
  plans the next batch's input partitions (source option ``blocksFile``; ``spark/planner.py`` reads and writes it);
* **the controller** - a source asks the application's scheduling controller (``control/``) before it cuts a
  micro-batch, and reports its progress and completed batches; the source finds it through three options;
* **the output callback** - the sink writer reports each micro-batch's result rows (``on_output(batch_id, rows)``)
  to the multi-query runner, which passes them to the scheduler (Klink's output-latency estimate).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

#: a sink writer's report of one micro-batch: (batch id, result rows written)
OnOutput = Callable[[int, int], None]


def blocks_file(run_dir: str) -> str:
    """Where a run's pane executor writes the map-task count its source plans the next batch with."""
    return os.path.join(run_dir, "pane-state", "map_tasks.json")


def controller_options(controller: Any, query: str | None = None) -> dict[str, str]:
    """The source options that connect a source to the application's controller (its address and secret; the
    name the query registers under, when the runner names it)."""
    out = {"controller": controller.address, "controllerSecret": controller.secret}
    if query is not None:
        out["controllerQuery"] = query
    return out
