"""``processAllAvailable`` that also waits for data an adaptstream source holds back.

Spark's ``StreamingQuery.processAllAvailable()`` returns at the first trigger that finds no new offset. An
adaptstream source answers "nothing new" while its admission policy buffers data (LMStream, fixed) or the
scheduler holds its query (Klink): the call would return with data unprocessed, and an application that stops its
queries then loses that data from its output. Here the call first lets Spark's own return (so each source polled
its input after the call), then reads how many datasets each adaptstream source of the query has recorded (its
manifest, found through the ``state`` field of its offsets) and waits until the query committed that many. While
adaptstream is registered in a session, ``processAllAvailable`` itself behaves so (``install``); queries without
an adaptstream source are unaffected.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from adaptstream.errors import AdaptstreamError

POLL_SECONDS = 0.2  # between checks while a source holds data: a few cheap calls per second
MANIFEST = "manifest.jsonl"
_original: Callable[[Any], None] | None = None  # Spark's own processAllAvailable, once install() replaced it


class DrainTimeout(AdaptstreamError, TimeoutError):
    """The query still held data when the time given ran out."""


def _doc(offset: Any) -> dict[str, Any]:
    try:
        doc = json.loads(offset) if isinstance(offset, str) else offset
    except (TypeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _count_lines(path: str) -> int:
    """Records in the manifest, read only (``read_jsonl`` cuts a torn last record off the file, which here could be
    one the source's process is still writing)."""
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def positions(progress: Any) -> dict[str, int]:
    """State directory -> committed position, for each adaptstream source in a progress report (the end offset's
    ``seq``; the state directory from either offset: the start-up batch's end offset predates it)."""
    out: dict[str, int] = {}
    for s in (progress or {}).get("sources") or ():
        end, latest = _doc(s.get("endOffset")), _doc(s.get("latestOffset"))
        state = end.get("state") or latest.get("state")
        if isinstance(state, str) and isinstance(end.get("seq"), int):
            out[state] = end["seq"]
    return out


def process_all_available(query: Any, timeout: float | None = None) -> None:
    """Block until the query processed all data available at the call, that held back by adaptstream's policies
    included; raises as Spark does when the query fails, and ``DrainTimeout`` after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    _spark_own(query)
    targets = {state: _count_lines(os.path.join(state, MANIFEST)) for state in positions(query.lastProgress)}
    while True:
        done = positions(query.lastProgress)
        left = sum(max(n - done.get(state, 0), 0) for state, n in targets.items())
        if left == 0:
            return
        if deadline is not None and time.monotonic() > deadline:
            msg = f"query {query.name or query.id}: {left} dataset(s) still held after {timeout:g} s"
            raise DrainTimeout(msg)
        if not query.isActive:
            query.awaitTermination()  # raises the query's error when it failed; a stopped one returns, as Spark's
            return
        query.awaitTermination(POLL_SECONDS)  # raises at once when the query fails


def _spark_own(query: Any) -> None:
    """Spark's processAllAvailable of the query (the one install() replaced, when it did on the query's class)."""
    own = type(query).processAllAvailable
    if _original is not None and getattr(own, "adaptstream_drain", False):
        own = _original
    own(query)


def install() -> None:
    """Make ``StreamingQuery.processAllAvailable`` wait for held data too (idempotent; this process only)."""
    global _original
    from pyspark.sql.streaming.query import StreamingQuery

    if _original is not None:
        return
    _original = StreamingQuery.processAllAvailable

    def processAllAvailable(self: Any) -> None:
        process_all_available(self)

    processAllAvailable.adaptstream_drain = True  # type: ignore[attr-defined]
    processAllAvailable.__doc__ = (StreamingQuery.processAllAvailable.__doc__ or "") + "\n" + __doc__
    StreamingQuery.processAllAvailable = processAllAvailable  # type: ignore[method-assign]
