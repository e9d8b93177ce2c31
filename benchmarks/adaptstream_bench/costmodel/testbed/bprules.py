"""Backpressure verdicts of a recorded testbed run under each labelling rule (pure: no Spark, no Redis).

Rules, newest first (the corpus job records ``meta.bp_rule``, the rule its label was measured by):

* ``lag-or-stuck`` (from 2026-11-26, evening): ``lag-growth``, or some piece that reads a source completed
  no micro-batch in the second half of the run. Such a piece always has new input (its source generates rows
  every trigger), so a missing batch means the one running had lasted over half the run, far past the 1 s
  trigger: Spark's own "falling behind" criterion. ``lag-growth`` saw no median for it and counted the piece as
  keeping up; that happened in 12 of the 168 lag-growth corpus runs, 10 of them runs that never wrote a row.
* ``lag-growth``: some piece's median batch in the second half exceeds the trigger, or a cross-host edge's lag
  grows (testbed/corpus.py).
* ``end-backlog`` (before 2026-11-26): an edge held more than 2 s of input after every piece had stopped.

Every verdict is derived from what the run recorded, so a trace recorded under an older rule gets a newer
rule's verdict wherever its meta holds the inputs (``lag-or-stuck`` from a ``lag-growth`` trace), and None
where it does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RULES = ("lag-or-stuck", "lag-growth", "end-backlog")
LATEST = RULES[0]


def recorded_rule(meta: Mapping[str, Any]) -> str:
    """The rule a trace's label was measured by; traces from before the rule was recorded used end-backlog."""
    return str(meta.get("bp_rule", "end-backlog"))


def stuck_pieces(
    pieces: Iterable[Mapping[str, Any]], median_batch_ms: Mapping[str, Any], source_ops: Iterable[str]
) -> list[str]:
    """Pieces ("host/piece") that read a source and completed no micro-batch in the second half of the run."""
    sources = set(source_ops)
    out = []
    for p in pieces:
        key = f"{p['host']}/{p['piece']}"
        if median_batch_ms.get(key) is None and sources & set(p["ops"]):
            out.append(key)
    return out


def _stuck_from_meta(trace: Any) -> list[str] | None:
    meta = trace.meta
    if "pieces" not in meta or "median_batch_ms_2nd_half" not in meta:
        return None
    sources = [op.id for op in trace.query.operators if op.kind == "source"]
    return stuck_pieces(meta["pieces"], meta["median_batch_ms_2nd_half"], sources)


def verdict(trace: Any, rule: str) -> bool | None:
    """Backpressure of a recorded run as ``rule`` judges it; None where the run did not record what it needs."""
    if rule not in RULES:
        msg = f"unknown backpressure rule {rule!r}; valid: {', '.join(RULES)}"
        raise ValueError(msg)
    labels, meta = trace.labels, trace.meta
    label = None if labels is None or labels.backpressure is None else bool(labels.backpressure)
    have = recorded_rule(meta)
    if have == rule:
        return label
    if rule == "end-backlog":
        return bool(meta["backpressure_end_backlog"]) if "backpressure_end_backlog" in meta else None
    if rule == "lag-growth":
        return bool(meta["backpressure_lag_growth"]) if "backpressure_lag_growth" in meta else None
    if have == "lag-growth" and label is not None:  # rule == lag-or-stuck
        stuck = _stuck_from_meta(trace)
        return None if stuck is None else label or bool(stuck)
    return None
