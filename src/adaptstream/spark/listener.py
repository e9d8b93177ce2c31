"""Spark's query progress, as the tuner reads it: a ``StreamingQueryListener`` that hands each progress event to a
callback as a small plain record (PySpark's progress objects differ between versions; this is the one place that
reads them)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger("adaptstream.tuner")


def wait_for_listeners(spark, timeout: float = 10.0) -> None:
    """Wait until Spark delivered the events posted so far to every listener (its listener bus is asynchronous)."""
    with contextlib.suppress(Exception):  # a stopped context has no bus: nothing more will come
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(timeout * 1000))


@dataclass(frozen=True)
class Progress:
    """One completed micro-batch of one query."""

    query: str  # the query's name, else its id
    run_id: str
    batch: int
    rows: int
    seconds: float  # Spark's triggerExecution: the batch's processing time
    timestamp: str
    controller_names: tuple[str, ...]  # the names its adaptstream sources are scheduled under (offset field ctl)
    query_id: str = ""  # Spark's query id (spark.streams.get takes it)


def _ctl(offset: object) -> str | None:
    try:
        doc = json.loads(offset) if isinstance(offset, str) else offset
    except ValueError:
        return None
    return doc.get("ctl") if isinstance(doc, dict) else None


def progress_of(p) -> Progress:
    durations = dict(p.durationMs or {})
    names = tuple(n for n in (_ctl(s.endOffset) for s in (p.sources or ())) if n)
    return Progress(
        query=p.name or str(p.id),
        run_id=str(p.runId),
        batch=int(p.batchId),
        rows=int(p.numInputRows or 0),
        seconds=float(durations.get("triggerExecution", 0)) / 1000.0,
        timestamp=str(p.timestamp),
        controller_names=names,
        query_id=str(p.id),
    )


class TunerListener(StreamingQueryListener):
    """Forwards progress and terminations; a failing callback is logged, never raised into Spark's listener bus."""

    def __init__(self, on_progress: Callable[[Progress], None], on_end: Callable[[str, str | None], None]) -> None:
        self.on_progress = on_progress
        self.on_end = on_end
        self.names: dict[str, str] = {}  # query id -> name (termination events carry only the id)

    def onQueryStarted(self, event) -> None:
        self.names[str(event.id)] = event.name or str(event.id)

    def onQueryProgress(self, event) -> None:
        try:
            self.on_progress(progress_of(event.progress))
        except Exception:  # the listener bus must keep running: one line per failure
            log.exception("adaptstream tuner: a progress event could not be handled")

    def onQueryIdle(self, event) -> None:
        return None

    def onQueryTerminated(self, event) -> None:
        try:
            self.on_end(self.names.get(str(event.id), str(event.id)), event.exception)
        except Exception:
            log.exception("adaptstream tuner: a termination event could not be handled")
