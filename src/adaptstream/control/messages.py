"""The schema of every message a source may send the controller: types and ranges, checked before the policy sees
anything, so a malformed request is one error line in reply and changes no decision.

``check(msg)`` returns None for a valid request, else the reason as one line. The limits bound what one client can
make the controller hold: a query name's length, the streams of a registration, the progress events of a poll.
"""

from __future__ import annotations

import math
from typing import Any

OPS = ("hello", "register", "poll", "output", "bye", "stats")
MAX_NAME = 200  # characters of a query or stream name
MAX_STREAMS = 16  # streams one registration may declare
MAX_PROGRESS = 1024  # progress events one poll may carry (the client buffers 256)


def _is_int(v: Any, minimum: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _is_num(v: Any, minimum: float | None = None) -> bool:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return ok and (minimum is None or v >= minimum)


def _is_name(v: Any) -> bool:
    return isinstance(v, str) and 0 < len(v) <= MAX_NAME


def _streams(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, dict) or len(v) > MAX_STREAMS:
        return f"streams must be an object of at most {MAX_STREAMS} names"
    for name, pair in v.items():
        if not _is_name(name) or not isinstance(pair, list | tuple) or len(pair) != 2:
            return "each stream must be NAME: [window period, watermark delay]"
        if not all(_is_num(x, 0.0) for x in pair):
            return f"stream {name!r}: period and delay must be finite numbers >= 0"
    return None


def _event(ev: Any) -> str | None:
    if not isinstance(ev, dict) or not _is_name(ev.get("stream")) or not _is_int(ev.get("seq")):
        return "a progress event needs a stream name and a seq >= 0"
    if not all(_is_num(ev.get(k)) for k in ("arrival", "event", "origin")):
        return "a progress event's arrival, event and origin must be finite numbers"
    if not _is_int(ev.get("n", 1), 1):
        return "a progress event's n must be an integer >= 1"
    if any(k in ev and not _is_num(ev[k]) for k in ("sum", "sumsq")):
        return "a progress event's sum and sumsq must be finite numbers"
    return None


def _poll(msg: dict[str, Any]) -> str | None:
    if "want" in msg and not isinstance(msg["want"], bool):
        return "want must be true or false"
    if not _is_int(msg.get("rows", 0)):
        return "rows must be an integer >= 0"
    if not _is_int(msg.get("unscheduled", 0)):
        return "unscheduled must be an integer >= 0"
    if msg.get("oldest") is not None and not _is_num(msg["oldest"]):
        return "oldest must be a finite number or null"
    progress = msg.get("progress") or []
    if not isinstance(progress, list) or len(progress) > MAX_PROGRESS:
        return f"progress must be a list of at most {MAX_PROGRESS} events"
    for ev in progress:
        if (why := _event(ev)) is not None:
            return why
    done = msg.get("done")
    if done is None:
        return None
    fields = isinstance(done, dict) and _is_int(done.get("end")) and _is_int(done.get("rows"))
    if not fields or not _is_num(done.get("seconds"), 0.0):
        return "done must be {end: int >= 0, rows: int >= 0, seconds: number >= 0} or null"
    return None


def check(msg: Any) -> str | None:
    """None when ``msg`` is a valid request, else what is wrong with it (one line)."""
    if not isinstance(msg, dict):
        return f"a request must be a JSON object, got {type(msg).__name__}"
    op = msg.get("op")
    if op not in OPS:
        return f"unknown op {op!r}; valid: {', '.join(OPS)}"
    if op == "hello":
        return None if isinstance(msg.get("secret"), str) else "hello needs the controller's secret"
    if op == "stats":
        return None
    if not _is_name(msg.get("query")):
        return f"query must be a name of 1 to {MAX_NAME} characters"
    if op == "register":
        return _streams(msg.get("streams"))
    if op == "poll":
        return _poll(msg)
    if op == "output":
        return None if _is_int(msg.get("rows")) else "rows must be an integer >= 0"
    return None
